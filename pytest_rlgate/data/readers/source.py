"""What every reader hands the gate: a :class:`RowSource`, and the options it was read with.

A harness's log is not a row file, but the gate needs only rows and a header, so a reader
turns one into the other as the rows are read, never holding them: a :class:`RowSource`
iterates its file again on every pass and yields the dicts :mod:`pytest_rlgate.data.rows`
validates. Its header says where the rows came from (``source``: the harness, its version,
the task and the task version it recorded, and the options that shaped the rows), which is
how two sides from different tasks are refused before a single row is compared.

Readers own their format; the knobs they share are :class:`~pytest_rlgate.options.ReadOptions`,
declared once beside the other doors' options: which field of a record is the category and
the unit, which metric is the score, and the threshold that turns a non-binary score into a
pass.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Generator, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Protocol

from ...errors import DataError, UsageError
from ...options import ReadOptions
from ..provenance import HEADER_KEY, HEADER_VERSION
from ..records import Header, Row
from .hashes import pack, unpack
from .pairing import check_items

__all__ = ["CheckedReader", "ReadOptions", "Reader", "RowSource", "fingerprint", "lookup", "pack", "pass_of",
           "path_getter", "SideReader", "rows_of", "short_hash", "source_header", "unpack"]


class Reader(Protocol):
    """One harness format: recognise a path, and open it as rows.

    ``sniff(path, head)`` gets the path and the first 4 KiB of the file (empty for a
    folder) and answers cheaply; ``open`` reads what it must to build the header (never the
    rows) and returns the source.
    """

    name: str

    def sniff(self, path: Path, head: bytes) -> bool: ...

    def open(self, path: Path, options: ReadOptions) -> RowSource: ...


#: a reader's row stream: called once per pass over the side
Produce = Callable[["RowSource"], Iterator[Row]]
#: a reader's checked pass (:attr:`RowSource.checked`): ``(row, position, key state)`` of each
#: row, then the number of rows it made
ProduceChecked = Callable[["RowSource"], Generator[tuple[Row, int, int], None, int]]


@dataclass
class RowSource:
    """One side's rows, read from a harness's output each time it is iterated.

    ``header`` is a row-file header (:mod:`~pytest_rlgate.data.provenance`) whose ``source``
    names the harness; ``notes`` collects what a pass let through (errored samples not
    gated, changed prompts allowed), ``errors`` counts errored samples. ``pairs`` maps an
    item (task, doc) to the hashes of its data, target and prompt, filled while the rows
    stream, so the other side can be checked against it (:func:`~pytest_rlgate.data.readers.check_sides`).

    A reader that makes every row valid as it builds it may also give ``checked``: the same
    pass with each row's position and key state, its rows valid as made (what
    :func:`~pytest_rlgate.data.rows.validate_row` accepts unchanged) and each (scenario,
    prompt, eval_run, rollout_index) made once; the gate then reads it through a
    :class:`CheckedReader`, without checking every row a second time.
    """

    format: str
    path: Path
    header: Header
    produce: Produce
    options: ReadOptions = field(default_factory=ReadOptions)
    notes: list[str] = field(default_factory=list)
    errors: int = 0
    pairs: dict[Hashable, str] = field(default_factory=dict, repr=False)  #: item -> :func:`pack`'d hashes
    #: set by check_sides: the other side, checked once both have been read
    partner: RowSource | None = field(default=None, repr=False)
    done: bool = False
    #: how the side was named (``results.json#provider=ID``), when that says more than the path
    spec: str | None = None
    #: the reader's checked pass, when it has one (see above)
    checked: ProduceChecked | None = field(default=None, repr=False)
    _pass: Iterator[Row] | None = field(default=None, repr=False)
    #: every pass makes its rows afresh, so the gate checks a plain valid one in place, as it
    #: does a row it parsed from a file (:class:`~pytest_rlgate.data.rows.RowReader`), not a copy
    fresh_rows: ClassVar[bool] = True

    @property
    def label(self) -> str:
        return self.spec or os.fspath(self.path)

    @property
    def harness(self) -> str:
        source = self.header.get("source")
        return str(source.get("harness", self.format) if isinstance(source, Mapping) else self.format)

    def __iter__(self) -> Iterator[Row]:
        self._start()
        yield from self.produce(self)
        self._finish()

    def checked_pass(self) -> Generator[tuple[Row, int, int], None, int]:
        """One pass of :attr:`checked`: ``(row, position, state)`` per row, then the number of rows."""
        if self.checked is None:
            raise TypeError(f"the {self.format} reader gives no checked pass")
        self._start()
        count = yield from self.checked(self)
        self._finish()
        return count

    def _start(self) -> None:
        self.notes.clear()
        self.errors = 0
        self.pairs.clear()
        self.done = False

    def _finish(self) -> None:
        self.done = True
        partner = self.partner
        if partner is not None and partner.done:
            for note in check_items(partner, self):
                if note not in self.notes:
                    self.notes.append(note)

    def __next__(self) -> Row:
        """The next row of one pass, as from a generator (``read_rows`` returned one before readers)."""
        if self._pass is None:
            self._pass = iter(self)
        return next(self._pass)

    def note(self, message: str) -> None:
        """Record what this pass let through: the gate's result carries it (and pytest warns it)."""
        if message not in self.notes:
            self.notes.append(message)


