"""``rlgate gate`` on a pair of large row files: wall time and peak memory next to the parser's floor.

Writes BEFORE/AFTER JSONL files of N rows each (default 1,000,000: 50,000 scenarios x
5 paraphrased prompts x k = 4 rollouts, three categories, one category regressing, each
file with the provenance header of the refund environment, so the gate guards its
``well_formed`` and ``argument_grounding`` markers as it would on a real run's files). Then, each in a child process:

* the *floor*: one bare ``json.loads`` per line over both files (the standard library),
  and ``orjson.loads`` when orjson is installed, which the reader then uses;
* the installed CLI, ``rlgate gate BEFORE AFTER``: parse, validate every field, refuse
  duplicates, aggregate per unit, keep a few replies per unit for the flips, bootstrap, print;
* the same with ``--show-flips 0`` (no replies kept), so the flips' cost is printed beside it.

Each line reports wall time from the child's first statement (imports included) and peak
RSS, the best of ``--repeat`` runs taken in turns (the shared box's load comes and goes, and
turns expose the floor and the gate to the same load); the last line is the gate's ratio to
the stdlib floor (the target is <= 1.3).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_gate_cli.py [--rows 1000000] [--repeat 3] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_rlgate.data.provenance import row_header
from pytest_rlgate.environment.contract import load_env

CATEGORIES = ("with_id", "no_id", "off_topic")
BASE = {"with_id": 0.3, "no_id": 0.95, "off_topic": 0.98}
SHIFT = {"with_id": 0.4, "no_id": -0.05, "off_topic": 0.0}
PROMPTS_PER_SCENARIO = 5
K = 4

#: a child that times its body and reports "PEAK <MB> <seconds>" on stderr
_TIMED = ("import resource, sys, time; t0 = time.perf_counter()\n{body}\n"
          "print(f'PEAK {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}} '"
          "f'{{time.perf_counter() - t0:.2f}}', file=sys.stderr)\n{tail}")
_GATE = "from pytest_rlgate.cli import main; rc = main(sys.argv[1:]) if len(sys.argv) > 1 else 0"
_FLOOR = ("import {module}\nfor path in sys.argv[1:]:\n    with open(path, 'rb') as handle:\n"
          "        for line in handle:\n            {module}.loads(line)")


def write_pair(directory: Path, rows: int, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    scenarios = rows // (PROMPTS_PER_SCENARIO * K)
    paths = directory / "before.jsonl", directory / "after.jsonl"
    env = load_env("refund")
    for side, path in enumerate(paths):
        header = row_header(env, policy=("base", "candidate")[side], temperature=0.8, top_p=0.95, seed=17, k=K)
        with path.open("w", encoding="utf-8") as out:
            out.write(json.dumps(header) + "\n")
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
                            "markers": {"well_formed": 1.0 if ok or j else 0.0, "argument_grounding": 1.0},
                            "eval_run": 0,
                        }))
                out.write("\n".join(lines) + "\n")
    return paths


def timed(body: str, args: list[str], *, tail: str = "") -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run *body* in a fresh interpreter; its (process, peak RSS in MB, wall seconds)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _TIMED.format(body=body, tail=tail), *args],
                          capture_output=True, text=True, env=env)
    if "PEAK " not in proc.stderr:
        raise SystemExit(f"the child failed:\n{proc.stderr}")
    peak_mb, wall = (float(x) for x in proc.stderr.split("PEAK ")[-1].split())
    return proc, peak_mb, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per file")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, in turns; the best counts")
    parser.add_argument("--dir", default=None, help="where to write the files (default: a temp folder)")
    args = parser.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="rlgate-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    before, after = write_pair(directory, args.rows)
    files = [str(before), str(after)]
    size_mb = (before.stat().st_size + after.stat().st_size) / 2**20
    print(f"wrote 2 x {args.rows:,} rows ({size_mb:.0f} MB) in {time.perf_counter() - t0:.1f} s to {directory}")
    rows = 2 * args.rows
    children = {"json": (_FLOOR.format(module="json"), files, ""),
                "gate": (_GATE, ["gate", *files, "--json", str(directory / "gate.json")], "sys.exit(rc)"),
                "no flips": (_GATE, ["gate", *files, "--show-flips", "0", "--json", str(directory / "plain.json")],
                             "sys.exit(rc)")}
    if importlib.util.find_spec("orjson") is not None:
        children["orjson"] = (_FLOOR.format(module="orjson"), files, "")
    best: dict[str, tuple[subprocess.CompletedProcess[str], float, float]] = {}
    for _ in range(args.repeat):
        for name, (body, argv, tail) in children.items():
            run = timed(body, argv, tail=tail)
            if name not in best or run[2] < best[name][2]:
                best[name] = run
    _, floor_mb, floor_s = best["json"]
    print(f"floor, json.loads per line:   {floor_s:6.2f} s wall, {rows / floor_s / 1e3:4.0f}k rows/s; "
          f"peak RSS {floor_mb:.0f} MB")
    if "orjson" in best:
        _, fast_mb, fast_s = best["orjson"]
        print(f"floor, orjson.loads per line: {fast_s:6.2f} s wall, {rows / fast_s / 1e3:4.0f}k rows/s; "
              f"peak RSS {fast_mb:.0f} MB (the gate's reader uses orjson)")
    proc, peak_mb, wall = best["gate"]
    print(f"rlgate gate:                  {wall:6.2f} s wall, {rows / wall / 1e3:4.0f}k rows/s; "
          f"peak RSS {peak_mb:.0f} MB; exit {proc.returncode}")
    print(f"  {proc.stdout.splitlines()[0] if proc.stdout else proc.stderr.strip()}")
    _, plain_mb, plain_s = best["no flips"]
    print(f"rlgate gate --show-flips 0:   {plain_s:6.2f} s wall, peak RSS {plain_mb:.0f} MB: flips (the replies kept "
          f"while reading) cost {wall / plain_s:.2f}x the time and {peak_mb - plain_mb:+.0f} MB")
    print(f"rlgate gate: exit {proc.returncode}, {wall / floor_s:.2f}x the json.loads floor "
          f"({wall:.2f} s vs {floor_s:.2f} s; target <= 1.3x) for {size_mb:.0f} MB of row files")


if __name__ == "__main__":
    main()
