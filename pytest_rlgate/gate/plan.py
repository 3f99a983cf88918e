"""How many scenarios, or how many replies per prompt, a category needs before its gate can see a drop.

A category of 6 scenarios cannot tell a 0.10 drop from noise, and the gate says so with
``inconclusive``; what it cannot say on its own is what *would* tell. This module answers
from a row file already sampled (usually the baseline), per category, both ways: "add N
scenarios" (at today's replies per prompt) and "raise k to K" (with today's scenarios),
each with its cost in replies, because the two buy different things.

**Two noises.** A scenario's paired delta varies for two reasons. *Reply noise*: the k
replies of one prompt differ, so a scenario's pass rate is measured with error; it is
estimated from the replies inside each prompt (the pooled within-prompt variance,
``c (k - c) / (k (k - 1))`` for c passes of k). *Scenario noise*: the scenarios' true pass
rates differ; it is the variance of the scenario pass rates less what the reply noise
explains (``var(rate) - reply variance / rows``, the one-way random-effects moment).
Raising k divides only the first; a drop that hits scenarios unevenly adds a part no k
removes, and only more scenarios do.

**The drop.** The scenario rates are modelled as a logit-normal population with the
category's mean and scenario noise (it has no mass at exactly 0 or 1, so a scenario at 4/4
can still fall), and a drop of size ``drop`` shifts every scenario's logit by the same
amount, so scenarios near a bound move less, as they do in training. The previous plan
plugged each scenario's own rate, smoothed by half a pass, in for its true rate: that
counts the reply noise of a 0/4 or 4/4 scenario as scenario noise and a 4/4 scenario's
reply variance as ``0.1 * 0.9``, and near a base rate of 0 or 1 it over-sized (90.5 and
94.5 % power at base rates 0.2 and 0.9 for a planned 80 %).

**The size.** A holdout of n new scenarios at r rows a side is simulated from the fitted
population and gated by the gate's own test at the one-sided level ``a`` each comparison is
tested at (:func:`_simulated_power`: the paired t with the family's shrunk variance, the
gate's default, or the expanded-percentile bootstrap to second order, with the deltas'
skewness and lattice, which a normal-theory power equation misses near the bounds). The
scenarios needed are the smallest n with the power at today's k; k is the smallest K with
the power at today's n, or None when even replies without noise are not enough. The power is
aimed a little off the one asked for (:func:`_allowance`) so that the whole procedure, a
baseline like this one, planned, then gated, has the asked power on average: a baseline of
15 scenarios knows its noise only roughly.

**The level.** The gate holds every comparison that can fail (overall and every category,
for pass@1 and for every guard) at one marginal level so that an unchanged run fails at most
``family_level`` of the time (:mod:`.family`); by default the plan sizes for that level, as
the min-p quantile of the comparisons' normal law (:func:`family_level_per_comparison`),
or for ``level`` when given (the gate's rule line prints the level it used).
``benchmarks/bench_plan.py`` simulates the whole procedure (a fresh baseline each time,
planned, the planned holdout sampled and gated with ``compare``'s defaults) at base rates
0.2, 0.5 and 0.9.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from tabulate import tabulate

from ..data.provenance import header_env
from ..data.rows import RowInput, RowReader
from ..errors import DataError, UsageError, hide_user_errors
from ..records import Header
from .family import PRIOR_DF, z_to_t
from .options import DEFAULT_METHOD, FAMILY_LEVEL, MARGIN, METHOD_NAMES
from .stats import t_ppf
from .verdicts import MIN_UNITS

__all__ = ["DEFAULT_DROP", "DEFAULT_POWER", "FAMILY_LEVEL", "CategoryPlan", "Plan", "family_level_per_comparison",
           "needed_units", "plan", "plan_table", "power_today"]

#: the drop a plan is sized for unless told: the gate's own flat margin
DEFAULT_DROP = MARGIN
#: the power a plan is sized for unless told, as in every printed MDE
DEFAULT_POWER = 0.80
#: the gate's tests the plan can simulate
_SIMULATED = ("t", "expanded")
#: no category is planned beyond this many scenarios (a drop that small is not worth a holdout)
_MAX_UNITS = 10**7
#: nor beyond this many replies per prompt
_MAX_K = 10**6

#: a bad policy or row file in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

# Gauss-Hermite nodes for expectations over the logit-normal population (probabilists' weights)
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(48)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()
#: the logit-scale sds the population fit chooses among (the variance is increasing in it)
_SPREADS = np.linspace(0.0, 12.0, 49)
_NORMAL = NormalDist()


@dataclass(frozen=True)
class CategoryPlan:
    """One category's plan: what its rows show, both ways to see the drop, what it sees today.

    ``needed`` (scenarios at today's k) and ``needed_k`` (replies per prompt at today's
    scenarios) are None when the category cannot drop by ``drop`` at all (its pass rate is
    at or below the drop); ``needed_k`` is also None when no k is enough, because the drop's
    own spread between scenarios (``effect_sd``) needs more scenarios whatever k is, or
    today's scenarios are fewer than the gate's minimum. ``mde`` is None when today's
    scenarios are fewer than the gate's minimum or no drop below the pass rate is detectable.
    """

    category: str
    n_units: int  #: scenarios in the rows
    prompts: float  #: prompts per scenario, mean over scenarios
    k: float  #: replies per prompt (rows per prompt)
    rollouts: float  #: rows per scenario (prompts x k), mean over scenarios
    pass_rate: float
    reply_sd: float | None  #: sd of one reply inside a prompt (None: one reply per prompt cannot tell)
    scenario_sd: float  #: sd of the scenarios' true pass rates, reply noise taken out
    sd: float | None  #: per-scenario sd of the paired delta under the drop, at today's rows
    effect_sd: float | None  #: sd between scenarios of the drop itself: the part no k removes
    needed: int | None  #: scenarios needed at today's k
    needed_k: int | None  #: replies per prompt needed with today's scenarios
    #: the power each answer is sized at, so that the whole procedure (a baseline like this
    #: one, planned, then gated) has the asked power on average
    aim: float | None
    aim_k: float | None
    mde: float | None  #: smallest drop today's scenarios see with the power
    power_now: float | None  #: today's power against the drop

    @property
    def enough(self) -> bool:
        return self.needed is not None and self.n_units >= self.needed

    @property
    def replies(self) -> int:
        """Replies one side has today (scenarios x prompts x k)."""
        return round(self.n_units * self.rollouts)

    @property
    def replies_more_units(self) -> int | None:
        """Replies a side needs when the scenarios grow to ``needed`` at today's k."""
        return None if self.needed is None else round(self.needed * self.rollouts)

    @property
    def replies_more_k(self) -> int | None:
        """Replies a side needs when k rises to ``needed_k`` with today's scenarios."""
        return None if self.needed_k is None else round(self.n_units * self.prompts * self.needed_k)

    @property
    def reply_share(self) -> float | None:
        """Share of today's delta variance that is reply noise (what raising k divides)."""
        if self.sd is None or self.effect_sd is None or self.sd == 0:
            return None
        return 1.0 - self.effect_sd**2 / self.sd**2

    def to_dict(self) -> dict[str, object]:
        return {"category": self.category, "n_units": self.n_units, "prompts": self.prompts, "k": self.k,
                "rollouts": self.rollouts, "pass_rate": self.pass_rate, "reply_sd": self.reply_sd,
                "scenario_sd": self.scenario_sd, "sd": self.sd, "effect_sd": self.effect_sd,
                "reply_share": self.reply_share, "needed": self.needed, "needed_k": self.needed_k,
                "aim": self.aim, "aim_k": self.aim_k,
                "replies": self.replies, "replies_more_units": self.replies_more_units,
                "replies_more_k": self.replies_more_k, "mde": self.mde, "power_now": self.power_now,
                "enough": self.enough}


