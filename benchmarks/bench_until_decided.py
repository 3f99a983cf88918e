"""Sampling until decided against a fixed k, at equal replies, by simulation through the same loop.

Each simulated holdout has eight categories of 15 scenarios x 2 prompts: two ``unchanged``
(scenario pass rates from Beta(2, 2), the candidate the same), a ``drop`` (every scenario 0.5
logits down: -0.10 in pass@1), a ``gain`` (0.5 logits up) and four ``ceiling`` (rates from
Beta(19, 1), about 0.95, unchanged). The before rows have k = 16 replies per prompt (a stored
baseline, sampled once; ``--k-before 8`` too by default). The candidate's replies come from a
fake sampler through :func:`pytest_rlgate.gate.adaptive.until_decided` itself: reply j of a prompt
is one fixed draw of the run (common random numbers), so every design reads the same replies,
as a seeded policy would give them.

Designs, side by side on the same runs:

* ``fixed k=8``: every prompt at k = 8, one gate at the family level (``rlgate sample --k 8``,
  then ``rlgate gate``);
* ``2 looks, <spending>``: every prompt at k = 4, gated; the prompts of categories still
  inconclusive get the rest of the budget (up to k = 32) and a second gate; the 5 % family level
  split by that spending function (each look is ``compare(..., family_level=share)``);
* ``4 looks, pocock``: the doubling schedule 4, 8, 16, 32;
* ``betting CS``: the doubling schedule, each category judged by an anytime-valid betting
  confidence sequence (Waudby-Smith and Ramdas' hedged capital, predictable plug-in bets, one bet
  per round of replies) on each side's mean pass rate, Bonferroni over the categories.

Every adaptive design gets the fixed design's replies as its budget, so it never spends more.
Printed per category kind: the share decided (regressed, moved or flat) / the share called right
(drop -> regressed, gain -> moved, unchanged and ceiling -> flat); the mean replies spent; and on
null runs (drop and gain replaced by unchanged categories) the false-regress rate, a regression
claimed at any look, with its Clopper-Pearson 95 % interval.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_until_decided.py [--runs 200] [--k-before 16 8]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from collections.abc import Sequence

import numpy as np

from pytest_rlgate.data.rows import Rows
from pytest_rlgate.errors import RlgateWarning
from pytest_rlgate.gate.adaptive import AdaptiveDesign, LookOutcome, gate_look, until_decided
from pytest_rlgate.gate.options import GateOptions
from pytest_rlgate.gate.verdicts import interval_verdict
from pytest_rlgate.records import PromptItem, Row

SCENARIOS, PROMPTS, K_BEFORE = 15, 2, 8
#: a logit shift that moves the mean pass rate of Beta(2, 2) scenarios by 0.10
SHIFT = 0.494
RIGHT = {"unchanged": "flat", "drop": "regressed", "gain": "moved", "ceiling": "flat"}


def _expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _logit(p: np.ndarray) -> np.ndarray:
    return np.asarray(np.log(p / (1.0 - p)))


class World:
    """One simulated holdout: its prompt items, the before rows and the candidate's replies (fixed draws)."""

    def __init__(self, kinds: Sequence[str], k_max: int, rng: np.random.Generator, k_before: int = K_BEFORE) -> None:
        self.items: list[PromptItem] = []
        rates_b, rates_a = [], []
        for c, kind in enumerate(kinds):
            base = rng.beta(19, 1, SCENARIOS) if kind == "ceiling" else rng.beta(2, 2, SCENARIOS)
            shift = {"drop": -SHIFT, "gain": SHIFT}.get(kind, 0.0)
            after = _expit(_logit(np.clip(base, 1e-6, 1 - 1e-6)) + shift) if shift else base
            for s in range(SCENARIOS):
                for p in range(PROMPTS):
                    self.items.append({"prompt": f"c{c}/s{s}/p{p}", "category": f"{kind}{c}",
                                       "scenario_id": f"c{c}/s{s}"})
                    rates_b.append(base[s])
                    rates_a.append(after[s])
        self.rates_a = np.array(rates_a)
        self.index = {item["prompt"]: i for i, item in enumerate(self.items)}
        before_pass = rng.random((len(self.items), k_before)) < np.array(rates_b)[:, None]
        self.before = Rows([_row(item, j, bool(before_pass[i, j])) for i, item in enumerate(self.items)
                            for j in range(k_before)])
        self.after_pass = rng.random((len(self.items), k_max)) < self.rates_a[:, None]

    def draw(self, items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        return [_row(item, j, bool(self.after_pass[self.index[item["prompt"]], j]))
                for item in items for j in range(first, first + count)]


def _row(item: PromptItem, j: int, passed: bool) -> Row:
    return {"prompt": item["prompt"], "scenario_id": item["scenario_id"], "category": item["category"],
            "rollout_index": j, "reply": "r", "score": float(passed), "reward": int(passed), "markers": {}}


# -- the anytime-valid alternative: a betting confidence sequence per side and category ----------------------

GRID = np.linspace(0.0, 1.0, 1001)


def betting_cs(rounds: np.ndarray, alpha: float, trunc: float = 0.5) -> tuple[float, float]:
    """The running intersection, over round ends, of the hedged-capital betting CS for the mean of *rounds*.

    *rounds* is [rounds, items] of rewards in [0, 1]; one bet per round (predictable: from the
    rounds before it), the same for every item of the round, so the product over a round's
    items is a test supermartingale for the items' average mean (by the AM-GM inequality).
    """
    n_rounds, n_items = rounds.shape
    if not np.isin(rounds, (0.0, 1.0)).all():
        raise ValueError("pass/fail rewards only: a round's capital is counted from its passes")
    log_plus = np.zeros_like(GRID)
    log_minus = np.zeros_like(GRID)
    low, high = 0.0, 1.0
    total = squares = 0.0  # running sums of the rounds before (predictable bets)
    threshold = math.log(2.0 / alpha)  # max(K+, K-) / 2 >= 1 / alpha rejects m
    for j in range(n_rounds):
        seen, t = j * n_items, (j + 1) * n_items
        mean = (0.5 + total) / (1 + seen)
        var = (0.25 + squares - 2 * mean * total + seen * mean * mean) / (1 + seen)
        lam = math.sqrt(2.0 * math.log(2.0 / alpha) / (var * t * math.log(1.0 + t)))
        lam_plus = np.minimum(lam, trunc / np.maximum(GRID, 1e-12))
        lam_minus = np.minimum(lam, trunc / np.maximum(1.0 - GRID, 1e-12))
        ones = float(rounds[j].sum())
        zeros = n_items - ones
        log_plus += ones * np.log1p(lam_plus * (1.0 - GRID)) + zeros * np.log1p(-lam_plus * GRID)
        log_minus += ones * np.log1p(-lam_minus * (1.0 - GRID)) + zeros * np.log1p(lam_minus * GRID)
        inside = GRID[np.maximum(log_plus, log_minus) < threshold]
        if inside.size:
            low, high = max(low, float(inside.min())), min(high, float(inside.max()))
        total += ones
        squares += ones  # x^2 = x for pass/fail
    return low, min(1.0, max(high, low))


def _rounds(rows: Sequence[Row], category: str) -> np.ndarray:
    by_prompt: dict[str, dict[int, float]] = {}
    for row in rows:
        if row["category"] == category:
            by_prompt.setdefault(row["prompt"], {})[row["rollout_index"]] = float(row["reward"])
    k = min(len(v) for v in by_prompt.values())
    return np.array([[v[j] for v in by_prompt.values()] for j in range(k)])


def betting_judge(level: float, categories: int, margin: float):  # type: ignore[no-untyped-def]
    """A look judged per category by the betting CS of each side, at level / categories (two-sided) per side."""
    alpha = level / categories

    def judge(before: Rows, after: Rows, options: GateOptions) -> LookOutcome:
        verdicts = {}
        for category in sorted({str(r["category"]) for r in after}):
            low_a, high_a = betting_cs(_rounds(after, category), alpha)
            low_b, high_b = betting_cs(_rounds(before, category), alpha)
            verdicts[category] = (interval_verdict(low_a - high_b, high_a - low_b, margin),)
        regressed = any("regressed" in v for v in verdicts.values())
        return LookOutcome(verdicts, regressed, regressed)

    return judge


# -- the simulation ------------------------------------------------------------------------------------------

MIX = ("unchanged", "unchanged", "drop", "gain", "ceiling", "ceiling", "ceiling", "ceiling")
#: design name -> (looks, spending); None: the fixed design
DESIGNS: dict[str, tuple[int | None, str] | None] = {
    "fixed k=8": None, "2 looks, pocock": (2, "pocock"), "2 looks, equal": (2, "equal"),
    "2 looks, obf": (2, "obf"), "4 looks, pocock": (None, "pocock"), "betting CS": (None, "betting"),
}


def _run(world: World, design: tuple[int | None, str] | None, options: GateOptions, k_fixed: int, k0: int,
         k_max: int) -> tuple[dict[str, str], bool, int]:
    """(category -> final verdict, a regression claimed at any look, replies spent) of one design on *world*."""
    budget = len(world.items) * k_fixed
    judge = gate_look
    if design is None:
        plan = AdaptiveDesign.plan(k_fixed, k_fixed)
    else:
        looks, spending = design
        if spending == "betting":
            spending = "equal"  # unused: the betting CS is valid at every look without spending
            judge = betting_judge(0.05, len({item["category"] for item in world.items}), options.margin)
        plan = AdaptiveDesign.plan(k0, k_max, looks=looks, spending=spending, budget=budget)  # type: ignore[arg-type]
    result = until_decided(world.before, world.draw, world.items, design=plan, options=options, judge=judge)
    claimed = any(look.outcome.regressed for look in result.looks)
    return {c.category: c.verdict for c in result.categories}, claimed, result.replies


def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def table(args: argparse.Namespace, k_before: int) -> None:
    kinds = tuple(dict.fromkeys(MIX))
    null_mix = tuple("unchanged" if kind in ("drop", "gain") else kind for kind in MIX)
    options = GateOptions(n_resamples=args.resamples, show_flips=0)
    designs = [d for d in DESIGNS if d in args.designs]
    decided = {d: {kind: [0, 0, 0] for kind in kinds} for d in designs}  # [decided, right, categories]
    spent = dict.fromkeys(designs, 0)
    false = dict.fromkeys(designs, 0)
    for run in range(args.runs):
        world = World(MIX, args.k_max, np.random.default_rng([args.seed, k_before, run, 1]), k_before)
        null = World(null_mix, args.k_max, np.random.default_rng([args.seed, k_before, run, 2]), k_before)
        opts = options.replace(bootstrap_seed=run)
        for d in designs:
            verdicts, _claimed, replies = _run(world, DESIGNS[d], opts, args.k_fixed, args.k0, args.k_max)
            spent[d] += replies
            for category, verdict in verdicts.items():
                cell = decided[d][category.rstrip("0123456789")]
                cell[0] += verdict in ("regressed", "moved", "flat")
                cell[1] += verdict == RIGHT[category.rstrip("0123456789")]
                cell[2] += 1
            false[d] += _run(null, DESIGNS[d], opts, args.k_fixed, args.k0, args.k_max)[1]
    runs = args.runs
    print(f"\nbefore k = {k_before}: {len(MIX)} categories ({', '.join(MIX)}) x {SCENARIOS} scenarios x {PROMPTS} "
          f"prompts; fixed k = {args.k_fixed}; adaptive k {args.k0} -> {args.k_max} within the fixed design's "
          f"replies; family level 5%; {args.resamples} sign flips a look; {runs} runs")
    print(f"{'design':<17}" + "".join(f"{kind:>17}" for kind in kinds) + f"{'all':>17}{'replies':>9}  "
          "false-regress (95% CI)")
    for d in designs:
        cells = [decided[d][k] for k in kinds]
        text = [f"{c[0] / c[2]:>7.1%} / {c[1] / c[2]:>6.1%}" for c in cells]
        n = sum(c[2] for c in cells)
        total = f"{sum(c[0] for c in cells) / n:>7.1%} / {sum(c[1] for c in cells) / n:>6.1%}"
        low, high = _clopper_pearson(false[d], runs)
        print(f"{d:<17}" + "".join(f"{c:>17}" for c in text) + f"{total:>17}{spent[d] / runs:>9,.0f}  "
              f"{false[d] / runs:5.1%} ({low:4.1%}-{high:4.1%})")
    worst = max(0.5 / math.sqrt(c[2]) for d in designs for c in decided[d].values())
    print(f"(decided / called right per kind; Monte Carlo s.e. at most {worst:.1%} a cell; "
          f"{0.5 / math.sqrt(runs * len(MIX)):.1%} for 'all')")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=2000, help="the gate's sign flips per look")
    parser.add_argument("--k-before", type=int, nargs="+", default=[16, 8])
    parser.add_argument("--k-fixed", type=int, default=8)
    parser.add_argument("--k0", type=int, default=4)
    parser.add_argument("--k-max", type=int, default=32)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS), metavar="DESIGN")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore", RlgateWarning)
    started = time.perf_counter()
    for k_before in args.k_before:
        table(args, k_before)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
