"""The gate looked at again and again: checkpoints tested against step 0 with alpha spent per look.

Gating every checkpoint of a run at the gate's usual 2.5 % one-sided level, and stopping
at the first regression, stops a run that changed nothing far more often than 2.5 %: ten
looks are ten chances to be unlucky. So the error budget is *spent* across the looks
(alpha spending, Bonferroni style): with ``planned`` looks each one is tested at
``alpha / planned``; when the number of looks is not known in advance look ``i`` gets
``alpha * 6 / (pi^2 i^2)``, which sums to ``alpha`` over any number of looks, so the
chance of ever stopping a null run stays below ``alpha`` however long it trains
(anytime-valid by the union bound, whatever the dependence between looks).

A spent alpha sits far in the tail (0.25 % for ten looks), where a bootstrap interval over
a few scenarios is too narrow to trust. The stopping test is therefore a paired
*sign-flip randomization test* of the per-scenario mean deltas, one per metric (pass@1 and
each guarded marker) and group (each category and overall), Holm-adjusted across them:
under "the policy did not change" a scenario's before and after rows are exchangeable, so
the test is exact at any number of scenarios (a category too small to ever reach the
level simply never stops the run). The house gate (:func:`~pytest_rlgate.gate.adapter.compare_adapter`)
still reports each look at its usual level, for reading. ``tests/test_looks.py`` checks the
false-stop rate by simulation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.records import Row
from ..environment.contract import EnvSpec, load_env
from ..errors import RlgateWarning, UsageError
from .adapter import compare_adapter
from .result import GateResult
from .stats import holm

__all__ = ["ALPHA", "Look", "SequentialGate", "Test", "look_alpha", "sign_flip_p"]

#: The gate's one-sided error at its default 95 % interval: what a whole run may spend.
ALPHA = 0.025
#: The stopping test's pass@1 metric (rows' ``reward``); guards are markers.
PASS = "pass@1"
#: Sign patterns enumerated exactly up to this many units (2**16 patterns); Monte Carlo beyond.
EXACT_UP_TO = 16
#: Random sign patterns beyond that: the p-value's resolution, 1/20000, is far below any spent alpha.
FLIPS = 20_000


def look_alpha(look: int, alpha: float = ALPHA, planned: int | None = None) -> float:
    """The one-sided error look *look* (1-based) may spend out of *alpha*."""
    if look < 1:
        raise UsageError(f"look={look!r}: looks are numbered from 1")
    if planned is not None:
        if look > planned:
            raise UsageError(f"look {look} of {planned} planned: the error budget is spent; plan more looks")
        return alpha / planned
    return alpha * 6 / (math.pi**2 * look**2)


def _unit_means(rows: Sequence[Row], metrics: Sequence[str]) -> dict[tuple[str, str], list[float]]:
    """(category, scenario) -> the mean of each metric over the unit's rows (pass@1 is ``reward``)."""
    sums: dict[tuple[str, str], list[float]] = {}
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        unit = (row["category"], row.get("scenario_id") or row["prompt"])
        values = [float(row["reward"]) if m == PASS else float(row.get("markers", {}).get(m, 0.0)) for m in metrics]
        acc = sums.setdefault(unit, [0.0] * len(metrics))
        for i, value in enumerate(values):
            acc[i] += value
        counts[unit] = counts.get(unit, 0) + 1
    return {unit: [v / counts[unit] for v in acc] for unit, acc in sums.items()}


def sign_flip_p(deltas: np.ndarray, *, draws: int = FLIPS, seed: int = 0) -> float:
    """One-sided p-value that the mean of *deltas* is this low by chance (H0: symmetric about 0).

    Exact over every sign pattern up to 2**16 of them, else Monte Carlo with *draws* random
    patterns (with the observed one counted, so p is never 0).
    """
    n = deltas.size
    if n == 0 or not np.any(deltas):
        return 1.0
    observed = deltas.mean()
    if n <= EXACT_UP_TO:
        patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        means = patterns @ deltas / n
        return float(np.mean(means <= observed + 1e-12))
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(draws, n))
    means = signs @ deltas / n
    return float((np.sum(means <= observed + 1e-12) + 1) / (draws + 1))


