"""The gate on real sampling noise: SmolLM2-135M-Instruct against itself, many reruns.

Base against base: "before" and "after" are the same model at different sample seeds, so
every regression the gate reports is a false fail and every interval should hold 0. The
replies are sampled ONCE into a pool (``--pool-k`` replies per prompt of a small arith
holdout, with ``rlgate sample``; reply ``j`` has its own seed, so the pool is many seeds of
one reply each), and each rerun draws ``--k`` replies per prompt for "before" and ``--k``
other ones for "after" from it. The draws of one prompt are then independent draws of that
prompt's real reply distribution, exactly as two sample seeds of the model would give, and
the reruns take seconds: only ``rg.compare`` runs. Beside it the same gate on a simulation
of the same shape: per prompt, Bernoulli draws at that prompt's pool pass rate (what the
statistics' own calibration assumes), each guarded marker drawn the same way on its own, so
the two columns differ only by what real replies add (markers that move with the pass,
prompts whose replies are alike, whatever else real noise is).

Printed per comparison (category x metric, as ``rg.compare`` reports them): the false-fail
rate (verdict ``regressed``), the coverage of the true delta 0 by the interval, and at run
level the share of reruns whose gate failed. Then ``hack_scan`` and ``probe_reward`` on the
real replies.

    # once (minutes on CPU): fetch the model, sample the pool (resumable)
    rlgate models fetch smollm2-135m
    OMP_NUM_THREADS=1 python benchmarks/bench_real_calibration.py --sample
    # the gate part, from the cached pool (seconds)
    OMP_NUM_THREADS=1 python benchmarks/bench_real_calibration.py [--reruns 400] [--k 4]

The pool lives under ``$RLGATE_CACHE_DIR/bench-real/`` (``--pool`` moves it).
"""

from __future__ import annotations

import argparse
import collections
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest_rlgate as rg
from pytest_rlgate._io.cache import cache_root

MODEL = "smollm2-135m"
ENV = "arith"
PER_CATEGORY = 12
POOL_K = 12
MAX_NEW_TOKENS = 32


def default_pool() -> Path:
    return cache_root() / "bench-real" / f"{MODEL}-{ENV}-pool-k{POOL_K}.jsonl"


def holdout(per_category: int = PER_CATEGORY) -> list[rg.PromptItem]:
    """The first *per_category* prompts of each category of the large arith holdout (seed 0)."""
    env = rg.load_env(ENV)
    split = rg.stratified_split(rg.build_prompts(0, "large", env=env), 0.2, env=env)
    taken: dict[str, int] = collections.Counter()
    out = []
    for item in split.holdout:
        if taken[item["category"]] < per_category:
            taken[item["category"]] += 1
            out.append(item)
    return out


def sample_pool(pool: Path, pool_k: int) -> None:
    from pytest_rlgate.data.prompts import write_prompts

    pool.parent.mkdir(parents=True, exist_ok=True)
    prompts = pool.with_suffix(".prompts.jsonl")
    write_prompts(prompts, holdout())
    command = [sys.executable, "-m", "pytest_rlgate.cli", "sample", "--model", MODEL, "--env", ENV,
               "--prompts", str(prompts), "--k", str(pool_k), "--max-new-tokens", str(MAX_NEW_TOKENS),
               "--batch-size", "4", "--out", str(pool)]
    print("$", " ".join(command[1:]), flush=True)
    started = time.time()
    subprocess.run(command, check=True)
    print(f"pool sampled in {time.time() - started:.0f} s", flush=True)


def by_prompt(rows: list[rg.Row]) -> dict[str, list[rg.Row]]:
    grouped: dict[str, list[rg.Row]] = collections.defaultdict(list)
    for row in rows:
        grouped[row["prompt"]].append(row)  # a prompt's own replies (a scenario may hold several prompts)
    return dict(grouped)


def draw(grouped: dict[str, list[rg.Row]], k: int, rng: random.Random) -> tuple[list[rg.Row], list[rg.Row]]:
    """One rerun: *k* replies per prompt for each side, disjoint, from the prompt's pool."""
    before, after = [], []
    for rows in grouped.values():
        picked = rng.sample(rows, 2 * k)
        before += [{**row, "rollout_index": j} for j, row in enumerate(picked[:k])]
        after += [{**row, "rollout_index": j} for j, row in enumerate(picked[k:])]
    return before, after


def simulated(grouped: dict[str, list[rg.Row]], k: int, rng: random.Random) -> tuple[list[rg.Row], list[rg.Row]]:
    """The simulation's rerun: per prompt, Bernoulli draws at the pool's pass rate, and each
    marker at its own pool rate, independently (no reply behind them)."""
    sides: tuple[list[rg.Row], list[rg.Row]] = ([], [])
    for rows in grouped.values():
        rate = statistics.fmean(r["reward"] for r in rows)
        marker_rates = {m: statistics.fmean(r["markers"][m] for r in rows) for m in rows[0]["markers"]}
        first = rows[0]
        for side in sides:
            for j in range(k):
                hit = int(rng.random() < rate)
                side.append({"prompt": first["prompt"], "scenario_id": first["scenario_id"],
                             "category": first["category"], "rollout_index": j, "reply": "(simulated)",
                             "score": float(hit), "reward": hit,
                             "markers": {m: float(rng.random() < p) for m, p in marker_rates.items()}})
    return sides


