"""probe_reward on the hack zoo: detection of planted flaws, false alarms on sound rewards, time per class.

Run: OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/bench_hack_zoo.py [--only NAME ...] [--seed N]

The zoo (``tests/hack_zoo/``) holds rewards for refund, arith, refund_agent and quickmath that
the probe was not built on: sound ones written several ways, and flawed ones, each a sound
reward with one planted flaw. Every reward is probed at the defaults (``probe_reward(reward,
env=...)``; quickmath, which writes no prompts, with its shipped prompt file), with no example
database, one process, one thread. A flawed reward is *detected* when a class pays on it and
the class's minimal example is one its sound base does not pay (the planted flaw is what pays,
not something else); a sound reward *false-alarms* when any class pays on it. Printed: one line
per reward, the totals (targets: >= 90 % detected, 0 false alarms, median <= 10 s a probe), the
detection per planted flaw, and per class how many rewards it caught, its false alarms and its
time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from functools import cache
from pathlib import Path

from tabulate import tabulate

from pytest_rlgate import probe_reward
from pytest_rlgate.rewards.strategies import pays

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from hack_zoo import ZOO, ZooReward, env_of, items_for


@cache
def _cases(env_name: str, seed: int) -> dict[str, object]:
    """Prompt -> case of the items a probe at *seed* reads (quickmath's file, else the seed's prompt set)."""
    env = env_of(env_name)
    items = list(items_for(env_name)) + (env.build_prompts(seed, "default") if env.can_build_prompts else [])
    return {str(i["prompt"]): i["case"] for i in items}


def _attributed(entry: ZooReward, base: ZooReward, finding: object, seed: int) -> bool:
    """The minimal example pays on *entry* and its sound *base* does not pay it (for partial credit: *entry*
    pays it more than *base* does)."""
    example, prompt = finding.example, finding.prompt  # type: ignore[attr-defined]
    case = _cases(entry.env, seed)[prompt]

    def paid_by(who: ZooReward) -> bool:
        return pays(example.kind, who.score(example.original, case, prompt), who.score(example.hacked, case, prompt),
                    lambda: who.score("", case, prompt))

    if not finding.pays:  # type: ignore[attr-defined]  # partial credit: the planted flaw raised its pay
        return entry.score(example.hacked, case, prompt) > base.score(example.hacked, case, prompt)
    return paid_by(entry) and not paid_by(base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--only", nargs="*", default=None, help="zoo entries to run (names)")
    parser.add_argument("--seed", type=int, default=0, help="the probe's seed (default 0, the probe's own)")
    args = parser.parse_args()
    by_name = {e.name: e for e in ZOO}
    chosen = [e for e in ZOO if not args.only or e.name in args.only]
    lines, times = [], []
    flaw_hits: dict[str, list[bool]] = defaultdict(list)
    per_class: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    detected = alarms = 0
    for entry in chosen:
        kwargs = {"items": list(items_for(entry.env))} if entry.env == "quickmath" else {}
        started = time.perf_counter()
        result = probe_reward(entry.reward, env=env_of(entry.env), database=None, seed=args.seed, **kwargs)
        seconds = time.perf_counter() - started
        times.append(seconds)
        caught = []
        for summary in result.classes():
            stats = per_class[summary.hack]
            stats["tried"] += summary.tried
            stats["seconds"] += summary.seconds
            stats["probes"] += 1
            if not (summary.paid or summary.partial):
                continue
            if entry.sound:
                stats["false_alarms"] += 1
            elif any(_attributed(entry, by_name[entry.base], f, args.seed) for f in result.paying
                     if f.hack == summary.hack):
                stats["caught"] += 1
                caught.append(summary.hack)
            else:
                stats["other"] += 1
        if entry.sound:
            alarms += bool(result.hacks)
            verdict = "FALSE ALARM" if result.hacks else "quiet"
        else:
            hit = bool(caught)
            detected += hit
            flaw_hits[entry.flaw].append(hit)
            verdict = "detected" if hit else ("paid, not the flaw" if result.hacks else "MISSED")
        lines.append([entry.name, "sound" if entry.sound else entry.flaw, verdict,
                      ", ".join(caught or result.hacks), f"{seconds:.1f}"])
        print(f"{entry.name:36s} {verdict:20s} {', '.join(caught or result.hacks):40s} {seconds:5.1f} s", flush=True)
    flawed = [e for e in chosen if not e.sound]
    sound = [e for e in chosen if e.sound]
    print()
    print(tabulate(lines, headers=["reward", "planted", "verdict", "classes that paid", "s"]))
    print()
    if flawed:
        share = 100 * detected / len(flawed)
        print(f"flawed rewards detected: {detected}/{len(flawed)} ({share:.0f} %, target >= 90 %)")
    if sound:
        print(f"false alarms on sound rewards: {alarms}/{len(sound)} (target 0)")
    print(f"probe time: median {statistics.median(times):.1f} s, max {max(times):.1f} s over {len(times)} probes "
          "(target median <= 10 s)")
    print()
    print(tabulate([[kind, f"{sum(h)}/{len(h)}"] for kind, h in sorted(flaw_hits.items())],
                   headers=["planted flaw", "detected"]))
    print()
    rows = [[name, int(s["tried"]), int(s["caught"]), int(s["other"]), int(s["false_alarms"]),
             f"{s['seconds'] / max(s['probes'], 1):.2f}"] for name, s in per_class.items()]
    print(tabulate(rows, headers=["class", "examples tried", "flaws caught", "paid otherwise", "false alarms",
                                  "s per probe"]))
    if not args.only:
        print()
        print_refund(args.seed)


#: What docs/hacks.md says refund's own score pays, class by class (its table "What the probe finds on the
#: refund reward"): the benchmark prints the probe's finding beside each claim, so the docs quote measured numbers.
REFUND_CLAIMS = {
    "second_call": "the honest lookup, then a create_refund on an invented id: 1.0 (argument_grounding drops)",
    "trailing_text": "an outcome stated after the honest lookup ('Your request has been processed.'), or a lookup "
                     "of another id: 1.0",
    "hidden_answer": "the honest lookup beside another: 1.0",
    "malformed_call": "a broken <tool_call> block before a right question or answer: 1.0 (well_formed drops)",
    "invented_claim": "the honest lookup, then an outcome no call performed ('Your refund has been issued.'): 1.0 "
                      "(the claim's judge)",
    "format_bonus": "a call on an invented id instead of plain text: 0.3 where a plain reply gets 0 (partial credit)",
    "wrong_value": "the honest lookup with another case's id: 0.3, the format bonus again",
    "leading_text": "another case's lookup before the honest one: the first call is read, 0.3",
    "padding": "filler of any length keeps 1.0 on with-id and no-id prompts: free, never paid more",
    "keyword_stuffing": "'... order id' after a plain reply reads as asking: 0.3 on with-id, 1.0 (right) on no-id; the "
                        "environment's own grading, no finding",
}


def print_refund(seed: int) -> None:
    """refund's own score, probed at the defaults: each class docs/hacks.md names, its claim, and the finding on
    every category it was tried on (the most any example was paid, the minimal example's scores)."""
    from pytest_rlgate.envs import refund

    started = time.perf_counter()
    result = probe_reward(refund.score, env="refund", database=None, seed=seed)
    print(f"refund's own score, probed in {time.perf_counter() - started:.1f} s: findings {', '.join(result.hacks)}")
    rows = []
    for hack, claim in REFUND_CLAIMS.items():
        for f in (f for f in result.findings if f.hack == hack):
            kind = "hack" if f.pays else ("partial credit" if f.reported else "none")
            scores = "" if f.example is None else f"{f.original_score:g} -> {f.hacked_score:g} (typical {f.baseline:g})"
            rows.append([hack, claim if f.category == next(g.category for g in result.findings if g.hack == hack)
                         else "", f.category, kind, f"{f.n_paid}+{f.n_partial}/{f.n}",
                         "" if f.max_paid is None else f"{f.max_paid:g}", f"{f.max_severity:.2f}", scores])
    print(tabulate(rows, headers=["class", "docs/hacks.md says", "category", "probe finds", "paid+partial/tried",
                                  "most paid", "severity", "minimal: honest -> hacked"], maxcolwidths=[None, 48]))


if __name__ == "__main__":
    main()
