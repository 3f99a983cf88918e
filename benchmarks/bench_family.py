"""The gate's run-level false-fail and its per-category power, by simulation through the public API.

An unchanged run: C categories x S scenarios x 2 prompts x 4 replies; each scenario passes
with a rate drawn from Beta(2, 2), and before and after are sampled from the same rates.
``rg.compare`` (its defaults: every category, overall and any guard held together) fails
such a run at most ``family_level`` (5 %) of the time; the table shows the rate with its
Clopper-Pearson interval. Beside it, the power to call a real drop ``regressed`` in the one
category that dropped: every scenario of category 0 shifted on the logit scale so that the
mean pass rate falls by 0.10 (0.5 logits on Beta(2, 2)).

Columns, side by side on the same simulated runs:

* ``gate``: ``rg.compare`` with its defaults, the family held by scenario sign flips;
* ``per comparison``: ``family_level=None``, each comparison at its own 95 % (2.5 % one-sided):
  what a gate without run-level control fails;
* ``Holm (whole family)``: Holm's step-down over every comparison's paired t p-value at 5 %:
  the textbook alternative, for reference.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_family.py [--runs 400] [--categories 2 4 8] [--guards 0]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import pytest_rlgate as rg
from pytest_rlgate.errors import RlgateWarning
from pytest_rlgate.gate.stats import holm

PROMPTS, REPLIES = 2, 4
#: a logit shift that takes 0.10 off the mean pass rate of Beta(2, 2) scenarios
DROP_LOGIT = 0.494


def _rows(rates: np.ndarray, guard_rates: np.ndarray, rng: np.random.Generator) -> list[dict[str, object]]:
    """Graded rows for rates [categories, scenarios] (and one marker rate per guard and scenario)."""
    rows = []
    categories, scenarios = rates.shape
    for c in range(categories):
        for s in range(scenarios):
            for p in range(PROMPTS):
                passes = rng.random(REPLIES) < rates[c, s]
                marks = rng.random((len(guard_rates), REPLIES)) < guard_rates[:, c, s, None]
                for r in range(REPLIES):
                    rows.append({"prompt": f"c{c}/s{s}/p{p}", "scenario_id": f"c{c}/s{s}", "category": f"c{c}",
                                 "rollout_index": r, "reply": "a reply", "score": float(passes[r]),
                                 "reward": int(passes[r]),
                                 "markers": {f"g{g}": float(marks[g, r]) for g in range(len(guard_rates))}})
    return rows


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


#: this benchmark also runs on a release before the family existed (``git worktree add ... 80a7563``), for
#: the "before" columns: there the gate's own defaults are Holm from four categories and no family
OLD_API = not hasattr(rg.GateResult, "family")


def _failed(result: rg.GateResult, metric: str, group: str) -> bool:
    c = next(c for c in result.comparisons if (c.metric, c.group) == (metric, group))
    return c.verdict == "regressed" if OLD_API else c.failed


def _holm_fails(result: rg.GateResult, level: float = 0.05) -> tuple[bool, bool]:
    """(any comparison fails, category 0's pass@1 fails) under Holm over every comparison's t p-value."""
    tested = [c for c in result.comparisons if c.p_less is not None]
    reject, _ = holm([float(c.p_less or 1.0) for c in tested], level)
    failing = {(c.metric, c.group) for c, r in zip(tested, reject) if r and c.delta < 0}
    return bool(failing), ("pass@1", "c0") in failing


def simulate(categories: int, scenarios: int, guards: int, runs: int, drop: float, seed: int) -> dict[str, list[int]]:
    rng = np.random.default_rng([seed, categories, guards, int(drop * 1000)])
    counts = {"gate": [0, 0], "per comparison": [0, 0], "Holm (whole family)": [0, 0]}
    guard_names = tuple(f"g{g}" for g in range(guards))
    for run in range(runs):
        rates = rng.beta(2, 2, size=(categories, scenarios))
        guard_rates = rng.beta(8, 1, size=(guards, categories, scenarios))
        after_rates = rates.copy()
        if drop:
            after_rates[0] = _expit(np.log(rates[0] / (1 - rates[0])) - drop)
        before = _rows(rates, guard_rates, rng)
        after = _rows(after_rates, guard_rates, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RlgateWarning)
            gate = rg.compare(before, after, guards=guard_names, show_flips=0, bootstrap_seed=run)
            alone = rg.compare(before, after, guards=guard_names, show_flips=0, bootstrap_seed=run,
                               **({"holm": False} if OLD_API else {"family_level": None}))
        for name, result in (("gate", gate), ("per comparison", alone)):
            counts[name][0] += not result.passed
            counts[name][1] += _failed(result, "pass@1", "c0")
        any_fail, caught = _holm_fails(alone)
        counts["Holm (whole family)"][0] += any_fail
        counts["Holm (whole family)"][1] += caught
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--categories", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--scenarios", type=int, default=15)
    parser.add_argument("--guards", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{args.scenarios} scenarios x {PROMPTS} prompts x {REPLIES} replies per category, Beta(2,2) rates, "
          f"{args.guards} guard(s), {args.runs} runs a cell" + (" (a release before the family)" if OLD_API else ""))
    print(f"{'categories':>10}  {'method':<20} {'false-fail (95% CI)':<26} {'power at -0.10 in one category':<32}")
    for categories in args.categories:
        null = simulate(categories, args.scenarios, args.guards, args.runs, 0.0, args.seed)
        power = simulate(categories, args.scenarios, args.guards, args.runs, DROP_LOGIT, args.seed)
        for name in null:
            fails = null[name][0]
            low, high = _clopper_pearson(fails, args.runs)
            caught = power[name][1]
            plow, phigh = _clopper_pearson(caught, args.runs)
            print(f"{categories:>10}  {name:<20} {fails / args.runs:6.1%} ({low:5.1%}-{high:5.1%})      "
                  f"{caught / args.runs:6.1%} ({plow:5.1%}-{phigh:5.1%})")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
