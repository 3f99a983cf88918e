"""How many scenarios a category needs before its gate can see a drop: power, planned.

A category of 6 scenarios cannot tell a 0.10 drop from noise, and the gate says so with
``inconclusive``; what it cannot say on its own is how many scenarios *would* tell. This
module answers from a row file already sampled (usually the baseline): per category, the
per-scenario pass rates and rollouts per scenario fix how much each scenario's paired delta
varies, and from that spread the number of scenarios the gate needs to call a drop of a
given size ``regressed`` (upper bound below 0) with a given power, and the smallest drop
today's scenarios can see.

The model is the super-population the gate's interval already targets: a new scenario is
drawn from the category's observed ones, its before pass probability is its observed rate
(smoothed by half a pass, so 4/4 is not a certainty), and a drop of size ``drop`` moves
every scenario by the same shift on the logit scale (scenarios near the ceiling move less,
as they do in training). Both sides are sampled afresh, so a scenario's delta varies by
``p(1-p)/r + q(1-q)/r`` (r its rollouts) plus how unevenly the scenarios moved. The number
needed is the smallest n with ``(t_{1-a/2, n-1} + t_{power, n-1}) * sd / sqrt(n) <= drop``,
the paired-t power equation the gate's expanded-percentile bootstrap follows to within its
calibration (both cover 95 % at 15 units); the tests check it by simulating the gate itself
at the planned size. Holm across categories (on from four) asks for more: the plan is per
category at the gate's unadjusted level.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tabulate import tabulate

from ..data.rows import RowInput, iter_checked
from ..errors import DataError, UsageError, hide_user_errors
from .options import CONFIDENCE_LEVEL, DEFAULT_METHOD, MARGIN, METHOD_NAMES
from .stats import t_cdf, t_ppf
from .verdicts import MIN_UNITS

__all__ = ["DEFAULT_DROP", "DEFAULT_POWER", "CategoryPlan", "Plan", "needed_units", "plan"]

#: the drop a plan is sized for unless told: the gate's own flat margin
DEFAULT_DROP = MARGIN
#: the power a plan is sized for unless told, as in every printed MDE
DEFAULT_POWER = 0.80
#: no category is planned beyond this many scenarios (a drop that small is not worth a holdout)
_MAX_UNITS = 10**7

#: a bad policy or row file in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


@dataclass(frozen=True)
class CategoryPlan:
    """One category's plan: what its rows show, what it needs, what it can see today.

    ``needed`` is None when the category cannot drop by ``drop`` at all (its pass rate is
    below the drop, or every scenario is at zero); ``mde`` is None when today's scenarios are
    fewer than the gate's minimum or no drop below the pass rate is detectable.
    """

    category: str
    n_units: int  #: scenarios in the rows
    rollouts: float  #: rows per scenario (prompts x k), mean over scenarios
    k: float  #: rows per prompt
    pass_rate: float
    sd: float | None  #: per-scenario sd of the paired delta under the drop
    needed: int | None  #: scenarios needed to see the drop with the power
    mde: float | None  #: smallest drop today's scenarios see with the power
    power_now: float | None  #: today's power against the drop

    @property
    def enough(self) -> bool:
        return self.needed is not None and self.n_units >= self.needed

    def to_dict(self) -> dict[str, object]:
        return {"category": self.category, "n_units": self.n_units, "rollouts": self.rollouts, "k": self.k,
                "pass_rate": self.pass_rate, "sd": self.sd, "needed": self.needed, "mde": self.mde,
                "power_now": self.power_now, "enough": self.enough}


@dataclass(frozen=True)
class Plan:
    """Every category's plan and the question they answer."""

    categories: tuple[CategoryPlan, ...]
    drop: float
    power: float
    confidence_level: float
    source: str
    method: str = DEFAULT_METHOD

    def __getitem__(self, category: str) -> CategoryPlan:
        for c in self.categories:
            if c.category == category:
                return c
        raise KeyError(category)

    def question(self) -> str:
        return (f"scenarios needed to see a {self.drop:.2f} drop in pass@1 with {self.power:.0%} power "
                f"({self.confidence_level:.0%} {METHOD_NAMES[self.method]}, regressed = upper bound < 0, "
                "per category without Holm)")

    def report(self) -> str:
        """What ``rlgate plan`` prints: the question, one row per category, what to do."""
        rows = []
        for c in self.categories:
            rows.append([c.category, c.n_units, f"{c.rollouts:g}", f"{c.pass_rate:.3f}",
                         "" if c.sd is None else f"{c.sd:.3f}", "-" if c.needed is None else c.needed,
                         "-" if c.mde is None else f"{c.mde:.3f}",
                         "-" if c.power_now is None else f"{c.power_now:.0%}"])
        headers = ["category", "scenarios", "rows/scenario", "pass@1", "sd(delta)", "needed",
                   f"sees today ({self.power:.0%})", "power today"]
        lines = [f"plan: {self.question()}", f"from {self.source}", "",
                 tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True), ""]
        short = [(c, c.needed) for c in self.categories if c.needed is not None and not c.enough]
        for c, needed in short:
            lines.append(f"{c.category}: {c.n_units} scenario(s) see a drop of {_drop(c.mde)}; "
                         f"{needed} would see {self.drop:.2f} (add {needed - c.n_units} scenarios, "
                         "or accept the larger detectable drop)")
        impossible = [c.category for c in self.categories if c.needed is None]
        if impossible:
            lines.append(f"{', '.join(impossible)}: pass@1 is too low to drop by {self.drop:.2f}")
        if not short and not impossible:
            lines.append(f"every category has enough scenarios to see a {self.drop:.2f} drop")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {"drop": self.drop, "power": self.power, "confidence_level": self.confidence_level,
                "method": self.method, "source": self.source,
                "categories": [c.to_dict() for c in self.categories]}