def rows_of(checked: ProduceChecked) -> Produce:
    """A checked pass as a plain row stream (its rows without their positions and states)."""

    def produce(source: RowSource) -> Iterator[Row]:
        for row, _position, _state in checked(source):
            yield row

    return produce


class CheckedReader:
    """The gate's reader of a :class:`RowSource` that has a checked pass: its rows as the reader made them.

    What a :class:`~pytest_rlgate.data.rows.RowReader` is to the gate (``label``, ``header``,
    ``source``, a context manager that streams ``(row, line, state)`` once), without checking
    each row again and refusing repeated rollouts: the reader's checked pass has done both
    as it built the rows, and gives each its position and key state.
    """

    is_file = False

    def __init__(self, source: RowSource) -> None:
        self.source = source
        self.label = source.label
        self.header: Header | None = source.header
        self._read = False

    def __iter__(self) -> Iterator[tuple[Row, int, int]]:
        if self._read:
            raise UsageError(f"{self.label}: rows already read (a RowReader streams once)")
        self._read = True
        return self._rows()

    def _rows(self) -> Iterator[tuple[Row, int, int]]:
        count = yield from self.source.checked_pass()
        if not count:
            raise DataError("no rows (an empty gate proves nothing; grade some replies first)", path=self.label)

    def close(self) -> None:
        """Nothing to close: each pass opens and closes its own files."""

    def __enter__(self) -> CheckedReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class SideReader(Protocol):
    """What the gate reads one side through: a :class:`~pytest_rlgate.data.rows.RowReader` or a :class:`CheckedReader`.

    Its header is read when it is opened; iterating it streams ``(row, line, state)`` once.
    """

    @property
    def label(self) -> str: ...

    @property
    def header(self) -> Header | None: ...

    @property
    def source(self) -> object: ...

    def __iter__(self) -> Iterator[tuple[Row, int, int]]: ...

    def __enter__(self) -> SideReader: ...

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None: ...




