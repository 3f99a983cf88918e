"""Policies: load a base model (hub id, local folder or the embedded tiny policy) + adapter.

Every policy goes through ``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained``, the
tiny default included (it is built into a folder first), so the CPU test path and the GPU
path with a hub model are the same code. ``trust_remote_code`` stays off: a gate must not
run code shipped with the model it is judging.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError

if TYPE_CHECKING:
    from .tiny.build import Recipe

__all__ = ["TINY_POLICY", "load_policy", "tiny_policy_dir", "tiny_policy_key"]

#: Name of the embedded default policy (built locally, never downloaded).
TINY_POLICY = "rlgate/tiny-refund"

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def _source_digest() -> str:
    """SHA-256 of the tiny-policy code, so editing the recipe's code rebuilds the policy."""
    digest = hashlib.sha256()
    for path in sorted((Path(__file__).parent / "tiny").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def tiny_policy_key(recipe: Recipe | None = None) -> str:
    """The cache key of the tiny policy: recipe, library versions, code, system prompt and the
    prompt writer's texts it trains on (so a change to the writer rebuilds the policy)."""
    from . import cache
    from .envs import refund
    from .tiny.build import RECIPE, versions
    from .tiny.corpus import writer_prompts

    recipe = recipe or RECIPE
    return cache.key(
        recipe=recipe.as_dict(),
        writer_prompts=cache.key(texts=writer_prompts(recipe.writer_seeds)),
        versions=versions(),
        source=_source_digest(),
        system=hashlib.sha256(refund.SYSTEM.encode("utf-8")).hexdigest(),
    )


def tiny_policy_dir(*, rebuild: bool = False, root: str | os.PathLike[str] | None = None,
                    progress: bool = True, recipe: Recipe | None = None) -> Path:
    """The folder of the tiny default policy, built (minutes on CPU) the first time only.

    The build is deterministic and cached under ``policy/<key>`` in the artifact cache
    (:mod:`pytest_rlgate.cache`); concurrent callers build it once. *rebuild* forces a
    fresh build; *root* overrides the cache root; *recipe* builds a variant (benchmarks).
    """
    from . import cache
    from .tiny.build import RECIPE, build_policy

    recipe = recipe or RECIPE
    return cache.cached_dir(
        "policy", tiny_policy_key(recipe), lambda out: build_policy(out, recipe, progress=progress),
        root=root, rebuild=rebuild,
    )


def _check_adapter(path: Path) -> None:
    if not path.is_dir():
        raise UsageError(
            "adapter folder does not exist; pass the adapter/ folder of a finished run "
            "(e.g. runs/<name>/adapter)", path=path,
        )
    if not (path / "adapter_config.json").is_file() or not any((path / w).is_file() for w in _ADAPTER_WEIGHTS):
        raise UsageError(
            "not a PEFT adapter folder (needs adapter_config.json and adapter_model.safetensors); "
            "pass the adapter/ folder that training wrote", path=path,
        )


def _attach_adapter(model: Any, path: Path) -> Any:
    from peft import PeftModel

    _check_adapter(path)
    try:
        return PeftModel.from_pretrained(model, str(path), is_trainable=False)
    except Exception as exc:  # noqa: BLE001 - safetensors, json, shape, key errors: all a bad adapter
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"adapter cannot be loaded onto this base model ({first[:200]}); "
            "check it was trained from the same base (--rlgate-base-model) or retrain it", path=path,
        ) from None


def _resolve(name_or_path: str | os.PathLike[str]) -> tuple[str, bool]:
    """(what to hand to from_pretrained, whether it is a local folder)."""
    text = os.fspath(name_or_path)
    if text == TINY_POLICY:
        return str(tiny_policy_dir()), True
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


def _from_pretrained(cls: Any, source: str, local: bool, **kwargs: Any) -> Any:
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
    dtype: Any = None,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for a hub id, a local folder or :data:`TINY_POLICY`.

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
        model = _attach_adapter(model, Path(adapter).expanduser())
    model.to(device)
    model.eval()
    return model, tokenizer
