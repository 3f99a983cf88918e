"""JSON lines of a harness's log, one object at a time, through the one JSONL reader.

:func:`pytest_rlgate.data.jsonl.iter_json_lines` decides what a line is and what a value may
hold (plain or gzip, lines end at ``\\n`` only, numbers a double holds, nesting bounded) for
every JSONL format rlgate reads, harness logs included; this module only adds the check
that a line is an object, named at ``file:line``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ...errors import DataError
from ..jsonl import iter_checked_lines, iter_json_lines

__all__ = ["json_lines", "lines_of", "not_an_object", "parsed_lines"]

_WHAT = "harness log"
_FIX = "point at the file or folder the harness wrote"


def parsed_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` of every non-blank line; the caller checks ``type(value) is dict`` in its hot loop."""
    return iter_json_lines(path, what=_WHAT, fix=_FIX)


def lines_of(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any, bool]]:
    """:func:`parsed_lines` as the JSONL reader's own ``(line, value, checked)`` stream, for the hottest loops."""
    return iter_checked_lines(path, what=_WHAT, fix=_FIX)


def not_an_object(value: Any, path: str, line: int) -> DataError:
    return DataError(f"expected a JSON object per line, got {type(value).__name__}", path=path, line=line)


def json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, object)`` for every non-blank line of a JSONL(.gz) file."""
    label = os.fspath(path)
    for line, obj in parsed_lines(path):
        if type(obj) is not dict:
            raise not_an_object(obj, label, line)
        yield line, obj