@dataclass(frozen=True)
class Plan:
    """Every category's plan, the question they answer and the level they were sized at."""

    categories: tuple[CategoryPlan, ...]
    drop: float
    power: float
    #: the one-sided level of each comparison's regression test the plan sized for
    level: float
    #: how that level was chosen ("given", or the Šidák share of the family level)
    level_rule: str
    source: str
    #: the comparisons the gate will make (the default level's m), with the family level
    comparisons: int | None = None
    family_level: float | None = None
    method: str = DEFAULT_METHOD

    def __getitem__(self, category: str) -> CategoryPlan:
        for c in self.categories:
            if c.category == category:
                return c
        raise KeyError(category)

    def question(self) -> str:
        return (f"scenarios, or replies per prompt, needed to see a {self.drop:.2f} drop in pass@1 with "
                f"{self.power:.0%} power, each comparison tested at one-sided level {self.level:.4g} "
                f"({self.level_rule}; regressed = {METHOD_NAMES[self.method]} upper bound < 0)")

    def report(self) -> str:
        """What ``rlgate plan`` prints: the question, one row per category, both ways to see the drop."""
        rows = []
        for c in self.categories:
            rows.append([c.category, c.n_units, f"{c.k:g}", f"{c.pass_rate:.3f}", _num(c.reply_sd),
                         f"{c.scenario_sd:.3f}", "" if c.reply_share is None else f"{c.reply_share:.0%}",
                         "-" if c.power_now is None else f"{c.power_now:.0%}", "-" if c.mde is None else f"{c.mde:.3f}",
                         "-" if c.needed is None else c.needed, "-" if c.needed_k is None else c.needed_k])
        headers = ["category", "scenarios", "k", "pass@1", "reply sd", "scenario sd", "replies' share",
                   "power today", f"sees today ({self.power:.0%})", "scenarios needed", "or k needed"]
        lines = [f"plan: {self.question()}", f"from {self.source}", "",
                 tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True), ""]
        short = [c for c in self.categories if c.needed is not None and not c.enough]
        lines += [_advice(c, self.drop, self.power, self.level) for c in short]
        impossible = [c.category for c in self.categories if c.needed is None]
        if impossible:
            lines.append(f"{', '.join(impossible)}: pass@1 is too low to drop by {self.drop:.2f}")
        if not short and not impossible:
            lines.append(f"every category has enough scenarios to see a {self.drop:.2f} drop")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {"drop": self.drop, "power": self.power, "level": self.level, "level_rule": self.level_rule,
                "comparisons": self.comparisons, "family_level": self.family_level, "method": self.method,
                "source": self.source, "categories": [c.to_dict() for c in self.categories]}


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def _advice(c: CategoryPlan, drop: float, power: float, level: float) -> str:
    """The two ways to see *drop* for a category that is short, with their costs in replies."""
    assert c.needed is not None and c.replies_more_units is not None
    if c.mde is not None:
        seen = f"see a drop of {c.mde:.2f} or more"
    elif c.n_units < MIN_UNITS:
        seen = f"are fewer than the gate's {MIN_UNITS} scenarios and see no drop"
    else:
        seen = f"see no drop with {power:.0%} power, not even pass@1 falling from {c.pass_rate:.2f} to 0"
    units = (f"add {c.needed - c.n_units} scenarios ({c.needed} x {c.rollouts:g} = {c.replies_more_units} "
             "replies a side)")
    if c.needed_k is not None and c.replies_more_k is not None:
        per = "" if c.prompts == 1 else f" x {c.prompts:g} prompts"
        k_way = f"raise k to {c.needed_k} ({c.n_units}{per} x {c.needed_k} = {c.replies_more_k} replies a side)"
        cheaper = "raising k" if c.replies_more_k < c.replies_more_units else "adding scenarios"
        ways = f"{units}, or {k_way}; {cheaper} costs fewer replies"
    elif c.n_units < MIN_UNITS:
        ways = f"{units}; raising k cannot help below {MIN_UNITS} scenarios"
    else:
        ways = f"{units}; {_no_k(c, drop, level)}"
    return f"{c.category}: {c.n_units} scenarios x {c.k:g} replies {seen}; to see {drop:.2f}: {ways}"


