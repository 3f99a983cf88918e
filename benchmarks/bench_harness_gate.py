"""``rlgate gate`` on a 100,000-sample lm-eval ``--log_samples`` pair, next to a bare ``json.loads`` pass.

Writes a BEFORE and an AFTER lm-eval output folder (``results_<date>.json`` and one
``samples_<task>_<date>.jsonl`` per task) of N samples each (default 100,000, half per task),
every line built from a line the real harness wrote (tests/data/harness/lm_eval): the same
fields and sizes, the ``doc``, ``arguments``, ``resps`` and the three SHA-256 hashes, with
the documents, their categories and their scores varied (the with-id category regresses
on the AFTER side). Then, each in a child process:

* the *floor*: one bare ``json.loads`` per line over every samples file of both folders
  (and ``orjson.loads`` when orjson is installed, which the reader then uses);
* the installed CLI as a user runs it, ``rlgate gate BEFORE AFTER --category-key doc.category``
  (flips on): detect the format, read the results files, stream every line into a row
  valid as made, check every item's hashes against the other side's, sum per unit, keep
  each unit's example replies, bootstrap, print. ``--without-orjson`` hides orjson from
  the gate's process; ``--gate-arg`` passes it more arguments (``--gate-arg=--show-flips=0``).

Each line reports wall time from the child's first statement (imports included) and peak
RSS, the median of ``--repeat`` runs taken in turns (so load on the machine falls on both
alike); the last line is the gate's ratio to the json.loads floor (the target is <= 1.5x)
and its peak memory. The children cache their bytecode in a folder of the benchmark's own
(an installed package has its bytecode; a checkout run with PYTHONDONTWRITEBYTECODE would
otherwise compile the package on every run), after one untimed run of the gate.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_harness_gate.py [--samples 100000] [--repeat 5] [--dir /tmp/x]
        [--without-orjson] [--gate-arg ARG]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REAL = HERE.parent / "tests" / "data" / "harness" / "lm_eval" / "base"
TASKS = ("rg_refund", "rg_refund_more")
CATEGORIES = ("with_id", "no_id", "off_topic")
PASS = {"with_id": (0.8, 0.55), "no_id": (0.9, 0.9), "off_topic": (0.95, 0.95)}
DATE = "2026-12-01T09-00-00.000000"

_TIMED = ("import resource, sys, time; t0 = time.perf_counter()\n{body}\n"
          "print(f'PEAK {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}} '"
          "f'{{time.perf_counter() - t0:.2f}}', file=sys.stderr)\n{tail}")
_GATE = "from pytest_rlgate.cli import main; rc = main(sys.argv[1:]) if len(sys.argv) > 1 else 0"
#: what the gate's child runs first with --without-orjson: orjson cannot be imported
_NO_ORJSON = "sys.modules['orjson'] = None\n"
_FLOOR = ("import {module}\nfor path in sys.argv[1:]:\n    with open(path, 'rb') as handle:\n"
          "        for line in handle:\n            {module}.loads(line)")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _templates() -> tuple[list[dict], dict]:
    samples = next(REAL.glob("samples_rg_refund_2*.jsonl"))
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    results = json.loads(next(REAL.glob("results_*.json")).read_text())
    return [rec for rec in lines if rec["filter"] == "none"], results


def write_pair(directory: Path, samples: int, seed: int = 0) -> tuple[Path, Path]:
    templates, results = _templates()
    rng = np.random.default_rng(seed)
    per_task = samples // len(TASKS)
    sides = directory / "before", directory / "after"
    draws = rng.random((len(TASKS), per_task))
    for side, folder in enumerate(sides):
        folder.mkdir(parents=True, exist_ok=True)
        meta = {**results, "versions": dict.fromkeys(TASKS, 2.0),
                "results": {t: {"contains,none": 0.5} for t in TASKS}, "group_subtasks": {},
                "higher_is_better": {t: {"contains": True} for t in TASKS}}
        (folder / f"results_{DATE}.json").write_text(json.dumps(meta))
        for t, task in enumerate(TASKS):
            with open(folder / f"samples_{task}_{DATE}.jsonl", "w", encoding="utf-8") as out:
                for doc_id in range(per_task):
                    rec = dict(templates[doc_id % len(templates)])
                    category = CATEGORIES[doc_id % 3]
                    doc = {**rec["doc"], "category": category, "prompt": f"{rec['doc']['prompt']} (#{doc_id})"}
                    prompt = rec["arguments"]["gen_args_0"]["arg_0"] + f" #{doc_id}"
                    passed = draws[t, doc_id] < PASS[category][side]
                    rec.update(doc_id=doc_id, doc=doc,
                               arguments={"gen_args_0": {**rec["arguments"]["gen_args_0"], "arg_0": prompt}},
                               doc_hash=_sha(json.dumps(doc)), prompt_hash=_sha(prompt),
                               target_hash=_sha(str(rec["target"])), contains=float(passed))
                    out.write(json.dumps(rec) + "\n")
    return sides


Run = tuple[subprocess.CompletedProcess[str], float, float]


def timed(body: str, args: list[str], *, tail: str = "", cache: Path) -> Run:
    """Run *body* in a fresh interpreter; its (process, peak RSS in MB, wall seconds)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPYCACHEPREFIX": os.fspath(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, "-c", _TIMED.format(body=body, tail=tail), *args],
                          capture_output=True, text=True, env=env)
    if "PEAK " not in proc.stderr:
        raise SystemExit(f"the child failed:\n{proc.stderr}")
    peak_mb, wall = (float(x) for x in proc.stderr.split("PEAK ")[-1].split())
    return proc, peak_mb, wall


