"""Atomic file writes: readers see the old file or the whole new one, never half of it.

Every file pytest-rlgate writes (prompt sets, graded rows, gate JSON, reports, run
folders) goes through here, so an interrupted write leaves nothing that looks usable. The
temp file is named for its owner (``.<name>.<owner>-<random>.tmp``); one a killed writer
left behind is removed by the next write of the same file (:mod:`pytest_rlgate._io.stale`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .stale import OWNER, sweep, token

__all__ = ["atomic_open", "atomic_write", "public_mode"]


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
    target.parent.mkdir(parents=True, exist_ok=True)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
        kwargs.setdefault("newline", "\n")
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
