"""Readers: the per-sample output of the eval harnesses teams already run, as graded rows.

A team that evaluates with an eval harness already has per-sample results for the base and
the candidate on the same items; the gate needs nothing more. Each reader owns one format
and turns it into the rows :mod:`pytest_rlgate.data.rows` validates, streamed, with no
model and no reward function: the harness graded the replies, the reader only says which
field is the category, the unit and the score. rlgate's own row files are one format among
them.

The formats are one registry: every module of this package that defines ``READER`` (an
object of the :class:`~.source.Reader` interface) is a built-in format, found by looking,
so a new reader is its module, its test and its docs section; the ``rlgate.readers``
entry-point group adds another package's (``name = "package.module:READER"``). Detection
tries rlgate's own row files first, then the others by name, then the entry points'.
``rlgate gate``, ``rlgate convert``, the plugin's ``--rlgate-format`` and the docs table of
formats are generated from or checked against it. :func:`read_rows` opens a path in the
format it names or the one detected; ``path#key=value`` picks read options per side
(``results.json#provider=openai:gpt-4o``).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ...errors import DataError, UsageError, hide_user_errors
from ..rows import RowInput, read_rows as _check_rows
from .pairing import check_items, check_sources, describe
from .source import Opened, Pass, Reader, ReaderOption, ReadOptions, RowSource, SideReader, refuse_unknown

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "Opened", "Pass", "ReadOptions", "Reader", "ReaderOption", "RowSource",
           "as_side", "check_items", "check_sides", "declared_options", "describe", "detect_format", "load_reader",
           "read_rows", "reader_names", "source_notes"]

#: a bad log read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

ENTRY_POINT_GROUP = "rlgate.readers"
#: the format every file no reader claims is read as (its reader names what is wrong, at its line)
NATIVE = "rlgate"
_HEAD = 4096
_MISSING = ("no such row file or eval-harness log (write rows with pytest_rlgate.write_rows or rlgate eval, or "
            "point at the harness's output)")


@functools.cache
def _builtin() -> dict[str, Reader]:
    """format name -> reader, for every module here that defines ``READER``; the order is the detection order."""
    found: dict[str, Reader] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        reader = getattr(module, "READER", None)
        if reader is not None:
            found[reader.name] = reader
    return {NATIVE: found.pop(NATIVE), **found}


def __getattr__(name: str) -> object:
    if name == "BUILTIN":  # format name -> "module:attribute" of its reader, in detection order
        return {n: f"{type(r).__module__}:READER" for n, r in _builtin().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=1)
def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in _builtin()}


def reader_names() -> list[str]:
    """Every format a path can be read as: the built-in ones, then the entry points'."""
    return [*_builtin(), *sorted(_plugins())]


@functools.cache
def load_reader(name: str) -> Reader:
    """The reader of format *name* (built in, or an ``rlgate.readers`` entry point)."""
    builtin = _builtin().get(name)
    if builtin is not None:
        return builtin
    target = _plugins().get(name)
    if target is None:
        raise UsageError(f"--format {name!r}: no such format; choose one of {', '.join(reader_names())}")
    module, _, attr = target.partition(":")
    try:
        reader = getattr(importlib.import_module(module), attr or "READER")
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"format {name!r}: cannot load its reader {target} ({exc})") from None
    return reader  # type: ignore[no-any-return]


def declared_options() -> dict[str, tuple[ReaderOption, list[str]]]:
    """option name -> (its declaration, the formats that declare it): the readers' own read options.

    A plugin format that cannot be loaded declares nothing here (reading it names the error).
    """
    out: dict[str, tuple[ReaderOption, list[str]]] = {}
    for name in reader_names():
        try:
            reader = load_reader(name)
        except UsageError:
            continue
        for option in getattr(reader, "options", ()):
            out.setdefault(option.name, (option, []))[1].append(name)
    return out


def _head(path: Path) -> bytes:
    if path.is_dir():
        return b""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD)
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror}", path=path) from None
    if head[:2] == b"\x1f\x8b":  # a gzip-compressed JSONL: sniff what is inside
        import gzip
        import zlib

        try:
            with gzip.open(path, "rb") as packed:
                head = packed.read(_HEAD)
        except (OSError, EOFError, zlib.error):
            pass
    return head


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of a file or folder, from its name and first bytes.

    A file no reader recognises is read as rlgate rows, whose reader names exactly what is
    wrong with it at its line; a folder no reader recognises is a DataError.
    """
    where = Path(os.fspath(path)).expanduser()
    if not where.exists():
        raise DataError(_MISSING, path=where)
    head = _head(where)
    for name in reader_names():
        if load_reader(name).sniff(where, head):
            return name
    if where.is_file():
        return NATIVE
    raise DataError(f"is a directory, expected a JSONL row file or an eval harness's output in a format rlgate "
                    f"reads ({', '.join(reader_names())}); pass --format NAME if it is one of them", path=where)


def _split(spec: str | os.PathLike[str]) -> tuple[Path, dict[str, str]]:
    """``path#key=value&key=value`` -> (path, options); a path that exists as given is never split."""
    text = os.fspath(spec)
    if "#" not in text or Path(text).expanduser().exists():
        return Path(text).expanduser(), {}
    base, _, tail = text.rpartition("#")
    picked: dict[str, str] = {}
    for part in tail.split("&"):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise UsageError(f"{text!r}: after '#' expected key=value (e.g. #provider=openai:gpt-4o), got {part!r}")
        picked[key.replace("-", "_")] = value
    return Path(base).expanduser(), picked