def _median(runs: list[Run]) -> Run:
    """The run of median wall time (the lower middle one of an even count), and the median itself."""
    ordered = sorted(runs, key=lambda run: run[2])
    proc, peak_mb, _ = ordered[(len(ordered) - 1) // 2]
    return proc, max(run[1] for run in runs), statistics.median(run[2] for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--samples", type=int, default=100_000, help="samples per side")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each, in turns; the median counts")
    parser.add_argument("--dir", default=None, help="where to write the folders (default: a temp folder)")
    parser.add_argument("--without-orjson", action="store_true",
                        help="the gate as it runs without the fast extra (orjson hidden from its process)")
    parser.add_argument("--gate-arg", action="append", default=[], metavar="ARG",
                        help="one more argument for rlgate gate (repeat it), e.g. --gate-arg=--show-flips=0")
    args = parser.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="rlgate-bench-harness-"))
    t0 = time.perf_counter()
    before, after = write_pair(directory, args.samples)
    files = [str(p) for side in (before, after) for p in sorted(side.glob("samples_*.jsonl"))]
    size_mb = sum(Path(p).stat().st_size for p in files) / 2**20
    print(f"wrote 2 x {args.samples:,} lm-eval samples ({size_mb:.0f} MB) in {time.perf_counter() - t0:.1f} s "
          f"to {directory}")
    children = {"json": (_FLOOR.format(module="json"), files, ""),
                "gate": ((_NO_ORJSON if args.without_orjson else "") + _GATE,
                         ["gate", str(before), str(after), "--category-key", "doc.category", *args.gate_arg],
                         "sys.exit(rc)")}
    if importlib.util.find_spec("orjson") is not None:
        children["orjson"] = (_FLOOR.format(module="orjson"), files, "")
    cache = directory / "pycache"
    timed(*children["gate"][:2], tail=children["gate"][2], cache=cache)  # untimed: the bytecode is written
    runs: dict[str, list[Run]] = {name: [] for name in children}
    for _ in range(args.repeat):
        for name, (body, argv, tail) in children.items():
            runs[name].append(timed(body, argv, tail=tail, cache=cache))
    median = {name: _median(found) for name, found in runs.items()}
    lines = 2 * args.samples
    _, floor_mb, floor_s = median["json"]
    print(f"floor, json.loads per line:   {floor_s:6.2f} s wall, {lines / floor_s / 1e3:4.0f}k lines/s; "
          f"peak RSS {floor_mb:.0f} MB")
    if "orjson" in median:
        _, fast_mb, fast_s = median["orjson"]
        print(f"floor, orjson.loads per line: {fast_s:6.2f} s wall, {lines / fast_s / 1e3:4.0f}k lines/s; "
              f"peak RSS {fast_mb:.0f} MB")
    parser_used = ("the standard library's json (orjson hidden: --without-orjson)" if args.without_orjson
                   else "orjson" if "orjson" in median
                   else "the standard library's json (orjson is not installed: pip install pytest-rlgate[fast])")
    print(f"the reader parses each line with {parser_used}; the floor stays json.loads")
    proc, peak_mb, wall = median["gate"]
    print(f"rlgate gate (lm-eval pair):   {wall:6.2f} s wall, {lines / wall / 1e3:4.0f}k lines/s; "
          f"peak RSS {peak_mb:.0f} MB; exit {proc.returncode}")
    print(f"  {proc.stdout.splitlines()[0] if proc.stdout else proc.stderr.strip()}")
    spread = ", ".join(f"{name} {min(r[2] for r in found):.2f}-{max(r[2] for r in found):.2f} s"
                       for name, found in runs.items())
    print(f"  wall time over {args.repeat} runs each: {spread}")
    print(f"rlgate gate: exit {proc.returncode}, {wall / floor_s:.2f}x the json.loads floor "
          f"(median {wall:.2f} s vs {floor_s:.2f} s; target <= 1.5x), peak RSS {peak_mb:.0f} MB for {size_mb:.0f} MB "
          "of lm-eval samples")


if __name__ == "__main__":
    main()
