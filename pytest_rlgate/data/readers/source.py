"""The one reader interface, and the per-record steps every reader shares.

A harness's log is not a row file, but the gate needs only rows and a header, so a reader
turns one into the other as the rows are read, never holding them. A reader is a small
object (:class:`Reader`): its ``name`` (the ``--format``), a one-line ``summary`` (the
docs table), the read ``options`` it declares for itself (lm-eval's ``filter``, promptfoo's
``provider``), ``sniff(path, head)`` and ``open(path, options)``, which reads what it must
to build the header (never the rows) and returns an :class:`Opened`: that header and a
function that streams the rows of one pass. Each pass gets a :class:`Pass`, where the
reader records what it let through (errored samples, counted and named) and each item's
pairing hashes. The header says where the rows came from (``source``: the harness, its
version, the task and the task version it recorded, and the options that shaped the
rows), which is how two sides from different tasks are refused before a single row is
compared.

What readers have in common is here once: the category and the unit at a dotted key with
the reader's default (:class:`Pick`), a score as a finite number (:func:`number`) and the
threshold that turns it into a pass (:func:`pass_of`), the header (:func:`source_header`).
:class:`RowSource` is what the package makes of an opened reader: an iterable of rows that
reads the file again on every pass, with the last pass's notes and pairs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Protocol

from ...errors import DataError, UsageError, hide_user_errors
from ...options import ReadOptions
from ...records import Header, Row
from ..provenance import HEADER_KEY, HEADER_VERSION
from .hashes import pack, unpack
from .pairing import check_items

__all__ = ["FILTER", "MISSING", "Opened", "Pass", "Pick", "ReadOptions", "Reader", "ReaderOption", "RowSource",
           "SideReader", "as_dict", "fingerprint", "keys_at", "label_of", "lookup", "number", "pack", "pass_of",
           "path_getter", "short_hash", "source_header", "unpack"]

#: a bad log read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


@dataclass(frozen=True)
class ReaderOption:
    """A read option one reader declares for itself (lm-eval's ``filter``, promptfoo's ``provider``).

    *name* is its keyword (``read_rows(..., filter="none")``) and its per-path spelling
    (``PATH#filter=none``); *flag* its ``rlgate gate``/``rlgate convert`` flag (None: per
    path only); in pytest it is ``--rlgate-read NAME=VALUE``. *shapes*: the value decides
    what a row means, so the header records it and both sides must agree (a provider or a
    findings file differs per side by design and does not).
    """

    name: str
    help: str
    flag: str | None = None
    metavar: str = "VALUE"
    shapes: bool = True


#: lm-eval's filter: its reader and the Every Eval Ever reader (whose files converted from lm-eval name the
#: filter of each record) read one of a task's filters, so a sample scored under several counts once
FILTER = ReaderOption("filter", "lm-eval (and Every Eval Ever files converted from it): the filter to read for "
                                "tasks scored under several (e.g. strict-match)", flag="--filter", metavar="NAME")


class Reader(Protocol):
    """One harness format: recognise a path, and open it as rows.

    ``sniff(path, head)`` gets the path and the first 4 KiB of the file (empty for a
    folder) and answers cheaply; ``open`` reads what it must to build the header (never the
    rows) and returns an :class:`Opened`. ``options`` are the read options it declares for
    itself, beside the shared :class:`~pytest_rlgate.options.ReadOptions`; their values are
    in ``options.own`` when it opens a path.
    """

    name: str
    summary: str
    options: Sequence[ReaderOption]

    def sniff(self, path: Path, head: bytes) -> bool: ...

    def open(self, path: Path, options: ReadOptions) -> Opened: ...


@dataclass(frozen=True)
class Opened:
    """What a reader's ``open`` returns: the header, and the rows of one pass.

    *rows* is called once per pass with that pass's :class:`Pass` and streams row dicts;
    *path* is the file actually read when it is not the path given (the one log in a folder).
    """

    header: Header
    rows: Callable[[Pass], Iterable[Row]]
    path: Path | None = None


class Pass:
    """What one pass over a side records: its notes, errored samples and items' pairing hashes.

    ``tally(what, where, detail)`` counts one sample the reader let through (``what`` says
    how, e.g. ``"errored sample(s) not gated"``); when the pass ends each kind becomes one
    note naming the first few. ``pair(item, data, target, prompt)`` keeps an item's hashes
    for the other side's check (:func:`~pytest_rlgate.data.readers.pairing.check_items`).
    """

    SHOWN = 5

    def __init__(self, label: str) -> None:
        self.label = label
        self.notes: list[str] = []
        self.errors = 0
        self.pairs: dict[Hashable, str] = {}  #: item -> :func:`pack`'d hashes
        self.done = False  #: the pass ran to its end: its pairs are complete
        self._tallies: dict[tuple[str, str], tuple[list[str], str]] = {}

    def note(self, message: str) -> None:
        """Record what this pass let through: the gate's result carries it (and pytest warns it)."""
        if message not in self.notes:
            self.notes.append(message)

    def tally(self, what: str, where: str, detail: str = "", *, label: str | None = None, error: bool = True) -> None:
        """Count a sample the reader let through; *error* counts it among the side's errored samples."""
        key = (label or self.label, what)
        wheres, first = self._tallies.setdefault(key, ([], ""))
        if not first and detail:
            self._tallies[key] = (wheres, " ".join(detail.split())[:200])
        wheres.append(where)
        self.errors += error

    def pair(self, item: Hashable, data: str | None, target: str | None, prompt: str | None) -> None:
        self.pairs[item] = pack(data, target, prompt)

    def finish(self) -> None:
        for (label, what), (wheres, first) in self._tallies.items():
            shown = ", ".join(wheres[:self.SHOWN])
            more = f" and {len(wheres) - self.SHOWN} more" if len(wheres) > self.SHOWN else ""
            self.note(f"{label}: {len(wheres)} {what} ({shown}{more}){': ' + first if first else ''}")
        self._tallies.clear()
        self.done = True


