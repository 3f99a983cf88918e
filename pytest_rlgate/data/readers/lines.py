"""JSON lines of a harness's log, one object at a time, through the one JSONL reader.

:func:`pytest_rlgate.data.jsonl.iter_json_lines` decides what a line is and what a value may
hold (plain or gzip, lines end at ``\\n`` only, numbers a double holds, nesting bounded) for
every JSONL format rlgate reads, harness logs included; this module adds the check that a
line is an object, named at ``file:line``.

A harness's line is large (lm-eval's carries the document, every request and every
response) and a reader keeps a handful of its fields. :func:`record_lines` reads such a log
with the same parser and the same verdict on every line that parser refuses, but leaves
out the one bound that costs as much as a third of the parse on a long line, the count of
brackets that rules out deep nesting: orjson refuses more than 1,024 levels itself, never
recursing, and the reader checks that each value it keeps or names is no deeper than a row
may hold (:func:`check_depth`). Without orjson it is :func:`parsed_lines`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...errors import DataError, hide_user_errors
from ...options import MAX_DEPTH
from ..jsonl import iter_checked_lines, iter_json_lines

__all__ = ["check_depth", "json_lines", "json_object", "not_an_object", "parsed_lines", "record_lines"]

#: a bad log read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

_WHAT = "harness log"
_FIX = "point at the file or folder the harness wrote"
_SCALARS = (str, int, float, bool, type(None))


def parsed_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, object]]:
    """``(line, value)`` of every non-blank line; the caller checks ``type(value) is dict`` in its hot loop."""
    return iter_json_lines(path, what=_WHAT, fix=_FIX)


def record_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, object, bool]]:
    """``(line, value, checked)`` for a reader that keeps a few fields of each line and checks their depth.

    Any line the fast parser refuses gets the one JSONL reader's exact verdict at
    ``file:line``; only the nesting of values the reader never looks at goes unchecked.
    """
    return iter_checked_lines(path, what=_WHAT, fix=_FIX, nesting=False)


def _depth(value: object) -> int:
    """How many levels *value* nests (0 for a scalar), counted without recursion, stopping past the bound."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        if level > MAX_DEPTH:
            return level
        deepest = max(deepest, level)
        stack.extend((child, level) for child in children if not isinstance(child, _SCALARS))
    return deepest


def check_depth(fields: Mapping[str, object], path: str, line: int) -> None:
    """Refuse, naming the field, a value a reader keeps that nests deeper than a row may hold.

    *fields* maps each field's name in the line to its value; scalars pass at once. One
    level is the record that holds the value, so the bound is the one JSONL reader's.
    """
    for name, value in fields.items():
        if not isinstance(value, _SCALARS) and _depth(value) >= MAX_DEPTH:
            raise DataError(f"field {name!r}: nested deeper than {MAX_DEPTH} levels; a value needs a handful "
                            "(flatten it)", path=path, line=line)


def not_an_object(value: object, path: str, line: int) -> DataError:
    return DataError(f"expected a JSON object per line, got {type(value).__name__}", path=path, line=line)


def json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, object]]]:
    """``(line, object)`` for every non-blank line of a JSONL(.gz) file."""
    label = os.fspath(path)
    for line, obj in parsed_lines(path):
        if type(obj) is not dict:
            raise not_an_object(obj, label, line)
        yield line, obj


def json_object(path: Path, what: str) -> dict[str, object]:
    """A file holding one JSON object (a results file, a bundle), or a DataError naming *what* it is not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"not {what}: {exc}", path=path) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror}", path=path) from None
    if not isinstance(data, dict):
        raise DataError(f"not {what} (expected a JSON object)", path=path)
    return data
