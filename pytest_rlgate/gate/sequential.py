"""The statistics of a watched run: exact permutation p-values, how a family spends its level,
and how a run's error budget is spread over its looks.

**The test.** A checkpoint is compared with step 0 unit by unit (scenario, else prompt). Under
"nothing changed" a unit's sides are exchangeable, so the side called "step 0" is equally
likely to be any of them. The statistic is the sum over units of the step-0 value (large: the
checkpoints did worse); its null distribution, given each unit's *bag* of values, is the
convolution of one small uniform distribution per unit. Two bags are used:

* the *checkpoint* test, bag ``{step 0, this checkpoint}``: the paired sign-flip test of the
  per-unit deltas;
* the *window* test, bag ``{step 0, the last W checkpoints}``: the same comparison with the
  after side averaged over W checkpoints, which divides the after side's noise variance by W
  when a drop persists, and whose smallest attainable p-value is ``(W + 1) ** -n`` instead of ``2 ** -n``.

The values are unit means of 0/1 rows, so they live on a lattice (steps of 1/rows per unit):
the convolution is computed exactly, in float64 on probabilities (every term is a
non-negative sum, so tails are accurate to a few ulps, far below 1e-12). Units with unequal
row counts, or markers that are not on a small lattice, are rounded onto a common grid
first; the rounded values are still exchangeable under the null, so the test stays exact (of
the rounded statistic). Ties: per-unit deltas on a 9-point lattice make many sign patterns
share one sum, and counting all of them as "as extreme" wastes most of a small level. Ties
of the sum are broken by a second statistic, the number of units whose step-0 value is above
their bag's mean (a sign count): the order is total and fixed in advance, so the p-value is
still exact, and the test uses most of its size.

**A family at one look** (every metric and group that can fail the gate) is tested by Holm's
step-down with Tarone's rule for discrete tests: a test whose smallest attainable p-value
(known from its bag) is above the level it would get cannot reject, so it is left out of the
count and its share goes to the tests that can. A 6-scenario category no longer costs the
20-scenario one a quarter of its level.

**Spending.** The run's budget is the gate's *family level*, how often an unchanged run may
be stopped over all its looks (:data:`~pytest_rlgate.gate.options.FAMILY_LEVEL`, 5 %, the
same default as one gate's). A planned run spends ``family_level * F(look / planned)`` by
each look with ``F(t) = (1 - floor) * t ** 3 + floor * t`` (a power family close to
O'Brien-Fleming's shape): most of the budget goes to the late looks, where a drift that
persists is seen anyway, while the even ``floor`` share keeps every look able to stop a
total collapse. A run of unknown length spends ``family_level * j / (j + horizon)`` by look
``j``: half by look ``horizon``, all of it only in the limit. :class:`Spending` is also the
spending of sampling until decided (Lan-DeMets ``obf``, ``pocock``, ``equal``). Looks share
step 0, so their tests are dependent; the union bound over looks and families holds whatever
the dependence.

:func:`betting_p` is the anytime-valid alternative the benchmark weighs against the exact
test: a mixture of betting martingales over the units' deltas in [-1, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import InitVar, dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from ..errors import UsageError
from .options import FAMILY_LEVEL, LEVEL, old_spelling

__all__ = ["SPENDING_KINDS", "BagTest", "Spending", "SpendingKind", "bag_test", "betting_p", "betting_test", "lattice",
           "min_units", "sign_flip_p", "tarone_holm"]

#: Largest total width (sum of the units' lattice ranges) convolved exactly; wider bags are
#: rounded onto a grid that fits (the test stays exact for the rounded values).
MAX_WIDTH = 1 << 15
#: Denominators tried when reading unit means as fractions (rows per unit, times sides).
_DENOMINATORS = 720720  # lcm(1..16): every row count up to 16 per unit, and many more
_BETS = np.linspace(0.05, 0.95, 19)


SpendingKind = Literal["obf", "pocock", "equal", "late", "open"]
#: The spending functions, by the share of the budget spent by information fraction ``t``:
#: ``obf`` O'Brien-Fleming-like (little early), ``pocock`` Pocock-like (about even in
#: information), ``equal`` Bonferroni (the same share at every look), ``late`` the watched
#: run's power family (most on the late looks, an even floor share so every look can stop a
#: collapse) and ``open`` a run of unknown length (half by look *horizon*).
SPENDING_KINDS: tuple[SpendingKind, ...] = ("obf", "pocock", "equal", "late", "open")
_NORMAL = NormalDist()


@dataclass(frozen=True)
class Spending:
    """How a run's error budget *family_level* (how often an unchanged run may be failed or
    stopped, over all its looks) is spread over its looks: the one spending of the house,
    for a watched run (:class:`~pytest_rlgate.watch.looks.SequentialGate`) and for sampling
    until decided (:class:`~pytest_rlgate.gate.adaptive.AdaptiveDesign`).

    *planned*: the number of looks (None: unknown, which only *kind* ``open`` spends over).
    *kind* (default ``late`` for a planned run, ``open`` otherwise) is the spending function:
    ``late`` spends ``family_level * F(look / planned)`` by each look,
    ``F(t) = (1 - floor) t**shape + floor t``; ``open`` spends ``family_level * j / (j + horizon)``
    by look ``j``; ``obf``, ``pocock`` and ``equal`` are Lan-DeMets functions of the
    information fraction (:meth:`increments`). ``alpha=`` is the old spelling of *family_level*.
    """

    family_level: float = FAMILY_LEVEL
    planned: int | None = None
    kind: SpendingKind | None = None
    shape: float = 3.0
    floor: float = 0.05
    horizon: int = 10
    alpha: InitVar[float | None] = None

    def __post_init__(self, alpha: float | None) -> None:
        if alpha is not None:
            object.__setattr__(self, "family_level", old_spelling("alpha", alpha, "family_level"))
        problem = LEVEL.problem(self.family_level)
        if problem is not None:
            raise UsageError(f"family_level={self.family_level!r}: how often an unchanged run may be failed or "
                             f"stopped over all its looks, {LEVEL.describe()}")
        if self.kind is None:
            object.__setattr__(self, "kind", "open" if self.planned is None else "late")
        if self.kind not in SPENDING_KINDS:
            raise UsageError(f"spending {self.kind!r}: choose one of {', '.join(SPENDING_KINDS)}")
        if self.planned is not None and (isinstance(self.planned, bool) or not isinstance(self.planned, int)
                                         or self.planned < 1):
            raise UsageError(f"planned={self.planned!r}: the number of looks, an integer >= 1 (or None)")
        if (self.kind == "open") != (self.planned is None):
            raise UsageError(f"spending {self.kind!r} with planned={self.planned!r}: 'open' is the spending of a run "
                             "of unknown length (planned None); every other kind needs the planned looks")
        if not (self.shape >= 1 and math.isfinite(self.shape)):
            raise UsageError(f"shape={self.shape!r}: the power family's exponent, >= 1 (3 is late-weighted)")
        if not 0 <= self.floor <= 1:
            raise UsageError(f"floor={self.floor!r}: the share spread evenly over the looks, in [0, 1]")
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int) or self.horizon < 1:
            raise UsageError(f"horizon={self.horizon!r}: the look by which an open-ended run has spent half, >= 1")

    def spent_at(self, t: float) -> float:
        """The share of the budget spent by information fraction *t* (0 < t <= 1) of a planned run."""
        level = self.family_level
        if t >= 1.0:
            return level
        if self.kind == "obf":
            return 2.0 * (1.0 - _NORMAL.cdf(_NORMAL.inv_cdf(1.0 - level / 2.0) / math.sqrt(t)))
        if self.kind == "pocock":
            return level * math.log(1.0 + (math.e - 1.0) * t)
        if self.kind == "equal":
            return level * t
        if self.kind == "late":
            return float(level * ((1 - self.floor) * t ** self.shape + self.floor * t))
        raise UsageError("an open-ended run spends by look, not by information fraction")

    def spent(self, look: int) -> float:
        """The error spent by the end of look *look* (0 before the first)."""
        if look <= 0:
            return 0.0
        if self.planned is None:
            return self.family_level * look / (look + self.horizon)
        return self.spent_at(min(look, self.planned) / self.planned)

    def level(self, look: int) -> float:
        """The error look *look* (1-based) may spend."""
        if look < 1:
            raise UsageError(f"look={look!r}: looks are numbered from 1")
        if self.planned is not None and look > self.planned:
            raise UsageError(f"look {look} of {self.planned} planned: the error budget is spent; plan more looks")
        return self.spent(look) - self.spent(look - 1)

    def increments(self, information: Sequence[float]) -> tuple[float, ...]:
        """Each planned look's share when look ``r`` has reached information fraction
        ``information[r]`` (the last is 1): the spending function's increments, except for
        ``equal``, which gives every look the same share whatever its information."""
        if self.kind == "equal" or self.kind == "late":
            return tuple(self.level(r) for r in range(1, len(information) + 1))
        cumulative = [self.spent_at(t) for t in information]
        return tuple(b - a for a, b in zip([0.0, *cumulative[:-1]], cumulative))

    def describe(self) -> str:
        if self.planned is None:
            return (f"family level {self.family_level:g} over an open-ended run: {self.family_level:g} * j / "
                    f"(j + {self.horizon}) spent by look j (half by look {self.horizon})")
        if self.kind == "late":
            return (f"family level {self.family_level:g} over {self.planned} planned looks: {1 - self.floor:g} "
                    f"t^{self.shape:g} + {self.floor:g} t of it by t = look / {self.planned} (mostly on the late "
                    "looks)")
        return f"family level {self.family_level:g} over {self.planned} planned looks, {self.kind} spending"



def lattice(values: np.ndarray, *, width: int = MAX_WIDTH) -> tuple[np.ndarray, float]:
    """*values* (units x sides) as integers on a common grid, and the grid's step count per unit of value.

    Unit means of 0/1 rows are fractions with small denominators: they are scaled exactly
    by the least common denominator when the bags then fit *width*; otherwise (or for values
    that are not such fractions) they are rounded to the finest grid that fits. Rounding is a
    fixed function of each value, so exchangeable sides stay exchangeable.
    """
    values = np.asarray(values, dtype=float)
    spread = float(np.sum(values.max(axis=1) - values.min(axis=1))) if values.size else 0.0
    if spread == 0.0:
        return np.zeros(values.shape, dtype=np.int64), 1.0
    scaled = values * _DENOMINATORS
    exact = np.abs(scaled - np.round(scaled)) < 1e-6 * max(1.0, float(np.max(np.abs(scaled))))
    if bool(exact.all()):
        common = math.gcd(*(int(v) for v in np.unique(np.round(scaled).astype(np.int64))), _DENOMINATORS)
        exact_scale = _DENOMINATORS // common
        if spread * exact_scale <= width:
            return np.round(values * exact_scale).astype(np.int64), float(exact_scale)
    scale = max(1.0, float(math.floor(width / spread)))
    return np.round(values * scale).astype(np.int64), scale


@dataclass(frozen=True)
class BagTest:
    """One exact permutation test (see :func:`bag_test`): its p-value and the smallest one its bags allow."""

    p: float
    min_p: float
    n_units: int  #: units whose bag is not constant (the others cannot move the statistic)


def _moving(bags: np.ndarray) -> np.ndarray:
    """The integer bags whose values are not all equal."""
    bags = np.asarray(bags, dtype=np.int64)
    if bags.ndim != 2 or bags.shape[1] < 2:
        raise UsageError(f"bags of shape {bags.shape}: units x sides, at least two sides")
    moving: np.ndarray = bags[bags.max(axis=1) > bags.min(axis=1)]
    return moving


def bag_test(bags: np.ndarray) -> BagTest:
    """Exact one-sided test that step 0 (column 0 of *bags*, units x sides) is this high by chance.

    Under the null each unit's step-0 value is a uniform draw from its bag, independently
    across units. The statistic is the sum of the step-0 values. Outcomes with the same sum
    are ordered by the units with the widest bags first (the biggest movers; ties of width by
    position): the one whose first differing unit has the higher step-0 value is the more
    extreme. That order is fixed by the bags, which the null does not change, so the p-value
    (the null probability of an outcome at least as extreme) is exact, and since no two
    different outcomes tie the test uses its whole size. *bags* are integers (see
    :func:`lattice`). Cost: one small convolution per unit.
    """
    bags = _moving(bags)
    n, sides = bags.shape
    if n == 0:
        return BagTest(p=1.0, min_p=1.0, n_units=0)
    shifted = bags - bags.min(axis=1, keepdims=True)
    shifted = shifted[np.lexsort((np.arange(n), -shifted.max(axis=1)))]
    width = int(shifted.max()) + 1
    kernels = np.zeros((n, width))  # each unit's null distribution of its step-0 value
    rows = np.arange(n)
    for j in range(sides):  # within one column each row is hit once, so += keeps repeated values
        kernels[rows, shifted[:, j]] += 1.0 / sides
    tops = shifted.max(axis=1)
    span = int(tops.sum()) + 1
    suffix = np.zeros((n, span))  # suffix[i]: the null distribution of the sum over the units after i
    dist = np.ones(1)
    for i in range(n - 1, -1, -1):
        suffix[i, :dist.size] = dist
        dist = np.convolve(kernels[i, :tops[i] + 1], dist)
    observed = shifted[:, 0]
    total = int(observed.sum())
    p = float(dist[total + 1:].sum())  # a higher sum
    # the same sum, and the first unit (in the order) where the outcome differs is higher there
    before = np.concatenate(([0], np.cumsum(observed)[:-1]))
    need = total - before[:, None] - np.arange(width)[None, :]
    higher = (np.arange(width)[None, :] > observed[:, None]) & (need >= 0) & (need < span)
    rest = np.where(higher, suffix[rows[:, None], np.clip(need, 0, span - 1)], 0.0)
    share = kernels[rows, observed]
    weight = np.concatenate(([1.0], np.cumprod(share)[:-1]))  # P(the units before agree with what was seen)
    p += float(np.dot(weight, (kernels * rest).sum(axis=1)))
    p += float(np.prod(share))  # the outcome itself
    min_p = float(np.prod(kernels[rows, tops]))
    return BagTest(p=min(1.0, p), min_p=min_p, n_units=int(n))


def sign_flip_p(deltas: Sequence[float] | np.ndarray) -> float:
    """Exact one-sided p-value that the mean of *deltas* is this low by chance (H0: symmetric about 0).

    The paired sign-flip test at any number of units (ties of the sum broken by the number of
    negative deltas, see :func:`bag_test`).
    """
    d = np.asarray(deltas, dtype=float).reshape(-1)
    if d.size == 0 or not np.any(d):
        return 1.0
    ints, _scale = lattice(np.stack([np.zeros_like(d), d], axis=1))
    return bag_test(ints).p


def min_units(level: float, sides: int = 2) -> int:
    """The fewest units whose bags of *sides* values can reach a p-value at or below *level*."""
    return max(1, math.ceil(math.log(1.0 / level) / math.log(sides)))


def _betting(deltas: np.ndarray) -> np.ndarray:
    """1 / e-value for each row of *deltas* (see :func:`betting_p`)."""
    d = np.clip(deltas, -1.0, 1.0)
    logs = np.log1p(-_BETS[None, :, None] * d[:, None, :]).sum(axis=2)  # rows x bets
    top = logs.max(axis=1)
    with np.errstate(over="ignore"):
        e = np.exp(np.minimum(top, 700.0)) * np.exp(logs - top[:, None]).mean(axis=1)
    return np.where(e <= 1.0, 1.0, 1.0 / e)


def betting_p(deltas: Sequence[float] | np.ndarray) -> float:
    """An anytime-valid p-value (1 / e-value) that the mean of *deltas* in [-1, 1] is below 0.

    The e-value is the average over bets ``lam`` of ``prod(1 - lam * d_i)``: each product is a
    non-negative martingale under "each unit's delta has mean >= 0" (a bettor wagering a share
    of their wealth that the deltas are negative), so their mixture is one too.
    """
    d = np.asarray(deltas, dtype=float).reshape(1, -1)
    return 1.0 if d.size == 0 else float(_betting(d)[0])


def betting_test(deltas: Sequence[float] | np.ndarray) -> BagTest:
    """:func:`betting_p` as a family member: its smallest attainable p-value is every unit at -|delta|."""
    d = np.asarray(deltas, dtype=float).reshape(-1)
    if d.size == 0:
        return BagTest(p=1.0, min_p=1.0, n_units=0)
    p, floor = _betting(np.stack([d, -np.abs(d)]))
    return BagTest(p=float(p), min_p=float(floor), n_units=int(np.count_nonzero(d)))


def tarone_holm(tests: Sequence[BagTest], alpha: float) -> tuple[list[bool], list[float]]:
    """Holm's step-down over a family, with Tarone's rule for tests that cannot reach their level.

    At each step, among the tests not yet rejected, the smallest K is found such that at
    most K of them can reach ``alpha / K`` (their smallest attainable p-value is at or below
    it): only those are counted, since the rest cannot reject at that level anyway. Every
    test with ``p <= alpha / K`` is rejected and the step repeats with the others (a smaller
    family, so a level at least as high); when none is, the procedure stops. Returns, per
    test, whether it was rejected and the level it was held to.
    """
    left = list(range(len(tests)))
    reject = [False] * len(tests)
    level = [0.0] * len(tests)
    while left:
        floors = sorted(tests[i].min_p for i in left)
        k = next(k for k in range(1, len(left) + 1) if sum(1 for f in floors if f <= alpha / k) <= k)
        bar = alpha / k
        hits = [i for i in left if tests[i].p <= bar]
        for i in left:
            level[i] = bar
        if not hits:
            break
        for i in hits:
            reject[i] = True
            left.remove(i)
    return reject, level
