"""Base policies and LoRA adapters: load, check, attach, merge (round two).

Every failure a user can cause (a missing or corrupt adapter folder, a base model that
cannot be loaded offline, LoRA targets the model does not have) becomes a one-line
``UsageError`` naming the flag or path and the fix. What makes an adapter folder usable
(LoRA weights that change the model) is checked in :mod:`pytest_rlgate.policy.lora`, shared with
``load_policy``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from ..errors import DataError, UsageError
from ..policy.load import load_policy
from ..policy.lora import attach_adapter, check_adapter
from .run import RunFolder

if TYPE_CHECKING:
    from peft import LoraConfig

    from ..policy.handles import Model, Tokenizer

__all__ = ["LineageStep", "attach_adapter", "check_adapter", "load_base", "lora_config", "merge_adapter"]


class LineageStep(TypedDict):
    """One finished run a base policy merges (``config.json``'s ``lineage``, oldest first)."""

    run: str
    path: str
    method: str | None
    adapter: str


def load_base(name_or_path: str, *, flag: str = "--base-model") -> tuple[Model, Tokenizer]:
    """``policy.load_policy`` with a one-line error when the model cannot be loaded offline."""
    try:
        return load_policy(name_or_path)
    except UsageError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"{flag} {name_or_path!r}: cannot be loaded offline ({first[:160]}); pass a local model folder, "
            "download it first (huggingface-cli download), or drop the flag for the environment's own base model"
        ) from None


def lora_config(rank: int, alpha: int, targets: Sequence[str]) -> LoraConfig:
    """The LoRA every method trains: dropout 0, no bias, causal LM."""
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, bias="none",
                      target_modules=list(targets), task_type="CAUSAL_LM")


def check_targets(model: Model, targets: Sequence[str]) -> None:
    """Raise ``UsageError`` when no LoRA target names a module of *model*."""
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    if not names & set(targets):
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if type(m).__name__ == "Linear"})
        raise UsageError(f"--lora-targets {','.join(targets)!r}: the model has none of these modules; "
                         f"choose from {', '.join(linear[:12])}")


def merge_adapter(model: Model, path: str | os.PathLike[str], *, flag: str = "--from-run") -> Model:
    """Merge the adapter at *path* into *model*'s weights (round two's new base)."""
    return attach_adapter(model, path, flag=flag).merge_and_unload()


def run_lineage(run_dir: str | os.PathLike[str]) -> tuple[str, list[LineageStep]]:
    """(base model, lineage) of a finished run: the adapters to merge, oldest first."""
    try:
        run = RunFolder.open(run_dir)
    except DataError as exc:
        raise UsageError(f"--from-run {str(run_dir)!r}: {exc.reason}") from None
    config = run.config
    lineage: list[LineageStep] = [*config.get("lineage", []), {"run": run.name, "path": str(run.path.resolve()),
                                            "method": config.get("method"), "adapter": str(run.adapter.resolve())}]
    return config["knobs"]["base_model"], lineage
