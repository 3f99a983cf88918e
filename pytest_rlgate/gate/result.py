"""What a one-adapter gate returns: one record per (metric, group) comparison, and the result.

Plain frozen records, each field declared once: the JSON shape (``to_dict``) and its inverse
(``from_dict``) follow from the fields (:mod:`.record`), so a run's gate.json reads back as
the result the run printed; the text they print lives in :mod:`.text`, which reads these
types, so the methods that print import it when called (no import circle, and tabulate
loads only when a result is printed). Each comparison keeps
the judgement it got (:class:`~.verdicts.Failure`, or None), and the result its
:class:`~.options.GateOptions`, so every face reads one judgement and the command that
reproduces it is generated from the options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from .family import FamilyTest
from .flips import Flip
from .options import N_RESAMPLES, GateOptions
from .record import from_record, to_record
from .text import blind_text, render_failure, render_report, render_table, settings_line
from .verdicts import Failure

__all__ = ["Blind", "Comparison", "GateResult", "GateSides"]


@dataclass(frozen=True)
class Comparison:
    """One (metric, group) before/after comparison over paired units, and its judgement.

    ``low``/``high`` are the interval at the one-sided ``level`` the family test set (so the
    verdict is exactly what the interval shows); ``p_less`` is the comparison's own paired t
    p-value and ``p_adjusted`` the smallest run-level false-fail at which it would regress.
    """

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
    #: how many scenarios lost at all, and how many beyond those shown lost as much as the last shown
    lost: int = 0
    tied: int = 0
    #: the release policy's tier and the line that decided it (None without a policy)
    tier: str | None = None
    decided_by: str | None = None
    #: the one-sided level of the interval (each side): the family's marginal level, or (1 - confidence) / 2
    level: float | None = None
    #: units that went from every reply passing to none (pass^K and pass@1 alike)
    severe: int = 0
    #: why it failed the gate; None when it did not
    failure: Failure | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def size(self) -> str:
        """``"15 units x 4"``, or ``"15 units x 4 (before) / 8 (after)"`` when the sides' k differ."""
        if self.k_before is None or self.k_before == self.k_after:
            return f"{self.n_units} units x {self.k}"
        return f"{self.n_units} units x {self.k_before} (before) / {self.k_after} (after)"

    def to_dict(self) -> dict[str, Any]:
        return dict(to_record(self))

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Comparison:
        """The inverse of :meth:`to_dict` (a row of a run's gate.json)."""
        return from_record(cls, record)


@dataclass(frozen=True)
class Blind:
    """A category whose holdout cannot see the drop: its size, the drop and the power it has."""

    category: str
    n_units: int
    k: float
    drop: float
    #: the chance the gate calls the drop regressed (0 under the gate's minimum of scenarios)
    power: float
    #: a release policy rule asks the holdout to see the drop: its line, and the gate fails
    decided_by: str | None = None

    @property
    def fails(self) -> bool:
        return self.decided_by is not None

    def text(self, before: str = "BEFORE.jsonl") -> str:
        """``no_id (3 scenarios x 4) sees a 0.20 drop with 31% power, not 80%: ...`` (:func:`~.text.blind_text`)."""
        return blind_text(to_record(self), before)


@dataclass(frozen=True)
class GateSides:
    """What the gate read: the sides' labels and headers, and what the options resolved to."""

    before: str
    after: tuple[str, ...]  #: one label per after side (a recipe has one per training seed)
    env: str | None = None  #: the environment the options named
    guards: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()  #: the declared categories
    headers: Mapping[str, object] = field(default_factory=dict)
    dropped_units: Mapping[str, int] = field(default_factory=dict)


class JudgedResult:
    """What a gate result (one adapter's or a recipe's) derives from its comparisons, the
    failures of its sides and its options; the fields are the subclass dataclass's."""

    comparisons: tuple[Any, ...]
    options: GateOptions
    side_failures: tuple[str, ...]
    #: what :meth:`comparison` calls this result when a comparison is missing
    _named = "gate"

    @property
    def failures(self) -> tuple[str, ...]:
        return self.side_failures + tuple(c.failure.text for c in self.comparisons if c.failure is not None)

    @property
    def passed(self) -> bool:
        return not self.side_failures and not any(c.failure for c in self.comparisons)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def method(self) -> str:
        return self.options.method

    @property
    def confidence_level(self) -> float:
        return float(self.options.confidence_level)

    @property
    def seed(self) -> int | None:
        return self.options.bootstrap_seed

    @property
    def margin(self) -> float:
        return float(self.options.margin)

    def comparison(self, metric: str, group: str) -> Any:
        """The comparison of *metric* in *group*, e.g. ``result.comparison("pass@1", "no_id")``."""
        for c in self.comparisons:
            if (c.metric, c.group) == (metric, group):
                return c
        known = ", ".join(sorted({f"{c.metric}/{c.group}" for c in self.comparisons}))
        raise UsageError(f"no comparison {metric}/{group} in this {self._named}; it has {known}")


