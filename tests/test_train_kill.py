"""A training run SIGKILLed at random points leaves nothing a later command accepts (issue 11).

Each attempt starts ``rlgate train grpo`` on the tiny policy (one step, two completions)
and kills its process group at a random moment of one phase: while importing, training,
sampling the after run, or just before publishing. Afterwards the run's name is either absent
or a finished run that opens; every leftover is hidden, refused by ``RunFolder.open`` and
``rlgate eval`` (exit 2) and skipped by ``rlgate report --index``; and the next writer into
the folder sweeps every leftover of the dead processes, TRL's scratch included.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_rlgate import cli
from pytest_rlgate.errors import DataError
from pytest_rlgate.train.run import RunFolder, sweep_runs

pytestmark = pytest.mark.slow

#: A run small enough to finish in well under a minute on one CPU core.
TRAIN = ["train", "grpo", "--base-model", "rlgate/tiny-refund", "--size", "small", "--steps", "1",
         "--num-generations", "2", "--batch-size", "2", "--monitor-every", "0", "--base-runs", "1", "--k", "1",
         "--no-progress", "--run-name", "killed"]
#: When to kill: a file (glob, inside the run's partial folder) to wait for, then a random
#: extra wait in seconds. Milestones rather than clock times, because one busy CPU core makes
#: the same run take 15 s or 80 s: importing and loading (no milestone), training (the base
#: rows are written), sampling after training (the adapter is saved), just before publishing.
KILL_POINTS: tuple[tuple[str | None, float], ...] = (
    (None, 4.0),
    ("holdout_before*.jsonl", 3.0),
    ("adapter/adapter_model.safetensors", 0.5),
    ("config.json", 0.0),
)


def _kill_at(runs: Path, env: dict[str, str], milestone: str | None, extra: float) -> int | None:
    """Start a run; once *milestone* exists in its partial folder, wait *extra* s and SIGKILL its
    process group. Its exit code if it ended first, else None."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest_rlgate.cli", *TRAIN, "--runs-dir", str(runs)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    own = f".killed.partial-*-{proc.pid}-*/{milestone}"  # this run's folder, not an earlier attempt's leftover
    while milestone is not None and proc.poll() is None and not any(runs.glob(own)):
        time.sleep(0.02)
    try:
        return proc.wait(timeout=extra)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def test_a_run_killed_anywhere_leaves_nothing_a_later_command_accepts(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    env = {**os.environ, "RLGATE_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    seed = int(os.environ.get("RLGATE_KILL_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    for milestone, most in KILL_POINTS:
        extra = rng.uniform(0.0, most)
        ended = _kill_at(runs, env, milestone, extra)
        note = f"seed {seed}: killed {extra:.1f} s after {milestone or 'the start'}"
        published = runs / "killed"
        if ended is not None or published.exists():  # it finished before the kill: a whole run, nothing else
            assert RunFolder.open(published).path == published, note
            break
        leftovers = list(runs.iterdir()) if runs.exists() else []
        assert all(p.name.startswith(".") for p in leftovers), (note, leftovers)
        for leftover in leftovers:
            if leftover.is_dir():
                with pytest.raises(DataError):
                    RunFolder.open(leftover)
                assert cli.main(["eval", "--run", str(leftover)]) == 2, note
        if runs.exists():
            assert cli.main(["report", str(runs), "--index"]) == 2, note  # no run folder to index
        capsys.readouterr()
    swept = sweep_runs(runs) if runs.exists() else []
    left = [p for p in runs.iterdir() if p.name.startswith(".")] if runs.exists() else []
    assert left == [], (seed, swept, left)
