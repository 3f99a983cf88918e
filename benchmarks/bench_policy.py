"""The tiny policy's build time and base pass@1 per category on the seed-0 holdouts.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_policy.py                 # cached policy
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_policy.py --fresh         # time a clean build
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_policy.py --recipe-seeds 0 1 2   # recipe variance

pass@1 = the share of the k=4 sampled replies (T 0.8, top-p 0.95) that pass, per category,
for each base-run sample seed (17, 18, 19), on the stratified holdout of the default (119)
and large (707) prompt sets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from collections import Counter, defaultdict

import torch


def reply_kind(reply: str, case: dict) -> str:
    from pytest_rlgate.envs import refund
    from pytest_rlgate.tiny.corpus import INVENTED_ID

    call = refund.parse_tool_call(reply)
    if call is None:
        return "malformed" if "<tool_call>" in reply else ("ask" if "?" in reply else "text")
    if call.name != "lookup_order":
        return call.name
    given = call.arguments.get("order_id")
    return "right id" if given == case.get("order_id") else ("invented" if given == INVENTED_ID else "other id")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true", help="build into a temporary cache and time it")
    parser.add_argument("--recipe-seeds", type=int, nargs="*", default=None)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--sizes", nargs="*", default=["default", "large"])
    parser.add_argument("--sample-seeds", type=int, nargs="*", default=None,
                        help="sampling seeds (default: the base-run seeds 17 18 19)")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from pytest_rlgate import prompts
    from pytest_rlgate.envs import refund
    from pytest_rlgate.policy import load_policy, tiny_policy_dir
    from pytest_rlgate.sampling import BASE_RUN_SEEDS, sample
    from pytest_rlgate.tiny.build import BUILD_INFO, RECIPE

    recipes = [RECIPE] if args.recipe_seeds is None else [dataclasses.replace(RECIPE, seed=s) for s in args.recipe_seeds]
    root = tempfile.mkdtemp(prefix="rlgate-bench-") if args.fresh else None
    results = []
    for recipe in recipes:
        started = time.perf_counter()
        folder = tiny_policy_dir(root=root, recipe=recipe)
        elapsed = time.perf_counter() - started
        info = json.loads((folder / BUILD_INFO).read_text())
        started = time.perf_counter()
        model, tok = load_policy(folder)
        load_s = time.perf_counter() - started
        print(f"recipe seed {recipe.seed}: build {info['build_seconds']:.0f} s wall, "
              f"{info.get('build_cpu_seconds', float('nan')):.0f} s CPU (warm start "
              f"{info['train_seconds']:.0f} s, loss {info['loss_first']:.2f} -> {info['loss_last']:.3f}); "
              f"this call {elapsed:.1f} s, load {load_s:.1f} s; {folder}")
        for size in args.sizes:
            holdout = prompts.stratified_split(prompts.build_prompts(seed=0, size=size)).holdout
            per_seed: dict[str, list[float]] = defaultdict(list)
            kinds: dict[str, Counter] = defaultdict(Counter)
            for sample_seed in args.sample_seeds or BASE_RUN_SEEDS:
                replies = sample(model, tok, holdout, k=args.k, seed=sample_seed, max_new_tokens=64, progress=False)
                passed: dict[str, list[bool]] = defaultdict(list)
                for item, sampled in zip(holdout, replies):
                    for reply in sampled:
                        passed[item["category"]].append(refund.passes(refund.score(reply, item["case"])))
                        kinds[item["category"]][reply_kind(reply, item["case"])] += 1
                for category, values in passed.items():
                    per_seed[category].append(sum(values) / len(values))
            counts = Counter(i["category"] for i in holdout)
            for category in sorted(per_seed):
                values = per_seed[category]
                print(f"  {size:<8}{category:<10} n={counts[category]:>3}x{args.k}  pass@1 "
                      f"{statistics.mean(values):.3f}  (seeds {', '.join(f'{v:.3f}' for v in values)})  "
                      f"{dict(kinds[category].most_common())}")
                results.append({"recipe_seed": recipe.seed, "size": size, "category": category,
                                "prompts": counts[category], "pass_at_1": values, "kinds": dict(kinds[category])})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