@dataclass
class RowSource:
    """One side's rows, read from a harness's output each time it is iterated.

    Made by :func:`~pytest_rlgate.data.readers.read_rows` from a reader's :class:`Opened`.
    ``header`` is a row-file header (:mod:`~pytest_rlgate.data.provenance`) whose ``source``
    names the harness; ``notes``, ``errors`` and ``pairs`` are the last pass's
    (:class:`Pass`); ``partner`` is the other side, set by
    :func:`~pytest_rlgate.data.readers.check_sides`, whose items are checked against this
    side's once both have been read.
    """

    format: str
    path: Path
    header: Header
    rows: Callable[[Pass], Iterable[Row]] = field(repr=False)
    options: ReadOptions = field(default_factory=ReadOptions)
    #: how the side was named (``results.json#provider=ID``), when that says more than the path
    spec: str | None = None
    partner: RowSource | None = field(default=None, repr=False)
    last: Pass | None = field(default=None, repr=False)
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

    @property
    def notes(self) -> list[str]:
        return self.last.notes if self.last is not None else []

    @property
    def errors(self) -> int:
        return self.last.errors if self.last is not None else 0

    @property
    def pairs(self) -> dict[Hashable, str]:
        return self.last.pairs if self.last is not None else {}

    @property
    def done(self) -> bool:
        """Whether the last pass ran to its end (its pairs are complete)."""
        return self.last is not None and self.last.done

    def __iter__(self) -> Iterator[Row]:
        record = self.last = Pass(self.label)
        yield from self.rows(record)
        record.finish()
        partner = self.partner
        if partner is not None and partner.done:
            for note in check_items(partner, self):
                record.note(note)

    def __next__(self) -> Row:
        """The next row of one pass, as from a generator (``read_rows`` returned one before readers)."""
        if self._pass is None:
            self._pass = iter(self)
        return next(self._pass)


class SideReader(Protocol):
    """What the gate reads one side through: a :class:`~pytest_rlgate.data.rows.RowReader`.

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
        "sampling": {},  # a harness says nothing of how it drew its replies
        "source": {"harness": harness, "version": version, "tasks": task_record, "options": shaping,
                   "path": os.fspath(path), "model": model, **(extra or {})},
    }


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: what :func:`lookup` returns when a dotted path leads nowhere
MISSING: object = _Missing()


def as_dict(value: object) -> dict[str, object]:
    """*value* when it is a dict, else an empty one: a record's optional object field, read safely."""
    return value if isinstance(value, dict) else {}


