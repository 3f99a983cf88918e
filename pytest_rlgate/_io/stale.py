"""Leftovers of killed processes: name them by their owner, remove them on the next run.

Everything pytest-rlgate writes goes to a hidden temporary sibling first (a run's
``.<name>.partial-…`` folder, the cache's ``.tmp-<key>-…`` build, an atomic write's
``.<file>.….tmp``) and is renamed into place when whole. A SIGKILL skips every ``finally``,
so those siblings stay behind, and nothing would ever read them, or remove them. Each
carries an owner :func:`token` (a hash of the host name and the pid); the next writer into
the same folder calls :func:`sweep`, which removes the ones whose owner is gone: on this
host a dead pid, or a live pid that started after the leftover was last written (the pid
was reused); from another host (a shared disk) only leftovers older than ``MAX_AGE``. A
live writer's files are never touched, however long it runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["MAX_AGE", "OWNER", "is_stale", "remove", "sweep", "token"]

#: Leftovers of another host are removed after this many seconds (its pids mean nothing here).
MAX_AGE = 7 * 24 * 3600
#: The regex part that matches a :func:`token`, with groups ``host`` and ``pid``.
OWNER = r"(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)"
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def token() -> str:
    """``<host hash>-<pid>``: put it in a temporary name so :func:`sweep` can tell whose it is."""
    return f"{_HOST}-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _started(pid: int) -> float | None:
    """When process *pid* started (epoch seconds), from /proc; None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def is_stale(path: Path, host: str, pid: int, *, now: float | None = None) -> bool:
    """True when the leftover at *path*, made by ``host-pid``, has no living owner."""
    try:
        written = path.lstat().st_mtime
    except FileNotFoundError:
        return False
    if host == _HOST:
        if pid == os.getpid():
            return False
        if not _alive(pid):
            return True
        started = _started(pid)
        if started is not None:
            return started > written + 1.0  # the pid now belongs to a process younger than the leftover
    return (time.time() if now is None else now) - written > MAX_AGE


def remove(path: Path) -> None:
    """Delete a file or folder tree, quietly if it is already gone."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep(folder: Path, pattern: re.Pattern[str], *, dispose: Callable[[Path, re.Match[str]], None] | None = None,
          ) -> list[Path]:
    """Remove (or hand to *dispose*) the stale entries of *folder* whose name matches *pattern*.

    *pattern* must contain :data:`OWNER`. Returns the entries it disposed of.
    """
    try:
        entries = list(folder.iterdir())
    except OSError:  # no folder yet, or not ours to read: nothing to sweep
        return []
    gone = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and is_stale(entry, match["host"], int(match["pid"])):
            if dispose is None:
                remove(entry)
            else:
                dispose(entry, match)
            gone.append(entry)
    return gone