@dataclass(frozen=True)
class Test:
    """One metric in one group: the per-scenario mean delta and its sign-flip p-values."""

    metric: str
    group: str
    n_units: int
    delta: float
    p: float
    p_adjusted: float
    regressed: bool

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Look:
    """One checkpoint tested against step 0."""

    look: int
    step: int
    alpha: float
    tests: tuple[Test, ...]
    gate: GateResult | None = None

    @property
    def regressed(self) -> list[str]:
        """``metric/group`` of every test that regressed at this look's level."""
        return [f"{t.metric}/{t.group}" for t in self.tests if t.regressed]

    def to_dict(self) -> dict[str, object]:
        return {"look": self.look, "step": self.step, "alpha": self.alpha, "regressed": self.regressed,
                "tests": [t.to_dict() for t in self.tests],
                "gate": None if self.gate is None else self.gate.to_dict()}


@dataclass
class SequentialGate:
    """Test checkpoint after checkpoint against the same step-0 rows, spending *alpha* across the looks.

    *planned* is the number of looks the run will take (None: unknown, the anytime
    schedule). *guards* are the markers tested besides pass@1 (default: *env*'s guards,
    none without an environment). *report* also runs the house gate at each look
    (:func:`~pytest_rlgate.gate.adapter.compare_adapter`, at its usual level, with *options*).
    """

    alpha: float = ALPHA
    planned: int | None = None
    env: EnvSpec = None
    guards: Sequence[str] | None = None
    report: bool = True
    #: :func:`~pytest_rlgate.gate.adapter.compare_adapter` keywords for the house gate at each look
    options: Mapping[str, Any] = field(default_factory=dict)
    looks: list[Look] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 0.5:
            raise UsageError(f"alpha={self.alpha!r}: a one-sided error in (0, 0.5), e.g. 0.025")
        if self.planned is not None and (not isinstance(self.planned, int) or self.planned < 1):
            raise UsageError(f"planned={self.planned!r}: the number of looks, an integer >= 1 (or None)")
        if self.guards is None:
            self.guards = tuple(load_env(self.env).guards) if self.env is not None else ()

    def look(self, before: Sequence[Row], after: Sequence[Row], *,
             step: int = 0) -> Look:
        """Test *after* against *before* at the next look's level; the look is kept in ``looks``."""
        number = len(self.looks) + 1
        alpha = look_alpha(number, self.alpha, self.planned)
        metrics = (PASS, *(self.guards or ()))
        was, now = _unit_means(before, metrics), _unit_means(after, metrics)
        shared = sorted(set(was) & set(now), key=repr)
        groups = sorted({unit[0] for unit in shared})
        found: list[tuple[str, str, np.ndarray]] = []
        for group in ("overall", *groups):
            units = [u for u in shared if group == "overall" or u[0] == group]
            diffs = np.array([[now[u][i] - was[u][i] for i in range(len(metrics))] for u in units]).reshape(-1,
                                                                                                       len(metrics))
            found += [(metric, group, diffs[:, i]) for i, metric in enumerate(metrics)]
        pvalues = [sign_flip_p(d, seed=number) for _m, _g, d in found]
        reject, adjusted = holm(pvalues, alpha) if pvalues else (np.array([]), np.array([]))
        tests = tuple(Test(metric=m, group=g, n_units=int(d.size), delta=float(d.mean()) if d.size else 0.0,
                           p=p, p_adjusted=float(a), regressed=bool(r))
                      for (m, g, d), p, a, r in zip(found, pvalues, adjusted, reject))
        gate = None
        if self.report:
            with warnings.catch_warnings():  # a constant guard is said once per run, not once per look
                warnings.simplefilter("ignore", RlgateWarning)
                gate = compare_adapter(list(before), list(after), by="category", env=self.env, **self.options)
        done = Look(look=number, step=step, alpha=alpha, tests=tests, gate=gate)
        self.looks.append(done)
        return done