@dataclass(frozen=True)
class GateResult(JudgedResult):
    """Every comparison, what failed, and the rule that decided it.

    ``failures`` are the comparisons' own failures after the failures of the sides
    (``side_failures``: a category on one side only, a required one missing).
    """

    __record_properties__ = ("passed", "failures", "method", "confidence_level", "n_resamples", "seed", "margin")

    comparisons: tuple[Comparison, ...]
    rule: str
    options: GateOptions
    sides: GateSides
    family: FamilyTest | None = None
    side_failures: tuple[str, ...] = ()
    unit: str = "scenario"
    warnings: tuple[str, ...] = ()
    #: the categories whose holdout cannot see ``options.sees_drop`` (:mod:`.sees`), named above the table
    blind: tuple[Blind, ...] = ()

    @property
    def n_resamples(self) -> int:
        """Resamples (or sign flips) the intervals drew; 0 when nothing was drawn (paired t, each on its own)."""
        drawn = self.options.method != "t" or (self.family is not None and self.family.draws > 0)
        return int(self.options.n_resamples) if drawn else 0

    def comparison(self, metric: str, group: str) -> Comparison:
        """The comparison of *metric* in *group*, e.g. ``result.comparison("pass@1", "no_id")``."""
        found: Comparison = super().comparison(metric, group)
        return found

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``rlgate gate --json`` (and ``--rlgate-report`` entries, a run's gate.json)."""
        return dict(to_record(self))

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> GateResult:
        """The inverse of :meth:`to_dict`: a run's gate.json as the result the run printed.

        A record written before the result kept its options and sides (a run folder of an
        older release) is read through :func:`_older_record`.

        :raises DataError: the record is not ``GateResult.to_dict()``'s shape.
        """
        record = record if "sides" in record else _older_record(record)
        options = record.get("options")
        if isinstance(options, Mapping) and "policy" in options:  # the release policy's older key
            options = {("release_policy" if k == "policy" else k): v for k, v in options.items()}
            record = {**record, "options": options}
        return from_record(cls, record)

    def settings_line(self) -> str:
        """How the intervals were made: enough to reproduce the run from the output alone."""
        return settings_line(self.to_dict())

    def table(self, *, verbose: bool = True) -> str:
        """The aligned table (every comparison, or only the failing/borderline ones)."""
        return render_table(self.to_dict(), verbose=verbose)

    def report(self, *, verbose: bool = True) -> str:
        """Header, table, rule and failures: what ``rlgate gate`` prints."""
        return render_report(self.to_dict(), verbose=verbose)

    def message(self) -> str:
        """The :class:`RegressionError` text: count, settings, failing rows, rule, remedy."""
        return render_failure(self.to_dict())


def _older_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """An older gate.json (settings at the top, an untyped ``options`` dict, failures as sentences) in today's shape.

    Its comparisons' failures are recovered from the sentences that name them, so an old run
    still reports which comparison failed; a sentence naming no comparison is a side failure.
    """
    old = dict(record.get("options") or {})
    settings = {"method": record.get("method", "expanded"), "confidence_level": record.get("confidence_level", 0.95),
                "n_resamples": record.get("n_resamples") or N_RESAMPLES, "bootstrap_seed": record.get("seed"),
                "margin": record.get("margin", 0.10), "family_level": None}
    for key in ("max_drop", "require_moved", "fail_on_inconclusive", "allow_env_change", "shared_units_only",
                "show_flips", "flips_in", "policy", "env"):
        if old.get(key) is not None:
            settings[key] = old[key]
    if old.get("guards") is not None:
        settings["guards"] = list(old["guards"])
    failures = list(record.get("failures") or ())
    comparisons = []
    for c in record.get("comparisons") or ():
        named = [f for f in failures if f.startswith((f"{c['metric']} regressed in {c['group']}:",
                                                      f"{c['metric']} in {c['group']} "))]
        kind = "regressed" if named and " regressed in " in named[0] else "max_drop"
        comparisons.append({**c, "failure": {"kind": kind, "text": named[0]} if named else None})
        failures = [f for f in failures if f not in named[:1]]
    after = old.get("after")
    return {"comparisons": comparisons, "rule": record.get("rule", ""), "options": settings,
            "sides": {"before": str(old.get("before") or "before"),
                      "after": [str(a) for a in after] if isinstance(after, list) else [str(after or "after")],
                      "env": old.get("env"), "guards": list(old.get("guards") or ()),
                      "categories": list(old.get("categories") or ()), "headers": old.get("headers") or {},
                      "dropped_units": old.get("dropped_units") or {}},
            "side_failures": failures, "warnings": list(record.get("warnings") or ())}
