"""Flips: the scenarios behind a verdict, each with its pass counts and a reply from each side.

A failing gate says *that* no_id regressed; a reviewer's next question is *which* scenarios
broke and what the policy now says on them. While the gate streams the rows it keeps, per
(category, scenario) and side, the first passing and the first failing reply (and, per
guarded marker, the first reply for each value it takes), each cut to a thousand characters:
a handful of strings per scenario, so nothing is read twice. After the verdicts,
the scenarios of a failing comparison that lost the most are its *flips*: before -> after
counts (``4/4 -> 0/4``), the reply that passed before and the one that failed after, each
described in the environment's words where it has them (``Env.describe_reply``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..environment.contract import Env

__all__ = ["Flip", "ReplyBook", "flips_for", "shorten"]
#: characters of a reply kept while reading (enough for any shortened form shown)
_KEEP = 1000
#: characters of a reply shown
_SHOW = 160
#: distinct values of one column whose replies a unit keeps (a continuous marker keeps its first few)
_VALUES = 8


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

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "before": self.before, "after": self.after, "before_rows": self.before_rows,
                "after_rows": self.after_rows, "counts": self.counts, "loss": self.loss,
                "before_reply": self.before_reply, "after_reply": self.after_reply,
                "before_described": self.before_described, "after_described": self.after_described}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Flip:
        return cls(unit=str(record["unit"]), before=record["before"], after=record["after"],
                   before_rows=int(record["before_rows"]), after_rows=int(record["after_rows"]),
                   before_reply=record.get("before_reply"), after_reply=record.get("after_reply"),
                   before_described=record.get("before_described"), after_described=record.get("after_described"))

    def lines(self, indent: str = "  ") -> list[str]:
        """The flip as text: the counts line, then each side's reply with its description."""
        out = [f"{indent}{self.unit}  {self.counts}"]
        for side, reply, described in (("before", self.before_reply, self.before_described),
                                       ("after", self.after_reply, self.after_described)):
            if reply is not None:
                about = f"  ({described})" if described else ""
                out.append(f"{indent}  {side + ':':<7} {shorten(reply)!r}{about}")
        return out


class ReplyBook:
    """One side's example replies per (category, unit), kept while the rows stream past.

    ``slots[(category, unit)]`` holds, for pass@1 and then each guarded marker, the first
    reply (and its case) for each value the column takes, up to :data:`_VALUES` values: two
    for a pass/fail reward or a 0/1 marker. The lowest and highest value's replies are the
    flip's "after" and "before" examples. A row costs one dict lookup per column.
    """

    def __init__(self, guards: Sequence[str]) -> None:
        self.guards = tuple(guards)
        self.slots: dict[tuple[str, str], list[dict[float, Any]]] = {}

    def entry(self, category: str, unit: str) -> list[dict[float, Any]]:
        """The unit's slots (created empty): one ``{value: (reply, case)}`` per column."""
        found = self.slots.get((category, unit))
        if found is None:
            found = self.slots[(category, unit)] = [{} for _ in range(1 + len(self.guards))]
        return found

    @staticmethod
    def keep(slot: dict[float, Any], value: float, row: Mapping[str, Any]) -> None:
        if len(slot) < _VALUES:
            slot[value] = (str(row.get("reply") or "")[:_KEEP], row.get("case"))

    def example(self, category: str, unit: str, column: int, high: bool) -> tuple[str | None, Any]:
        """The reply (and case) with the highest (*high*) or lowest value of *column* (2 = pass@1)."""
        found = self.slots.get((category, unit))
        slot = None if found is None else found[column - 2]
        if not slot:
            return None, None
        reply, case = slot[max(slot) if high else min(slot)]
        return str(reply), case


def flips_for(
    category: str,
    column: int,
    before_units: Mapping[str, Sequence[float]],
    after_units: Mapping[str, Sequence[float]],
    before_book: ReplyBook | None,
    after_book: ReplyBook | None,
    env: Env | None,
    limit: int,
) -> tuple[Flip, ...]:
    """The *limit* units of *category* that lost the most on *column* (ties by name); only units that lost.

    ``*_units[unit] = [rows, prompts, sum reward, sum marker...]`` (the gate's per-unit sums).
    The before reply is the unit's best before (passing) one, the after reply its worst after one.
    """
    if limit <= 0:
        return ()
    losses = []
    for unit, b in before_units.items():
        a = after_units.get(unit)
        if a is None or not b[0] or not a[0]:
            continue
        loss = b[column] / b[0] - a[column] / a[0]
        if loss > 0:
            losses.append((-loss, unit))
    out = []
    for _, unit in sorted(losses)[:limit]:
        b, a = before_units[unit], after_units[unit]
        before_reply, before_case = (None, None) if before_book is None else before_book.example(
            category, unit, column, high=True)
        after_reply, after_case = (None, None) if after_book is None else after_book.example(
            category, unit, column, high=False)
        out.append(Flip(
            unit=str(unit), before=_number(b[column]), after=_number(a[column]), before_rows=int(b[0]),
            after_rows=int(a[0]), before_reply=None if before_reply is None else shorten(before_reply),
            after_reply=None if after_reply is None else shorten(after_reply),
            before_described=_describe(env, before_reply, before_case),
            after_described=_describe(env, after_reply, after_case),
        ))
    return tuple(out)


def _number(x: float) -> float:
    return int(x) if float(x).is_integer() else round(float(x), 4)


def _describe(env: Env | None, reply: str | None, case: Any) -> str | None:
    if env is None or reply is None:
        return None
    return env.describe_reply(reply, case if isinstance(case, Mapping) else None)