def _read_options(name: str, picked: Mapping[str, str], given: Mapping[str, object], reader: Reader,
                  where: str) -> ReadOptions:
    """The options a path is read with: a per-path value (``#key=value``) wins over the keyword."""

    def text(key: str) -> str | None:
        value = picked.get(key, given.get(key))
        if value is None or isinstance(value, str):
            return value
        raise UsageError(f"{key}={value!r}: expected a non-empty string")

    threshold = given.get("pass_threshold")
    if "pass_threshold" in picked:
        try:
            threshold = float(picked["pass_threshold"])
        except ValueError:
            raise UsageError(f"{where!r}: pass_threshold must be a number") from None
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        raise UsageError(f"pass_threshold={threshold!r}: expected a finite number")
    allow = given.get("allow_prompt_change", False)
    if "allow_prompt_change" in picked:
        allow = picked["allow_prompt_change"].lower() in ("1", "true", "yes")
    if not isinstance(allow, bool):
        raise UsageError(f"allow_prompt_change={allow!r}: expected True or False")
    return ReadOptions(format=name, category=text("category"), unit=text("unit"), score=text("score"),
                       pass_threshold=threshold, allow_prompt_change=allow,
                       own={option.name: text(option.name) for option in reader.options},
                       loose=frozenset(option.name for option in reader.options if not option.shapes))


def read_rows(source: RowInput, format: str | None = None, **options: object) -> RowSource:
    """Open a row file or a harness's output as rows: an iterable with ``header``, re-read on each pass.

    The keywords are :class:`~pytest_rlgate.options.ReadOptions`' fields (``category``,
    ``unit``, ``score``, ``pass_threshold``, ``allow_prompt_change``; ``metric`` is the old name of
    ``score``) and the options the
    readers declare for themselves (lm-eval's ``filter``, promptfoo's ``provider``,
    Inspect's ``findings``: :func:`declared_options`), each used by the format that declares
    it. *format* is a name of :func:`reader_names` (default: detected). ``path#key=value``
    sets an option for this path alone. Iterating yields validated-shape row dicts; bad
    input is a :class:`~pytest_rlgate.errors.DataError` at ``file:line``. An iterable of
    row dicts is validated as it streams (a generator, as before readers).
    """
    if isinstance(source, RowSource):
        return source
    if not isinstance(source, (str, os.PathLike)):
        return _check_rows(source)  # type: ignore[return-value]  # rows in memory: validated as they stream
    where = os.fspath(source)
    path, picked = _split(source)
    options, picked = ReadOptions.renamed(options, where="read_rows"), ReadOptions.renamed(picked, where=where)
    declared = declared_options()
    shared = [name for name in ReadOptions.names() if name != "format"]
    refuse_unknown(options, [*shared, *declared], "read_rows")
    refuse_unknown(picked, [*ReadOptions.names(), *declared], f"{where!r} after '#'")
    name = picked.get("format") or format or detect_format(path)
    if not path.exists():
        raise DataError(_MISSING, path=path)
    reader = load_reader(name)
    stray = sorted(set(picked) - set(ReadOptions.names()) - {option.name for option in reader.options})
    if stray:
        raise UsageError(f"{where!r}: {stray[0]} is an option of the {' / '.join(declared[stray[0]][1])} reader, "
                         f"and this path reads as {name}")
    read = _read_options(name, picked, options, reader, where)
    opened = reader.open(path, read)
    # two providers of one file are two sides: a side named with '#' is labelled so, apart from the other
    return RowSource(name, opened.path or path, opened.header, opened.rows, read, spec=where if picked else None)


def as_side(source: RowInput) -> RowInput:
    """What the gate reads for one side: rlgate row files stay paths (the gate's own fast reader), a
    harness's log becomes its :class:`RowSource`; rows in memory pass through."""
    if isinstance(source, RowSource):
        return source.path if source.format == NATIVE else source
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        path = Path(text)
        if not path.exists() and "#" not in text:
            return source  # the gate's reader names the missing file
        if path.is_file() and detect_format(path) == NATIVE:
            return source
        opened = read_rows(source)
        return opened.path if opened.format == NATIVE else opened
    return source


def check_sides(before: SideReader, afters: Sequence[SideReader]) -> list[str]:
    """Refuse sides from different harnesses, tasks or task versions (naming both); else the notes.

    Each side is an opened :class:`~pytest_rlgate.data.rows.RowReader` (its header read
    once, when it was opened). Links two harness sides so that, once both have been read,
    the items they share are checked (:func:`check_items`): another document or target is
    refused, another prompt too unless ``allow_prompt_change``.
    """
    notes: list[str] = []
    for after in afters:
        notes += check_sources((before.label, before.header), (after.label, after.header))
        one, other = before.source, after.source
        if isinstance(one, RowSource) and isinstance(other, RowSource) and len(afters) == 1:
            one.partner, other.partner = other, one
    return list(dict.fromkeys(notes))


def source_notes(sides: Sequence[SideReader]) -> Iterator[str]:
    """What reading the sides let through (errored samples, allowed prompt changes), in order."""
    seen: set[str] = set()
    for side in sides:
        source = side.source
        if isinstance(source, RowSource):
            for note in source.notes:
                if note not in seen:
                    seen.add(note)
                    yield note
