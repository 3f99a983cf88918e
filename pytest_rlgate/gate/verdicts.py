"""The gate's judgement: the verdict words, and the one function that fails a comparison.

Every comparison (one adapter's, a recipe's across seeds, a checkpoint's inside a watched
run) speaks this vocabulary, and :func:`judge` alone decides whether it fails the gate: from
its evidence (the verdict its interval earned, the interval, the levels), the release
policy's decision for it (a gate without a policy file runs the default one) and the gate's
options. Each comparison keeps the :class:`Failure` it got, so every face (the terminal, the
pytest failure, JSON, Markdown, HTML, JUnit) reads the same judgement instead of deciding
again. A new rule is a field in :mod:`.options` (or a policy key) and a branch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from .family import FamilyTest
    from .options import GateOptions
    from .release import Decision

__all__ = ["BORDERLINE", "FAILURE_FLAGS", "MIN_UNITS", "ORDER", "RECIPE_VERDICTS", "UNDECIDED", "VERDICTS", "Evidence",
           "Failure", "FailureKind", "Verdict", "interval_verdict", "judge", "rule_text", "verdict_word"]

Verdict = Literal["regressed", "inconclusive", "insufficient", "unresolved", "flat", "moved"]
#: in the order a summary counts them: what fails first, what passed last (``unresolved``: a recipe of one seed)
RECIPE_VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
#: the verdicts of one adapter's comparisons
VERDICTS: tuple[Verdict, ...] = tuple(v for v in RECIPE_VERDICTS if v != "unresolved")
#: the question is still open: too few units, too wide an interval, one training seed
UNDECIDED: frozenset[str] = frozenset({"inconclusive", "insufficient", "unresolved"})
#: worth a look without ``-v``
BORDERLINE: frozenset[str] = UNDECIDED | {"regressed"}
#: sort order of verdicts, what fails first
ORDER: dict[str, int] = {v: i for i, v in enumerate(RECIPE_VERDICTS)}
#: fewer units than this cannot support an interval: the verdict is ``insufficient``
MIN_UNITS = 3

FailureKind = Literal["regressed", "max_drop", "max_relative_drop", "insufficient", "undecided", "not_moved",
                      "severe_flips"]
#: the flag a table shows beside a verdict that failed for a reason the verdict does not say
FAILURE_FLAGS: dict[str, str] = {"max_drop": "below -max_drop", "max_relative_drop": "below -max_relative_drop",
                                 "insufficient": "insufficient in a critical tier", "severe_flips": "severe flips",
                                 "undecided": "fail_on_inconclusive", "not_moved": "did not move"}


def interval_verdict(low: float, high: float, margin: float) -> Verdict:
    """The verdict for an interval: regressed (below 0), moved (above 0), flat (inside ±margin),
    else inconclusive (covers 0 and wider than the margin: too few units to tell)."""
    if high < 0:
        return "regressed"
    if low > 0:
        return "moved"
    if -margin <= low and high <= margin:
        return "flat"
    return "inconclusive"


def verdict_word(verdict: str, failed: bool) -> str:
    """How a table prints a verdict: upper case when that comparison failed the gate (``REGRESSED``)."""
    return verdict.upper() if failed else verdict


@dataclass(frozen=True)
class Failure:
    """Why one comparison failed the gate: the rule's *kind* and the sentence every face prints."""

    kind: FailureKind
    text: str

    @property
    def flag(self) -> str | None:
        """What a table adds to the verdict's flags (None for a regression: the verdict says it)."""
        return FAILURE_FLAGS.get(self.kind)


@dataclass(frozen=True)
class Evidence:
    """What :func:`judge` reads of one comparison, whichever gate made it.

    *size* says what the interval covers (``15 units x 4``); *scope* where the group was
    judged (a recipe's `` across 3 seeds``) and *detail* a gate's own clause (``regressed in
    1 of 3 seeds``); *severe* counts the units that went from all passing to none.
    """

    metric: str
    group: str
    verdict: str
    before: float
    after: float
    delta: float
    low: float | None
    high: float | None
    size: str
    flags: Sequence[str] = ()
    scope: str = ""
    detail: str = ""
    severe: int = 0


