"""The one reader of JSON-lines files: row files, prompt files, JSONL reward tables, other tools' logs.

Every JSONL format rlgate reads goes through :func:`iter_json_lines`, so they all agree on
what a line is and what a value may hold:

* a line ends at ``\\n`` only. U+2028, U+2029, ``\\x85``, ``\\x0c`` or ``\\r`` inside a JSON
  string are text (``str.splitlines`` would cut a prompt there); a trailing ``\\r`` is
  whitespace. Blank lines are skipped; a byte-order mark on the first line is an editor's
  habit, not an error.
* a file that starts with gzip's magic bytes is decompressed, whatever its name.
* every number is one a double holds (NaN, ``Infinity`` and literals that overflow, such as a
  400-digit integer or ``1e400``, are refused, and Python never converts a 5000-digit string),
  and no value nests deeper than :data:`~pytest_rlgate.options.MAX_DEPTH` levels, so nothing
  read here can overflow or recurse later.

The common line takes a fast parser (orjson when installed, else the standard library's C
scanner) and a cheap test that it cannot break a bound; any other line is parsed again by
:func:`loads_bounded`, whose verdict is exact and names the line, the field and the fix.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import math
import os
import zlib
from collections.abc import Callable, Generator
from typing import IO, Any

from ..errors import DataError, hide_user_errors
from ..options import MAX_DEPTH, MAX_NUMBER_DIGITS
from ..records import JSON

try:  # a dependency; the standard library's scanner stands in where it cannot be installed
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None  # type: ignore[assignment]

__all__ = ["GZIP_ERRORS", "GZIP_MAGIC", "iter_checked_lines", "iter_json_lines", "loads_bounded", "open_lines"]

#: a user's test that hands rlgate a bad file fails with its one line, not these frames
__tracebackhide__ = hide_user_errors

GZIP_MAGIC = b"\x1f\x8b"
#: what a damaged or truncated gzip stream raises while it is read
GZIP_ERRORS: tuple[type[BaseException], ...] = (gzip.BadGzipFile, EOFError, zlib.error)
_BOM = codecs.BOM_UTF8


def open_lines(path: str | os.PathLike[str], *, what: str = "row file", fix: str = "") -> IO[bytes]:
    """*path* opened for reading as binary lines, decompressed when it starts like gzip.

    A missing file (saying *fix*), a folder or an unreadable file is a :class:`DataError`
    naming it as *what*. Closing the handle closes the file.
    """
    label = os.fspath(path)
    try:
        with open(path, "rb") as probe:
            packed = probe.read(2) == GZIP_MAGIC
        if not packed:
            return open(path, "rb")
        # lines come out of BufferedReader's C code, not GzipFile's Python readline
        return io.BufferedReader(gzip.GzipFile(path, "rb"), buffer_size=1 << 16)
    except FileNotFoundError:
        raise DataError(f"no such {what}" + (f" ({fix})" if fix else ""), path=label) from None
    except IsADirectoryError:
        raise DataError(f"is a directory, expected a JSONL {what}", path=label) from None
    except OSError as exc:
        raise DataError(f"cannot read the {what}: {exc.strerror or exc}", path=label) from None


class _Refused:
    """A number the bounds refuse, left in place so the walk can name the field that holds it."""

    __slots__ = ("why",)
    #: how many were made, ever: the fast scanner compares it around a line
    made = 0

    def __init__(self, why: str) -> None:
        self.why = why
        _Refused.made += 1


def _int(text: str) -> int | _Refused:
    digits = len(text) - (text[0] == "-")
    if digits > MAX_NUMBER_DIGITS:  # int() of it is slow, or refused beyond 4300 digits
        return _Refused(f"a {digits}-digit integer is beyond a double's range")
    value = int(text)
    try:
        float(value)
    except OverflowError:
        return _Refused(f"a {digits}-digit integer is beyond a double's range")
    return value


def _float(text: str) -> float | _Refused:
    if len(text) > 4 * MAX_NUMBER_DIGITS:
        return _Refused(f"a number written with {len(text)} characters")
    value = float(text)
    return value if math.isfinite(value) else _Refused(f"{text[:24]} overflows a double (it reads as infinity)")


def _constant(text: str) -> _Refused:
    return _Refused(f"{text} is not a number JSON allows")


def _decoder() -> json.JSONDecoder:
    return json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


_EXACT = _decoder()
_NUMBER_FIX = "write a finite number within ±1.8e308 (no NaN, no Infinity)"


def _field(path: list[str | int]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def _first_problem(value: object) -> tuple[str, str] | None:
    """``(field, why)`` of the first refused number or too-deep value in *value*, else None."""
    stack: list[tuple[object, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Refused):
            return _field(path), f"{item.why}; {_NUMBER_FIX}"
        if isinstance(item, (dict, list)):
            if len(path) >= MAX_DEPTH:
                return _field(path[:3]), (f"nested deeper than {MAX_DEPTH} levels; a value needs a handful "
                                          "(flatten it)")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((child, [*path, key]) for key, child in reversed(list(pairs)))
    return None


def _unit(what: str) -> str:
    """``row`` for a "row file": what one line of the file holds."""
    return what.split()[0] if what.endswith(" file") else "line"


def loads_bounded(text: str | bytes, where: str, line: int | None = None, *, what: str = "row file") -> JSON:
    """The JSON value of *text* within the bounds, or a :class:`DataError` at ``where:line`` saying why.

    The exact verdict: not UTF-8, not JSON (a line that ends without ``\\n`` is called
    truncated), NaN or Infinity, a number that overflows a double, nesting deeper than
    ``MAX_DEPTH``; each names the field that holds it when there is one.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"not UTF-8 text at byte {exc.start} (a {what} is UTF-8 JSON lines); save it as UTF-8",
                            path=where, line=line) from None
    try:
        value: JSON = _EXACT.decode(text)
    except RecursionError:
        raise DataError(f"nested deeper than {MAX_DEPTH} levels; a value needs a handful (flatten it)",
                        path=where, line=line) from None
    except json.JSONDecodeError as exc:
        truncated = line is not None and not text.endswith("\n")
        kind = f"truncated line (the file ends mid-{_unit(what)})" if truncated else "not valid JSON"
        if line is None:  # a whole JSON file: the error's own line
            raise DataError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=where, line=exc.lineno) from None
        raise DataError(f"{kind}: {exc.msg} (column {exc.colno}); each line is one JSON value",
                        path=where, line=line) from None
    except ValueError as exc:  # pragma: no cover - the hooks bound every number first
        raise DataError(f"not usable JSON ({exc})", path=where, line=line) from None
    problem = _first_problem(value)
    if problem is not None:
        field, why = problem
        raise DataError(f"{'field ' + repr(field) + ': ' if field else ''}{why}", path=where, line=line)
    return value


