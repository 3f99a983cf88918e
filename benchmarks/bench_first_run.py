"""A newcomer's first ``rlgate demo``: wall time from an empty cache, side by side and one run at a time.

Runs the installed ``rlgate demo`` in a child process exactly as a new user would after
``pip install``: a fresh, empty artifact cache (``RLGATE_CACHE_DIR`` set to a new temp
folder, so no base run or training run is served from an earlier one; the tiny policy ships
with the package) and a fresh ``--runs-dir``. It runs the demo twice, each from its own
empty cache: as it runs by default (its runs side by side, one process per core) and with
``--jobs 1`` (one after the other, the serial baseline), in alternating order when
``--repeats`` asks for more than one pair. The demo's standard output is echoed with the
time each line appeared; its stderr goes to this process's stderr (progress bars when that
is a terminal).

At the end, for each run: the wall time, the CPU seconds of the demo and its workers, the
machine's load average while it ran, and each training run's split between training and the
rest (read from the run folders' ``config.json``); then the side-by-side wall time beside
the serial one, their ratio, and whether the two transcripts are the same apart from times
and paths (the table and the story must not depend on the scheduling). Exit 1 when they
differ, else the demo's exit status.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_first_run.py [--repeats N] [--only MODE]
        [--keep DIR] [-- DEMO_ARGS...]

Arguments after ``--`` go to every ``rlgate demo`` (e.g. ``-- --quick``). On a machine other
jobs share, the ratio measured side by side is the number to read: both runs see the same
load, and the side-by-side one gains less from a busy second core than it would from an idle one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The goal for ``rlgate demo`` from a fresh clone and an empty cache, on an idle 2-core machine.
GOAL_SECONDS = 180.0
#: The two ways the demo is run: its default (side by side) and the serial baseline.
MODES: dict[str, list[str]] = {"side-by-side": [], "serial": ["--jobs", "1"]}
#: Transcript text that is allowed to differ between two runs: times and the runs folder.
_TIMES = re.compile(r"\b\d+ s\b")


@dataclass
class Measured:
    mode: str
    code: int
    wall: float
    cpu: float  #: user + system seconds of the demo and every process it started
    load: tuple[float, float]  #: 1-minute load average before and after
    transcript: list[str] = field(default_factory=list)
    split: list[tuple[str, float, float]] = field(default_factory=list)


def rlgate_command() -> list[str]:
    """The ``rlgate`` console script beside this interpreter (what a user runs), else the module."""
    script = Path(sys.executable).with_name("rlgate")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pytest_rlgate.cli"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_demo(mode: str, cache: Path, runs: Path, demo_args: list[str]) -> Measured:
    """Run the demo in *mode*, echoing each stdout line with its elapsed time."""
    env = {**os.environ, "RLGATE_CACHE_DIR": str(cache), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PYTHONUNBUFFERED": "1"}  # each line when it is printed, not when a pipe buffer fills
    command = [*rlgate_command(), "demo", "--runs-dir", str(runs), *MODES[mode], *demo_args]
    print(f"$ RLGATE_CACHE_DIR={cache} {' '.join(command)}", flush=True)
    load, cpu, started = os.getloadavg()[0], _children_cpu(), time.perf_counter()
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            print(f"[{time.perf_counter() - started:7.1f} s] {line}", end="", flush=True)
    wall = time.perf_counter() - started
    return Measured(mode, proc.returncode, wall, _children_cpu() - cpu, (load, os.getloadavg()[0]),
                    [_TIMES.sub("N s", line.replace(str(runs), "<runs>")) for line in lines], run_split(runs))


def _timestamp(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def run_split(runs: Path) -> list[tuple[str, float, float]]:
    """(run folder, seconds from load to publish, seconds training) for each run the demo wrote."""
    split = []
    for config_path in sorted(runs.glob("*/config.json")):
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if "training" not in config or "started" not in config:
            continue
        total = (_timestamp(config["finished"]) - _timestamp(config["started"])).total_seconds()
        split.append((config_path.parent.name, total, float(config["training"].get("train_seconds", 0.0))))
    return split


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--repeats", type=int, default=1, metavar="N",
                        help="pairs of runs, alternating which mode goes first (default 1)")
    parser.add_argument("--only", choices=sorted(MODES), help="run one mode only")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="put the caches and runs in this new folder and keep them (default: a temp "
                             "folder, removed)")
    parser.add_argument("demo_args", nargs="*", help="arguments for rlgate demo, after --")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)
    root = args.keep or Path(tempfile.mkdtemp(prefix="rlgate-first-run-"))
    modes = [args.only] if args.only else list(MODES)
    measured: list[Measured] = []
    try:
        for repeat in range(args.repeats):
            for mode in modes if repeat % 2 == 0 else modes[::-1]:
                folder = root / f"{mode}-{repeat}"
                (folder / "cache").mkdir(parents=True)
                measured.append(run_demo(mode, folder / "cache", folder / "runs", args.demo_args))
                print()
        return report(measured, " ".join(["rlgate demo", *args.demo_args]))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def report(measured: list[Measured], demo: str) -> int:
    """Print every run's numbers, the side-by-side/serial ratio and whether the transcripts agree."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{demo} from an empty cache on {cores} cores (the 1-minute load average before -> after each run):")
    for m in measured:
        print(f"  {m.mode:<13} {m.wall:6.0f} s wall, {m.cpu:6.0f} CPU s, load {m.load[0]:.1f} -> {m.load[1]:.1f}, "
              f"exit {m.code}")
        for name, total, train in m.split:
            print(f"      {name:<28} {total:5.0f} s in its run folder, {train:5.0f} s training")
    code = max((m.code for m in measured), default=0)
    walls = {mode: _median([m.wall for m in measured if m.mode == mode]) for mode in MODES
             if any(m.mode == mode for m in measured)}
    if len(walls) == 2:
        ratio = walls["side-by-side"] / walls["serial"]
        print(f"side by side {walls['side-by-side']:.0f} s, serial {walls['serial']:.0f} s (medians): "
              f"ratio {ratio:.2f}; at this ratio a {GOAL_SECONDS / ratio:.0f} s serial first run meets the "
              f"{GOAL_SECONDS:.0f} s goal")
    first = measured[0].transcript if measured else []
    differing = [m for m in measured[1:] if m.transcript != first]
    for m in differing:
        print(f"the {m.mode} transcript differs from the first {measured[0].mode} one:")
        print("\n".join(difflib.unified_diff(first, m.transcript, lineterm="", n=1)))
    if len(measured) > 1 and not differing:
        print(f"the {len(measured)} transcripts are identical apart from times and paths: the same table and story")
    for mode, wall in walls.items():
        verdict = "within" if wall <= GOAL_SECONDS else f"over by {wall - GOAL_SECONDS:.0f} s"
        print(f"{mode}: {wall:.0f} s wall; goal {GOAL_SECONDS:.0f} s: {verdict}")
    return 1 if differing else code


if __name__ == "__main__":
    raise SystemExit(main())
