"""What a one-adapter gate returns: one record per (metric, group) comparison, and the result.

Plain frozen records, so a result can be written as JSON (``to_dict``) and read back
(``from_dict``) without the statistics; the text they print lives in :mod:`.text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..errors import DataError
from .flips import Flip
from .text import render_failure, render_report, render_table, settings_line

__all__ = ["Comparison", "ComparisonKeys", "ComparisonRecord", "GateRecord", "GateResult"]


class ComparisonKeys(TypedDict):
    """The keys every comparison record has, one adapter's or a recipe's: what reports read."""

    metric: str
    group: str
    n_units: int
    k: float
    before: float
    after: float
    delta: float
    low: float | None
    high: float | None
    verdict: str
    mde: float | None
    flags: list[str]


class ComparisonRecord(ComparisonKeys):
    """:meth:`Comparison.to_dict`: one row of ``rlgate gate --json`` and of a run's gate.json."""

    p_less: float | None
    p_adjusted: float | None
    noise: float | None
    k_before: float | None
    k_after: float | None
    flips: list[Mapping[str, object]]
    tier: str | None
    decided_by: str | None


class GateRecord(TypedDict):
    """:meth:`GateResult.to_dict`: the JSON shape of ``rlgate gate --json`` (and ``--rlgate-report`` entries)."""

    passed: bool
    rule: str
    comparisons: list[ComparisonRecord]
    failures: list[str]
    method: str
    confidence_level: float
    n_resamples: int
    seed: int | None
    margin: float
    holm: bool
    warnings: list[str]
    options: dict[str, object]


@dataclass(frozen=True)
class Comparison:
    """One (metric, group) before/after comparison over paired units."""

    metric: str
    group: str
    n_units: int
    k: float
    before: float
    after: float
    delta: float
    low: float | None
    high: float | None
    verdict: str
    mde: float | None = None
    p_less: float | None = None
    p_adjusted: float | None = None
    noise: float | None = None
    flags: tuple[str, ...] = ()
    #: rows per prompt on each side; ``k`` pools both (they differ when a k = 8 candidate
    #: is gated against a k = 4 baseline)
    k_before: float | None = None
    k_after: float | None = None
    #: the scenarios that lost the most, when the comparison failed (or every one was asked for)
    flips: tuple[Flip, ...] = ()
    #: the release policy's tier and the line that decided it (None without a policy)
    tier: str | None = None
    decided_by: str | None = None

    @property
    def size(self) -> str:
        """``"15 units x 4"``, or ``"15 units x 4 (before) / 8 (after)"`` when the sides' k differ."""
        if self.k_before is None or self.k_before == self.k_after:
            return f"{self.n_units} units x {self.k}"
        return f"{self.n_units} units x {self.k_before} (before) / {self.k_after} (after)"

    def to_dict(self) -> ComparisonRecord:
        return {
            "metric": self.metric,
            "group": self.group,
            "n_units": self.n_units,
            "k": self.k,
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "low": self.low,
            "high": self.high,
            "verdict": self.verdict,
            "mde": self.mde,
            "p_less": self.p_less,
            "p_adjusted": self.p_adjusted,
            "noise": self.noise,
            "flags": list(self.flags),
            "k_before": self.k_before,
            "k_after": self.k_after,
            "flips": [f.to_dict() for f in self.flips],
            "tier": self.tier,
            "decided_by": self.decided_by,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Comparison:
        """The inverse of :meth:`to_dict` (a row of a run's gate.json)."""
        return cls(**{**record, "flags": tuple(record.get("flags") or ()),
                      "flips": tuple(Flip.from_dict(f) for f in record.get("flips") or ())})


@dataclass(frozen=True)
class GateResult:
    """Every comparison, what failed, and the rule that decided it."""

    comparisons: tuple[Comparison, ...]
    failures: tuple[str, ...]
    rule: str
    method: str
    confidence_level: float
    n_resamples: int
    seed: int | None
    margin: float
    holm: bool
    unit: str = "scenario"
    warnings: tuple[str, ...] = ()
    options: Mapping[str, object] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.failures

    def __bool__(self) -> bool:
        return self.passed

    def to_dict(self) -> GateRecord:
        """The JSON shape of ``rlgate gate --json`` (and ``--rlgate-report`` entries)."""
        return {
            "passed": self.passed,
            "rule": self.rule,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "failures": list(self.failures),
            "method": self.method,
            "confidence_level": self.confidence_level,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "margin": self.margin,
            "holm": self.holm,
            "warnings": list(self.warnings),
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> GateResult:
        """The inverse of :meth:`to_dict`: a run's gate.json as the result the run printed.

        :raises DataError: the record is not ``GateResult.to_dict()``'s shape.
        """
        try:
            return cls(comparisons=tuple(Comparison.from_dict(c) for c in record["comparisons"]),
                       failures=tuple(record["failures"]), rule=record["rule"], method=record["method"],
                       confidence_level=record["confidence_level"], n_resamples=record["n_resamples"],
                       seed=record["seed"], margin=record["margin"], holm=record["holm"],
                       warnings=tuple(record.get("warnings") or ()), options=dict(record.get("options") or {}))
        except (KeyError, TypeError) as exc:
            raise DataError(f"not a gate result (GateResult.to_dict()): {exc}") from None

    def settings_line(self) -> str:
        """How the intervals were made: enough to reproduce the run from the output alone."""
        return settings_line(self)

    def table(self, *, verbose: bool = True) -> str:
        """The aligned table (every comparison, or only the failing/borderline ones)."""
        return render_table(self, verbose=verbose)

    def report(self, *, verbose: bool = True) -> str:
        """Header, table, rule and failures: what ``rlgate gate`` prints."""
        return render_report(self, verbose=verbose)

    def message(self) -> str:
        """The :class:`RegressionError` text: count, settings, failing rows, rule, remedy."""
        return render_failure(self)
