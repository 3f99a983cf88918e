"""Both sides of a gate, read once and paired: the reader the one-adapter gate and the recipe gate share.

A side is a row source reduced, while its rows stream past, to per-cell sums of each
metric; a gate pairs its sides' units (scenario, else prompt), refuses rows its options
do not let through (another environment, a changed holdout) and hands the paired per-unit
sums to the statistics. Both gates read through :func:`read_sides`, so they refuse, guard
and pair rows alike. A side may be an eval harness's per-sample output: its reader
(:mod:`pytest_rlgate.data.readers`) makes the rows, and two sides from different harnesses,
tasks or task versions are refused before a row is read.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import sys
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from ..data.provenance import Provenance, check_graded_by, header_env
from ..data.readers import RowSource, as_side, check_sides, source_notes
from ..data.readers.source import SideReader
from ..data.rows import NEW, SAME, RowInput, RowReader, refuse_silent_sides
from ..environment.contract import Env, load_env
from ..errors import DataError, RlgateWarning, hide_user_errors
from ..records import Case, Header
from .flips import KEEP, Page, ReplyBook
from .options import GateOptions, parse_metric

__all__ = ["Paired", "PairFn", "Side", "Sides", "Units", "groups", "metric_columns", "open_side", "pair_units",
           "ratio_k", "read_sides", "resample_stream", "warn_caller"]

#: a bad row file gated in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

#: an eval run's name in a row (``eval_run``), None for rows of no named run
RunKey = int | str | None


class Units(Mapping[str, Sequence[float]]):
    """One category's per-unit sums of one side: ``units[unit] = [rows, prompts, sum reward, sum marker...]``.

    A mapping over a matrix (a row per unit) and the unit -> row index it was built with, so
    100,000 units cost two objects, not 100,000 lists; ``keys()`` is the index's own, so set
    operations on it run at dict speed.
    """

    __slots__ = ("index", "matrix")

    def __init__(self, index: dict[str, int], matrix: np.ndarray) -> None:
        self.index = index
        self.matrix = matrix  #: [units, columns]

    def __getitem__(self, unit: str) -> list[float]:
        return [float(x) for x in self.matrix[self.index[unit]]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def keys(self) -> KeysView[str]:
        return self.index.keys()

    def rows(self, units: Iterable[str]) -> np.ndarray:
        """The matrix rows of *units*, in that order."""
        return self.matrix[np.fromiter(map(self.index.__getitem__, units), dtype=np.intp)]


class _Cells:
    """One category's cells while a side streams: cell -> number, and the cells' sums, flat.

    A cell is a unit (scenario, else prompt), or ``(unit, eval_run)`` for a row of a named
    eval run; cell *n*'s sums are ``sums[n * width:(n + 1) * width]``: [rows, prompts, sum
    reward, sum marker...]. One flat list, not a list per cell, so the garbage collector has
    a handful of containers to walk however many units there are. ``page`` is the category's
    page of the side's reply book, and ``best``/``replies``/``cases`` its pass@1 column.
    """

    __slots__ = ("best", "cases", "index", "page", "replies", "sums", "width")

    def __init__(self, width: int, page: Page | None) -> None:
        self.index: dict[str | tuple[str, RunKey], int] = {}
        self.sums: list[float] = []
        self.width = width
        self.page = page
        self.best: dict[str, float] = {} if page is None else page[0][0]
        self.replies: dict[str, str] = {} if page is None else page[1][0]
        self.cases: dict[str, Case | None] | None = None if page is None or page[2] is None else page[2][0]

    def matrix(self) -> np.ndarray:
        return np.array(self.sums, dtype=float).reshape(-1, self.width)


class Side:
    """Per-cell sums of each metric for one side, filled while rows stream past.

    A cell is (category, unit, eval_run), with the sums [rows, prompts, sum reward, sum
    marker_1, ...]. Per-unit sums (the bootstrap's input) and per-run sums (the noise floor)
    are both derived from the cells once the rows are read, so each row adds to one cell's
    sums; and while the reader says a row has the previous row's (scenario, prompt,
    eval_run) and category, its cell is the previous one too. Rows themselves are not kept.
    With a :class:`~.flips.ReplyBook`, the same pass keeps each unit's example reply.
    """

    def __init__(self, reader: SideReader, guards: Sequence[str], *, book: ReplyBook | None = None,
                 metrics: Sequence[str] = ()) -> None:
        label = self.label = reader.label
        self.dropped = 0
        self.book = book
        width = 3 + len(guards) + len(metrics)
        zeros = [0] * width
        #: (category, cell offset, prompt) -> [replies, passes], for pass^K and pass@K
        prompts: dict[tuple[str, int, str], list[int]] | None = {} if metrics else None
        tally = [0, 0]
        marked = tuple(enumerate(guards, 3))
        cells: dict[str, _Cells] = {}
        category: str | None = None
        table = _Cells(width, None)
        sums = table.sums
        at = 0
        unit = ""
        page: Page | None = None
        best = table.best
        replies = table.replies
        cases = table.cases
        sign = 1.0 if book is None else book.sign
        high = sign > 0
        for row, line, state in reader:
            if state != SAME or row["category"] != category:
                category = row["category"]
                found_table = cells.get(category)
                if found_table is None:
                    found_table = cells[category] = _Cells(width, None if book is None else book.page(category))
                table = found_table
                unit = row.get("scenario_id") or row["prompt"]
                run = row.get("eval_run")
                key = unit if run is None else (unit, run)
                index = table.index
                found = index.get(key)
                sums = table.sums
                if found is None:
                    index[key] = len(index)
                    at = len(sums)
                    sums.extend(zeros)
                else:
                    at = found * width
                if state == NEW:
                    sums[at + 1] += 1
                page, best, replies, cases = table.page, table.best, table.replies, table.cases
                if prompts is not None:
                    tally = prompts.setdefault((category, at, row["prompt"]), [0, 0])
            reward = row["reward"]
            sums[at] += 1
            sums[at + 2] += reward
            if prompts is not None:
                tally[0] += 1
                tally[1] += reward >= 1
            if page is not None:  # the unit's best reply so far (highest before, lowest after): the first wins
                value = reward if high else -reward
                held = best.get(unit)
                if held is None or value > held:
                    best[unit] = value
                    replies[unit] = row["reply"][:KEEP]
                    if cases is not None:
                        cases[unit] = row.get("case")
            if marked:
                markers = row["markers"]
                try:
                    for column, guard in marked:
                        mark = markers[guard]
                        sums[at + column] += mark
                        if page is not None:
                            _keep(page, column - 2, unit, mark * sign, row["reply"], row.get("case"))
                except KeyError:
                    missing = next(g for g in guards if g not in markers)
                    raise DataError(
                        f"marker {missing!r} is missing but guarded (every row needs it; "
                        f"drop the guard or re-grade with an env that sets it)",
                        path=label, line=line,
                    ) from None
        self._cells = cells
        if prompts:
            _add_reliability(cells, prompts, metrics, 3 + len(guards), label)
        self._tables()

    def _tables(self) -> None:
        """``units[category]`` (a :class:`Units`) and ``runs[category][eval_run]``: the cells summed.

        A category without named eval runs (the usual case) has one cell per unit, so its
        unit table is its cells' own index over their matrix; a unit's runs are added in
        the order they were read, and each run's cells are summed with numpy.
        """
        self.units: dict[str, Units] = {}
        self.runs: dict[str, dict[RunKey, list[float]]] = {}
        for category, table in self._cells.items():
            matrix = table.matrix()
            if all(type(key) is str for key in table.index):  # no eval runs: a cell is a unit
                self.units[category] = Units(cast(dict[str, int], table.index), matrix)  # every key a str: checked
                self.runs[category] = {None: np.sum(matrix, axis=0).tolist()}
                continue
            units: dict[str, int] = {}
            unit_of = np.empty(len(table.index), dtype=np.intp)
            by_run: dict[RunKey, list[int]] = {}
            for at, key in enumerate(table.index):
                unit, run = (key, None) if isinstance(key, str) else key
                unit_of[at] = units.setdefault(unit, len(units))
                by_run.setdefault(run, []).append(at)
            sums = np.zeros((len(units), matrix.shape[1]))
            np.add.at(sums, unit_of, matrix)
            self.units[category] = Units(units, sums)
            self.runs[category] = {run: np.sum(matrix[at], axis=0).tolist() for run, at in by_run.items()}

    def drop_units(self, lost: Mapping[str, Collection[str]]) -> None:
        """Drop the units *lost* names per category (``--shared-units-only``); count them."""
        self.dropped = sum(len(units) for units in lost.values())
        for category, units in lost.items():
            table = self._cells.get(category)
            if table is None or not units:
                continue
            keys = list(table.index)
            kept = [at for at, key in enumerate(keys) if (key if type(key) is str else key[0]) not in units]
            width, sums = table.width, table.sums
            table.index = {keys[at]: new for new, at in enumerate(kept)}
            table.sums = [x for at in kept for x in sums[at * width:(at + 1) * width]]
        self._tables()

    def categories(self) -> set[str]:
        return set(self.units)

    def unit_counts(self, category: str) -> int:
        return len(self.units.get(category, ()))

    def unit_sums(self, categories: Sequence[str]) -> Units:
        """Per-unit column sums over *categories* (a scenario may span categories), in category order."""
        tables = [t for t in (self.units.get(c) for c in categories) if t is not None]
        if len(tables) == 1:
            return tables[0]
        if not tables:
            return Units({}, np.zeros((0, 0)))
        index: dict[str, int] = {}
        for table in tables:  # the usual case: no unit in two categories, so the matrices stack
            index.update(zip(table.index, itertools.count(len(index))))
        if len(index) == sum(len(t.index) for t in tables):
            return Units(index, np.concatenate([t.matrix for t in tables]))
        index = {}
        places = [np.fromiter((index.setdefault(u, len(index)) for u in t.index), dtype=np.intp, count=len(t.index))
                  for t in tables]
        sums = np.zeros((len(index), tables[0].matrix.shape[1]))
        for place, table in zip(places, tables):
            np.add.at(sums, place, table.matrix)
        return Units(index, sums)


def _add_reliability(cells: Mapping[str, _Cells], prompts: Mapping[tuple[str, int, str], list[int]],
                     metrics: Sequence[str], first: int, label: str) -> None:
    """Each cell's pass^K / pass@K columns: the prompts' unbiased estimates, weighted by their replies.

    With n replies of which c pass, pass^K = C(c, K) / C(n, K) (every one of K fresh replies
    passes) and pass@K = 1 - C(n - c, K) / C(n, K) (at least one does); stored times n, so
    the gate's per-unit mean (the column over the unit's rows) averages its prompts.
    """
    parsed = [parse_metric(m) for m in metrics]
    for (category, at, prompt), (n, c) in prompts.items():
        sums = cells[category].sums
        for offset, (kind, k) in enumerate(parsed):
            if n < k:
                raise DataError(f"{metrics[offset]} needs at least {k} replies of every prompt; prompt "
                                f"{prompt[:60]!r} ({category}) has {n} (sample k >= {k}, or gate a smaller K)",
                                path=label)
            total = math.comb(n, k)
            estimate = math.comb(c, k) / total if kind == "^" else 1.0 - math.comb(n - c, k) / total
            sums[at + first + offset] += n * estimate


def _keep(page: Page, column: int, unit: str, value: float, reply: str, case: Case | None) -> None:
    """A guard's reply for the unit, when *value* beats the one the page holds (the first wins)."""
    held = page[0][column].get(unit)
    if held is None or value > held:
        page[0][column][unit] = value
        page[1][column][unit] = reply[:KEEP]
        if page[2] is not None:
            page[2][column][unit] = case


