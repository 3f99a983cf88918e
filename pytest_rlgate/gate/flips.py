"""Flips: the scenarios behind a verdict, each with its pass counts and a reply from each side.

A failing gate says *that* no_id regressed; a reviewer's next question is *which* scenarios
broke and what the policy now says on them. While the gate streams the rows it keeps, per
(category, scenario), the best reply before (the first that passed) and the worst after
(the first that failed), and the same per guarded marker, each cut to a thousand
characters: one string per scenario and column, so nothing is read twice. After the verdicts,
the scenarios of a failing comparison that lost the most are its *flips*: before -> after
counts (``4/4 -> 0/4``), the reply that passed before and the one that failed after, each
described in the environment's words where it has them (``Env.describe_reply``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from ..data.records import Case
from .record import from_record, to_record

if TYPE_CHECKING:  # pragma: no cover
    from ..environment.contract import Env

__all__ = ["KEEP", "Flip", "Page", "ReplyBook", "flips_for", "shorten"]
#: characters of a reply kept while reading (enough for any shortened form shown)
KEEP = 1000
#: characters of a reply shown
_SHOW = 160


def shorten(text: str, width: int = _SHOW) -> str:
    """One line, at most *width* characters, the cut marked with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


@dataclass(frozen=True)
class Flip:
    """One scenario of a comparison: its before -> after counts and one reply from each side.

    ``before``/``after`` are the sums of the metric over the scenario's rows (passes for
    pass@1) and ``before_rows``/``after_rows`` the rows summed; the replies are shortened,
    and ``*_described`` is the environment's description of each (None without one).
    """

    __record_properties__ = ("counts", "loss")

    unit: str
    before: float
    after: float
    before_rows: int
    after_rows: int
    before_reply: str | None = None
    after_reply: str | None = None
    before_described: str | None = None
    after_described: str | None = None

    @property
    def loss(self) -> float:
        """How much the scenario's mean fell (positive: it lost)."""
        return self.before / max(self.before_rows, 1) - self.after / max(self.after_rows, 1)

    @property
    def counts(self) -> str:
        """``4/4 -> 0/4`` for counts; ``0.75 -> 0.25`` for a marker that is not 0/1."""
        if float(self.before).is_integer() and float(self.after).is_integer():
            return f"{int(self.before)}/{self.before_rows} -> {int(self.after)}/{self.after_rows}"
        return f"{self.before / max(self.before_rows, 1):.2f} -> {self.after / max(self.after_rows, 1):.2f}"

    def to_dict(self) -> dict[str, object]:
        return dict(to_record(self))

    @classmethod
    def from_dict(cls, record: Mapping[str, object]) -> Flip:
        """The inverse of :meth:`to_dict` (a flip of a run's gate.json)."""
        return from_record(cls, record)

    def lines(self, indent: str = "  ") -> list[str]:
        """The flip as text: the counts line, then each side's reply with its description."""
        out = [f"{indent}{self.unit}  {self.counts}"]
        for side, reply, described in (("before", self.before_reply, self.before_described),
                                       ("after", self.after_reply, self.after_described)):
            if reply is not None:
                about = f"  ({described})" if described else ""
                out.append(f"{indent}  {side + ':':<7} {shorten(reply)!r}{about}")
        return out


#: one category's page of a book: per column (pass@1, then each guard), unit -> the best value
#: seen, unit -> its reply, and unit -> its case (None when the book keeps no cases)
Page = tuple[list[dict[str, float]], list[dict[str, str]], "list[dict[str, Case | None]] | None"]