def _no_k(c: CategoryPlan, drop: float, level: float) -> str:
    """Why no k is enough at today's scenarios: what limits a test that noiseless replies would still fail.

    Replies without noise leave two things: the drop's own spread between scenarios, and the
    test's degrees of freedom. With few scenarios the second binds (3 scenarios put the t's
    critical value at several times the normal one), even where replies are most of today's
    noise; the plan names the one that binds, with its number.
    """
    shown = "" if c.effect_sd is None else f" (sd {c.effect_sd:.3f})"
    critical, normal = t_ppf(1.0 - level, c.n_units - 1), _NORMAL.inv_cdf(1.0 - level)
    if critical > 1.5 * normal:
        return (f"no k is enough: {c.n_units} scenarios leave the paired t {c.n_units - 1} degrees of freedom, a "
                f"critical value of {critical:.1f} at one-sided {level:.2%} (not {normal:.1f}), so even noiseless "
                f"replies cannot call {drop:.2f} against the drop's spread between scenarios{shown}; only more "
                "scenarios help")
    return f"no k is enough: the drop's own spread between scenarios{shown} needs more of them, whatever k is"


# -- the level -----------------------------------------------------------------------------------


#: normal draws behind the family's marginal level: its 5 % quantile to about 1 % of itself
_FAMILY_DRAWS = 40_000


def family_level_per_comparison(sizes: Sequence[int], guards: int, family_level: float = FAMILY_LEVEL) -> float:
    """The one-sided level each comparison is tested at when the gate holds *family_level* over them all.

    The gate (:mod:`~.family`) holds every comparison that can fail (``overall`` and each
    category, for pass@1 and for each guard) at one marginal level, the largest at which an
    unchanged run fails any of them at most *family_level* of the time (single-step min-p
    over scenario sign flips, whose law approaches the normal law with the same covariance).
    So the plan takes the same min-p quantile of that normal law before any after side
    exists: categories of *sizes* scenarios are independent, ``overall`` pools them (its
    correlation with a category is ``sqrt(n_c / N)``, equal per-scenario variances assumed),
    and each guard's comparisons are an independent copy (the conservative case: a guard
    that moves with pass@1 spends less). With one category ``overall`` is that category and
    costs nothing; it is always at least the Šidák level ``1 - (1 - family_level)^(1/m)``.
    """
    if len(sizes) == 1 and guards == 0:
        return float(family_level)
    shares = np.sqrt(np.sort(np.asarray(sizes, dtype=float)) / float(np.sum(sizes)))  # the same in any order
    z = np.random.default_rng(_SEED).standard_normal((_FAMILY_DRAWS, 1 + guards, len(shares)))
    overall = z @ shares
    lowest = np.minimum(z.min(axis=2), overall).min(axis=1)
    return float(_NORMAL.cdf(float(np.quantile(lowest, family_level))))


# -- the model -----------------------------------------------------------------------------------