def _drop(mde: float | None) -> str:
    return "none below its pass rate" if mde is None else f"{mde:.2f} or more"


# -- the model -----------------------------------------------------------------------------------


def _expit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def after_rates(before: np.ndarray, drop: float) -> np.ndarray | None:
    """Pass probabilities after a drop of *drop* on average: one shift of every logit, or None.

    None when the mean cannot fall that far (``drop >= mean(before)``).
    """
    target = float(before.mean()) - drop
    if target <= 0:
        return None
    logits = np.log(before / (1.0 - before))
    low, high = -60.0, 0.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        if float(_expit(logits + mid).mean()) < target:
            low = mid
        else:
            high = mid
    return _expit(logits + 0.5 * (low + high))


def delta_sd(before: np.ndarray, rollouts: np.ndarray, drop: float) -> float | None:
    """sd of one new scenario's paired delta under a drop of *drop* (None: cannot drop that far)."""
    after = after_rates(before, drop)
    if after is None:
        return None
    sampling = float(np.mean((before * (1 - before) + after * (1 - after)) / rollouts))
    return math.sqrt(sampling + float(np.var(after - before)))


def _multiplier(n: int, confidence_level: float, power: float) -> float:
    return t_ppf(0.5 + confidence_level / 2.0, n - 1) + t_ppf(power, n - 1)


def needed_units(sd: float, drop: float, *, power: float = DEFAULT_POWER,
                 confidence_level: float = CONFIDENCE_LEVEL) -> int:
    """Smallest n >= 3 with ``(t_{1-a/2, n-1} + t_{power, n-1}) * sd / sqrt(n) <= drop``."""
    if sd <= 0:
        return MIN_UNITS

    def enough(n: int) -> bool:
        return _multiplier(n, confidence_level, power) * sd / math.sqrt(n) <= drop

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


def _detectable(before: np.ndarray, rollouts: np.ndarray, observed: float, n: int, confidence_level: float,
                power: float) -> float | None:
    """The drop whose own spread makes it just detectable at n scenarios (bisection), or None."""
    if n < MIN_UNITS:
        return None
    multiplier = _multiplier(n, confidence_level, power)
    ceiling = min(float(before.mean()), observed)

    def gap(drop: float) -> float:
        sd = delta_sd(before, rollouts, drop)
        return -1.0 if sd is None else drop - multiplier * sd / math.sqrt(n)

    high = ceiling * (1 - 1e-9)
    if gap(high) < 0:
        return None
    low = 0.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if gap(mid) < 0 else (low, mid)
    return high


