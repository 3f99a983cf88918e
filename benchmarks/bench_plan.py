"""Does ``rlgate plan`` deliver the power it plans for? The whole procedure, simulated.

Each repetition does what a user does: sample a baseline of a category (a fresh one each
time: 15 scenarios x 4 replies), ask ``plan`` for a 0.10 drop at 80 % power, sample a new
holdout of the size it answers (before, and after the drop), and gate it with
``rg.compare``; the achieved power is the share of holdouts whose category is called
``regressed``. Both answers are checked: "add scenarios" (N scenarios at k = 4) and "raise
k" (today's 15 scenarios at the K it names).

Population: scenario pass rates ``p ~ Beta(c m, c (1 - m))`` (base rate m in 0.2, 0.5, 0.9;
concentration c = 4, Beta(2, 2) at 0.5); the drop is one shift of every scenario's logit,
solved by quadrature so that the population's mean falls by exactly 0.10 (scenarios near 0
or 1 move less). Pilots whose pass rate is at or below the drop get "cannot drop" from the
plan and are counted, not gated.

The level. The plan sizes for the one-sided level each comparison is tested at: by default
the level the gate's family holds each comparison to, or ``--level``. ``--gate defaults``
(the default) calls ``rg.compare`` as a user does and prints the level each result reports
(``Comparison.level``) beside the planned one: the check is valid when they agree. Alone,
the category and ``overall`` are the same comparison and the family is the sign-flip test
itself (about 5 %); ``--others 7`` puts 7 unchanged categories of 30 scenarios beside it in
every baseline and holdout, a family of 9 whose level is about 0.6 %. ``--gate
per-comparison`` gates with no family (``family_level=None``, plain paired t at the planned
level), for comparison. ``--old`` also runs the previous plan (each scenario's own rate
smoothed by half a pass, plugged in as its true rate, sized by the t power equation at the
same level) on the same baselines.

1,000 repetitions a base rate (the default) give a Monte-Carlo 95 % band of about ±2.5
points on an 80 % power; --quick uses 200 (±5.5).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_plan.py [--quick] [--reps 1000] [--old]
        [--others 7] [--gate defaults|per-comparison] [--level A] [--pilot 15] [--concentration 4]
        [--base-rates 0.2 0.5 0.9]
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

import pytest_rlgate as rg
from pytest_rlgate.gate.plan import needed_units
from pytest_rlgate.gate.result import GateResult
from pytest_rlgate.stats import plan

BASE_RATES = (0.2, 0.5, 0.9)
K = 4
PILOT = 15
CONCENTRATION = 4.0
DROP = 0.10
POWER = 0.80
#: the band the achieved power must land in
BAND = (0.75, 0.85)
GATES = ("defaults", "per-comparison")
_QUANTILES = (np.arange(20_000) + 0.5) / 20_000


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class Population:
    """Scenario pass rates Beta(c m, c (1 - m)) and the logit shift that drops their mean by *drop*."""

    base_rate: float
    concentration: float = CONCENTRATION
    drop: float = DROP

    @property
    def shape(self) -> tuple[float, float]:
        return self.concentration * self.base_rate, self.concentration * (1.0 - self.base_rate)

    @functools.cached_property
    def shift(self) -> float:
        """The logit shift whose population mean drop is exactly ``drop`` (bisection on quantile nodes)."""
        p = np.clip(sps.beta.ppf(_QUANTILES, *self.shape), 1e-300, 1 - 1e-16)
        logits, target = np.log(p / (1 - p)), float(p.mean()) - self.drop
        low, high = -60.0, 0.0
        for _ in range(100):
            mid = 0.5 * (low + high)
            low, high = (mid, high) if _expit(logits + mid).mean() < target else (low, mid)
        return 0.5 * (low + high)

    def rates(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """n scenarios' pass probabilities before and after the drop."""
        p = np.clip(rng.beta(*self.shape, n), 1e-300, 1 - 1e-16)
        return p, _expit(np.log(p / (1 - p)) + self.shift)


def rows(category: str, passes: np.ndarray, k: int) -> list[dict[str, object]]:
    """Graded rows: scenario i passes the first ``passes[i]`` of its k replies."""
    return [{"prompt": f"{category} {i}", "scenario_id": f"{category}-{i}", "category": category,
             "rollout_index": j, "reply": "...", "score": float(j < c), "reward": int(j < c), "markers": {}}
            for i, c in enumerate(passes.tolist()) for j in range(k)]


