"""Train a warm start: a recipe's chats through TRL's ``SFTTrainer``, the LoRA merged, the folder cached.

What a warm start is, how it is named and keyed: :mod:`.warm`. This module holds the training,
which loads models (so :mod:`.warm`, which the policy loader reads to resolve names, stays free
of the loader). ``_train``'s syntax tree is part of every warm start's key.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._io import cache
from ..environment.contract import Env, load_env
from .identity import base_identity
from .load import load_policy
from .models import is_model_name
from .warm import KIND, WARM_INFO, WarmStart, _versions, warm_dataset, warm_key, warm_name, warm_recipe

__all__ = ["warm_start"]

#: The LoRA every warm start trains: attention and MLP projections, as GRPO's.
_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def warm_start(model: str, env: Env | str | None = None, *, recipe: WarmStart | None = None,
               root: str | os.PathLike[str] | None = None, rebuild: bool = False,
               log: Callable[[str], None] | None = None) -> Path:
    """Base *model* (a registry model such as ``smollm2-135m``, a folder, a tiny policy) warm-started
    for *env* with *recipe* (default: the environment's own); returns the merged model's folder in
    the artifact cache, training it first (once, under the cache's lock) when it is missing. A
    registry model warm-started with its environment's own recipe is then also addressed as
    ``<model>+<environment>``. *log* receives one line per logged step."""
    environment = load_env(env)
    recipe = recipe or warm_recipe(environment)
    key = warm_key(base_identity(model), environment, recipe)
    return cache.cached_dir(KIND, key, lambda out: _train(out, model, environment, recipe, key, log),
                            root=root, rebuild=rebuild)


def _train(out: Path, model_name: str, env: Env, recipe: WarmStart, key: str,
           log: Callable[[str], None] | None) -> None:
    import tempfile

    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    chats = warm_dataset(env, recipe)
    data = Dataset.from_list([{"prompt": env.messages_for(chat.prompt),
                               "completion": [{"role": "assistant", "content": chat.reply}]} for chat in chats])
    model, tokenizer = load_policy(model_name, device="cpu")
    losses: list[float] = []

    class _Losses(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None,
                   **kw: object) -> None:
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
                if log is not None:
                    log(f"warm start step {state.global_step}/{recipe.steps}: loss {logs['loss']:.4f}")

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".sft-", dir=out) as scratch:
        trainer = SFTTrainer(
            model=model, processing_class=tokenizer, train_dataset=data,
            args=SFTConfig(output_dir=scratch, max_steps=recipe.steps, per_device_train_batch_size=recipe.batch_size,
                           learning_rate=recipe.learning_rate, lr_scheduler_type="constant_with_warmup",
                           warmup_steps=recipe.warmup_steps, max_length=recipe.max_length, seed=recipe.seed,
                           data_seed=recipe.seed, use_cpu=True, bf16=False, logging_steps=1, save_strategy="no",
                           report_to="none", disable_tqdm=True, dataloader_drop_last=False),
            peft_config=LoraConfig(r=recipe.lora_rank, lora_alpha=recipe.lora_alpha, lora_dropout=0.0, bias="none",
                                   target_modules=list(_TARGETS), task_type="CAUSAL_LM"),
            callbacks=[_Losses()],
        )
        trainer.train()
    seconds = time.perf_counter() - started
    trainer.model.save_pretrained(str(out / "adapter"))
    merged = trainer.model.merge_and_unload()
    merged.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    kinds = collections.Counter(f"{chat.category}/{chat.kind}" for chat in chats)
    named = warm_name(model_name, env.name) if is_model_name(model_name) else None
    info = {"name": named, "key": key, "base": model_name, "environment": env.describe(),
            "recipe": recipe.as_dict(), "versions": _versions(), "data_kinds": dict(sorted(kinds.items())),
            "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
            "loss_curve": losses, "train_seconds": round(seconds, 1),
            "seconds_per_step": round(seconds / recipe.steps, 2)}
    (out / WARM_INFO).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