def _power_now(sd: float | None, drop: float, n: int, confidence_level: float) -> float | None:
    if sd is None or n < MIN_UNITS:
        return None
    if sd == 0:
        return 1.0
    df = n - 1
    return t_cdf(drop * math.sqrt(n) / sd - t_ppf(0.5 + confidence_level / 2.0, df), df)


# -- reading the rows ----------------------------------------------------------------------------


def _read(source: RowInput, label: str) -> dict[str, dict[str, list[float]]]:
    """``category -> unit -> [rows, prompts, passes]`` (units are scenario_id, else prompt)."""
    table: dict[str, dict[str, list[float]]] = {}
    seen: set[tuple[str, str, int | str | None]] = set()
    for row, _line, _state in iter_checked(source, name=label):
        unit = row.get("scenario_id") or row["prompt"]
        acc = table.setdefault(row["category"], {}).setdefault(unit, [0, 0, 0])
        acc[0] += 1
        acc[2] += row["reward"]
        key = (row["prompt"], unit, row.get("eval_run"))
        if key not in seen:
            seen.add(key)
            acc[1] += 1
    return table


def _plan_one(category: str, units: Mapping[str, list[float]], drop: float, power: float,
              confidence_level: float) -> CategoryPlan:
    counts = np.array(list(units.values()), dtype=float)
    rollouts, prompts, passes = counts[:, 0], counts[:, 1], counts[:, 2]
    before = (passes + 0.5) / (rollouts + 1.0)  # half a pass each way: 4/4 is not a certainty
    n = len(counts)
    observed = float(passes.sum() / rollouts.sum())
    sd = delta_sd(before, rollouts, drop) if drop < observed else None
    needed = None if sd is None else needed_units(sd, drop, power=power, confidence_level=confidence_level)
    k = float(rollouts.sum() / prompts.sum())
    return CategoryPlan(
        category=category, n_units=n, rollouts=round(float(rollouts.mean()), 2),
        k=int(k) if k.is_integer() else round(k, 2), pass_rate=observed,
        sd=sd, needed=needed, mde=_detectable(before, rollouts, observed, n, confidence_level, power),
        power_now=_power_now(sd, drop, n, confidence_level),
    )


def plan(
    rows: RowInput,
    *,
    drop: float = DEFAULT_DROP,
    power: float = DEFAULT_POWER,
    confidence_level: float = CONFIDENCE_LEVEL,
    categories: Sequence[str] | None = None,
) -> Plan:
    """Per category of *rows* (a row file or row dicts): scenarios needed to see *drop*, and today's MDE.

    *rows* are graded rows of the policy the gate will compare against (the baseline);
    *categories* limits the plan to those (each must be in the rows).

    :raises UsageError: *drop*, *power* or *confidence_level* out of (0, 1), or a named
        category the rows lack.
    :raises DataError: the rows are malformed or empty.
    """
    for name, value in (("drop", drop), ("power", power), ("confidence level", confidence_level)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise UsageError(f"{name} must be in (0, 1), got {value!r}")
    label = os.fspath(rows) if isinstance(rows, (str, os.PathLike)) else "<rows>"
    table = _read(rows, label)
    if not table:
        raise DataError(f"{label} has no rows to plan from")
    wanted = sorted(table) if categories is None else list(dict.fromkeys(categories))
    missing = [c for c in wanted if c not in table]
    if missing:
        raise UsageError(f"category {missing[0]!r} is not in {label} (it has {', '.join(sorted(table))})")
    return Plan(categories=tuple(_plan_one(c, table[c], float(drop), float(power), float(confidence_level))
                                 for c in wanted),
                drop=float(drop), power=float(power), confidence_level=float(confidence_level), source=label)
