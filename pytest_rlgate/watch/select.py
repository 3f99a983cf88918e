"""Which checkpoint of a watched run to ship: the best one the release policy passes, the ones that cannot
be told apart from it, and a confirmation of the pick on a fresh sample.

The choice is made on the *gated task metrics* (pass@1 or a guard, in a group), never on the
training reward: a reward that saturates while the task collapses picks the worst
checkpoint. A candidate is a look whose house gate passed (every comparison its release
policy judges) and that the sequential test did not stop on; the best is the candidate with
the highest criterion delta against step 0.

The best of several noisy estimates is biased upwards (the winner's curse), and its gate
was one of many. So the pick is confirmed once, by the ordinary gate at its full level, on
rows sampled afresh at another seed (step 0's too, when it can be re-sampled): those rows
played no part in the choice, so the confirmation's delta and interval are what a gate of
that checkpoint alone would say. ``tests/test_select.py`` checks both by simulation.

The *tie set* is every candidate that an exact one-sided paired test (Holm across the
candidates, held together at the family level) cannot call worse than the best on the criterion: the checkpoints a
release owner may ship instead, on this evidence, for other reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..data.rows import RowInput, load_rows
from ..errors import DataError, UsageError
from ..gate.adapter import compare_adapter
from ..gate.options import FAMILY_LEVEL, LEVEL, old_spelling
from ..gate.result import GateResult
from ..gate.sequential import BagTest, bag_test, lattice, tarone_holm
from ..records import Row
from .looks import PASS, Look, Units, bag_sums

__all__ = ["CONFIRM_SEED_OFFSET", "CRITERION", "SELECTION", "Candidate", "Confirmation", "Selection", "confirm_pick",
           "parse_criterion", "select_checkpoint"]

#: Rank checkpoints by the overall pass@1 delta against step 0 unless told otherwise.
CRITERION = "pass@1/overall"
#: The confirmation samples at ``seed + CONFIRM_SEED_OFFSET``: rows no look has seen.
CONFIRM_SEED_OFFSET = 1000
#: Where a watched run records its choice.
SELECTION = "selection.json"


def parse_criterion(criterion: str) -> tuple[str, str]:
    """``metric/group`` -> (the gate's metric name, group): ``pass@1/overall``, ``well_formed/no_id``."""
    metric, sep, group = str(criterion).partition("/")
    if not sep or not metric or not group:
        raise UsageError(f"select={criterion!r}: say metric/group, e.g. pass@1/overall or pass@1/with_id "
                         "(a gated metric: pass@1 or a guard; never the training reward)")
    if metric in ("reward", "rewards", "loss"):
        raise UsageError(f"select={criterion!r}: checkpoints are chosen by a gated task metric (pass@1 or a "
                         "guard), never the training reward, which can saturate while the task collapses")
    return (metric if metric == PASS or metric.startswith("marker:") else f"marker:{metric}"), group


@dataclass(frozen=True)
class Candidate:
    """One look's checkpoint as the selection saw it."""

    step: int
    look: int
    passed: bool  #: its house gate passed and the sequential test did not stop on it
    score: float | None  #: the criterion's delta against step 0 at that look
    verdicts: Mapping[str, str]  #: ``metric/group`` -> the house gate's verdict, every comparison
    p_worse: float | None = None  #: exact p that it is worse than the best (None: the best, or not a candidate)
    tied: bool = False  #: cannot be told apart from the best

    def to_dict(self) -> dict[str, object]:
        return {**self.__dict__, "verdicts": dict(self.verdicts)}


@dataclass(frozen=True)
class Confirmation:
    """The pick gated once more, at the gate's full level, on rows that played no part in choosing it."""

    step: int
    seed: int
    base: str  #: ``fresh`` (step 0 re-sampled at the same seed) or ``stored`` (the run's step-0 rows)
    gate: GateResult

    @property
    def passed(self) -> bool:
        return self.gate.passed

    def to_dict(self) -> dict[str, object]:
        return {"step": self.step, "seed": self.seed, "base": self.base, "passed": self.passed,
                "gate": self.gate.to_dict()}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Confirmation:
        return cls(step=int(record["step"]), seed=int(record["seed"]), base=str(record["base"]),
                   gate=GateResult.from_dict(record["gate"]))


@dataclass(frozen=True)
class Selection:
    """The checkpoint to ship, the ones as good, and (once run) the confirmation."""

    criterion: str
    alpha: float
    candidates: tuple[Candidate, ...]
    best: int | None  #: the chosen step (None: no checkpoint passed)
    tied: tuple[int, ...]
    stopped_at: int | None = None
    confirmation: Confirmation | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: every confirmation the run recorded, one per step: a selection by another criterion keeps them,
    #: so a pick confirmed where only the training process could sample (GateCallback) is never lost
    confirmed: tuple[Confirmation, ...] = field(default_factory=tuple)

    @property
    def shipped(self) -> int | None:
        """The step to ship: the best, if its confirmation (when there is one) passed."""
        if self.best is None or (self.confirmation is not None and not self.confirmation.passed):
            return None
        return self.best

    def with_confirmation(self, confirmation: Confirmation) -> Selection:
        kept = {c.step: c for c in self.confirmed}
        kept[confirmation.step] = confirmation
        return replace(self, confirmation=confirmation, confirmed=tuple(kept[step] for step in sorted(kept)))

    def keeping(self, recorded: Selection | None) -> Selection:
        """This selection with every confirmation *recorded* holds, and its pick's when one confirmed that step.

        A confirmation gates one checkpoint on a fresh sample, whatever criterion picked it, so
        a choice by another criterion (``rlgate select --select pass@1/with_id``) keeps the
        run's confirmations, and choosing that checkpoint again finds its confirmation.
        """
        if recorded is None:
            return self
        out = self
        for confirmation in (*recorded.confirmed, *((recorded.confirmation,) if recorded.confirmation else ())):
            if all(c.step != confirmation.step for c in out.confirmed):
                out = replace(out, confirmed=tuple(sorted((*out.confirmed, confirmation), key=lambda c: c.step)))
        mine = next((c for c in out.confirmed if c.step == out.best), None)
        return out if out.confirmation is not None or mine is None else replace(out, confirmation=mine)

    def summary(self) -> str:
        """What a terminal shows: the pick, the tie set, the confirmation."""
        if self.best is None:
            lines = [f"no checkpoint passed the gate ({len(self.candidates)} looked at); ship step 0"]
        else:
            best = next(c for c in self.candidates if c.step == self.best)
            lines = [f"best by {self.criterion}: step {self.best} (delta {best.score:+.3f} against step 0)",
                     "cannot be told apart from it: " + (", ".join(f"step {s}" for s in self.tied if s != self.best)
                                                        or "none")]
        if self.confirmation is not None:
            c = next((x for x in self.confirmation.gate.comparisons
                      if (x.metric, x.group) == parse_criterion(self.criterion)), None)
            detail = "" if c is None else (f": delta {c.delta:+.3f}" + (
                f" [{c.low:+.3f}, {c.high:+.3f}]" if c.low is not None and c.high is not None else "")
                + f", {c.verdict}")
            lines.append(f"confirmation on a fresh sample (seed {self.confirmation.seed}, {self.confirmation.base} "
                         f"step 0) {'PASSED' if self.confirmation.passed else 'FAILED'}{detail}")
        elif self.best is not None and self.confirmed:
            others = ", ".join(f"step {c.step}" for c in self.confirmed)
            lines.append(f"not confirmed on a fresh sample (this run confirmed {others}; `rlgate select --confirm` "
                         "confirms a watch folder's pick)")
        lines += list(self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {"criterion": self.criterion, "alpha": self.alpha, "best": self.best, "tied": list(self.tied),
                "shipped": self.shipped, "stopped_at": self.stopped_at,
                "candidates": [c.to_dict() for c in self.candidates],
                "confirmation": None if self.confirmation is None else self.confirmation.to_dict(),
                "confirmed": [c.to_dict() for c in self.confirmed], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Selection:
        """A ``selection.json`` as the run wrote it."""
        try:
            confirmation = record.get("confirmation")
            return cls(criterion=str(record["criterion"]), alpha=float(record["alpha"]),
                       candidates=tuple(Candidate(**c) for c in record["candidates"]),
                       best=record["best"], tied=tuple(record["tied"]), stopped_at=record.get("stopped_at"),
                       confirmation=None if confirmation is None else Confirmation.from_dict(confirmation),
                       notes=tuple(record.get("notes") or ()),
                       confirmed=tuple(Confirmation.from_dict(c) for c in record.get("confirmed") or ()))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"not a checkpoint selection (Selection.to_dict()): {exc}") from None


def _score(gate: GateResult, metric: str, group: str) -> float | None:
    c = next((c for c in gate.comparisons if c.metric == metric and c.group == group), None)
    return None if c is None else float(c.delta)


def _worse_p(best: Units, other: Units, group: str) -> float:
    """Exact one-sided p that *other* is worse than *best* on the metric, unit by unit, in *group*."""
    units, sums, rows = bag_sums([best, other])
    keep = [i for i, u in enumerate(units) if group == "overall" or u[0] == group]
    if not keep:
        return 1.0
    sums, rows = sums[keep, :, 0], rows[keep]
    if bool(np.all(rows == rows[0])) and bool(np.all(sums == np.round(sums))):
        return bag_test(sums.astype(np.int64)).p
    return bag_test(lattice(sums / rows[:, None])[0]).p


def select_checkpoint(looks: Sequence[Look], rows: Mapping[int, RowInput], *,
                      criterion: str = CRITERION, family_level: float = FAMILY_LEVEL, stopped_at: int | None = None,
                      alpha: float | None = None) -> Selection:
    """Choose among the *looks* of a watched run (each with its house gate): see the module docstring.

    *rows* maps each look's step to its graded rows (for the tie set's paired tests, held
    together at *family_level*; ``alpha=`` is its old spelling).
    """
    metric, group = parse_criterion(criterion)
    if alpha is not None:
        family_level = old_spelling("alpha", alpha, "family_level")
    if LEVEL.problem(family_level) is not None:
        raise UsageError(f"family_level={family_level!r}: the tie set's tests are held together at it, "
                         f"{LEVEL.describe()}")
    gated = [look for look in looks if look.gate is not None]
    if looks and not gated:
        raise UsageError("the looks carry no house gate (SequentialGate(report=False)); selection needs them")
    names = sorted({(c.metric, c.group) for look in gated for c in look.gate.comparisons})  # type: ignore[union-attr]
    if gated and (metric, group) not in names:
        shown = ", ".join(f"{m.removeprefix('marker:')}/{g}" for m, g in names)
        raise UsageError(f"select={criterion!r}: no such gated comparison; one of {shown}")
    candidates = []
    for look in gated:
        assert look.gate is not None
        stopped = bool(look.regressed) or (stopped_at is not None and look.step >= stopped_at)
        candidates.append(Candidate(step=look.step, look=look.look, passed=look.gate.passed and not stopped,
                                    score=_score(look.gate, metric, group),
                                    verdicts={f"{c.metric.removeprefix('marker:')}/{c.group}": c.verdict
                                              for c in look.gate.comparisons}))
    passing = [c for c in candidates if c.passed and c.score is not None]
    if not passing:
        return Selection(criterion=criterion, alpha=family_level, candidates=tuple(candidates), best=None, tied=(),
                         stopped_at=stopped_at)
    best = max(passing, key=lambda c: (c.score, c.step))
    metrics = (metric if metric == PASS else metric.removeprefix("marker:"),)
    best_units = Units.of(_rows(rows, best.step), metrics)
    others = [c for c in passing if c.step != best.step]
    p_values = [_worse_p(best_units, Units.of(_rows(rows, c.step), metrics), group) for c in others]
    reject, _level = tarone_holm([BagTest(p=p, min_p=0.0, n_units=1) for p in p_values], family_level) if others \
        else ([], [])
    worse = {c.step: (p, r) for c, p, r in zip(others, p_values, reject)}
    marked = tuple(replace(c, p_worse=worse[c.step][0] if c.step in worse else None,
                           tied=c.step == best.step or (c.step in worse and not worse[c.step][1]))
                   for c in candidates)
    return Selection(criterion=criterion, alpha=family_level, candidates=marked, best=best.step,
                     tied=tuple(c.step for c in marked if c.tied), stopped_at=stopped_at)


def _rows(rows: Mapping[int, RowInput], step: int) -> list[Row]:
    if step not in rows:
        raise DataError(f"no graded rows for step {step}; the selection needs every candidate's rows")
    return list(load_rows(rows[step]))


def confirm_pick(selection: Selection, base_rows: RowInput, pick_rows: RowInput, *, seed: int,
                 base: str = "fresh", **gate_options: Any) -> Selection:
    """The selection with its pick confirmed: the ordinary gate of *pick_rows* (sampled afresh at *seed*)
    against *base_rows* (step 0 re-sampled at *seed* when it can be, else the stored rows), at full level."""
    if selection.best is None:
        raise UsageError("no checkpoint was picked, so there is nothing to confirm")
    gate = compare_adapter(base_rows, pick_rows, None, **{"by": "category", **gate_options})
    return selection.with_confirmation(Confirmation(step=selection.best, seed=seed, base=base, gate=gate))