def _expit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def _locations(spread: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """The logit-scale location whose logit-normal population, at each *spread*, has rate *mean* (bisection)."""
    spread, mean = np.broadcast_arrays(np.asarray(spread, dtype=float), np.asarray(mean, dtype=float))
    low, high = np.full(spread.shape, -120.0), np.full(spread.shape, 120.0)
    # start from the probit approximation E[expit(mu + s Z)] ~ expit(mu / sqrt(1 + pi s^2 / 8)), then
    # Newton steps kept inside a bracket that every step narrows (a step that leaves it bisects instead)
    x = np.log(mean / (1.0 - mean)) * np.sqrt(1.0 + math.pi * spread**2 / 8.0)
    x = np.clip(x, low, high)
    for _ in range(60):
        rates = _expit(x[..., None] + spread[..., None] * _NODES)
        gap = rates @ _WEIGHTS - mean
        slope = (rates * (1.0 - rates)) @ _WEIGHTS
        low, high = np.where(gap < 0, x, low), np.where(gap < 0, high, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = x - gap / slope
        inside = np.isfinite(step) & (step > low) & (step < high)
        x_new = np.where(inside, step, 0.5 * (low + high))
        if np.all(np.abs(x_new - x) <= 1e-10 * np.maximum(1.0, np.abs(x))):
            x = x_new
            break
        x = x_new
    out: np.ndarray = x
    return out


@functools.lru_cache(maxsize=256)
def _location(spread: float, mean: float) -> float:
    """:func:`_locations` of one population (the simulations ask for the same ones again and again)."""
    return float(_locations(np.array(spread), np.array(mean)))


@functools.lru_cache(maxsize=1)
def _moments_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(locations, means, variances)``: each spread's (row) logit-normal moments on a grid of locations."""
    locations = np.linspace(-80.0, 80.0, 1601)
    rates = _expit(locations[None, :, None] + _SPREADS[:, None, None] * _NODES)
    means = rates @ _WEIGHTS
    return locations, means, (rates**2) @ _WEIGHTS - means**2


def _spreads(means: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """The logit-scale spread of the logit-normal with each mean and variance (capped at the widest).

    Read off a table of the moments (interpolated twice: the location that gives each mean
    at every spread, then the spread that gives the variance), so fitting many populations
    at once costs no root finding.
    """
    locations, table_means, table_vars = _moments_table()
    at = np.array([np.interp(np.interp(means, row_means, locations), locations, row_vars)
                   for row_means, row_vars in zip(table_means, table_vars)]).T  # (populations, spreads)
    at = np.maximum.accumulate(np.maximum(at, 0.0), axis=1)
    return np.array([0.0 if v <= 0 else float(np.interp(v, row, _SPREADS)) for v, row in zip(variances, at)])


def _under(means: np.ndarray, spreads: np.ndarray, drop: float) -> tuple[np.ndarray, np.ndarray]:
    """``(Var(q - p), E[q (1 - q)])`` of each population ``(mean, spread)`` under the logit shift of *drop*."""
    before = _locations(spreads, means)
    after = _locations(spreads, means - drop)
    p = _expit(before[..., None] + spreads[..., None] * _NODES)
    q = _expit(after[..., None] + spreads[..., None] * _NODES)
    change = q - p
    between = (change**2) @ _WEIGHTS - (change @ _WEIGHTS) ** 2
    return np.maximum(between, 0.0), (q * (1.0 - q)) @ _WEIGHTS


@dataclass(frozen=True)
class _Population:
    """A category's scenario pass rates as a logit-normal population, and its reply noise."""

    mean: float
    location: float
    spread: float
    reply_var: float  #: variance of one reply inside a prompt, before

    @classmethod
    def fit(cls, mean: float, scenario_var: float, reply_var: float) -> _Population:
        """The logit-normal with *mean* and variance *scenario_var* (capped at the most that mean allows)."""
        spread = float(_spreads(np.array([mean]), np.array([scenario_var]))[0])
        return cls(mean, _location(spread, mean), spread, reply_var)

    def rates(self, location: np.ndarray | float) -> np.ndarray:
        return _expit(np.asarray(location, dtype=float)[..., None] + self.spread * _NODES)

    def under(self, drops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(Var(q - p), E[q (1 - q)])`` for each drop in *drops* (each below the mean)."""
        p = self.rates(self.location)
        q = self.rates(_locations(np.full(drops.shape, self.spread), self.mean - drops))
        change = q - p
        between = (change**2) @ _WEIGHTS - (change @ _WEIGHTS) ** 2
        after_var = (q * (1.0 - q)) @ _WEIGHTS
        return np.maximum(between, 0.0), after_var

    def sd(self, drops: np.ndarray, rows: float) -> np.ndarray:
        """sd of one new scenario's paired delta at *rows* rows per side, for each drop."""
        between, after_var = self.under(drops)
        out: np.ndarray = np.sqrt(between + (self.reply_var + after_var) / rows)
        return out


def _multiplier(n: int, level: float, power: float) -> float:
    return t_ppf(1.0 - level, n - 1) + t_ppf(power, n - 1)


def needed_units(sd: float, drop: float, *, power: float = DEFAULT_POWER, level: float = 0.025) -> int:
    """Smallest n >= 3 with ``(t_{1-level, n-1} + t_{power, n-1}) * sd / sqrt(n) <= drop``."""
    if sd <= 0:
        return MIN_UNITS

    def enough(n: int) -> bool:
        return _multiplier(n, level, power) * sd / math.sqrt(n) <= drop

    high = MIN_UNITS
    while not enough(high):
        if high >= _MAX_UNITS:
            return _MAX_UNITS
        high = min(_MAX_UNITS, high * 2)
    low = max(MIN_UNITS, high // 2)
    if enough(low):
        return low
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


# -- the gate, simulated --------------------------------------------------------------------------

#: simulated holdouts per power: a Monte-Carlo sd of 0.9 points on an 80 % power, far below what a
#: baseline of a few dozen scenarios knows about its category
_HOLDOUTS = 2000
#: the seed of every simulation: the same rows plan the same, every time
_SEED = 20_261_201
#: a delta with at most this many values (or fewer than the scenarios) is drawn as counts of its
#: values, else scenario by scenario
_MAX_CELLS = 129


@dataclass(frozen=True)
class _Test:
    """The gate's regression test a plan simulates: its one-sided level, its interval, and whether
    the family is one comparison (one category, no guard: overall is the same comparison), when the
    family's sign flips are the test itself."""

    level: float
    method: str = DEFAULT_METHOD
    flips: bool = False


def _binomial(rows: int, rates: np.ndarray) -> np.ndarray:
    """``(rates, rows + 1)``: the chance of each pass count out of *rows* at each rate (in logs: no overflow)."""
    c = np.arange(rows + 1)
    log_comb = np.array([math.lgamma(rows + 1) - math.lgamma(j + 1) - math.lgamma(rows - j + 1) for j in c])
    with np.errstate(divide="ignore", invalid="ignore"):  # a rate of exactly 0 or 1: 0 * log 0 is taken as 0
        log_p, log_q = np.log(rates)[:, None], np.log1p(-rates)[:, None]
        terms = log_comb + np.where(c > 0, c * log_p, 0.0) + np.where(c < rows, (rows - c) * log_q, 0.0)
    out: np.ndarray = np.exp(terms)
    return out


def _delta_pmf(p: np.ndarray, q: np.ndarray, rows: int) -> np.ndarray:
    """The chance of each paired delta ``(a - b) / rows``, a - b = -rows..rows, over the population nodes."""
    joint = (_binomial(rows, q).T * _WEIGHTS) @ _binomial(rows, p)  # [a, b]
    a, b = np.indices(joint.shape)
    out: np.ndarray = np.bincount((a - b + rows).ravel(), weights=joint.ravel(), minlength=2 * rows + 1)
    out /= out.sum()
    return out


def _simulated_power(population: _Population, drop: float, n: int, rows: int | None, test: _Test) -> float:
    """The share of simulated holdouts of *n* new scenarios the gate calls regressed under *drop*.

    Each scenario is drawn from the population and sampled at *rows* rows a side (None:
    without reply noise, k without bound), and each holdout is gated by the gate's own test
    at one-sided *level*:

    * ``"t"`` (the gate's default): the paired t of the per-scenario deltas with its variance
      shrunk toward the replies' binomial noise with :data:`~.family.PRIOR_DF` degrees of
      freedom (the noise smoothed by half a pass, as :func:`~.adapter.reply_noise` does),
      regressed when ``mean + critical * se < 0`` with the critical value the family sets for
      the level (:func:`~.family.z_to_t`). When the family is one comparison its sign flips
      are the test itself, and their law sits on a lattice (flipping a scenario moves the sum
      of its pass-count deltas by an even number): the observed sum must fall below the flips'
      5 % point with ties counted against it, which costs about 3 points of power at 60
      scenarios. That flip p-value is taken to fourth order: half a lattice step of
      continuity and the Rademacher flips' kurtosis ``-2 sum x^4 / (sum x^2)^2``.
    * ``"expanded"``: the expanded-percentile bootstrap to second order, without resampling:
      the t bound plus the Cornish-Fisher term of the deltas' skewness
      ``m3 / m2 * (z'^2 - 1) / (6 n)`` (``z' = sqrt(n / (n - 1)) t_{1-level, n-1}``) plus half
      a lattice step ``1 / (2 n rows)`` (a delta lives on ``j / rows``, and a resample mean
      of exactly 0 does not regress). On simulated holdouts this agrees with the bootstrap's
      exact distribution (the n-fold convolution of the delta histogram) on 98.5-100 % of
      them and within 1.5 points of power; near a pass rate of 0 or 1 (a logit shift moves a
      few scenarios far and many a little) the bootstrap sees up to 5 points more than the t.

    With few rows a side the holdout is drawn as counts of each (before, after) pair of pass
    counts (a multinomial: the cost does not grow with n), else scenario by scenario.
    """
    rng = np.random.default_rng(_SEED)
    location = _location(population.spread, population.mean - drop)
    if rows is not None and (rows + 1) ** 2 <= max(_MAX_CELLS, n):
        before = _binomial(rows, population.rates(population.location))
        after = _binomial(rows, population.rates(location))
        joint = ((after.T * _WEIGHTS) @ before).ravel()  # cell a * (rows + 1) + b
        a_count, b_count = np.divmod(np.arange(joint.size), rows + 1)
        counts = rng.multinomial(n, joint / joint.sum(), size=_HOLDOUTS).astype(float)
        deltas = (a_count - b_count) / rows
        mean = counts @ deltas / n
        raw2 = counts @ deltas**2 / n
        second = raw2 - mean**2
        third = counts @ deltas**3 / n - 3.0 * mean * raw2 + 2.0 * mean**3
        raw4 = counts @ deltas**4 / n
        noise = counts @ _reply_noise(b_count, a_count, rows) / n
    else:
        z = rng.standard_normal((_HOLDOUTS, n))
        p = _expit(population.location + population.spread * z)
        q = _expit(location + population.spread * z)
        if rows is None:
            d, noise = q - p, np.zeros(_HOLDOUTS)
        else:
            b_pass, a_pass = rng.binomial(rows, p), rng.binomial(rows, q)
            d = (a_pass - b_pass) / rows
            noise = _reply_noise(b_pass, a_pass, rows).mean(axis=1)
        mean = d.mean(axis=1)
        centred = d - mean[:, None]
        second, third = (centred**2).mean(axis=1), (centred**3).mean(axis=1)
        raw2, raw4 = (d**2).mean(axis=1), (d**4).mean(axis=1)
    second = np.maximum(second, 0.0)
    level = test.level
    if test.method == "t":  # the family's statistic: the sample variance shrunk toward the noise, PRIOR_DF strong
        variance = (n * second + PRIOR_DF * noise) / (n - 1 + PRIOR_DF)
        critical = -z_to_t(_NORMAL.inv_cdf(level), n - 1)
        regressed = mean + critical * np.sqrt(variance / n) < 0
        if test.flips and rows is not None:
            regressed &= _flip_p(mean * n * rows, raw2 * n * rows**2, raw4 * n * rows**4) <= level
        return float(np.mean(regressed))
    t = t_ppf(1.0 - level, n - 1)
    z2 = n / (n - 1) * t * t
    with np.errstate(divide="ignore", invalid="ignore"):
        skew_term = np.where(second > 0, third / second, 0.0) * (z2 - 1.0) / (6.0 * n)
    half_step = 0.0 if rows is None else 0.5 / (n * rows)
    upper = mean + t * np.sqrt(second / (n - 1)) + skew_term + half_step
    return float(np.mean(upper < 0))


def _flip_p(total: np.ndarray, square: np.ndarray, fourth: np.ndarray) -> np.ndarray:
    """The sign flips' chance of a sum at or below *total* (pass counts, after - before), to fourth order.

    Each scenario's delta x keeps or flips its sign, so the flipped sum has variance
    ``sum x^2`` and fourth cumulant ``-2 sum x^4``, and lives on a lattice of step 2: the
    observed sum is widened by half a step (a tie with it does not regress), then Edgeworth.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(square > 0, (total + 1.0) / np.sqrt(square), np.inf)
        excess = np.where(square > 0, -2.0 * fourth / square**2, 0.0)
    cdf = np.array([_NORMAL.cdf(v) if np.isfinite(v) else float(v > 0) for v in z])
    density = np.exp(-0.5 * np.where(np.isfinite(z), z, 0.0) ** 2) / math.sqrt(2 * math.pi) * np.isfinite(z)
    zf = np.where(np.isfinite(z), z, 0.0)
    out: np.ndarray = np.clip(cdf - density * excess * (zf**3 - 3 * zf) / 24.0, 0.0, 1.0)
    return out


def _reply_noise(before: np.ndarray, after: np.ndarray, rows: int) -> np.ndarray:
    """Per scenario, the variance of its delta from its replies alone, as the gate smooths it (half a pass)."""
    smooth_b, smooth_a = (before + 0.5) / (rows + 1.0), (after + 0.5) / (rows + 1.0)
    out: np.ndarray = (smooth_b * (1 - smooth_b) + smooth_a * (1 - smooth_a)) / rows
    return out


def _smallest(power_at: Callable[[int], float], target: float, start: int, low: int, high: int) -> int | None:
    """The smallest integer in [low, high] whose *power_at* reaches *target*, from a guess (None: not even high).

    Brackets the answer by doubling away from *start*, then bisects; the power, simulated with
    the same random numbers at every size, rises with the size but for noise of a point or so.
    """
    good: int | None
    bad: int | None
    start = min(max(start, low), high)
    step = max(1, start // 4)
    if power_at(start) >= target:
        good, bad = start, None
        while bad is None:
            if good <= low:
                return low
            probe = max(low, good - step)
            if power_at(probe) >= target:
                good, step = probe, step * 2
            else:
                bad = probe
    else:
        good, bad = None, start
        while good is None:
            if bad >= high:
                return None
            probe = min(high, bad + step)
            if power_at(probe) >= target:
                good = probe
            else:
                bad, step = probe, step * 2
    while good - bad > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if power_at(mid) >= target else (good, mid)
    return good


def _needed(population: _Population, drop: float, rows: float, test: _Test, power: float, sd: float) -> int:
    """Scenarios the simulated gate needs at *rows* rows a side: the power equation's answer, refined."""
    guess = needed_units(sd, drop, power=power, level=test.level)
    found = _smallest(lambda n: _simulated_power(population, drop, n, round(rows), test), power,
                      guess, MIN_UNITS, _MAX_UNITS)
    return _MAX_UNITS if found is None else found


def _needed_k(population: _Population, drop: float, n: int, prompts: float, test: _Test,
              power: float) -> int | None:
    """Smallest replies per prompt with which *n* scenarios see *drop*, or None when no k is enough."""
    if n < MIN_UNITS or _simulated_power(population, drop, n, None, test) < power:
        return None
    between, after_var = (float(x[0]) for x in population.under(np.array([drop])))
    room = n * (drop / _multiplier(n, test.level, power)) ** 2 - between
    guess = 1 if room <= 0 else max(1, math.ceil((population.reply_var + after_var) / (prompts * room)))
    return _smallest(lambda k: _simulated_power(population, drop, n, max(1, round(prompts * k)), test), power,
                     min(guess, _MAX_K), 1, _MAX_K)


def _detectable(population: _Population, rows: float, n: int, test: _Test, power: float) -> float | None:
    """The smallest drop the simulated gate sees with *power* at n scenarios, or None.

    Regula falsi (the Illinois variant) on the simulated power, bracketed around the power
    equation's answer: a handful of simulations, to a thousandth of the drop.
    """
    if n < MIN_UNITS or population.mean <= 0:
        return None

    def gap(drop: float) -> float:
        return _simulated_power(population, drop, n, round(rows), test) - power

    ceiling = population.mean * (1 - 1e-6)
    multiplier = _multiplier(n, test.level, power) / math.sqrt(n)
    guesses = np.linspace(0.0, ceiling, 65)[1:]
    crossing = np.flatnonzero(guesses >= multiplier * population.sd(guesses, rows))
    guess = float(guesses[crossing[0]]) if crossing.size else ceiling
    low, high = 0.5 * guess, min(ceiling, 1.5 * guess)
    g_low, g_high = gap(low), gap(high)
    while g_low > 0 and low > 1e-6:
        low, high, g_high = 0.5 * low, low, g_low
        g_low = gap(low)
    while g_high < 0:
        if high >= ceiling:
            return None
        low, g_low, high = high, g_high, min(ceiling, 2 * high)
        g_high = gap(high)
    side = 0
    for _ in range(30):
        if high - low <= 1e-3 * high:
            break
        mid = high - g_high * (high - low) / (g_high - g_low) if g_high != g_low else 0.5 * (low + high)
        mid = min(max(mid, low + 1e-4 * (high - low)), high - 1e-4 * (high - low))
        g_mid = gap(mid)
        if g_mid >= 0:
            high, g_high = mid, g_mid
            if side == 1:
                g_low /= 2
            side = 1
        else:
            low, g_low = mid, g_mid
            if side == -1:
                g_high /= 2
            side = -1
    return high


def _power_now(population: _Population, drop: float, rows: float, n: int, test: _Test) -> float | None:
    if drop >= population.mean or n < MIN_UNITS:
        return None
    return _simulated_power(population, drop, n, round(rows), test)


# -- what the baseline does not know ----------------------------------------------------------------

#: simulated baselines behind the allowance for what a baseline of a few scenarios cannot pin down
_BASELINES = 64


def _estimates(passes: np.ndarray, k: int, prompts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, scenario variance, reply variance) of each baseline: passes is (baselines, scenarios, prompts) of k."""
    n = passes.shape[1]
    rows = k * prompts
    rates = passes.sum(axis=2) / rows
    means = rates.mean(axis=1)
    reply = (passes * (k - passes) / k).sum(axis=(1, 2)) / (n * prompts * (k - 1)) if k > 1 \
        else np.zeros(len(passes))
    scenario = rates.var(axis=1, ddof=1) - reply / rows if n > 1 else np.zeros(len(passes))
    total = n * rows
    fitted = np.clip(means, 0.5 / (total + 1.0), 1.0 - 0.5 / (total + 1.0))
    return fitted, np.clip(scenario, 0.0, fitted * (1.0 - fitted)), reply


def _allowance(population: _Population, n: int, prompts: float, k: float, drop: float, level: float,
               power: float, design_k: bool) -> float:
    """The power to plan for so that the whole procedure, not one lucky baseline, has *power* on average.

    A baseline of n scenarios estimates its noise with an error, and the plan's answer
    inherits it: a baseline that happens to look quiet plans too few scenarios (or too few
    replies), one that looks noisy too many, and power lost to the first is not made up by
    the second (power is concave in the size). So the procedure is simulated under the
    fitted population: baselines like today's (n scenarios, the same prompts and k) are
    drawn, each is planned by the power equation, and the plan aims at the power for which
    those plans have *power* on average under the fitted population (an assurance,
    O'Hagan, Stevens and Campbell 2005). *design_k*: the plan raises k at n scenarios,
    else it adds scenarios at today's k.
    """
    if n < MIN_UNITS:
        return power
    normal = NormalDist()
    rng = np.random.default_rng(_SEED + 1)
    p_count, k_count = max(1, round(prompts)), max(1, round(k))
    rates = _expit(population.location + population.spread * rng.standard_normal((_BASELINES, n)))
    passes = rng.binomial(k_count, np.repeat(rates[..., None], p_count, axis=2))
    means, scenario, reply = _estimates(passes, k_count, p_count)
    usable = means > drop
    if not usable.any():
        return power
    means, scenario, reply = means[usable], scenario[usable], reply[usable]
    between, after_var = _under(means, _spreads(means, scenario), drop)
    true_between, true_after = (float(x[0]) for x in population.under(np.array([drop])))
    z_level = normal.inv_cdf(1.0 - level)
    rows = p_count * k_count

    def achieved(z_power: float) -> float:
        reach = z_level + z_power
        if not design_k:  # n_b = reach^2 sd_b^2 / drop^2, gated where the truth has sd_0
            true_sd = math.sqrt(true_between + (population.reply_var + true_after) / rows)
            ratio = np.sqrt(between + (reply + after_var) / rows) / true_sd
            return float(np.mean([normal.cdf(reach * r - z_level) for r in ratio]))
        room = n * (drop / reach) ** 2 - between
        planned = room > 0
        if not planned.any():
            return 0.0
        ks = np.maximum(1.0, np.ceil((reply + after_var)[planned] / (p_count * room[planned])))
        true_sd = np.sqrt(true_between + (population.reply_var + true_after) / (p_count * ks))
        return float(np.mean([normal.cdf(drop * math.sqrt(n) / s - z_level) for s in true_sd]))

    low, high = normal.inv_cdf(power) - 1.0, normal.inv_cdf(power) + 3.0
    if achieved(high) < power:
        return normal.cdf(high)
    for _ in range(30):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if achieved(mid) < power else (low, mid)
    return normal.cdf(high)


# -- reading the rows ----------------------------------------------------------------------------

#: per prompt: [rows, sum of rewards, sum of squared rewards]
_Prompt = list[float]


def _read(source: RowInput, label: str) -> tuple[dict[str, dict[str, dict[str, _Prompt]]], Header | None]:
    """``category -> unit -> prompt -> [rows, sum, sum of squares]`` (unit: scenario_id, else prompt), header."""
    table: dict[str, dict[str, dict[str, _Prompt]]] = {}
    with RowReader(source, name=label) as reader:
        header = reader.header
        for row, _line, _state in reader:
            unit = row.get("scenario_id") or row["prompt"]
            reward = float(row["reward"])
            acc = table.setdefault(row["category"], {}).setdefault(unit, {}).setdefault(row["prompt"], [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += reward
            acc[2] += reward * reward
    return table, header


def _noise(units: Mapping[str, Mapping[str, _Prompt]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, float | None]:
    """Per scenario (rows, prompts, pass rate) and the mean within-prompt reply variance (None: k = 1 everywhere)."""
    rows, prompts, rates, within, df = [], [], [], 0.0, 0.0
    for by_prompt in units.values():
        cells = np.array(list(by_prompt.values()), dtype=float)
        n, total, squares = cells[:, 0], cells[:, 1], cells[:, 2]
        rows.append(n.sum())
        prompts.append(len(cells))
        rates.append(total.sum() / n.sum())
        # the pooled within-prompt sum of squares, per scenario, weighs each scenario by its replies' df
        within += float(np.maximum(squares - total**2 / n, 0.0).sum())
        df += float((n - 1).sum())
    reply_var = within / df if df > 0 else None
    return np.array(rows), np.array(prompts, dtype=float), np.array(rates), reply_var


@dataclass(frozen=True)
class _Fitted:
    """One category's rows reduced to what a plan reads: sizes, noises and the fitted population."""

    n: int
    mean: float
    k: float
    r: float
    prompts: np.ndarray
    reply_var: float | None
    scenario_var: float
    population: _Population


def _fit(units: Mapping[str, Mapping[str, _Prompt]]) -> _Fitted:
    rows, prompts, rates, reply_var = _noise(units)
    n = len(rates)
    mean = float(rates.mean())
    # scenario noise: the rates' spread less what the replies explain (one-way random-effects moment)
    scenario_var = float(rates.var(ddof=1)) - float(np.mean((reply_var or 0.0) / rows)) if n > 1 else 0.0
    # a category with every reply passing (or failing) is not certain: half a reply each way, for the mean only
    total = float(rows.sum())
    fitted = min(max(mean, 0.5 / (total + 1.0)), 1.0 - 0.5 / (total + 1.0))
    scenario_var = min(max(scenario_var, 0.0), fitted * (1.0 - fitted))
    before_var = reply_var if reply_var is not None else fitted * (1.0 - fitted) - scenario_var
    return _Fitted(n=n, mean=mean, k=float(rows.sum() / prompts.sum()), r=float(rows.mean()), prompts=prompts,
                   reply_var=reply_var, scenario_var=scenario_var,
                   population=_Population.fit(fitted, scenario_var, before_var))


def power_today(units: Mapping[str, Mapping[str, _Prompt]], drop: float, level: float,
                method: str = DEFAULT_METHOD, *, rows: float | None = None) -> float | None:
    """The ``power today`` column of :func:`plan` alone, for one category's summed rows
    (``unit -> prompt -> [rows, sum, sum of squares]``) tested at one-sided *level*: the
    chance the gate calls a drop of *drop* ``regressed`` with *rows* rows a unit on each side
    (default: the rows' own). None where the plan prints ``-`` (the pass rate is at or below
    the drop, or fewer scenarios than the gate judges)."""
    fitted = _fit(units)
    return _power_now(fitted.population, drop, fitted.r if rows is None else rows, fitted.n, _Test(level, method))


def _plan_one(category: str, units: Mapping[str, Mapping[str, _Prompt]], drop: float, power: float,
              test: _Test) -> CategoryPlan:
    fit = _fit(units)
    n, mean, k, r, prompts, reply_var = fit.n, fit.mean, fit.k, fit.r, fit.prompts, fit.reply_var
    scenario_var, population = fit.scenario_var, fit.population
    sd = effect_sd = needed = needed_k = aim = aim_k = None
    if drop < mean:
        between, _ = population.under(np.array([drop]))
        sd = float(population.sd(np.array([drop]), r)[0])
        effect_sd = math.sqrt(float(between[0]))
        aim = _allowance(population, n, float(prompts.mean()), k, drop, test.level, power, design_k=False)
        needed = _needed(population, drop, r, test, aim, sd)
        if reply_var is not None and n >= MIN_UNITS:
            aim_k = _allowance(population, n, float(prompts.mean()), k, drop, test.level, power, design_k=True)
            needed_k = _needed_k(population, drop, n, float(prompts.mean()), test, aim_k)
    return CategoryPlan(
        category=category, n_units=n, prompts=_tidy(float(prompts.mean())), k=_tidy(k), rollouts=_tidy(r),
        pass_rate=mean, reply_sd=None if reply_var is None else math.sqrt(reply_var),
        scenario_sd=math.sqrt(scenario_var), sd=sd, effect_sd=effect_sd, needed=needed, needed_k=needed_k,
        aim=aim, aim_k=aim_k,
        mde=_detectable(population, r, n, test, power) if mean > 0 else None,
        power_now=_power_now(population, drop, r, n, test),
    )


def _tidy(x: float) -> float:
    """An integer count as an int-valued float (4.0 prints as 4), else two decimals."""
    return float(round(x)) if abs(x - round(x)) < 1e-9 else round(x, 2)


def _check_share(name: str, value: object, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < high:
        raise UsageError(f"{name} must be in (0, {high:g}), got {value!r}")
    return float(value)


def plan(
    rows: RowInput,
    *,
    drop: float = DEFAULT_DROP,
    power: float = DEFAULT_POWER,
    level: float | None = None,
    family_level: float = FAMILY_LEVEL,
    guards: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    method: str = DEFAULT_METHOD,
) -> Plan:
    """Per category of *rows*: the scenarios, or the replies per prompt, needed to see *drop*, and today's MDE.

    *rows* are graded rows (a row file or row dicts) of the policy the gate will compare
    against (the baseline); *categories* limits the plan to those (each must be in the rows).
    *level* is the one-sided level each comparison's regression test runs at; by default the
    level the gate holds each of its comparisons to when it keeps *family_level* over all of
    them (:func:`family_level_per_comparison`: overall and every category, for pass@1 and for
    every guard). *guards* are the marker names the gate guards; by default those of the
    environment the rows' header names, as the gate resolves them. *method* is the gate's
    interval (``"t"``, its default, or ``"expanded"``): the plan simulates that test.

    :raises UsageError: *drop*, *power* or *family_level* out of (0, 1), *level* out of
        (0, 0.5), an unknown *method*, or a named category the rows lack.
    :raises DataError: the rows are malformed or empty.
    """
    drop, power = _check_share("drop", drop), _check_share("power", power)
    family = _check_share("family level", family_level)
    given = None if level is None else _check_share("level", level, 0.5)
    if method not in _SIMULATED:
        raise UsageError(f"method must be one of {', '.join(_SIMULATED)} (the tests a plan simulates), got {method!r}")
    if guards is not None and (isinstance(guards, str) or not all(isinstance(g, str) for g in guards)):
        raise UsageError(f"guards must be a list of marker names, got {guards!r}")
    label = os.fspath(rows) if isinstance(rows, (str, os.PathLike)) else str(getattr(rows, "label", None) or "<rows>")
    table, header = _read(rows, label)
    if not table:
        raise DataError(f"{label} has no rows to plan from")
    wanted = sorted(table) if categories is None else list(dict.fromkeys(categories))
    missing = [c for c in wanted if c not in table]
    if missing:
        raise UsageError(f"category {missing[0]!r} is not in {label} (it has {', '.join(sorted(table))})")
    if guards is None and given is None:
        env = header_env([header]) if header is not None else None
        guards = tuple(dict.fromkeys(env.guards)) if env is not None else ()
    n_guards = len([g for g in dict.fromkeys(guards or ()) if g])
    return plan_table(table, wanted, drop=drop, power=power, level=given, family_level=family, guards=n_guards,
                      method=method, source=label)


def plan_table(table: Mapping[str, Mapping[str, Mapping[str, _Prompt]]], categories: Sequence[str], *,
               drop: float, power: float, level: float | None, family_level: float, guards: int, method: str,
               source: str) -> Plan:
    """:func:`plan` of rows already summed: ``category -> unit -> prompt -> [rows, sum, sum of squares]``
    of the reward (every category the gate compares; *categories* are those planned), *guards*
    the number of guarded markers. The gate calls it on its before side (:mod:`.sees`)."""
    if level is not None:
        chosen, rule, comparisons, family_used = level, "given", None, None
    else:
        comparisons, family_used = (1 + len(table)) * (1 + guards), family_level
        sizes = [len(table[c]) for c in sorted(table)]
        chosen = family_level_per_comparison(sizes, guards, family_level)
        metrics = "pass@1" + ("" if not guards else f" and {guards} guard{'' if guards == 1 else 's'}")
        rule = (f"the gate's family: run-level {family_level:.0%} over {comparisons} comparisons (overall and "
                f"{len(table)} categor{'y' if len(table) == 1 else 'ies'}, {metrics}), min-p")
    test = _Test(chosen, method, flips=level is None and method == "t" and comparisons == 2)
    return Plan(categories=tuple(_plan_one(c, table[c], drop, power, test) for c in categories),
                drop=drop, power=power, level=chosen, level_rule=rule, source=source,
                comparisons=comparisons, family_level=family_used, method=method)
