"""A content-addressed artifact cache: built once per key, published atomically.

Artifacts that take minutes to make (the tiny policy, trained adapters, sampled rows) live
in ``<root>/<kind>/<key>/`` where *key* hashes everything that determines the artifact.
A build writes into a private temporary sibling folder, drops a completion marker in it,
and only then renames it into place, so a reader sees either nothing or a finished
artifact, never a half-written one. A :mod:`filelock` lock per key makes concurrent
processes (``pytest-xdist`` workers, two CI jobs on one runner) build it exactly once:
the others wait and then read the winner's copy. Temporary folders carry their owner
(:mod:`pytest_rlgate._io.stale`), so the ones a killed build left behind, of any key, are
removed by the next build in the same kind.

The root is, in order: the ``root`` argument, the ``RLGATE_CACHE_DIR`` environment
variable, platformdirs' user cache dir for ``pytest-rlgate``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from .atomic import disk_problem
from .stale import OWNER, sweep, token

if TYPE_CHECKING:
    from ..records import JSON

__all__ = ["CACHE_ENV", "MARKER", "cache_key", "cache_root", "cached_dir", "is_complete", "key"]

#: Environment variable that moves the whole cache (CI points it at a fresh folder).
CACHE_ENV = "RLGATE_CACHE_DIR"
#: File written last inside a build; a folder without it is never served.
MARKER = ".rlgate-complete.json"
#: Prefix of in-progress build folders; a crashed build leaves one behind, cleaned up later.
_TMP_PREFIX = ".tmp-"
#: A build in progress (``.tmp-<key>-<owner>-<hex>``) or a folder being deleted (``.tmp-gone-…``).
_LEFTOVER = re.compile(rf"\.tmp-.+-{OWNER}-[0-9a-f]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def cache_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: *root*, else ``$RLGATE_CACHE_DIR``, else the user cache dir."""
    if root is None:
        root = os.environ.get(CACHE_ENV) or None
    if root is None:
        import platformdirs

        root = platformdirs.user_cache_dir("pytest-rlgate", appauthor=False)
    return Path(root).expanduser()


def _canonical(value: object) -> JSON:
    """Reduce *value* to JSON types so equal inputs always hash alike."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fsdecode(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"cache key part {value!r} is not a finite number; pass a string instead")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise UsageError(
        f"cache key part {value!r} of type {type(value).__name__} is not JSON data; "
        "pass str/int/float/bool/None or lists and dicts of them"
    )


def key(**parts: object) -> str:
    """SHA-256 (hex) of the canonical JSON of *parts* (sorted keys, no whitespace)."""
    text = json.dumps(_canonical(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The package-level name of :func:`key` (``pytest_rlgate.train.cache_key``).
cache_key = key


def is_complete(path: str | os.PathLike[str]) -> bool:
    """True when *path* is a published artifact (its completion marker exists)."""
    return (Path(path) / MARKER).is_file()


def _check_name(what: str, value: str) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise UsageError(
            f"cache {what} {value!r} must be 1-128 letters, digits, '_', '.' or '-' "
            "(not starting with '.' or '-')"
        )


def _remove(path: Path) -> None:
    """Delete *path* without ever exposing a half-deleted artifact under its real name."""
    if not path.exists():
        return
    doomed = path.with_name(f"{_TMP_PREFIX}gone-{path.name}-{token()}-{uuid.uuid4().hex}")
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


@contextlib.contextmanager
def _cache_errors(base: Path) -> Iterator[None]:
    """A full disk or a read-only cache folder, met while an artifact is built or published, is one
    :class:`~pytest_rlgate.DataError` naming the folder and :data:`CACHE_ENV`; nothing is published
    (an atomic write inside the build says so itself, naming its file)."""
    try:
        yield
    except OSError as exc:
        problem = disk_problem(exc, f"the artifact cache ({CACHE_ENV} moves it)", base)
        if problem is None:
            raise
        raise problem from None


def cached_dir(
    kind: str,
    key: str,
    build: Callable[[Path], object],
    *,
    root: str | os.PathLike[str] | None = None,
    rebuild: bool = False,
    lock_timeout: float = -1,
) -> Path:
    """The folder ``<root>/<kind>/<key>``, calling ``build(tmp_dir)`` first if it is missing.

    *build* fills the (existing, empty) folder it is given; if it raises, nothing is
    published and the error propagates. *rebuild* replaces a published artifact.
    *lock_timeout* (seconds, -1 = wait forever) bounds the wait for another builder.
    """
    _check_name("kind", kind)
    _check_name("key", key)
    base = cache_root(root) / kind
    final = base / key
    if not rebuild and is_complete(final):  # a published artifact is served from a read-only cache too
        return final
    from filelock import FileLock, Timeout

    with _cache_errors(base):
        base.mkdir(parents=True, exist_ok=True)
        sweep(base, _LEFTOVER)  # what killed builds of any key left behind; never a live build's folder
        lock = FileLock(str(base / f"{key}.lock"))
        try:
            lock.acquire(timeout=lock_timeout)
        except Timeout:
            raise UsageError(
                f"another process has been building {final} for over {lock_timeout:g} s; "
                f"wait for it or remove {lock.lock_file} if no build is running"
            ) from None
    try:
        if not rebuild and is_complete(final):  # another process built it while we waited
            return final
        # Holding the lock, every leftover temp folder of this key is from a dead build.
        for stale in base.glob(f"{_TMP_PREFIX}{key}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        _remove(final)  # unpublished (no marker) or being rebuilt
        tmp = base / f"{_TMP_PREFIX}{key}-{token()}-{uuid.uuid4().hex[:8]}"
        started = time.time()
        with _cache_errors(base):
            tmp.mkdir()
            try:
                build(tmp)
                meta = {"kind": kind, "key": key, "built_at": started, "build_seconds": time.time() - started}
                (tmp / MARKER).write_text(json.dumps(meta, sort_keys=True) + "\n", encoding="utf-8")
                os.replace(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        return final
    finally:
        lock.release()