def open_side(source: RowInput, side: str) -> SideReader:
    """*source* opened, its header read: a file is labelled by its path, rows in memory by the file they were
    read from (:class:`~pytest_rlgate.data.rows.Rows` ``label``), else ``<before rows>``.

    An eval harness's output (a path in another format, or a :class:`~pytest_rlgate.data.readers.RowSource`)
    is read by its reader (:func:`~pytest_rlgate.data.readers.as_side`) and labelled by its path;
    rlgate's own row files stay paths, for the row reader's fast path.
    """
    opened = as_side(source)
    if isinstance(opened, RowSource):
        return RowReader(opened, name=opened.label)
    return RowReader(opened, name=getattr(opened, "label", None) or f"<{side} rows>")


def _runs(side: Side, categories: Sequence[str]) -> list[list[float]]:
    """The per-run column sums over *categories*, a run's categories added in order."""
    if len(categories) == 1:
        return list(side.runs.get(categories[0], {}).values())
    out: dict[RunKey, list[float]] = {}
    for category in categories:
        for key, acc in side.runs.get(category, {}).items():
            slot = out.get(key)
            out[key] = acc if slot is None else [x + y for x, y in zip(slot, acc)]
    return list(out.values())


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

    before: np.ndarray  #: [units, columns]: rows, prompts, sum reward, sum marker..., pass^K...
    after: np.ndarray
    before_runs: np.ndarray  #: [eval runs, columns]
    after_runs: np.ndarray
    units: tuple[str, ...] = ()  #: the units, row for row

    @classmethod
    def of(cls, before: Side, after: Side, categories: Sequence[str]) -> Paired:
        b, a = before.unit_sums(categories), after.unit_sums(categories)
        units = sorted(b.index)
        width = b.matrix.shape[1]

        def runs(sums: list[list[float]]) -> np.ndarray:
            return np.array(sums, dtype=float).reshape(-1, width)

        return cls(b.rows(units), a.rows(units), runs(_runs(before, categories)), runs(_runs(after, categories)),
                   tuple(units))

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
    # per side, not per label: two sides may share a label (two providers of one file)
    lost = [{c: side.units[c].keys() - other.units[c].keys() for c in categories}
            for side, other in ((before, after), (after, before))]
    if not any(units for side in lost for units in side.values()):
        return None
    if shared_units_only:
        for side, units in zip((before, after), lost):
            side.drop_units(units)
        return (f"--shared-units-only: dropped {before.dropped} unit(s) of {before.label} and {after.dropped} of "
                f"{after.label} that the other side lacks")
    problems = []
    for (here, there), units in zip(((before, after), (after, before)), lost):
        missing = sorted((c, u) for c, found in units.items() for u in found)
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
    before_header: Header | None
    after_headers: list[Header | None]
    declared: Env | None  #: the environment *env* names, or None
    guards: tuple[str, ...]
    categories: tuple[str, ...] | None  #: the declared categories
    notes: list[str]  #: what the caller let through (changed environment, dropped units)
    failures: list[str]  #: categories missing from a side
    shared: list[str]  #: categories on every side