def gate_level(result: GateResult, category: str = "c") -> float:
    """The one-sided level the gate tested *category*'s pass@1 at, as its result reports it."""
    comparison = next(c for c in result.comparisons if c.group == category and c.metric == "pass@1")
    assert comparison.level is not None
    return comparison.level


def gate(before: list[dict[str, object]], after: list[dict[str, object]], mode: str,
         level: float) -> tuple[bool, float]:
    """(the category regressed, the level the gate used) for one holdout.

    ``defaults``: ``rg.compare`` as a user calls it (the family held at its run-level
    false-fail); ``per-comparison``: no family, each comparison at one-sided *level*.
    """
    if mode == "defaults":
        result = rg.compare(before, after, show_flips=0)
    else:
        result = rg.compare(before, after, show_flips=0, family_level=None, confidence_level=1.0 - 2.0 * level)
    assert isinstance(result, GateResult)
    verdict = next(c.verdict for c in result.comparisons if c.group == "c" and c.metric == "pass@1")
    return verdict == "regressed", gate_level(result)


def old_plan(passes: np.ndarray, k: int, drop: float, power: float, level: float) -> int | None:
    """The previous plan: each scenario's rate, smoothed by half a pass, as its true rate."""
    p = (passes + 0.5) / (k + 1.0)
    if drop >= passes.sum() / (k * len(passes)):
        return None
    logits, target = np.log(p / (1 - p)), float(p.mean()) - drop
    low, high = -60.0, 0.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if _expit(logits + mid).mean() < target else (low, mid)
    q = _expit(logits + 0.5 * (low + high))
    sd = math.sqrt(float(np.mean(p * (1 - p) + q * (1 - q))) / k + float(np.var(q - p)))
    return needed_units(sd, drop, power=power, level=level)


@dataclass
class Tally:
    """Regressed / gated holdouts for one answer, with the sizes it asked for."""

    hits: int = 0
    gated: int = 0
    sizes: list[int] = field(default_factory=list)
    levels: list[float] = field(default_factory=list)

    def add(self, regressed: bool, size: int, level: float) -> None:
        self.hits += regressed
        self.gated += 1
        self.sizes.append(size)
        self.levels.append(level)

    @property
    def power(self) -> float:
        return self.hits / self.gated if self.gated else float("nan")

    @property
    def band(self) -> float:
        """Half-width of the Monte-Carlo 95 % band of ``power``."""
        return 1.96 * math.sqrt(self.power * (1 - self.power) / self.gated) if self.gated else float("nan")

    def cell(self) -> str:
        return "-" if not self.gated else f"{100 * self.power:.1f} ± {100 * self.band:.1f}"

    def median(self) -> str:
        return "-" if not self.sizes else f"{np.median(self.sizes):.0f}"


@dataclass
class Outcome:
    """Every tally of one base rate."""

    planned_level: float = float("nan")
    units: Tally = field(default_factory=Tally)
    k: Tally = field(default_factory=Tally)
    old: Tally = field(default_factory=Tally)
    cannot: int = 0
    no_k: int = 0
    reps: int = 0


