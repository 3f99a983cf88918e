"""Atomic file writes: readers see the old file or the whole new one, never half of it.

Every file pytest-rlgate writes (prompt sets, graded rows, gate JSON, reports, run
folders) goes through here, so an interrupted write leaves nothing that looks usable. The
temp file is named for its owner (``.<name>.<owner>-<random>.tmp``); one a killed writer
left behind is removed by the next write of the same file (:mod:`pytest_rlgate._io.stale`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import DataError
from .stale import OWNER, sweep, token

__all__ = ["DISK_FULL", "NOT_WRITABLE", "atomic_open", "atomic_write", "disk_errors", "disk_problem", "public_mode"]

#: What a write raises when the disk (or a quota, or a file-size limit) has no room left.
DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
#: What it raises where nothing may be written (a read-only file system, a folder not ours).
NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def disk_problem(exc: OSError, what: str, path: str | os.PathLike[str]) -> DataError | None:
    """The one clear line for a write that found no room, or no right to write; None for other errors."""
    reason = exc.strerror or type(exc).__name__
    if exc.errno in DISK_FULL:
        return DataError(f"cannot write {what}: {reason} (the disk is full, or a quota or file-size limit was hit); "
                         "nothing half-written was left in its place: free some space and run it again", path=path)
    if exc.errno in NOT_WRITABLE:
        return DataError(f"cannot write {what}: {reason} (the folder is read-only or not yours); write it elsewhere, "
                         "or make the folder writable", path=path)
    return None


@contextlib.contextmanager
def disk_errors(path: str | os.PathLike[str], what: str = "the file") -> Iterator[None]:
    """Turn a full disk or a read-only folder met inside the block into one :class:`DataError`
    naming *path*: the user's machine, not a bug (the CLI's exit 2, never a traceback)."""
    try:
        yield
    except OSError as exc:
        problem = disk_problem(exc, what, path)
        if problem is None:
            raise
        raise problem from None


def public_mode(*, directory: bool = False) -> int:
    """The mode a plain ``open`` would give: mkstemp's 0600 would hide files from readers."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """Open a temp sibling of *path* for writing; rename it into place on success.

    An exception inside the block removes the temp file and leaves *path* untouched.
    """
    target = Path(path)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
        kwargs.setdefault("newline", "\n")
    with disk_errors(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        sweep(target.parent, re.compile(rf"\.{re.escape(target.name)}\.{OWNER}-[^.]+\.tmp"))
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{token()}-", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, mode, **kwargs) as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, public_mode())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write *data* to *path* atomically and return the path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as handle:
        handle.write(data)
    return Path(path)
