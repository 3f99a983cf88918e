"""Policies: load a base model (hub id, local folder or a shipped tiny policy) + adapter.

Every policy goes through ``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained``, the
tiny ones included (they are folders of package data), so the CPU test path and the GPU path
with a hub model are the same code. ``trust_remote_code`` stays off: a gate must not run
code shipped with the model it is judging.

The tiny policies (``rlgate/tiny-refund``, ``rlgate/tiny-arith``) ship built, with the
SHA-256 of every file and the exact spec beside the weights: loading verifies the hashes
and never builds. ``rlgate policy build`` (:func:`build_tiny_policy`) rebuilds one from
its environment's spec, into the artifact cache or a folder of your choice.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._io import cache
from ..environment.contract import Env, EnvSpec, load_env
from ..errors import UsageError
from .lora import attach_adapter
from .models import fetched_model_dir, is_model_name
from .tiny.build import build_policy, versions
from .tiny.manifest import verify
from .tiny.spec import TINY_POLICY, TINY_PREFIX, TinySpec, spec_of
from .warm import is_warm_name, warm_model_dir

if TYPE_CHECKING:
    import torch

    from .handles import Model, Tokenizer

_Loaded = TypeVar("_Loaded", covariant=True)


class _Pretrained(Protocol[_Loaded]):
    """A transformers ``Auto*`` class: what ``from_pretrained`` builds."""

    def from_pretrained(self, source: str, **kwargs: Any) -> _Loaded: ...

__all__ = [
    "SHIPPED_POLICIES",
    "TINY_POLICY",
    "build_tiny_policy",
    "load_policy",
    "tiny_policy_dir",
    "tiny_policy_key",
    "tiny_policy_names",
]

#: The package-data folder holding one built tiny policy per built-in environment.
SHIPPED_POLICIES = Path(__file__).parent / "shipped"

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def tiny_policy_names() -> list[str]:
    """The shipped tiny policies' names, e.g. ``['rlgate/tiny-arith', 'rlgate/tiny-refund']``."""
    return sorted(TINY_PREFIX + p.name.removeprefix("tiny-") for p in SHIPPED_POLICIES.glob("tiny-*") if p.is_dir())


def _shipped(name: str) -> Path:
    folder = SHIPPED_POLICIES / name.removeprefix("rlgate/")
    if not name.startswith(TINY_PREFIX) or not folder.is_dir():
        raise UsageError(f"no shipped tiny policy {name!r}; shipped: {', '.join(tiny_policy_names())}. For "
                         "another environment, build one with `rlgate policy build --env SPEC --out DIR` "
                         "and pass that folder")
    return folder


@functools.lru_cache(maxsize=8)
def _verified(name: str) -> tuple[Path, str]:
    folder = _shipped(name)
    return folder, verify(folder)["content_sha256"]


def tiny_policy_dir(name: str = TINY_POLICY) -> Path:
    """The folder of a shipped tiny policy, after checking every file against its SHA-256.

    Never builds. The hashes are checked once a process (about 30 ms); a corrupt or missing
    file is a :class:`UsageError` naming it and the fix.
    """
    return _verified(name)[0]


def tiny_policy_key(name: str = TINY_POLICY) -> str:
    """The shipped tiny policy's content hash (``sha256:...``): its identity in cache keys."""
    return _verified(name)[1]


def build_tiny_policy(env: EnvSpec = None, out: str | os.PathLike[str] | None = None, *,
                      spec: TinySpec | None = None, progress: bool | None = None,
                      root: str | os.PathLike[str] | None = None) -> Path:
    """Build an environment's tiny policy from nothing (minutes on CPU); returns its folder.

    *env* is an environment or a spec (default: the default environment); *spec*
    overrides its ``tiny_policy`` (a variant, for benchmarks). With *out*, the policy is
    built into that folder (which must not exist or be empty); without, into the artifact
    cache (:mod:`pytest_rlgate._io.cache`, *root* overrides its root) under ``policy/<key>``,
    where a second call returns at once. *progress* shows the build's bar (None: when stderr
    is a terminal).
    """
    env = load_env(env)
    spec = spec or spec_of(env)
    if out is not None:
        folder = Path(out).expanduser()
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise UsageError("output folder is not empty; pass a new or empty folder to --out", path=folder)
        folder.mkdir(parents=True, exist_ok=True)
        build_policy(folder, env, spec, progress=progress)
        return folder
    return cache.cached_dir("policy", _build_key(env, spec),
                            lambda tmp: build_policy(tmp, env, spec, progress=progress), root=root)