def run(population: Population, reps: int, *, seed: int = 0, level: float | None = None,
        mode: str = "defaults", pilot: int = PILOT, k: int = K, answers: tuple[str, ...] = ("units", "k"),
        old: bool = False, others: int = 0, other_size: int = 30, max_units: int = 5_000) -> Outcome:
    """*reps* repetitions of pilot -> plan -> holdout -> gate at one base rate.

    *others* more categories of *other_size* scenarios each (the same population, unchanged
    after) sit beside the planned one in every baseline and holdout: the gate's family then
    has more members, and each comparison a smaller level.
    """
    rng = np.random.default_rng([seed, round(population.base_rate * 1000), pilot, k, others])
    out = Outcome(reps=reps)

    def beside() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        """The other categories, before and after (unchanged: the same rates)."""
        before: list[dict[str, object]] = []
        after: list[dict[str, object]] = []
        for j in range(others):
            p, _ = population.rates(rng, other_size)
            before += rows(f"other{j}", rng.binomial(k, p), k)
            after += rows(f"other{j}", rng.binomial(k, p), k)
        return before, after

    def holdout(n: int, kk: int) -> tuple[bool, float]:
        p, q = population.rates(rng, n)
        before, after = beside()
        return gate(rows("c", rng.binomial(kk, p), kk) + before, rows("c", rng.binomial(kk, q), kk) + after, mode,
                    out.planned_level)

    for _ in range(reps):
        p, _ = population.rates(rng, pilot)
        passes = rng.binomial(k, p)
        planned = plan(rows("c", passes, k) + beside()[0], drop=population.drop, power=POWER, level=level,
                          categories=["c"])
        cat = planned["c"]
        out.planned_level = planned.level
        if cat.needed is None:
            out.cannot += 1
            continue
        if "units" in answers and cat.needed <= max_units:
            hit, used = holdout(cat.needed, k)
            out.units.add(hit, cat.needed, used)
        if "k" in answers:
            if cat.needed_k is None:
                out.no_k += 1
            elif cat.needed_k * pilot <= max_units * k:
                hit, used = holdout(pilot, cat.needed_k)
                out.k.add(hit, cat.needed_k, used)
        if old:
            n_old = old_plan(passes.astype(float), k, population.drop, POWER, planned.level)
            if n_old is not None and n_old <= max_units:
                hit, used = holdout(n_old, k)
                out.old.add(hit, n_old, used)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--reps", type=int, default=1000, help="repetitions a base rate (1000)")
    parser.add_argument("--quick", action="store_true", help="200 repetitions a base rate")
    parser.add_argument("--level", type=float, default=None,
                        help="one-sided level per comparison to plan for (default: the plan's, the gate's family)")
    parser.add_argument("--gate", choices=GATES, default="defaults",
                        help="rg.compare with its defaults (the family), or each comparison at the planned level "
                             "(defaults)")
    parser.add_argument("--pilot", type=int, default=PILOT, help=f"scenarios in each baseline ({PILOT})")
    parser.add_argument("--concentration", type=float, default=CONCENTRATION,
                        help=f"Beta concentration of the scenario rates ({CONCENTRATION:g})")
    parser.add_argument("--old", action="store_true", help="also run the previous plan on the same pilots")
    parser.add_argument("--others", type=int, default=0,
                        help="unchanged categories beside the planned one, in every baseline and holdout (0)")
    parser.add_argument("--other-size", type=int, default=30, help="scenarios in each of them (30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-rates", type=float, nargs="+", default=BASE_RATES, metavar="M",
                        help="the base rates to run (0.2 0.5 0.9); each is seeded alike, so one alone prints its row")
    args = parser.parse_args()
    reps = 200 if args.quick else args.reps
    t0 = time.perf_counter()
    print(f"{reps} repetitions a base rate: baseline {args.pilot} scenarios x {K} replies, Beta concentration "
          f"{args.concentration:g}, {args.others} unchanged categories of {args.other_size} beside it, plan for a "
          f"{DROP:.2f} drop at {POWER:.0%} power, gate: {args.gate}; "
          f"power ± its Monte-Carlo 95 % band, in percent (band {100 * BAND[0]:.0f}-{100 * BAND[1]:.0f})\n")
    header = ["base rate", "planned level", "gate's level", "add scenarios: power", "median N",
              "raise k: power", "median K", "no k enough", "cannot drop"]
    if args.old:
        header[5:5] = ["previous plan: power", "median N (previous)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for base in args.base_rates:
        population = Population(base, args.concentration)
        out = run(population, reps, seed=args.seed, level=args.level, mode=args.gate, pilot=args.pilot,
                  old=args.old, others=args.others, other_size=args.other_size)
        levels = out.units.levels + out.k.levels + out.old.levels
        row = [f"{base:.1f}", f"{out.planned_level:.4g}", f"{np.mean(levels):.4g}" if levels else "-",
               out.units.cell(), out.units.median(), out.k.cell(), out.k.median(),
               f"{out.no_k}/{reps}", f"{out.cannot}/{reps}"]
        if args.old:
            row[5:5] = [out.old.cell(), out.old.median()]
        print("| " + " | ".join(row) + " |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
