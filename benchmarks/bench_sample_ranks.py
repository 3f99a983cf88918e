"""Sharded sampling pays: 2 processes under torchrun against 1, one thread each, side by side.

Both sample the same prompts x k with ``sample_rows`` (the path ``rlgate sample``, ``rlgate
eval`` and the fixtures take) on the shipped tiny policy; only the sampling is timed
(between two barriers, after the model is loaded), and the runs alternate (1, 2, 1, 2,
...) so machine load hits both alike. The rows of the two are checked equal. Target: the
2-process throughput >= 1.6x the 1-process one on 2 cores.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sample_ranks.py --prompts 64 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pytest_rlgate._io import ranks
from pytest_rlgate.data.prompts import build_prompts
from pytest_rlgate.policy.load import load_policy
from pytest_rlgate.policy.sampling import sample_rows

os.environ.setdefault("OMP_NUM_THREADS", "1")


def inner(prompts: int, k: int, tokens: int) -> None:
    """One measurement, in this process (and its torchrun peers): prints a JSON line on rank 0."""
    import hashlib

    import torch


    torch.set_num_threads(1)
    ranks.init_from_launcher()
    items = (build_prompts(0, "default") * 4)[:prompts]
    model, tok = load_policy("rlgate/tiny-refund", device="cpu")
    ranks.barrier()
    started = time.perf_counter()
    rows = sample_rows(model, tok, items, k=k, max_new_tokens=tokens, progress=False)
    ranks.barrier()
    seconds = time.perf_counter() - started
    if ranks.is_main_process():
        digest = hashlib.sha256(json.dumps([r["reply"] for r in rows]).encode()).hexdigest()[:16]
        print(json.dumps({"seconds": seconds, "replies": len(rows), "digest": digest, "world": ranks.world_size()}))
    ranks.finish()


def _measure(world: int, args: argparse.Namespace) -> dict:
    script = [str(Path(__file__).resolve()), "--inner", "--prompts", str(args.prompts), "--k", str(args.k),
              "--tokens", str(args.tokens)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if world == 1:
        command = [sys.executable, *script]
    else:
        torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
        command = [torchrun, "--standalone", "--nproc_per_node", str(world), *script]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.prompts, args.k, args.tokens)
        return
    times: dict[int, list[float]] = {1: [], 2: []}
    digests: set[str] = set()
    for _ in range(args.repeats):
        for world in (1, 2):
            result = _measure(world, args)
            times[world].append(result["seconds"])
            digests.add(result["digest"])
    replies = args.prompts * args.k
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(f"{args.prompts} prompts x {args.k} replies, {args.tokens} new tokens, one thread a process, "
          f"{args.repeats} alternating runs (medians)")
    print(f"{'processes':>10} {'seconds':>9} {'replies/s':>10}   runs")
    for world, median in ((1, one), (2, two)):
        print(f"{world:>10} {median:>9.2f} {replies / median:>10.1f}   {', '.join(f'{t:.2f}' for t in times[world])}")
    print(f"2-process / 1-process throughput: {one / two:.2f}x (target >= 1.6x); rows identical: {len(digests) == 1}")


if __name__ == "__main__":
    main()