#: the bounded decoder's C scanner: what ``raw_decode`` calls, without its Python frame
_scan_once = _EXACT.scan_once  # type: ignore[attr-defined]


def _stdlib_fast(raw: bytes) -> JSON:
    """One line through the standard library's C scanner, without ``json.loads``' wrappers.

    Raises ValueError or StopIteration for anything unusual (bad UTF-8, bad JSON, leading
    whitespace, trailing data): :func:`loads_bounded` then decides, so this only ever
    accepts what it accepts (a refused number sends the line there too).
    """
    text = raw.decode("utf-8")
    refused = _Refused.made
    obj: JSON
    obj, end = _scan_once(text, 0)
    if _Refused.made != refused:
        raise ValueError("a refused number")
    size = len(text)
    if end != size and (text[end] != "\n" or end != size - 1) and text[end:].strip():
        raise ValueError("trailing data")
    return obj


#: the fast parser: raises ValueError (orjson's errors subclass it), StopIteration or
#: RecursionError on anything it will not parse; the exact parser then decides
_FAST: Callable[[bytes], JSON] = _stdlib_fast if _orjson is None else _orjson.loads


def iter_json_lines(
    path: str | os.PathLike[str],
    *,
    what: str = "row file",
    fix: str = "",
    on_error: Callable[[DataError], None] | None = None,
) -> Generator[tuple[int, Any], None, None]:
    """``(line number, value)`` of each non-blank line of the JSONL (or gzip-compressed) file *path*.

    A value is any :data:`~pytest_rlgate.records.JSON`; each reader narrows it to the
    shape its format promises (``isinstance(value, dict)``) at the line it names.

    :param what: what the file is, for messages ("row file", "prompts file", "reward table").
    :param fix: how to get the file, said when it is missing.
    :param on_error: called with the :class:`DataError` of each bad line, which is then
        skipped (a reader that reports every bad line); by default the first one is raised.
    :raises DataError: naming ``file:line`` and the fix (a missing file, a folder, damaged
        gzip, bad UTF-8 or JSON, a refused number or nesting).
    """
    for number, value, _checked in iter_checked_lines(path, what=what, fix=fix, on_error=on_error):
        yield number, value


def iter_checked_lines(
    path: str | os.PathLike[str],
    *,
    what: str = "row file",
    fix: str = "",
    on_error: Callable[[DataError], None] | None = None,
    check: Callable[[JSON], bool] | None = None,
    nesting: bool = True,
) -> Generator[tuple[int, JSON, bool], None, None]:
    """:func:`iter_json_lines` for a hot loop: ``(line, value, checked)``, *check* applied on the way.

    ``checked`` is True when the fast parse of the line passed ``check(value)`` (the
    caller's cheap test of a plain, valid value), so the caller need not look again. Any
    other line is read by the exact parser (orjson reads an integer beyond 64 bits as a
    float: the caller then judges the value the standard library reads) and comes with
    ``checked`` False, for the caller's full validation.

    ``nesting=False`` leaves out the bracket count that rules out deep nesting (up to a
    third of the parse of a long line) for a caller that keeps a few fields of each line and
    checks their depth itself; it takes effect only with orjson, which refuses more than
    1,024 levels without recursing.
    """
    label = os.fspath(path)
    fast = _FAST
    count = nesting or _orjson is None
    handle = open_lines(path, what=what, fix=fix)
    try:
        for number, raw in enumerate(handle, 1):
            try:
                value = fast(raw)
            except (ValueError, StopIteration, RecursionError):
                if not raw.strip():
                    continue
                if number == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM):]
                    if not raw.strip():
                        continue
            else:
                if (not count or raw.count(b"{") + raw.count(b"[") < MAX_DEPTH) and (check is None or check(value)):
                    yield number, value, check is not None
                    continue
            # the exact verdict: the line is refused, too bracketed to rule out deep nesting,
            # or not what *check* accepts as it was read fast
            exact = _exact(raw, label, number, what, on_error)
            if not isinstance(exact, _Skipped):
                yield number, exact, False
    except GZIP_ERRORS as exc:
        raise DataError(f"damaged or truncated gzip file ({exc}); write it again", path=label) from None
    finally:
        handle.close()


class _Skipped:
    """A bad line that *on_error* was told about: the reader goes on without it."""


_SKIP = _Skipped()


def _exact(raw: bytes, label: str, number: int, what: str,
           on_error: Callable[[DataError], None] | None) -> JSON | _Skipped:
    try:
        return loads_bounded(raw, label, number, what=what)
    except DataError as exc:
        if on_error is None:
            raise
        on_error(exc)
        return _SKIP
