"""The family a gate tests at once, and the critical value each of its comparisons is held to.

A gate makes many comparisons: pass@1 and every guarded marker, in ``overall`` and in each
category. Testing each at 2.5 % one-sided fails far more than 2.5 % of unchanged runs (four
categories, overall and no guards already fail 7 %), and a CI gate that fails honest changes
gets rerun until it passes. So the comparisons that can fail the gate form one *family*, and
the family's chance of failing an unchanged run is held at ``level`` (5 % by default).

How: **scenario sign flips** (the restricted wild cluster bootstrap with Rademacher weights).
When nothing changed, a scenario's before and after rows are exchangeable, so its vector of
deltas (one per metric) keeps or flips its sign as a whole, in ``overall`` and in its category
at once. Each draw flips every scenario at random and recomputes every comparison's paired t
statistic, and the family is held by the smallest p-value of each draw: the single-step
min-p procedure of Westfall and Young. Every member fails below the same marginal level *a*
(times its weight), chosen so that at most ``level`` of the draws (the observed pattern
counted among them) would fail any member. The draws keep every dependence the family has
(``overall`` contains the categories, a guard moves with pass@1), so nothing is spent on a
Bonferroni bound, and a comparison that cannot reach the tail (a constant or rarely moving
marker) spends nothing. Whatever statistic the members use, the level holds for the data at
hand, not only asymptotically: it is a randomization test.

The statistic is the paired t of the per-scenario deltas, with the variance shrunk toward the
replies' own binomial noise (:data:`PRIOR_DF` degrees of freedom of it, half a pass of
smoothing): a category of three scenarios whose deltas happen to be equal would otherwise
claim an infinite t in a quarter of the draws and spend the whole family's level, and a total
collapse (every scenario k/k -> 0/k, no spread at all) would read as nothing. Shrunk, a small
category claims what its replies support: a collapse of five scenarios still reads as one
(and spends, in the draws, the share of the level its few sign patterns cost), while many
scenarios are read by their own spread. A p-value is its t read on the t distribution
(through Wallace's normal transform, which only balances members of different sizes against
each other: the draws, not the transform, set the level).

Each comparison's critical value is the t its threshold corresponds to, so its printed
interval (``delta ± critical x se``) is exactly its decision: below zero if and only if it
regressed. Above a budget of draws x units the flips are replaced by the normal law with the
flips' own covariance, which is what they approach at that many units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .options import FAMILY_LEVEL, N_RESAMPLES

__all__ = ["FamilyMember", "FamilyTest", "family_test"]

#: draws x units above which the flips' law is replaced by the normal law of the same covariance
_FLIP_BUDGET = 4 * 10**7
#: rows of sign draws held at once
_CHUNK = 2048
_NORMAL = NormalDist()


@dataclass(frozen=True)
class FamilyMember:
    """One comparison: its per-unit deltas and which of the gate's units they belong to.

    *units* index the gate's units (scenarios), so that one scenario flips its sign in every
    comparison it is part of; *noise* is the variance of a delta from the replies alone (the
    statistic's prior); *weight* scales the marginal level it is held to; a comparison that is
    not *tested* (advisory, too few units) gets a critical value without spending any level.
    """

    deltas: np.ndarray
    units: np.ndarray
    noise: float = 0.0
    weight: float = 1.0
    tested: bool = True

    def standard_error(self) -> float:
        """The standard error of the mean delta its t divides by: the spread shrunk toward the replies' noise."""
        n = self.deltas.size
        return math.sqrt(_shrunk(float(self.deltas.var(ddof=1)) if n > 1 else 0.0, n, self.noise) / n)


@dataclass(frozen=True)
class FamilyTest:
    """What :func:`family_test` found: the marginal level, and per comparison its critical value."""

    level: float  #: the family's one-sided level (run-level false-fail)
    marginal: float  #: *a*: each member's one-sided marginal level (times its weight)
    size: int  #: members that can reach the tail (the others spend nothing)
    members: int  #: comparisons in the family
    #: ``"sign flips"``, ``"normal"`` (the flips' own covariance), ``"bonferroni"`` (a recipe's: no joint
    #: law) or ``"none"`` (nothing to test)
    law: str
    draws: int
    #: per comparison, the smallest family level at which it would fail (1.0 when it cannot)
    adjusted: tuple[float, ...] = ()
    #: per comparison, the critical value of its t statistic
    critical: tuple[float, ...] = ()

    def describe(self) -> str:
        """``12 comparisons held together by min-p over 10,000 scenario sign flips, each at one-sided 0.61 %``."""
        if self.law == "none":
            return f"{self.members} comparisons, none of which can fail"
        how = {"bonferroni": "by Bonferroni", "sign flips": f"by min-p over {self.draws:,} scenario sign flips",
               "normal": f"by min-p over the sign flips' normal law ({self.draws:,} draws)"}[self.law]
        return (f"{self.members} comparisons held together {how}, each at one-sided {self.marginal:.2%} "
                f"(a {1 - 2 * self.marginal:.1%} interval)")


def _wallace(df: np.ndarray | float) -> np.ndarray:
    return np.asarray((8.0 * np.asarray(df) + 1.0) / (8.0 * np.asarray(df) + 3.0))


def t_to_z(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """A normal deviate for a t statistic (Wallace's transform: monotone, close to Phi^-1(F_t(t)))."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.sign(t) * _wallace(df) * np.sqrt(df * np.log1p(t * t / df))
    return np.where(np.isinf(t), t, z)


def z_to_t(z: float, df: float) -> float:
    """The inverse of :func:`t_to_z` for one member."""
    c = float(_wallace(df))
    return math.copysign(math.sqrt(df * math.expm1(min((z / c) ** 2 / df, 700.0))), z)


#: degrees of freedom of the replies' binomial noise in a comparison's variance
PRIOR_DF = 2.0


def _shrunk(var: np.ndarray | float, n: int, noise: float) -> np.ndarray | float:
    """The sample variance of *n* deltas shrunk toward *noise* with :data:`PRIOR_DF` degrees of freedom."""
    return ((n - 1) * var + PRIOR_DF * noise) / (n - 1 + PRIOR_DF)


def _statistic(sums: np.ndarray, m: FamilyMember, square_sum: float) -> np.ndarray:
    """The t of each draw's flipped deltas from their sums; the sum of squares is the same for every flip."""
    n = m.deltas.size
    mean = sums / n
    var = _shrunk(np.maximum(square_sum - n * mean * mean, 0.0) / (n - 1), n, m.noise)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / np.sqrt(var / n)
    return np.where(var > 0, t, np.where(mean == 0, 0.0, np.copysign(np.inf, mean)))


def _z(t: np.ndarray, members: Sequence[FamilyMember]) -> np.ndarray:
    """Each member's t as a normal deviate."""
    return t_to_z(t, np.array([m.deltas.size - 1 for m in members], dtype=float))


def _flips(members: Sequence[FamilyMember], n_units: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """z of every comparison under *draws* random scenario sign flips: [draws, comparisons]."""
    out = np.empty((draws, len(members)))
    squares = [float(m.deltas @ m.deltas) for m in members]
    for start in range(0, draws, _CHUNK):
        stop = min(draws, start + _CHUNK)
        signs = rng.integers(0, 2, size=(stop - start, n_units), dtype=np.int8) * 2.0 - 1.0
        for j, m in enumerate(members):
            out[start:stop, j] = _statistic(signs[:, m.units] @ m.deltas, m, squares[j])
    return _z(out, members)


def _normal(members: Sequence[FamilyMember], n_units: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Draws of the normal law with the flips' covariance: Cov(sum_i, sum_j) = sum of d_i d_j over shared units."""
    dense = np.zeros((len(members), n_units))
    for j, m in enumerate(members):
        dense[j, m.units] = m.deltas
    cov = dense @ dense.T
    scale = np.sqrt(np.diag(cov))
    corr = cov / np.outer(scale, scale)
    values, vectors = np.linalg.eigh(corr)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    return np.asarray(rng.standard_normal((draws, len(members))) @ root.T)


def family_test(members: Sequence[FamilyMember], *, n_units: int, level: float = FAMILY_LEVEL, draws: int = N_RESAMPLES,
                rng: np.random.Generator | int | None = 0) -> FamilyTest:
    """The marginal level *a* that fails an unchanged run at most *level*, and each comparison's critical value.

    A tested comparison fails when its t statistic is below minus its critical value (the
    regression side; the gains side is its mirror image, the flips being symmetric).
    Comparisons with no varying delta cannot reach the tail and spend nothing.
    """
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    alive = [j for j, m in enumerate(members) if m.deltas.size >= 2 and np.any(m.deltas != 0)]
    n_members = sum(1 for m in members if m.tested)
    live = [members[j] for j in alive]
    dfs = [float(m.deltas.size - 1) for m in members]
    tested = np.array([m.tested for m in live], dtype=bool)
    if not tested.any():
        critical = tuple(-z_to_t(_NORMAL.inv_cdf(level), max(df, 1.0)) for df in dfs)
        return FamilyTest(level, level, 0, n_members, "none", 0, (1.0,) * len(members), critical)
    work = draws * sum(m.deltas.size for m in live)
    law = "sign flips" if work <= _FLIP_BUDGET else "normal"
    z = (_flips if law == "sign flips" else _normal)(live, n_units, draws, generator)[:, tested]
    weights = np.array([m.weight for m in live], dtype=float)[tested]

    def cuts_at(a: float) -> np.ndarray:
        return np.array([_NORMAL.inv_cdf(min(0.5, w * a)) if w * a > 0 else -math.inf for w in weights])

    def count(cuts: np.ndarray) -> int:
        return int(np.count_nonzero(np.any(z < cuts, axis=1)))

    allowed = math.floor(level * (draws + 1)) - 1  # draws that may fall past the thresholds
    low, high = 0.0, min(level, 0.5 / float(weights.max()))
    if allowed >= 0 and count(cuts_at(high)) <= allowed:
        low = high
    elif allowed >= 0:
        for _ in range(80):
            mid = math.sqrt(low * high) if low > 0 else high * 2.0**-30
            if count(cuts_at(mid)) <= allowed:
                low = mid
            else:
                high = mid
            if high - low <= 1e-4 * high:
                break
    marginal = low
    t_observed = np.array([float(_statistic(np.asarray(m.deltas.sum()), m, float(m.deltas @ m.deltas)))
                           for m in live])
    observed = dict(zip(alive, _z(t_observed[None, :], live)[0].tolist()))
    family_weights = {j: m.weight for j, m in zip(alive, live) if m.tested}
    adjusted = [1.0] * len(members)
    for j, w in family_weights.items():
        p = _NORMAL.cdf(observed[j]) if math.isfinite(observed[j]) else (0.0 if observed[j] < 0 else 1.0)
        if p <= 0.0:
            adjusted[j] = 1.0 / (draws + 1)
            continue
        cuts = np.array([_NORMAL.inv_cdf(min(1 - 1e-16, max(1e-300, wk * p / w))) for wk in weights])
        cuts += 1e-9 * (1.0 + np.abs(cuts))  # a draw tied with the observed counts (the round trip through p)
        adjusted[j] = min(1.0, (1 + int(np.count_nonzero(np.any(z <= cuts, axis=1)))) / (draws + 1))
    critical = tuple(-z_to_t(_NORMAL.inv_cdf(min(0.5, max(marginal * m.weight, 1e-300))), max(df, 1.0))
                     for m, df in zip(members, dfs))
    return FamilyTest(level, marginal, int(tested.sum()), n_members, law, draws, tuple(adjusted), critical)