def lookup(record: object, dotted: str) -> object:
    """The value at a dotted path (``doc.subject``, ``info.task``, ``choices.0``), or :data:`MISSING`."""
    value = record
    for part in dotted.split("."):
        if isinstance(value, Mapping):
            value = value.get(part, MISSING)
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit():
            index = int(part)
            value = value[index] if -len(value) <= index < len(value) else MISSING
        else:
            return MISSING
        if value is MISSING:
            return MISSING
    return value


def path_getter(dotted: str) -> Callable[[object], object]:
    """:func:`lookup` for one dotted path, compiled once: plain dicts take the fast road (a row each)."""
    parts = tuple(dotted.split("."))
    if len(parts) == 2:  # the common doc.subject, metadata.category: two lookups inline
        first, second = parts

        def get_two(record: object) -> object:
            if type(record) is dict:
                inner = record.get(first, MISSING)
                if type(inner) is dict:
                    return inner.get(second, MISSING)
            return lookup(record, dotted)

        return get_two

    def get(record: object) -> object:
        value = record
        for position, part in enumerate(parts):
            if type(value) is dict:
                value = value.get(part, MISSING)
                if value is MISSING:
                    return MISSING
            else:
                return lookup(value, ".".join(parts[position:]))
        return value

    return get


def keys_at(record: object, dotted: str) -> str:
    """The keys found where a dotted path stopped: for the error that names what was there."""
    value = record
    for part in dotted.split(".")[:-1]:
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


class Pick:
    """One row field of a record: a dotted path the user named (``--category-key``), else the reader's default.

    The default is a fixed value handed to each call, or a path *probe* the reader prefers
    when the first record has it (Inspect's ``metadata.category``). *spell* maps the user's
    key to a path once (Inspect reads a bare key in the sample's metadata). A path that
    leads nowhere is a DataError naming the key and what was there.
    """

    def __init__(self, what: str, key: str | None, *, probe: str | None = None,
                 spell: Callable[[str], str] | None = None) -> None:
        self.what = what
        self.key = None if key is None else (spell(key) if spell is not None else key)
        self.given = key  #: as the user spelled it, for messages
        self._probe = probe
        self._get = None if self.key is None else path_getter(self.key)

    def __call__(self, record: object, default: str, *, path: str, line: int | None = None,
                 where: str | None = None) -> str:
        get = self._get
        if get is not None:
            found = get(record)
            if type(found) is str and found:
                return found
        elif self._probe is None:
            return default
        return self._slow(record, default, path=path, line=line, where=where)

    def _slow(self, record: object, default: str, *, path: str, line: int | None, where: str | None) -> str:
        get = self._get
        if get is None:
            if self._probe is None:
                return default
            probe, self._probe = self._probe, None
            if lookup(record, probe) is MISSING:
                return default
            self.key = self.given = probe
            get = self._get = path_getter(probe)
        found = get(record)
        if type(found) is str and found:
            return found
        if found is MISSING:
            key = str(self.key)
            spelled = "" if self.given in (None, key) else f", from --{self.what}-key {self.given}"
            raise DataError(f"{where + ': ' if where else ''}no {self.what} at {key!r} ({keys_at(record, key)}"
                            f"{spelled}); pass another --{self.what}-key", path=path, line=line)
        return label_of(found, what=self.what, path=path, line=line, key=str(self.key))


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
    """A score as a finite float (booleans are 1/0, numeric text is read), or a DataError naming the metric."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float, str)):
        try:
            parsed = float(value)
        except (ValueError, OverflowError):  # not a number, or an int past a double's range
            parsed = math.nan
        if math.isfinite(parsed):
            return parsed
    raise DataError(f"metric {metric!r} is {value!r:.60}, not a finite number; pick another with --score-key",
                    path=path, line=line)


def refuse_unknown(given: Mapping[str, object], known: Sequence[str], where: str) -> None:
    """A UsageError naming the read options nothing declares (and those that are)."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UsageError(f"{where}: unknown read option(s) {', '.join(unknown)} (known: {', '.join(known)})")
