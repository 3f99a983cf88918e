"""JSON lines of a harness's log, one object at a time, with exact errors at ``file:line``.

The row files' line reader (:mod:`pytest_rlgate.data.rowfile`): plain or gzip, the fast
parser first and the standard library's verdict on any line it refuses. Blank lines are
skipped; a line that is not an object is a :class:`~pytest_rlgate.errors.DataError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ...errors import DataError
from ..rowfile import GZIP_ERRORS, gzip_error, line_parser, open_rows, parse_line

__all__ = ["json_lines", "parsed_lines"]


def parsed_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` of every line, the fast parser's value as is (not checked to be an object).

    For a reader's hot loop: the caller checks ``type(value) is dict`` itself and hands any
    other value to :func:`not_an_object`. Blank lines and lines the fast parser refuses go
    through the exact parser, which names the error.
    """
    label = os.fspath(path)
    parse = line_parser()
    handle = open_rows(path)
    try:
        for line, raw in enumerate(handle, 1):
            try:
                yield line, parse(raw)
            except (ValueError, StopIteration, RecursionError):
                if raw.strip():
                    yield line, parse_line(raw, path=label, line=line)
    except GZIP_ERRORS as exc:
        raise gzip_error(exc, label) from None
    finally:
        handle.close()


def not_an_object(value: Any, path: str, line: int) -> DataError:
    return DataError(f"expected a JSON object per line, got {type(value).__name__}", path=path, line=line)


def json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line, object)`` for every non-blank line of a JSONL(.gz) file."""
    label = os.fspath(path)
    parse = line_parser()
    handle = open_rows(path)
    try:
        for line, raw in enumerate(handle, 1):
            try:
                obj = parse(raw)
            except (ValueError, StopIteration, RecursionError):
                if not raw.strip():
                    continue
                obj = parse_line(raw, path=label, line=line)
            if type(obj) is not dict:
                raise DataError(f"expected a JSON object per line, got {type(obj).__name__}", path=label, line=line)
            yield line, obj
    except GZIP_ERRORS as exc:
        raise gzip_error(exc, label) from None
    finally:
        handle.close()
