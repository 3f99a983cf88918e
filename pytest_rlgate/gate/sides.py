"""Both sides of a gate, read once and paired: the reader the one-adapter gate and the recipe gate share.

A side is a row source reduced, while its rows stream past, to per-cell sums of each
metric; a gate pairs its sides' units (scenario, else prompt), refuses rows its options
do not let through (another environment, a changed holdout) and hands the paired per-unit
sums to the statistics. Both gates read through :func:`read_sides`, so they refuse, guard
and pair rows alike.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.provenance import Provenance, check_graded_by, header_env
from ..data.rows import NEW, SAME, RowReader
from ..environment.contract import Env, load_env
from ..errors import DataError, RlgateWarning, hide_user_errors
from .flips import ReplyBook
from .options import GateOptions

__all__ = ["Paired", "PairFn", "Side", "Sides", "groups", "open_side", "pair_units", "ratio_k", "read_sides",
           "resample_stream", "warn_caller"]

#: a bad row file gated in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


class Side:
    """Per-cell sums of each metric for one side, filled while rows stream past.

    A cell is (category, unit, eval_run); ``cells[key] = [rows, prompts, sum reward, sum
    marker_1, ...]``. Per-unit sums (the bootstrap's input) and per-run sums (the noise
    floor) are both derived from the cells once the rows are read, so each row touches one
    list; and while the reader says a row has the previous row's (scenario, prompt,
    eval_run) and category, its cell is the previous one too. Rows themselves are not kept.
    """

    def __init__(self, reader: RowReader, guards: Sequence[str], *, replies: bool = False) -> None:
        label = self.label = reader.label
        self.dropped = 0
        #: example replies per unit (for flips), kept in the same pass when asked for
        self.book = ReplyBook(guards) if replies else None
        book = self.book
        keep = ReplyBook.keep
        cells: dict[tuple[str, str, Any], list[float]] = {}
        width = 3 + len(guards)
        columns = tuple(enumerate(guards, 3))
        marked = tuple(enumerate(guards, 1))
        category: str | None = None
        acc: list[float] = []
        entry: list[dict[float, Any]] | None = None
        for row, line, state in reader:
            if state != SAME or row["category"] != category:
                category = row["category"]
                key = (category, row.get("scenario_id") or row["prompt"], row.get("eval_run"))
                acc = cells.get(key)  # type: ignore[assignment]
                if acc is None:
                    acc = cells[key] = [0] * width
                if state == NEW:
                    acc[1] += 1
                if book is not None:
                    entry = book.entry(category, key[1])
            if entry is not None:  # one reply per value a column takes: a dict lookup each, no copy
                if row["reward"] not in entry[0]:
                    keep(entry[0], row["reward"], row)
                if marked:
                    markers = row["markers"]
                    for index, guard in marked:
                        value = markers.get(guard)
                        if value is not None and value not in entry[index]:
                            keep(entry[index], value, row)
            acc[0] += 1
            acc[2] += row["reward"]
            if columns:
                markers = row["markers"]
                try:
                    for column, guard in columns:
                        acc[column] += markers[guard]
                except KeyError:
                    missing = next(g for g in guards if g not in markers)
                    raise DataError(
                        f"marker {missing!r} is missing but guarded (every row needs it; "
                        f"drop the guard or re-grade with an env that sets it)",
                        path=label, line=line,
                    ) from None
        self.cells = cells
        self._tables()

    def _tables(self) -> None:
        """``units[category][unit]`` and ``runs[category][eval_run]``: the cells summed."""
        self.units: dict[str, dict[str, list[float]]] = {}
        self.runs: dict[str, dict[Any, list[float]]] = {}
        for (category, unit, run), acc in self.cells.items():
            for table, key in ((self.units, unit), (self.runs, run)):
                inner = table.get(category)
                if inner is None:
                    inner = table[category] = {}
                total = inner.get(key)
                if total is None:
                    inner[key] = list(acc)
                else:
                    for column, value in enumerate(acc):
                        total[column] += value

    def drop_units(self, lost: Mapping[str, set[str]]) -> None:
        """Drop the units *lost* names per category (``--shared-units-only``); count them."""
        self.dropped = sum(len(units) for units in lost.values())
        self.cells = {key: acc for key, acc in self.cells.items() if key[1] not in lost.get(key[0], ())}
        self._tables()

    def categories(self) -> set[str]:
        return set(self.units)

    def unit_counts(self, category: str) -> int:
        return len(self.units.get(category, ()))


def open_side(source: Any, side: str) -> RowReader:
    """*source* opened, its header read: a file is labelled by its path, rows in memory ``<before rows>``."""
    return RowReader(source, name=f"<{side} rows>")


def _sums(table: Mapping[str, dict[Any, list[float]]], categories: Sequence[str]) -> dict[Any, list[float]]:
    """key -> column sums over *categories* (a scenario may span categories)."""
    if len(categories) == 1:
        return table.get(categories[0], {})
    out: dict[Any, list[float]] = {}
    for category in categories:
        for key, acc in table.get(category, {}).items():
            slot = out.get(key)
            out[key] = acc if slot is None else [x + y for x, y in zip(slot, acc)]
    return out


def ratio_k(rows: float, prompts: float) -> float:
    if not prompts:
        return 0
    k = rows / prompts
    return int(k) if float(k).is_integer() else round(k, 2)


@dataclass(frozen=True)
class Paired:
    """One group's paired units: per-unit column sums of each side, row for row.

    Built once per group and shared by every metric (a column of the same sums), so a
    gate over 50,000 units walks its tables a handful of times, not once per comparison.
    """

    before: np.ndarray  #: [units, columns]: rows, prompts, sum reward, sum marker...
    after: np.ndarray
    before_runs: np.ndarray  #: [eval runs, columns]
    after_runs: np.ndarray

    @classmethod
    def of(cls, before: Side, after: Side, categories: Sequence[str]) -> Paired:
        b, a = _sums(before.units, categories), _sums(after.units, categories)
        units = sorted(b)
        width = len(next(iter(b.values())))

        def matrix(rows: Iterable[list[float]]) -> np.ndarray:
            return np.array(list(rows), dtype=float).reshape(-1, width)

        return cls(matrix(b[u] for u in units), matrix(a[u] for u in units),
                   matrix(_sums(before.runs, categories).values()), matrix(_sums(after.runs, categories).values()))

    @property
    def n(self) -> int:
        return len(self.before)

    def k(self, side: str | None = None) -> float:
        """Rows per prompt (per eval run): of one side, or pooled over both."""
        sides = [self.before, self.after] if side is None else [getattr(self, side)]
        return ratio_k(sum(float(m[:, 0].sum()) for m in sides), sum(float(m[:, 1].sum()) for m in sides))

    def means(self, column: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-unit means of a column, before and after."""
        return self.before[:, column] / self.before[:, 0], self.after[:, column] / self.after[:, 0]

    def run_means(self, column: int) -> tuple[list[float], list[float]]:
        """Per-eval-run means of a column, before and after (the noise floor's input)."""
        return ([float(v) for v in self.before_runs[:, column] / self.before_runs[:, 0]],
                [float(v) for v in self.after_runs[:, column] / self.after_runs[:, 0]])


