"""What identifies a policy: a base model (a tiny policy's content hash, a folder's files, a
fetched model's registry entry, or a hub id) and a LoRA adapter (its config and weights).

A row file's header, a run's cache key and a watch folder name the model they sampled by
these, so a changed checkpoint under an unchanged name is never mistaken for the old one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .load import tiny_policy_key
from .models import is_model_name, model_identity
from .tiny.manifest import BUILD_INFO
from .tiny.spec import TINY_PREFIX

__all__ = ["adapter_identity", "base_identity", "is_tiny"]


def is_tiny(base_model: str | None) -> bool:
    """True when the base is a tiny policy (any environment's): by name, or a folder its build wrote."""
    if base_model is None:
        return False
    return base_model.startswith(TINY_PREFIX) or (Path(base_model) / BUILD_INFO).is_file()


def base_identity(name_or_path: str) -> dict[str, str]:
    """What identifies a base model: a tiny policy's content hash, a folder's files, or a hub id."""
    if name_or_path.startswith(TINY_PREFIX):
        return {"tiny": tiny_policy_key(name_or_path)}
    if is_model_name(name_or_path):
        return model_identity(name_or_path)
    folder = Path(name_or_path)
    if folder.is_dir():
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            small = path.stat().st_size < 64 << 20  # hash small files whole, name large ones by size
            content = path.read_bytes() if small else str(path.stat().st_size).encode()
            digest.update(path.name.encode() + b"\0" + content)
        return {"folder": digest.hexdigest()}
    return {"hub": name_or_path}


def adapter_identity(path: str | os.PathLike[str]) -> str:
    """SHA-256 of an adapter folder's config and weights (a handed-in adapter's cache identity)."""
    digest = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        digest.update((Path(path) / name).read_bytes())
    return digest.hexdigest()
