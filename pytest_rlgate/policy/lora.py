"""LoRA adapter folders: what makes one worth attaching, checked before and after loading.

An adapter that loads as a no-op is the worst kind of bad input: "after" is then the base
model, the gate compares the base with itself and passes. PEFT only warns when a folder's
weights miss the matrices its config creates (and loads an unrelated tensor without a
word), so every adapter goes through here: the config must be a LoRA config, the
safetensors must hold paired ``lora_A``/``lora_B`` matrices for the modules the config
targets, and once attached no LoRA matrix of the model may be missing from the file. Each
failure is a one-line ``UsageError`` naming the flag, the folder and the fix. An adapter
whose every ``lora_B`` is zero is well-formed but changes nothing (a fresh LoRA, or a run
whose advantages were all zero): that is what training produced, so it loads, with an
``RlgateWarning`` saying that "after" is the base model. Only safetensors are read: a
pickled ``adapter_model.bin`` would run code on load.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RlgateWarning, UsageError

if TYPE_CHECKING:
    from peft import PeftModel

    from .handles import Model

__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "attach_adapter", "check_adapter"]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_FIX = "point it at the adapter/ folder of a finished run (adapter_config.json + adapter_model.safetensors)"
_RESAVE = "re-save the adapter, or retrain the run"


def _fail(flag: str, folder: Path, why: str) -> UsageError:
    return UsageError(f"{flag} {str(folder)!r}: {why}")


def _module(key: str, part: str) -> str:
    """``...layers.0.self_attn.q_proj`` from ``...layers.0.self_attn.q_proj.lora_A.weight``."""
    return key.split(f".{part}.", 1)[0]


def _lora_problem(keys: Sequence[str], config: Mapping[str, object]) -> str | None:
    """None when *keys* (a safetensors file's tensor names) are LoRA weights for *config*, else why not."""
    down = {_module(k, "lora_A") for k in keys if ".lora_A." in k}
    up = {_module(k, "lora_B") for k in keys if ".lora_B." in k}
    if not down and not up:
        shown = ", ".join(sorted(keys)[:3]) or "nothing"
        return f"its weights hold no LoRA matrices (lora_A/lora_B), only {shown}"
    unpaired = sorted(down ^ up)
    if unpaired:
        return f"lora_A and lora_B do not pair up for {unpaired[0]}"
    targets = config.get("target_modules")
    if isinstance(targets, list) and targets:
        stray = sorted(m for m in down if m.rsplit(".", 1)[-1] not in targets)
        if stray:
            return f"it holds weights for {stray[0]}, which its config does not target ({', '.join(targets)})"
    return None


def _read_config(flag: str, folder: Path) -> dict[str, object]:
    path = folder / ADAPTER_CONFIG
    try:
        parsed = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(parsed, dict) or "peft_type" not in parsed:
            raise ValueError("no peft_type")
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(flag, path, f"corrupt adapter config ({exc}); {_RESAVE}") from None
    if parsed["peft_type"] != "LORA":
        raise _fail(flag, path, f"peft_type {parsed['peft_type']!r}: only LoRA adapters are supported")
    return parsed


def check_adapter(path: str | os.PathLike[str], *, flag: str = "--rlgate-adapter") -> Path:
    """Return *path* if it is a LoRA adapter folder, else raise ``UsageError``; warn when it changes nothing."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise _fail(flag, folder, f"no such folder; {_FIX}")
    for needed in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if not (folder / needed).is_file():
            raise _fail(flag, folder, f"{needed} is missing; {_FIX}")
    config = _read_config(flag, folder)
    weights = folder / ADAPTER_WEIGHTS
    try:
        from safetensors import safe_open

        with safe_open(str(weights), framework="pt") as fh:
            keys = list(fh.keys())
            problem = _lora_problem(keys, config)
            inert = problem is None and not any(bool(fh.get_tensor(k).any()) for k in keys if ".lora_B." in k)
    except Exception as exc:
        raise _fail(flag, weights, f"corrupt adapter weights ({exc}); {_RESAVE}") from None
    if problem is not None:
        raise _fail(flag, folder, f"not a usable LoRA adapter: {problem}; {_RESAVE}")
    if inert:
        warnings.warn(f"{flag} {str(folder)!r}: every lora_B matrix is zero, so the adapter changes nothing: "
                      "'after' is the base model and a gate compares the base with itself", RlgateWarning,
                      stacklevel=2)
    return folder


def _missing_matrices(model: PeftModel, folder: Path) -> list[str]:
    """LoRA matrices the attached *model* has that the folder's weights lack (PEFT loads them as zero/random)."""
    from peft.utils import get_peft_model_state_dict
    from safetensors import safe_open

    with safe_open(str(folder / ADAPTER_WEIGHTS), framework="pt") as fh:
        saved = set(fh.keys())
    return sorted(set(get_peft_model_state_dict(model)) - saved)


def attach_adapter(model: Model, path: str | os.PathLike[str], *, flag: str = "--rlgate-adapter") -> PeftModel:
    """Wrap *model* in a ``PeftModel`` with the adapter at *path*, checked before and after loading."""
    from peft import PeftModel

    folder = check_adapter(path, flag=flag)
    try:
        attached = PeftModel.from_pretrained(model, str(folder), is_trainable=False)
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise _fail(flag, folder, f"does not fit this base model ({first}); pass the base model it was "
                                  "trained on (--base-model / --rlgate-base-model)") from None
    missing = _missing_matrices(attached, folder)
    if missing:
        raise _fail(flag, folder, f"its weights lack {len(missing)} LoRA matrices its config puts on this base "
                                  f"model (e.g. {missing[0]}); pass the base model it was trained on, or {_RESAVE}")
    return attached
