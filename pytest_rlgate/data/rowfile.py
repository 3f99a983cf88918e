"""Row files on disk: plain or gzip-compressed JSON lines.

Kept apart from the row schema (:mod:`pytest_rlgate.data.rows`) because it is about bytes, not
fields. Lines are read by the one JSONL reader, :mod:`pytest_rlgate.data.jsonl` (a file is
gzip when it *starts* with gzip's magic bytes, whatever its name, so a renamed ``.gz`` still
reads); a file is written compressed when its name ends in ``.gz``. Compressed files are
written reproducibly (no timestamp, no file name in the gzip header) so the same rows give
the same bytes, which keeps a baseline committed to a repository from changing on every
rewrite.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
from collections.abc import Iterator
from typing import IO

from .._io.atomic import atomic_open
from ..errors import hide_user_errors
from .jsonl import GZIP_ERRORS, GZIP_MAGIC, open_lines

__all__ = ["GZIP_ERRORS", "GZIP_MAGIC", "is_gzip_name", "open_rows", "write_lines"]

#: a user's test that hands rlgate a bad file or spec fails with its one line, not these frames
__tracebackhide__ = hide_user_errors

#: how row files are named in messages, and how to get one
ROW_FILE = "row file"
ROW_FILE_FIX = "write one with pytest_rlgate.write_rows or rlgate eval"


def is_gzip_name(path: str | os.PathLike[str]) -> bool:
    """Whether a file of this name is written gzip-compressed (``.gz``, e.g. ``rows.jsonl.gz``)."""
    return os.fspath(path).endswith(".gz")


def open_rows(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open a row file for reading as binary lines, decompressing when it starts like gzip.

    A missing file, a folder or an unreadable file is a :class:`DataError` naming it.
    Closing the handle closes the file.
    """
    return open_lines(path, what=ROW_FILE, fix=ROW_FILE_FIX)


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