def read_sides(before_reader: SideReader, after_readers: Sequence[SideReader], options: GateOptions,
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
    notes = check_sides(before_reader, after_readers)  # two harnesses, tasks or task versions are refused
    for reader in after_readers:
        notes += Provenance(before_header, reader.header, before_reader.label, reader.label).check(
            allow_env_change=options.allow_env_change, shared_units_only=options.shared_units_only,
            allow_model_change=options.allow_model_change)
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
    cases = declared is not None  # only an environment's describe_reply reads a case

    def book(high: bool) -> ReplyBook | None:
        return ReplyBook(guards, high=high, cases=cases) if replies else None

    with _no_collection():
        before = Side(before_reader, guards, book=book(True), metrics=options.metrics)
        afters = [Side(reader, guards, book=book(False), metrics=options.metrics) for reader in after_readers]
    refuse_silent_sides([before_reader, *after_readers])  # rows of nothing compare as equal and would pass
    # what the harness readers let through (errored samples, allowed prompt changes)
    notes += [note for note in source_notes([before_reader, *after_readers]) if note not in notes]
    failures, shared, dropped = pair(before, afters, categories or (), options.shared_units_only)
    if dropped:
        notes.append(dropped)
    return Sides(before, afters, before_header, after_headers, declared, guards, categories, notes, failures,
                 shared)


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while the sides stream (and restored after).

    Every row is a fresh dict that forms no cycle, while what outlives it grows by a unit's
    keys (the pairing check's item, a named eval run's cell): each collection the
    allocations trigger walks those again for nothing. The sums and the example replies
    are kept in flat lists and in dicts of strings and numbers, which the collector does
    not track, so there is little left to walk once the sides are read. Reference counting
    still frees every row as soon as it is summed.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def metric_columns(metrics: Sequence[str], guards: Sequence[str]) -> list[str]:
    """The gate's metrics in the order of the sides' columns (from column 2): pass@1, the guards, then pass^K/pass@K."""
    return ["pass@1", *(f"marker:{g}" for g in guards), *metrics]


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