class ReplyBook:
    """One side's example reply per (category, unit) and column, kept while the rows stream past.

    A flip shows the reply a unit passed with before and the one it failed with after, so
    the before side's book (``high``) keeps, per column (pass@1, then each guarded marker),
    the first reply with the highest value and the after side's the first with the lowest:
    one reply per unit and column, cut to :data:`KEEP` characters, in dicts of strings and
    numbers that the garbage collector never walks. The row's case is kept beside it only
    with ``cases`` (an environment that describes replies reads it).
    """

    def __init__(self, guards: Sequence[str], *, high: bool, cases: bool = False) -> None:
        self.guards = tuple(guards)
        self.high = high
        #: values are kept times this, so the best is always the largest
        self.sign = 1.0 if high else -1.0
        self.cases = cases
        self.pages: dict[str, Page] = {}

    def page(self, category: str) -> Page:
        """The category's page (created empty)."""
        found = self.pages.get(category)
        if found is None:
            width = 1 + len(self.guards)
            found = self.pages[category] = ([{} for _ in range(width)], [{} for _ in range(width)],
                                            [{} for _ in range(width)] if self.cases else None)
        return found

    def example(self, category: str, unit: str, column: int) -> tuple[str | None, Case | None]:
        """The reply (and case) with the book's best value of *column* (2 = pass@1) for *unit*."""
        found = self.pages.get(category)
        if found is None:
            return None, None
        reply = found[1][column - 2].get(unit)
        case = None if found[2] is None else found[2][column - 2].get(unit)
        return reply, case


def flips_for(
    category: str,
    column: int,
    before_units: Mapping[str, Sequence[float]],
    after_units: Mapping[str, Sequence[float]],
    before_book: ReplyBook | None,
    after_book: ReplyBook | None,
    env: Env | None,
    limit: int | None,
    *,
    replies: int | None = None,
) -> tuple[Flip, ...]:
    """The *limit* units of *category* that lost the most on *column* (ties by name; None: every one that lost).

    ``*_units[unit] = [rows, prompts, sum reward, sum marker...]`` (the gate's per-unit sums).
    The before reply is the unit's best before (passing) one, the after reply its worst after one,
    of the *replies* column (default *column*: a pass^K column shows pass@1's replies).
    """
    if limit is not None and limit <= 0:
        return ()
    losses = _losses(column, before_units, after_units)
    shown = column if replies is None else replies
    out = []
    for _, unit in (sorted(losses) if limit is None else heapq.nsmallest(limit, losses)):
        b, a = before_units[unit], after_units[unit]
        before_reply, before_case = (None, None) if before_book is None else before_book.example(
            category, unit, shown)
        after_reply, after_case = (None, None) if after_book is None else after_book.example(
            category, unit, shown)
        out.append(Flip(
            unit=str(unit), before=_number(b[column]), after=_number(a[column]), before_rows=int(b[0]),
            after_rows=int(a[0]), before_reply=None if before_reply is None else shorten(before_reply),
            after_reply=None if after_reply is None else shorten(after_reply),
            before_described=_describe(env, before_reply, before_case),
            after_described=_describe(env, after_reply, after_case),
        ))
    return tuple(out)


@runtime_checkable
class UnitMatrix(Protocol):
    """Per-unit sums held as a matrix (a row per unit) and the unit -> row index: the gate's own tables."""

    index: dict[str, int]
    matrix: np.ndarray


def _losses(column: int, before_units: Mapping[str, Sequence[float]],
            after_units: Mapping[str, Sequence[float]]) -> list[tuple[float, str]]:
    """``(-loss, unit)`` of every unit on both sides whose mean of *column* fell (loss > 0)."""
    if isinstance(before_units, UnitMatrix) and isinstance(after_units, UnitMatrix):
        names = list(before_units.index)
        b = before_units.matrix[np.fromiter(before_units.index.values(), dtype=np.intp, count=len(names))]
        where = np.fromiter(map(after_units.index.get, names, itertools.repeat(-1)), dtype=np.intp,
                            count=len(names))
        a = after_units.matrix[np.maximum(where, 0)] if len(after_units.matrix) else np.zeros_like(b)
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = b[:, column] / b[:, 0] - a[:, column] / a[:, 0]
        kept = (where >= 0) & (b[:, 0] != 0) & (a[:, 0] != 0) & (loss > 0)
        return [(-x, unit) for x, unit in zip(loss[kept].tolist(), itertools.compress(names, kept.tolist()))]
    losses = []
    for unit, before in before_units.items():
        after = after_units.get(unit)
        if after is None or not before[0] or not after[0]:
            continue
        lost = before[column] / before[0] - after[column] / after[0]
        if lost > 0:
            losses.append((-lost, unit))
    return losses


def _number(x: float) -> float:
    return int(x) if float(x).is_integer() else round(float(x), 4)


def _describe(env: Env | None, reply: str | None, case: Case | None) -> str | None:
    if env is None or reply is None:
        return None
    return env.describe_reply(reply, case if isinstance(case, Mapping) else None)