def short_hash(value: object) -> str:
    """16 hex digits of the SHA-256 of a value's JSON (or a string itself): enough to tell items apart."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fingerprint(record: Mapping[str, object]) -> str:
    """``sha256:...`` of a JSON record (sorted keys): a task's identity in a header."""
    text = json.dumps(record, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_header(
    harness: str,
    *,
    version: object,
    tasks: Mapping[str, object],
    options: ReadOptions,
    path: Path,
    model: str | None = None,
    extra: Mapping[str, object] | None = None,
) -> Header:
    """The header of rows read from *harness*'s output: an rlgate header plus ``source``.

    ``env`` names the harness and its tasks and ``env_fingerprint`` covers the task versions
    and the options that shaped the rows, so two converted files of different tasks are
    refused by the gate's ordinary provenance check too.
    """
    shaping = options.shaping()
    task_record = {str(k): (None if v is None else str(v)) for k, v in sorted(tasks.items())}
    return {
        HEADER_KEY: HEADER_VERSION,
        "env": f"{harness}:{'+'.join(task_record) or path.name}",
        "env_fingerprint": fingerprint({"harness": harness, "tasks": task_record, "options": shaping}),
        "prompts_fingerprint": None,
        "policy": model,
        "sampling": {"temperature": None, "top_p": None, "seed": None, "k": None},
        "source": {"harness": harness, "version": version, "tasks": task_record, "options": shaping,
                   "path": os.fspath(path), "model": model, **(extra or {})},
    }


_MISSING = object()


def lookup(record: object, dotted: str) -> object:
    """The value at a dotted path (``doc.subject``, ``info.task``, ``choices.0``), or a sentinel miss.

    Returns :data:`MISSING` when a step is absent, so a reader can name the path and the
    keys that were there.
    """
    value = record
    for part in dotted.split("."):
        if isinstance(value, Mapping):
            value = value.get(part, _MISSING)
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit():
            index = int(part)
            value = value[index] if -len(value) <= index < len(value) else _MISSING
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


MISSING = _MISSING


def path_getter(dotted: str) -> Callable[[object], object]:
    """:func:`lookup` for one dotted path, compiled once: plain dicts take the fast road (a row each)."""
    parts = tuple(dotted.split("."))

    def get(record: object) -> object:
        value = record
        for part in parts:
            if type(value) is dict:
                value = value.get(part, _MISSING)
                if value is _MISSING:
                    return _MISSING
            else:
                return lookup(value, ".".join(parts[parts.index(part):]))
        return value

    return get


def keys_at(record: object, dotted: str) -> str:
    """The keys found where a dotted path stopped: for the error that names what was there."""
    value = record
    parts = dotted.split(".")
    for part in parts[:-1]:
        nxt = lookup(value, part)
        if nxt is MISSING:
            break
        value = nxt
    if isinstance(value, Mapping):
        names = sorted(map(str, value))
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        return f"keys there: {shown}" if names else "nothing there"
    return f"a {type(value).__name__} there"


def label_of(value: object, *, what: str, path: str, line: int | None, key: str) -> str:
    """A category or unit value as a non-empty string, or a DataError naming the key."""
    if value is MISSING or value is None or value == "":
        raise DataError(f"no {what} at {key!r} ({'missing' if value is MISSING else 'empty'}); pass another "
                        f"--{what}-key", path=path, line=line)
    if isinstance(value, (dict, list)):
        raise DataError(f"{what} {key!r} is a {type(value).__name__}, not a value; point --{what}-key at a "
                        "field inside it", path=path, line=line)
    return str(value)


def pass_of(score: float, threshold: float | None, *, higher_is_better: bool, metric: str, path: str,
            line: int | None) -> int:
    """``reward`` of a score: 0/1 scores as they are; others need the pass threshold."""
    if threshold is None:
        if score == 1 or score == 0:
            good = score == 1
            return int(good if higher_is_better else not good)
        raise DataError(f"metric {metric!r} is {score!r}, not 0 or 1: say what passes with --pass-threshold X "
                        f"(score {'>=' if higher_is_better else '<='} X passes)", path=path, line=line)
    return int(score >= threshold if higher_is_better else score <= threshold)


def number(value: object, *, metric: str, path: str, line: int | None) -> float:
    """A score as a finite float (booleans are 1/0), or a DataError naming the metric."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            parsed = math.nan
        if math.isfinite(parsed):
            return parsed
    raise DataError(f"metric {metric!r} is {value!r:.60}, not a finite number; pick another with --metric",
                    path=path, line=line)


def env_path(path: str | os.PathLike[str]) -> Path:
    return Path(os.fspath(path)).expanduser()