def judge(e: Evidence, decision: Decision, options: GateOptions) -> Failure | None:
    """The failure *e* adds to the gate under *decision* (its tier, limits) and *options*, or None.

    In this order: an advisory comparison never fails; a regression fails; then a lower bound
    below ``-max_drop`` or ``-max_relative_drop x before`` (non-inferiority); too few units in
    a critical tier; scenarios that collapsed from all passing to none where the policy asks
    (``severe_flips``); an undecided verdict under ``fail_on_inconclusive``; and ``overall``
    pass@1 that did not move under ``require_moved``.
    """
    if decision.tier == "advisory":
        return None
    tag = f" [{decision.label()}]" if decision.where else ""
    detail = f", {e.detail}" if e.detail else ""
    failure: Failure | None = None
    if e.verdict == "regressed":
        failure = Failure("regressed", f"{e.metric} regressed in {e.group}{e.scope}: {e.before:.3f} -> {e.after:.3f}, "
                                       f"delta {e.delta:+.3f} [{e.low:+.3f}, {e.high:+.3f}]{detail}, {e.size}")
    elif decision.max_drop is not None and e.low is not None and e.low < -decision.max_drop:
        failure = Failure("max_drop", f"{e.metric} in {e.group} may have dropped more than max_drop "
                                      f"{decision.max_drop:.3f}: lower bound {e.low:+.3f} (delta {e.delta:+.3f}, "
                                      f"{e.size})")
    elif decision.max_relative_drop is not None and e.low is not None \
            and e.low < -decision.max_relative_drop * e.before:
        failure = Failure("max_relative_drop", f"{e.metric} in {e.group} may have dropped more than "
                                               f"max_relative_drop {decision.max_relative_drop:.0%} of "
                                               f"{e.before:.3f}: lower bound {e.low:+.3f} ({e.size})")
    elif e.verdict == "insufficient" and decision.tier == "critical":
        failure = Failure("insufficient", f"{e.metric} in {e.group} is insufficient for a critical tier: {e.size} "
                                          f"({', '.join(e.flags)})")
    elif decision.severe_flips and e.severe:
        failure = Failure("severe_flips", f"{e.metric} in {e.group}: {e.severe} scenario"
                                          f"{'s' if e.severe != 1 else ''} went from every reply passing to none "
                                          f"(delta {e.delta:+.3f}, {e.size}; severe_flips)")
    elif options.fail_on_inconclusive and e.verdict in UNDECIDED:
        failure = Failure("undecided", f"{e.metric} in {e.group} is {e.verdict}: delta {e.delta:+.3f}, {e.size} "
                                       "(fail_on_inconclusive)")
    elif options.require_moved and (e.metric, e.group) == ("pass@1", "overall") and e.verdict != "moved":
        failure = Failure("not_moved", f"headline pass@1 overall did not move: {e.verdict}, delta {e.delta:+.3f} "
                                       "(require_moved)")
    return None if failure is None else Failure(failure.kind, failure.text + tag)


def rule_text(metrics: Sequence[str], options: GateOptions, family: FamilyTest | None, *, test: str,
              subject: str = "") -> str:
    """The rule line every report prints: what fails, at which level, and what *flat* means.

    *test* names the interval (``95 % paired t upper bound < 0``); *family* is the family the
    levels were set for (None: each comparison at its own level); *subject* what regressed
    (``the recipe``).
    """
    if family is not None:
        test = f"{test}, the {family.members} comparisons held together at a {family.level:.0%} run-level false-fail"
    parts = [f"fail if {subject}{', '.join(metrics)} regressed overall or in any category ({test})",
             "a category is missing from a side"]
    if options.max_drop is not None:
        parts.append(f"a lower bound is below -{options.max_drop:.2f} (non-inferiority)")
    if options.require_moved:
        parts.append("overall pass@1 did not move up")
    if options.fail_on_inconclusive:
        parts.append("any verdict is inconclusive, insufficient or unresolved")
    return "; or ".join(parts) + f"; flat = interval inside ±{options.margin:.2f}"
