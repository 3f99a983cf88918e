"""A newcomer's first ``rlgate demo``: wall time from an empty cache, next to the 5-minute goal.

Runs the installed ``rlgate demo`` in a child process exactly as a new user would after
``pip install``: a fresh, empty artifact cache (``RLGATE_CACHE_DIR`` set to a new temp
folder, so no tiny policy build, base run or training run is served from an earlier one)
and a fresh ``--runs-dir``. The demo's standard output is echoed with the time each line
appeared, so the stages it announces (the tiny policy, the prompts, each run) are timed
even where the demo does not time them itself; its stderr goes to this process's stderr
(progress bars when that is a terminal). At the end: the wall time beside the goal, the
demo's own total, and each run's split between training and the rest (base and after
sampling, gating, loading), read from the run folders' ``config.json``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_first_run.py [--keep DIR] [-- DEMO_ARGS...]

Arguments after ``--`` go to ``rlgate demo`` (e.g. ``-- --quick``). Exit status: the demo's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Issue 14's goal for ``rlgate demo`` from a fresh clone and an empty cache, on the 2-core machine.
GOAL_SECONDS = 300.0


def rlgate_command() -> list[str]:
    """The ``rlgate`` console script beside this interpreter (what a user runs), else the module."""
    script = Path(sys.executable).with_name("rlgate")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pytest_rlgate.cli"]


def run_demo(cache: Path, runs: Path, demo_args: list[str]) -> tuple[int, float]:
    """Run the demo, echoing each stdout line with its elapsed time; (exit status, wall seconds)."""
    env = {**os.environ, "RLGATE_CACHE_DIR": str(cache), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PYTHONUNBUFFERED": "1"}  # each line when it is printed, not when a pipe buffer fills
    command = [*rlgate_command(), "demo", "--runs-dir", str(runs), *demo_args]
    print(f"$ RLGATE_CACHE_DIR={cache} {' '.join(command)}", flush=True)
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"[{time.perf_counter() - started:7.1f} s] {line}", end="", flush=True)
    return proc.returncode, time.perf_counter() - started


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="put the cache and runs in this new folder and keep them "
                             "(default: a temp folder, removed)")
    parser.add_argument("demo_args", nargs="*", help="arguments for rlgate demo, after --")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)
    root = args.keep or Path(tempfile.mkdtemp(prefix="rlgate-first-run-"))
    cache, runs = root / "cache", root / "runs"
    cache.mkdir()
    try:
        code, wall = run_demo(cache, runs, args.demo_args)
        print()
        print("run                             total s  training s  rest s (sampling, gating, loading)")
        for name, total, train in run_split(runs):
            print(f"{name:<30} {total:8.0f} {train:11.0f} {total - train:7.0f}")
        verdict = "within" if wall <= GOAL_SECONDS else f"OVER by {wall - GOAL_SECONDS:.0f} s"
        demo = " ".join(["rlgate demo", *args.demo_args])
        print(f"{demo} from an empty cache: {wall:.0f} s wall, exit {code}; goal {GOAL_SECONDS:.0f} s: {verdict}")
        return code
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
