"""Row files on disk: plain or gzip-compressed JSON lines, and the fastest correct line parser.

Kept apart from the row schema (:mod:`pytest_rlgate.data.rows`) because it is about bytes, not
fields. A file is gzip when it *starts* with gzip's magic bytes, whatever its name, so a
renamed ``.gz`` still reads; it is written compressed when its name ends in ``.gz``.
Compressed files are written reproducibly (no timestamp, no file name in the gzip header)
so the same rows give the same bytes, which keeps a baseline committed to a repository
from changing on every rewrite.

Parsing is the gate's floor on large files. orjson, when installed, parses a line several
times faster than the standard library; it is an optional speed-up, never a requirement:
any line it refuses is parsed again by the standard library, which accepts or names the
error exactly as it would without orjson.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any

from .._io.atomic import atomic_open
from ..errors import DataError, hide_user_errors

try:  # an optional speed-up: pip install pytest-rlgate[fast]
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None  # type: ignore[assignment]

__all__ = ["GZIP_ERRORS", "GZIP_MAGIC", "gzip_error", "is_gzip_name", "line_parser", "open_rows", "parse_line",
           "write_lines"]

#: a user's test that hands rlgate a bad file or spec fails with its one line, not these frames
__tracebackhide__ = hide_user_errors

GZIP_MAGIC = b"\x1f\x8b"
#: what a damaged or truncated gzip stream raises while it is read
GZIP_ERRORS: tuple[type[BaseException], ...] = (gzip.BadGzipFile, EOFError, zlib.error)


def is_gzip_name(path: str | os.PathLike[str]) -> bool:
    """Whether a file of this name is written gzip-compressed (``.gz``, e.g. ``rows.jsonl.gz``)."""
    return os.fspath(path).endswith(".gz")


def open_rows(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open a row file for reading as binary lines, decompressing when it starts like gzip.

    A missing file, a folder or an unreadable file is a :class:`DataError` naming it.
    Closing the handle closes the file.
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
        raise DataError("no such row file (write one with pytest_rlgate.write_rows or rlgate eval)",
                        path=label) from None
    except IsADirectoryError:
        raise DataError("is a directory, expected a JSONL row file", path=label) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror}", path=label) from None


def gzip_error(exc: BaseException, path: str | os.PathLike[str]) -> DataError:
    """A damaged or truncated gzip file (one of :data:`GZIP_ERRORS`), as one line naming it."""
    return DataError(f"damaged or truncated gzip file ({exc}); write it again", path=os.fspath(path))


@contextlib.contextmanager
def write_lines(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """A text handle that writes *path* atomically (gzip-compressed for a ``.gz`` name)."""
    if not is_gzip_name(path):
        with atomic_open(path) as out:
            yield out
        return
    with atomic_open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as packed, \
            io.TextIOWrapper(packed, encoding="utf-8", newline="\n") as text:
        yield text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (scores and markers must be finite numbers)")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
#: the decoder's C scanner: what ``raw_decode`` calls, without its Python frame
_scan_once = _DECODER.scan_once  # type: ignore[attr-defined]


def parse_line(raw: bytes, *, path: str, line: int) -> Any:
    """The JSON value of one line, or a :class:`DataError` at ``path:line`` saying why not.

    The slow, exact path: every line a fast parser refuses comes here for its verdict.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError("not UTF-8 text (row files are UTF-8 JSON lines)", path=path, line=line) from None
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise DataError("JSON nested too deeply (a row is a flat object with a markers object)",
                        path=path, line=line) from None
    except ValueError as exc:
        truncated = not text.endswith("\n")
        what = "truncated line (the file ends mid-row)" if truncated else "not valid JSON"
        raise DataError(f"{what}: {exc}", path=path, line=line) from None


def _stdlib_fast(raw: bytes) -> Any:
    """One line through the standard library's C scanner, without ``json.loads``' wrappers.

    Raises ValueError or StopIteration for anything unusual (bad UTF-8, bad JSON, leading
    whitespace, trailing data): :func:`parse_line` then decides, so this only ever accepts
    what ``json.loads`` accepts. Half the cost of ``json.loads(bytes)``, which detects the
    encoding and runs two regular expressions per line in Python.
    """
    text = raw.decode("utf-8")
    obj, end = _scan_once(text, 0)
    size = len(text)
    if end != size and (text[end] != "\n" or end != size - 1) and text[end:].strip():
        raise ValueError("trailing data")
    return obj


def line_parser() -> Callable[[bytes], Any]:
    """The fast line parser: orjson's when it is installed, else the standard library's scanner.

    It raises ValueError (orjson's errors subclass it) or StopIteration on anything it will
    not parse; the caller then asks :func:`parse_line` for the exact verdict.
    """
    return _stdlib_fast if _orjson is None else _orjson.loads