def pair_units(before: Side, after: Side, categories: Sequence[str], shared_units_only: bool) -> str | None:
    """Units of a shared category must appear on both sides: name the first missing ones.

    With *shared_units_only* (a holdout that changed between the sides) the unpaired units
    are dropped instead, and the returned note says how many from each side.
    """
    lost = {side.label: {c: side.units[c].keys() - other.units[c].keys() for c in categories}
            for side, other in ((before, after), (after, before))}
    if not any(units for side in lost.values() for units in side.values()):
        return None
    if shared_units_only:
        for side in (before, after):
            side.drop_units(lost[side.label])
        return (f"--shared-units-only: dropped {before.dropped} unit(s) of {before.label} and {after.dropped} of "
                f"{after.label} that the other side lacks")
    problems = []
    for here, there in ((before, after), (after, before)):
        missing = sorted((c, u) for c, units in lost[here.label].items() for u in units)
        if missing:
            shown = ", ".join(f"{u!r} ({c})" for c, u in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            problems.append(f"{len(missing)} unit(s) of {here.label} missing from {there.label}: {shown}{more}")
    raise DataError(
        "before and after rows do not pair: " + "; ".join(problems)
        + " (units are scenario_id, else prompt; sample the same holdout on both sides, or pass "
        "--shared-units-only to gate the units both share)"
    )


#: How a gate checks its sides' categories and pairs their units, given the before side,
#: the after sides, the declared categories and ``shared_units_only``: (failures, the
#: categories every side has, the note on dropped units or None).
PairFn = Callable[[Side, Sequence[Side], Sequence[str], bool], tuple[list[str], list[str], str | None]]


@dataclass
class Sides:
    """Every side of one gate, read and paired, and what the options resolved to."""

    before: Side
    afters: list[Side]
    before_header: dict[str, Any] | None
    after_headers: list[dict[str, Any] | None]
    declared: Env | None  #: the environment *env* names, or None
    guards: tuple[str, ...]
    categories: tuple[str, ...] | None  #: the declared categories
    notes: list[str]  #: what the caller let through (changed environment, dropped units)
    failures: list[str]  #: categories missing from a side
    shared: list[str]  #: categories on every side


def read_sides(before_reader: RowReader, after_readers: Sequence[RowReader], options: GateOptions,
               pair: PairFn, *, replies: bool = False) -> Sides:
    """Check the headers, resolve guards and declared categories, read every side, pair them.

    The one-adapter gate and the recipe gate (one after side per training seed) both read
    through here, so they refuse, guard and pair rows alike; *pair* is the part that differs
    (how a missing category or unit is worded for two sides or for many). Each reader has
    read its header already; its rows are streamed here, once. With *replies* each side also
    keeps a few example replies per unit (:class:`~.flips.ReplyBook`), for flips.
    """
    before_header = before_reader.header
    after_headers = [reader.header for reader in after_readers]
    notes: list[str] = []
    for reader in after_readers:
        notes += Provenance(before_header, reader.header, before_reader.label, reader.label).check(
            allow_env_change=options.allow_env_change, shared_units_only=options.shared_units_only)
    notes = list(dict.fromkeys(notes))
    declared = load_env(options.env) if options.env is not None else None
    if declared is not None:
        notes += check_graded_by(declared, [(r.label, r.header) for r in (before_reader, *after_readers)],
                                 allow_env_change=options.allow_env_change)
    guards = options.guards
    if guards is None:
        guarding = declared if declared is not None else header_env(
            [h for h in (before_header, *after_headers) if h is not None])
        guards = tuple(dict.fromkeys(guarding.guards)) if guarding is not None else ()
    categories = options.categories
    if categories is None and declared is not None:
        categories = tuple(declared.categories)
    before = Side(before_reader, guards, replies=replies)
    afters = [Side(reader, guards, replies=replies) for reader in after_readers]
    failures, shared, dropped = pair(before, afters, categories or (), options.shared_units_only)
    if dropped:
        notes.append(dropped)
    return Sides(before, afters, before_header, after_headers, declared, guards, categories, notes, failures,
                 shared)


def groups(shared: list[str]) -> list[tuple[str, list[str]]]:
    """The groups a gate compares: ``overall`` (every shared category), then each category."""
    return [("overall", shared), *((c, [c]) for c in shared)]


def resample_stream(seed: int | None, index: int) -> np.random.Generator | None:
    """The resample stream of the *index*-th comparison (1-based): its own, derived from *seed*."""
    return None if seed is None else np.random.default_rng([seed, index])


def warn_caller(note: str) -> None:
    """Warn *note* (an :class:`RlgateWarning`) at the first frame outside pytest-rlgate: the
    line of the caller's code that ran the gate, whichever door it came in by."""
    level, frame = 2, sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("pytest_rlgate."):
        frame, level = frame.f_back, level + 1
    warnings.warn(note, RlgateWarning, stacklevel=level)
