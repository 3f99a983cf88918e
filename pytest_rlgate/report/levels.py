"""The numbers a report draws: pass@1 levels by category with display bands, and curves.

The only numbers computed for a report are display bands on the pass@1 levels of each side
alone (how precisely each side is known); what the gate decided, the interval on the paired
difference, comes from gate.json unchanged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..gate.stats import paired_bootstrap
from .data import ReportData, UnitRow, is_number

__all__ = ["LEVEL_CONFIDENCE", "Level", "gate_confidence", "groups", "levels", "pass_comparisons", "series"]

#: Confidence level of the display bands on pass@1 levels when the gate names none for a group.
LEVEL_CONFIDENCE = 0.95
#: Resamples of the display bands: enough for a stable 95 % percentile.
LEVEL_RESAMPLES = 2000
#: Fixed so that rendering the same run twice draws the same picture.
LEVEL_SEED = 0


@dataclass(frozen=True)
class Level:
    """pass@1 of one group on one side: the mean over units of each unit's mean, and a band."""

    value: float
    low: float | None
    high: float | None
    n_units: int


def levels(rows: Sequence[UnitRow], confidence: Mapping[str, float] | None = None) -> dict[str, Level]:
    """Per category and ``overall``: the level as the gate computes it, and a display band.

    The band is the percentile bootstrap over units of :func:`pytest_rlgate.gate.stats.paired_bootstrap`
    against a zero baseline, i.e. of the unit means themselves, at each group's *confidence* (the
    gate's level for that comparison, :func:`gate_confidence`; :data:`LEVEL_CONFIDENCE` where none),
    so the bars beside the gate's table are drawn at the table's level.
    """
    per_unit: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        per_unit[row["category"]][row["unit"]].append(row["reward"])
        per_unit["overall"][row["unit"]].append(row["reward"])
    out = {}
    for group, units in per_unit.items():
        means = np.array([np.mean(v) for v in units.values()])
        low = high = None
        if len(means) >= 2:
            band = paired_bootstrap(np.zeros_like(means), means, n_resamples=LEVEL_RESAMPLES,
                                    confidence_level=(confidence or {}).get(group, LEVEL_CONFIDENCE),
                                    method="percentile", rng=LEVEL_SEED)
            low, high = band.confidence_interval
        out[group] = Level(float(means.mean()), low, high, len(means))
    return out


def gate_confidence(gate: Mapping[str, Any] | None) -> dict[str, float]:
    """Each group's two-sided confidence in the gate's pass@1 table (``1 - 2 level``: 98.7 % for a level
    of 0.0065), where the gate recorded a level."""
    return {g: 1.0 - 2.0 * float(c["level"]) for g, c in pass_comparisons(gate).items()
            if isinstance(c.get("level"), (int, float)) and 0 < c["level"] < 0.5}


def pass_comparisons(gate: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The gate's pass@1 comparisons by group."""
    if gate is None:
        return {}
    return {c["group"]: c for c in gate["comparisons"] if c["metric"] == "pass@1"}


def groups(run: ReportData) -> list[str]:
    """``overall`` first, then the categories in name order."""
    names = set(pass_comparisons(run.gate))
    for rows in [*run.before.values(), run.after or []]:
        names.update(r["category"] for r in rows)
    if names:
        names.add("overall")
    return sorted(names, key=lambda g: (g != "overall", g))


def series(
    records: Sequence[Mapping[str, Any]], candidates: Sequence[str]
) -> tuple[str | None, list[float], list[float]]:
    """(key used, steps, values) for the first candidate key with any finite number."""
    for key in candidates:
        points = sorted((float(m["step"]), float(m[key])) for m in records
                        if is_number(m.get(key)) and math.isfinite(m[key]))
        if points:
            return key, [p[0] for p in points], [p[1] for p in points]
    return None, [], []
