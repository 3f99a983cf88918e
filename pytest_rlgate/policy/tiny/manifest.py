"""A built policy folder's record: the build info file, per-file SHA-256 and the content hash.

Shipped policies are package data; a truncated wheel, a bad checkout (Git LFS pointers,
line-ending rewrites) or a hand edit must fail loudly rather than load a different model.
So the build writes the SHA-256 of every file it produced into :data:`BUILD_INFO`, and
loading recomputes them. Pure hashlib: verifying never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import cast

from ...errors import UsageError
from .warmstart import LossCurve

__all__ = ["BUILD_INFO", "BuildInfo", "content_hash", "file_digests", "read_build_info", "verify"]


class BuildInfo(LossCurve, total=False):
    """What a build records beside the weights (:data:`BUILD_INFO`): the spec, the versions,
    the data mix, the warm start's loss curve and timings, every file's SHA-256."""

    name: str
    environment: dict[str, str]
    recipe: dict[str, object]
    versions: dict[str, str]
    parameters: int
    data_kinds: dict[str, int]
    build_seconds: float
    build_cpu_seconds: float
    files: dict[str, str]
    content_sha256: str

#: Written next to the weights: the spec, versions, timings, loss curve, file hashes.
BUILD_INFO = "rlgate_policy.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digests(folder: str | os.PathLike[str]) -> dict[str, str]:
    """SHA-256 of every file a build wrote (not the build info, not hidden cache markers)."""
    root = Path(folder)
    return {p.name: _sha256(p) for p in sorted(root.iterdir())
            if p.is_file() and p.name != BUILD_INFO and not p.name.startswith(".")}


def content_hash(digests: dict[str, str]) -> str:
    """One SHA-256 over the file names and their digests: the policy's identity."""
    text = "".join(f"{name}\0{digests[name]}\n" for name in sorted(digests))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_build_info(folder: str | os.PathLike[str]) -> BuildInfo:
    """The folder's build info, or a :class:`UsageError` naming the file and the fix."""
    path = Path(folder) / BUILD_INFO
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"tiny policy build info is missing or unreadable ({type(exc).__name__}); "
                         "rebuild it with `rlgate policy build --env ENV --out DIR`", path=path) from None
    if not isinstance(info, dict) or not isinstance(info.get("files"), dict):
        raise UsageError("tiny policy build info has no 'files' hashes; rebuild it with "
                         "`rlgate policy build --env ENV --out DIR`", path=path)
    return cast(BuildInfo, info)  # its file hashes are checked above; the rest is what the build wrote


def verify(folder: str | os.PathLike[str]) -> BuildInfo:
    """The build info after checking every recorded file's SHA-256 and the content hash."""
    info = read_build_info(folder)
    recorded = info["files"]
    found = file_digests(folder)
    bad = sorted(name for name in recorded if found.get(name) != recorded[name])
    if bad or content_hash(recorded) != info.get("content_sha256"):
        what = f"{bad[0]} does not match its recorded SHA-256" if bad else "the content hash does not match"
        raise UsageError(f"tiny policy is corrupt: {what}; reinstall pytest-rlgate or rebuild it with "
                         "`rlgate policy build --env ENV --out DIR`",
                         path=Path(folder) / (bad[0] if bad else BUILD_INFO))
    return info
