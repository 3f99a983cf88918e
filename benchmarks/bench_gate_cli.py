"""``rlgate gate`` on a pair of large row files: wall time and peak memory.

Writes BEFORE/AFTER JSONL files of N rows each (default 1,000,000: 50,000 scenarios x
5 paraphrased prompts x k = 4 rollouts, three categories, one category regressing), runs
the installed CLI on them in a child process and reports its wall time and peak RSS, next
to the size of the files (what holding the rows would cost at the very least).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_gate_cli.py [--rows 1000000] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CATEGORIES = ("with_id", "no_id", "off_topic")
BASE = {"with_id": 0.3, "no_id": 0.95, "off_topic": 0.98}
SHIFT = {"with_id": 0.4, "no_id": -0.05, "off_topic": 0.0}
PROMPTS_PER_SCENARIO = 5
K = 4


def write_pair(directory: Path, rows: int, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    scenarios = rows // (PROMPTS_PER_SCENARIO * K)
    paths = directory / "before.jsonl", directory / "after.jsonl"
    for side, path in enumerate(paths):
        with path.open("w", encoding="utf-8") as out:
            for s in range(scenarios):
                category = CATEGORIES[s % 3]
                p = BASE[category] + side * SHIFT[category]
                passed = rng.random(PROMPTS_PER_SCENARIO * K) < p
                lines = []
                for i in range(PROMPTS_PER_SCENARIO):
                    prompt = f"scenario {s} paraphrase {i}: please refund my order"
                    for j in range(K):
                        ok = bool(passed[i * K + j])
                        lines.append(json.dumps({
                            "prompt": prompt, "scenario_id": f"s{s}", "category": category, "rollout_index": j,
                            "reply": "Which order id?" if ok else "<tool_call>{}</tool_call>",
                            "score": 1.0 if ok else 0.2, "reward": int(ok),
                            "markers": {"well_formed": 1.0 if ok or j else 0.0}, "eval_run": 0,
                        }))
                out.write("\n".join(lines) + "\n")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per file")
    parser.add_argument("--dir", default=None, help="where to write the files (default: a temp folder)")
    args = parser.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="rlgate-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    before, after = write_pair(directory, args.rows)
    size_mb = (before.stat().st_size + after.stat().st_size) / 2**20
    print(f"wrote 2 x {args.rows:,} rows ({size_mb:.0f} MB) in {time.perf_counter() - t0:.1f} s to {directory}")
    wrapper = ("import resource, sys, time; t0 = time.perf_counter(); from pytest_rlgate.cli import main; "
               "rc = main(sys.argv[1:]) if len(sys.argv) > 1 else 0; "
               "print(f'PEAK {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} '"
               "f'{time.perf_counter() - t0:.1f}', file=sys.stderr); sys.exit(rc)")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", wrapper, "gate", str(before), str(after), "--json",
                           str(directory / "gate.json")], capture_output=True, text=True, env=env)
    peak_mb, wall = (float(x) for x in proc.stderr.split("PEAK ")[-1].split())
    idle = subprocess.run([sys.executable, "-c", wrapper + "\nimport pytest_rlgate.gate"], capture_output=True,
                          text=True, env=env)
    idle_mb = float(idle.stderr.split("PEAK ")[-1].split()[0])
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(proc.stdout.splitlines()[0] if proc.stdout else proc.stderr)
    print(f"rlgate gate: exit {proc.returncode}, {wall:.1f} s wall ({cpu.ru_utime + cpu.ru_stime:.1f} s CPU), "
          f"{2 * args.rows / wall / 1e3:.0f}k rows/s; peak RSS {peak_mb:.0f} MB "
          f"(the interpreter with the gate imported alone: {idle_mb:.0f} MB) for {size_mb:.0f} MB of row files")

if __name__ == "__main__":
    main()
