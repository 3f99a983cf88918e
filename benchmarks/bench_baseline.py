"""The before side of a gate: re-sampling the base on the tiny policy vs reading a stored baseline.

Both on the same holdout (the refund environment's default prompt set, 20 % held out, k = 4):

* *re-sample*: load the tiny policy and sample its three base runs (seeds 17, 18, 19), what
  ``rlgate_before_rows`` does for a handed-in adapter when nothing is cached;
* *stored*: ``rlgate gate baselines/release.jsonl.gz AFTER.jsonl`` in a fresh process, the
  stored baseline being those same base runs written once with their provenance header.

The after side (the candidate's rows) is the base's first run here: the cost compared is
only the before side's, and the gate on top.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_baseline.py [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_rlgate.data.rows import Rows, write_rows
from pytest_rlgate.train.adapters import load_base
from pytest_rlgate.train.methods import make_knobs
from pytest_rlgate.train.pipeline import base_seeds, holdout_rows, load_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--dir", default=None, help="where to write the files (default: a temp folder)")
    args = parser.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="rlgate-bench-baseline-"))
    knobs = make_knobs("grpo")
    holdout = load_prompts(knobs).holdout

    started = time.perf_counter()
    model, tokenizer = load_base(knobs.base_model)
    loaded = time.perf_counter()
    runs = [holdout_rows(model, tokenizer, holdout, knobs, seed=seed, policy="base", eval_run=f"before-{i}")
            for i, seed in enumerate(base_seeds(knobs))]
    sampled = time.perf_counter()
    baseline = write_rows(directory / "baselines" / "release.jsonl.gz",
                          Rows((row for rows in runs for row in rows), header=runs[0].header))
    after = write_rows(directory / "after.jsonl", runs[0])
    print(f"holdout: {len(holdout)} prompts x k = {knobs.k}, {len(runs)} base runs "
          f"({sum(len(r) for r in runs)} rows); stored baseline {baseline.stat().st_size / 1024:.0f} KB")
    print(f"re-sample the base: {sampled - started:6.2f} s ({loaded - started:.2f} s loading the tiny policy, "
          f"{sampled - loaded:.2f} s sampling)")

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    gate_started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", "gate", str(baseline), str(after)],
                          capture_output=True, text=True, env=env)
    gated = time.perf_counter() - gate_started
    print(f"stored baseline:    {gated:6.2f} s for `rlgate gate {baseline.name} after.jsonl` in a fresh process "
          f"(exit {proc.returncode}: {proc.stdout.splitlines()[0] if proc.stdout else proc.stderr.strip()})")
    print(f"the stored baseline saves {sampled - started - gated:.1f} s of the before side "
          f"({(sampled - started) / gated:.0f}x)")


if __name__ == "__main__":
    main()
