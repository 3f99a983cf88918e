"""Readers: the per-sample output of the eval harnesses teams already run, as graded rows.

A team that evaluates with lm-evaluation-harness, Inspect AI, promptfoo, verifiers or NeMo
Evaluator already has per-sample results for the base and the candidate on the same items;
the gate needs nothing more. Each reader owns one format and turns it into the rows
:mod:`pytest_rlgate.data.rows` validates, streamed, with no model and no reward function:
the harness graded the replies, the reader only says which field is the category, the unit
and the score. rlgate's own row files are one format among them.

Readers are registered like environments: :data:`BUILTIN` names the built-in ones (a dict in
code, so they work without the package's entry points installed) and the ``rlgate.readers``
entry-point group adds more (``name = "package.module:READER"``, an object with ``name``,
``sniff(path, head)`` and ``open(path, options)``). :func:`read_rows` opens a path in the
format it names or the one detected; ``path#key=value`` picks read options per side
(``results.json#provider=openai:gpt-4o``).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from ...errors import DataError, UsageError
from ..rows import RowInput, read_rows as _check_rows
from .pairing import check_items, check_sources, describe
from .source import Reader, ReadOptions, RowSource, SideReader

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "ReadOptions", "Reader", "RowSource", "as_side", "check_items",
           "check_sides", "describe", "detect_format", "load_reader", "read_rows", "reader_names"]

#: format name -> "module:attribute" of its reader; the order is the detection order
BUILTIN: dict[str, str] = {
    "rlgate": "pytest_rlgate.data.readers.rlgate:READER",
    "lm-eval": "pytest_rlgate.data.readers.lm_eval:READER",
    "inspect": "pytest_rlgate.data.readers.inspect:READER",
    "promptfoo": "pytest_rlgate.data.readers.promptfoo:READER",
    "verifiers": "pytest_rlgate.data.readers.verifiers:READER",
    "nemo": "pytest_rlgate.data.readers.nemo:READER",
}
ENTRY_POINT_GROUP = "rlgate.readers"
_HEAD = 4096
_MISSING = ("no such row file or eval-harness log (write rows with pytest_rlgate.write_rows or rlgate eval, or "
            "point at the harness's output)")


@functools.lru_cache(maxsize=1)
def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTIN}


def reader_names() -> list[str]:
    """Every format a path can be read as: the built-in ones, then the entry points'."""
    return [*BUILTIN, *sorted(_plugins())]


@functools.cache
def load_reader(name: str) -> Reader:
    """The reader of format *name* (built in, or an ``rlgate.readers`` entry point)."""
    target = BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise UsageError(f"--format {name!r}: no such format; choose one of {', '.join(reader_names())}")
    module, _, attr = target.partition(":")
    try:
        reader = getattr(importlib.import_module(module), attr or "READER")
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"format {name!r}: cannot load its reader {target} ({exc})") from None
    return reader  # type: ignore[no-any-return]


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
        return "rlgate"
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


def read_rows(
    source: RowInput,
    format: str | None = None,
    *,
    category: str | None = None,
    unit: str | None = None,
    metric: str | None = None,
    pass_threshold: float | None = None,
    filter: str | None = None,
    provider: str | None = None,
    allow_prompt_change: bool = False,
) -> RowSource:
    """Open a row file or a harness's output as rows: an iterable with ``header``, re-read on each pass.

    The options are :class:`~pytest_rlgate.options.ReadOptions`' fields.
    *format* is a name of :func:`reader_names` (default: detected). *category* and *unit*
    are dotted paths into the harness's record (lm-eval: ``doc.subject``, or ``task`` /
    ``group``; Inspect: a ``metadata`` key), *metric* the score (lm-eval metric, Inspect
    scorer, promptfoo named score, verifiers metric), *pass_threshold* what passes for a
    non-binary score, *filter* an lm-eval filter, *provider* a promptfoo provider id.
    ``path#key=value`` sets an option for this path alone. Iterating yields validated-shape
    row dicts; bad input is a :class:`~pytest_rlgate.errors.DataError` at ``file:line``.
    An iterable of row dicts is validated as it streams (a generator, as before readers).
    """
    if isinstance(source, RowSource):
        return source
    if not isinstance(source, (str, os.PathLike)):
        return _check_rows(source)  # type: ignore[return-value]  # rows in memory: validated as they stream
    path, picked = _split(source)
    unknown = sorted(set(picked) - set(ReadOptions.names()))
    if unknown:
        raise UsageError(f"{os.fspath(source)!r}: unknown option(s) after '#': {', '.join(unknown)} "
                         f"(known: {', '.join(ReadOptions.names())})")
    if "pass_threshold" in picked:
        try:
            pass_threshold = float(picked["pass_threshold"])
        except ValueError:
            raise UsageError(f"{os.fspath(source)!r}: pass_threshold must be a number") from None
    if "allow_prompt_change" in picked:
        allow_prompt_change = picked["allow_prompt_change"].lower() in ("1", "true", "yes")
    options = ReadOptions(format=picked.get("format", format), category=picked.get("category", category),
                          unit=picked.get("unit", unit), metric=picked.get("metric", metric),
                          pass_threshold=pass_threshold, filter=picked.get("filter", filter),
                          provider=picked.get("provider", provider), allow_prompt_change=allow_prompt_change)
    format = options.format
    name = format or detect_format(path)
    if not path.exists():
        raise DataError(_MISSING, path=path)
    opened = load_reader(name).open(path, options)
    if picked:
        opened.spec = os.fspath(source)  # two providers of one file are two sides: their labels must differ
    return opened


def as_side(source: RowInput) -> RowInput:
    """What the gate reads for one side: rlgate row files stay paths (the gate's own fast reader), a
    harness's log becomes its :class:`RowSource`; rows in memory pass through."""
    if isinstance(source, RowSource):
        return source.path if source.format == "rlgate" else source
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        path = Path(text)
        if not path.exists() and "#" not in text:
            return source  # the gate's reader names the missing file
        if path.is_file() and detect_format(path) == "rlgate":
            return source
        opened = read_rows(source)
        return opened.path if opened.format == "rlgate" else opened
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
