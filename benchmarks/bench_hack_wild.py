"""probe_reward on scorers this project did not write: Inspect AI, lm-evaluation-harness, reasoning-gym.

Run: OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/bench_hack_wild.py [--only NAME ...] [--seed N]

The wild set (``tests/hack_wild/``) calls each published scorer as its installed package ships it,
over a small task with a truth of its own, and lists each scorer's known weaknesses, written down
from its source before the probe was changed to look for them, with the probe classes that would
show each. Every scorer is probed at the defaults (``probe_reward(reward, env=task)``; a
reasoning-gym scorer on its own task's category), with no example database, one process, one
thread. A weakness is *shown* when a class that would show it reports a reply the scorer pays in
full (a ``wrong`` weakness), or a class reports partial credit for a wrong reply (a ``partial``
one). A scorer is *found* when all its weaknesses are shown, *partly* when some are, *MISSED*
when none is; a scorer with no weakness is *clean*, or a *FALSE ALARM* when anything is reported.
Printed: one line per scorer (its finding classes, their largest severity, the seconds), then per
package and in total the scorers found / partly / missed / false alarms / clean, the weaknesses
shown, and the median seconds a probe.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

from pytest_rlgate import probe_reward

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from hack_wild import WILD, task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="wild entries to run (names)")
    parser.add_argument("--seed", type=int, default=0, help="the probe's seed (default 0, the probe's own)")
    args = parser.parse_args()
    chosen = [w for w in WILD if not args.only or w.name in args.only]
    rows, times = [], []
    tally: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for entry in chosen:
        kwargs = {"categories": list(entry.categories)} if entry.categories else {}
        started = time.perf_counter()
        result = probe_reward(entry.reward, env=task(entry.env), database=None, seed=args.seed, **kwargs)
        seconds = time.perf_counter() - started
        times.append(seconds)
        seen = [weakness.shown_in(result) for weakness in entry.weaknesses]
        if not entry.weaknesses:
            verdict = "FALSE ALARM" if result.hacks else "clean"
        elif all(seen):
            verdict = "found"
        else:
            verdict = f"partly ({sum(seen)} of {len(seen)})" if any(seen) else "MISSED"
        for package in (entry.package, "all"):
            tally[package][verdict.split(" ")[0]] += 1
            tally[package]["weaknesses"] += len(seen)
            tally[package]["shown"] += sum(seen)
        severity = max((f.severity for f in result.paying), default=None)
        rows.append([entry.name, entry.call, f"{sum(seen)}/{len(seen)}" if seen else "none", verdict,
                     ", ".join(result.hacks), "" if severity is None else f"{severity:.2f}", f"{seconds:.1f}"])
        print(f"{entry.name:42s} {verdict:14s} {', '.join(result.hacks):40s} {seconds:5.1f} s", flush=True)
    print()
    print(tabulate(rows, headers=["scorer", "called as", "weaknesses shown", "verdict", "finding classes",
                                  "severity", "s"]))
    print()
    summary = [[package, counts["found"], counts["partly"], counts["MISSED"], counts["FALSE"], counts["clean"],
                f"{counts['shown']}/{counts['weaknesses']}"]
               for package, counts in sorted(tally.items(), key=lambda kv: (kv[0] == "all", kv[0]))]
    print(tabulate(summary, headers=["package", "found", "partly", "missed", "false alarms", "clean (as expected)",
                                     "weaknesses shown"]))
    print(f"\nprobe time: median {statistics.median(times):.1f} s, max {max(times):.1f} s over {len(times)} probes")


if __name__ == "__main__":
    main()