def _build_key(env: Env, spec: TinySpec) -> str:
    """A local build's cache key: spec, library versions, and the code that builds it (the
    builder's and the module of the spec's corpus)."""
    digest = hashlib.sha256()
    sources = sorted((Path(__file__).parent / "tiny").glob("*.py"))
    sources.append(Path(inspect.getfile(type(spec.corpus))))
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return cache.key(spec=spec.as_dict(), environment=env.describe(), versions=versions(),
                     source=digest.hexdigest())


def _resolve(name_or_path: str | os.PathLike[str]) -> tuple[str, bool]:
    """(what to hand to from_pretrained, whether it is a local folder)."""
    text = os.fspath(name_or_path)
    if text.startswith(TINY_PREFIX):
        return str(tiny_policy_dir(text)), True
    if is_model_name(text):  # a registry model: its converted folder, or the line naming the fetch command
        return str(fetched_model_dir(text)), True
    if is_warm_name(text):  # a registry model warm-started for an environment, or the line naming its command
        return str(warm_model_dir(text)), True
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError("not a model folder (no config.json); pass a folder written by "
                             "save_pretrained or a hub id", path=path)
        return str(path), True
    if path.exists() or not _HUB_ID.fullmatch(text):  # a hub id is "name" or "owner/name"
        raise UsageError(f"base model folder {text!r} does not exist; pass an existing folder, "
                         f"a hub id such as Qwen/Qwen2.5-0.5B-Instruct, or {TINY_POLICY!r}", path=text)
    return text, False


def _from_pretrained(cls: _Pretrained[_Loaded], source: str, local: bool, **kwargs: object) -> _Loaded:
    """Load from a folder, else the hub cache, else (when online) the hub; errors name the fix."""
    if local:
        return cls.from_pretrained(source, local_files_only=True, trust_remote_code=False, **kwargs)
    try:
        return cls.from_pretrained(source, local_files_only=True, trust_remote_code=False, **kwargs)
    except OSError:
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
            reason = "HF_HUB_OFFLINE is set and it is not in the local hub cache"
        else:
            try:
                return cls.from_pretrained(source, trust_remote_code=False, **kwargs)
            except OSError as exc:
                reason = (str(exc).strip().splitlines() or ["not found"])[0][:200]
    raise UsageError(
        f"base model {source!r} is no local folder and cannot be loaded offline ({reason}); "
        f"download it first on a "
        f"machine with network (`hf download {source}`) and copy the hub cache, or pass a local "
        f"folder saved with save_pretrained, or use the embedded {TINY_POLICY!r}"
    )


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_policy(
    name_or_path: str | os.PathLike[str] = TINY_POLICY,
    *,
    adapter: str | os.PathLike[str] | None = None,
    device: str | None = None,
    dtype: torch.dtype | str | None = None,
) -> tuple[Model, Tokenizer]:
    """``(model, tokenizer)`` for a hub id, a local folder or a tiny policy (``rlgate/tiny-<env>``).

    *adapter* is a PEFT adapter folder put on top (a ``PeftModel``; sampling can switch it
    off). *device* defaults to CUDA when available; *dtype* to float32 on CPU and bfloat16
    on CUDA. The tokenizer pads on the left (batched generation) and always has a pad
    token. The model is in eval mode.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, local = _resolve(name_or_path)
    device = device or _default_device()
    if dtype is None:
        dtype = torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    elif isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    tokenizer = _from_pretrained(AutoTokenizer, source, local)
    model = _from_pretrained(AutoModelForCausalLM, source, local, dtype=dtype)
    tokenizer.padding_side = "left"  # does not survive save_pretrained when set afterwards (G8)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if adapter is not None:
        model = attach_adapter(model, adapter, flag="adapter")
    model.to(device)
    model.eval()
    return model, tokenizer
