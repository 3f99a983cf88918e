"""A tiny policy's base pass@1 per category on its environment's seed-0 holdouts (and build time).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_policy.py                  # shipped rlgate/tiny-refund
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_policy.py --env arith      # shipped rlgate/tiny-arith
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_policy.py --fresh          # time a clean build too
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_policy.py --recipe-seeds 0 1 2   # recipe variance

pass@1 = the share of the k=4 sampled replies (T 0.8, top-p 0.95) that pass, per category, for
each base-run sample seed (17, 18, 19), on the stratified holdout of the environment's default
and large prompt sets; each category also shows how its replies scored (score: count).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch

from pytest_rlgate.data.prompts import stratified_split
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.policy.load import build_tiny_policy, load_policy, tiny_policy_dir
from pytest_rlgate.policy.sampling import BASE_RUN_SEEDS, sample_rows
from pytest_rlgate.policy.tiny.manifest import read_build_info
from pytest_rlgate.policy.tiny.spec import spec_of


def policies(env, args) -> list[tuple[str, Path]]:
    """(label, folder) of each policy to measure: the shipped one, or fresh builds."""
    recipe = spec_of(env)
    if not args.fresh and args.recipe_seeds is None:
        return [(f"shipped {recipe.name}", tiny_policy_dir(recipe.name))]
    root = tempfile.mkdtemp(prefix="rlgate-bench-")
    seeds = args.recipe_seeds if args.recipe_seeds is not None else [recipe.seed]
    return [(f"recipe seed {seed}", build_tiny_policy(env, recipe=dataclasses.replace(recipe, seed=seed), root=root))
            for seed in seeds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--env", default="refund", help="environment spec (default refund)")
    parser.add_argument("--fresh", action="store_true", help="build the recipe into a temporary cache and time it")
    parser.add_argument("--recipe-seeds", type=int, nargs="*", default=None, help="fresh builds with these seeds")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--sizes", nargs="*", default=["default", "large"])
    parser.add_argument("--sample-seeds", type=int, nargs="*", default=None,
                        help="sampling seeds (default: the base-run seeds 17 18 19)")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()
    torch.set_num_threads(1)


    env = load_env(args.env)
    results = []
    for label, folder in policies(env, args):
        info = read_build_info(folder)
        started = time.perf_counter()
        model, tok = load_policy(folder)
        print(f"{label}: built in {info['build_seconds']:.0f} s wall, {info['build_cpu_seconds']:.0f} s CPU "
              f"(warm start {info['train_seconds']:.0f} s, loss {info['loss_first']:.2f} -> {info['loss_last']:.3f}); "
              f"load {time.perf_counter() - started:.1f} s; {info['content_sha256'][:19]}; {folder}")
        for size in args.sizes:
            holdout = stratified_split(env.build_prompts(0, size), env=env).holdout
            per_seed: dict[str, list[float]] = defaultdict(list)
            scores: dict[str, Counter] = defaultdict(Counter)
            for sample_seed in args.sample_seeds or BASE_RUN_SEEDS:
                rows = sample_rows(model, tok, holdout, k=args.k, seed=sample_seed, env=env,
                                   max_new_tokens=64, progress=False)
                passed: dict[str, list[int]] = defaultdict(list)
                for row in rows:
                    passed[row["category"]].append(row["reward"])
                    scores[row["category"]][round(row["score"], 3)] += 1
                for category, values in passed.items():
                    per_seed[category].append(sum(values) / len(values))
            counts = Counter(item["category"] for item in holdout)
            for category in sorted(per_seed):
                values = per_seed[category]
                print(f"  {size:<8}{category:<13} n={counts[category]:>3}x{args.k}  pass@1 "
                      f"{statistics.mean(values):.3f}  (seeds {', '.join(f'{v:.3f}' for v in values)})  "
                      f"scores {dict(sorted(scores[category].items(), reverse=True))}")
                results.append({"env": env.name, "policy": label, "size": size, "category": category,
                                "prompts": counts[category], "pass_at_1": values,
                                "scores": {str(s): n for s, n in scores[category].items()}})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