def tally(name: str, grouped: dict[str, list[rg.Row]], k: int, reruns: int, seed: int, maker) -> dict[str, object]:
    rng = random.Random(seed)
    fails: dict[str, int] = collections.Counter()
    covered: dict[str, int] = collections.Counter()
    seen: dict[str, int] = collections.Counter()
    run_fails = all_covered = 0
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(reruns):
        before, after = maker(grouped, k, rng)
        result = rg.compare(before, after, by="category", env=ENV)
        holds = True
        for comparison in result.comparisons:
            label = f"{comparison.group}:{comparison.metric}"
            seen[label] += 1
            fails[label] += comparison.verdict == "regressed"
            inside = comparison.low is None or comparison.low <= 0.0 <= comparison.high
            covered[label] += inside
            holds = holds and inside
        run_fails += not result.passed
        all_covered += holds
    return {"name": name, "fails": fails, "covered": covered, "seen": seen, "run_fails": run_fails,
            "all_covered": all_covered,
            "reruns": reruns, "seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--sample", action="store_true", help="sample the pool first if it is missing (minutes)")
    parser.add_argument("--pool", type=Path, default=None, help="the pool's row file (default: in the cache)")
    parser.add_argument("--pool-k", type=int, default=POOL_K)
    parser.add_argument("--k", type=int, default=4, help="replies per prompt and side in a rerun")
    parser.add_argument("--reruns", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-scan", action="store_true", help="skip hack_scan and the probe")
    args = parser.parse_args()
    pool = args.pool or default_pool()
    if not pool.is_file():
        if not args.sample:
            sys.exit(f"no pool at {pool}: run with --sample once (it samples {MODEL}; minutes on CPU)")
        sample_pool(pool, args.pool_k)
    rows = list(rg.load_rows(pool))
    grouped = by_prompt(rows)
    if 2 * args.k > min(len(v) for v in grouped.values()):
        sys.exit(f"--k {args.k}: each side needs k replies of its own, and the pool has "
                 f"{min(len(v) for v in grouped.values())} per prompt")
    print(f"pool: {pool} ({len(rows)} replies, {len(grouped)} prompts)")
    per_cat = collections.defaultdict(list)
    for row in rows:
        per_cat[row["category"]].append(row["reward"])
    print("base pass@1 per category (pool): " + ", ".join(
        f"{c} {statistics.fmean(v):.3f} ({len(v)} replies)" for c, v in sorted(per_cat.items())))
    real = tally("real replies", grouped, args.k, args.reruns, args.seed, draw)
    sim = tally("simulation", grouped, args.k, args.reruns, args.seed, simulated)
    print(f"\nbase vs base, {len(grouped)} prompts x k={args.k} per side, {args.reruns} reruns each")
    print(f"{'comparison':<28}{'false-fail real':>16}{'sim':>8}{'coverage real':>15}{'sim':>8}")
    for label in sorted(real["seen"]):
        n = real["seen"][label]
        line = f"{label:<28}{real['fails'][label] / n:>16.3f}"
        m = sim["seen"].get(label)
        line += f"{sim['fails'][label] / m:>8.3f}" if m else f"{'-':>8}"
        line += f"{real['covered'][label] / n:>15.3f}"
        line += f"{sim['covered'][label] / m:>8.3f}" if m else f"{'-':>8}"
        print(line)
    print(f"{'run level (gate failed)':<28}{real['run_fails'] / args.reruns:>16.3f}"
          f"{sim['run_fails'] / args.reruns:>8.3f}{real['all_covered'] / args.reruns:>15.3f}"
          f"{sim['all_covered'] / args.reruns:>8.3f}  (coverage: every interval holds 0)")
    print(f"gate time ({args.reruns} x rg.compare a side): real {real['cpu']:.1f} s CPU "
          f"({real['seconds']:.1f} s wall), simulation {sim['cpu']:.1f} s CPU ({sim['seconds']:.1f} s wall)")
    if not args.no_scan:
        scan_and_probe(rows)


def scan_and_probe(rows: list[rg.Row]) -> None:
    """``hack_scan`` over the pool's real replies (12 to a prompt: one GRPO group each), and the
    environment's hack probe over the pool's own prompts."""
    env = rg.load_env(ENV)
    started = time.perf_counter()
    scan = rg.hack_scan(rows, env=env, endorsed=sorted({f for fs in env.endorsed.values() for f in fs}), rng=0)
    print(f"\nhack_scan on {len(rows)} real replies ({time.perf_counter() - started:.1f} s):")
    print(scan.summary())
    print(scan.table(limit=8))
    started = time.perf_counter()
    items = [{"prompt": r["prompt"], "case": r["case"], "category": r["category"]}
             for r in {r["scenario_id"]: r for r in rows}.values()]
    probe = rg.probe_reward(env=env, items=items)
    print(f"\nprobe_reward on the pool's {len(items)} prompts ({time.perf_counter() - started:.1f} s):")
    print(probe.table(paying_only=False))


if __name__ == "__main__":
    main()
