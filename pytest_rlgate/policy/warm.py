"""A real model warm-started for an environment: SFT on the environment's own replies, merged, cached.

A small instruct model rarely has the shape RL needs on a new task: SmolLM2-135M-Instruct makes
no tool call at all on refund, and a short SFT on refund's train prompts (four fifths with an
id) swings it to calling ``lookup_order`` on everything. What GRPO needs is the shape of the
reference run's base: a policy that asks when it should and sometimes, not always, looks up. So
an environment can declare a ``warm_start`` (a :class:`WarmStart`): its dialogue writer (the same
:class:`~pytest_rlgate.policy.tiny.corpus.Corpus` its tiny policy is built from, or another) and
a :class:`~pytest_rlgate.policy.tiny.corpus.ReplyMix` of category shares and reply kinds, plus
the SFT schedule. :func:`warm_start` draws ``steps x batch_size`` chats from that stream, trains
a LoRA adapter on the replies with TRL's ``SFTTrainer``, merges it and saves the merged model
(and the adapter, for inspection) into the artifact cache under ``warm/<key>``. The key hashes
the recipe, the base model's identity, the environment (fingerprint and rendered chat), the
library versions and this module's source, so a changed recipe is a new folder, never a stale one.

A registry model warm-started for a named environment is addressed like the model itself:
``smollm2-135m+refund`` (``--base-model``, ``--model``, ``load_policy``). Like a registry model
before its fetch, the name is one line naming the command that builds it
(``rlgate models warm-start smollm2-135m --env refund``) until that has run; nothing is trained
at load time.
"""

from __future__ import annotations

import ast
import collections
import hashlib
import inspect
import itertools
import json
import os
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io import cache
from ..environment.contract import Env, load_env
from ..errors import UsageError
from .models import fetched_model_dir, is_model_name
from .tiny.corpus import Corpus, Dialogue, ReplyMix, dialogues

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["WARM_INFO", "WarmStart", "is_warm_name", "split_warm_name", "warm_dataset", "warm_key",
           "warm_model_dir", "warm_name", "warm_recipe", "warm_start"]

#: The cache kind warm-started models live under.
KIND = "warm"
#: What the build writes beside the merged weights: the recipe, the data drawn, the loss curve.
WARM_INFO = "rlgate_warm.json"
#: ``<registry model>+<environment>`` names a warm-started model.
SEPARATOR = "+"
#: The LoRA every warm start trains: attention and MLP projections, as GRPO's.
_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class WarmStart:
    """An environment's SFT warm start for a real base model: what it reads and how long.

    :param corpus: the environment's dialogue writer per seed (``writer(seed)``, ``describe()``).
    :param mix: category shares and reply kinds per category: the lever that sets the base's
        shape (refund's with-id examples look the order up only some of the time).
    :param steps: optimizer steps; each step reads ``batch_size`` fresh chats (no chat repeats).
    :param learning_rate: LoRA learning rate (constant after a short warmup).
    :param seed: the chat stream's and the trainer's seed.
    :param measured: where the recipe was measured to land (a note for ``rlgate models warm-start``).
    """

    corpus: Corpus
    mix: ReplyMix
    steps: int = 24
    batch_size: int = 8
    learning_rate: float = 2e-4
    lora_rank: int = 16
    lora_alpha: int = 32
    warmup_steps: int = 2
    max_length: int = 512
    seed: int = 0
    version: int = 1  # bump when this module changes what a recipe trains
    measured: str = ""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "lora_rank", "lora_alpha", "max_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"WarmStart.{name} must be an integer >= 1, got {value!r}")
        if not 0 < self.learning_rate < 1:
            raise ValueError(f"WarmStart.learning_rate must lie in (0, 1), got {self.learning_rate!r}")

    def as_dict(self) -> dict[str, object]:
        """JSON of everything that decides the trained weights (with the base, the env and versions)."""
        return {"steps": self.steps, "batch_size": self.batch_size, "learning_rate": self.learning_rate,
                "lora_rank": self.lora_rank, "lora_alpha": self.lora_alpha, "warmup_steps": self.warmup_steps,
                "max_length": self.max_length, "seed": self.seed, "version": self.version, "mix": self.mix.as_dict(),
                "corpus": {"kind": type(self.corpus).__qualname__, **self.corpus.describe()}}


def warm_recipe(env: Env) -> WarmStart:
    """*env*'s declared ``warm_start``, or a :class:`UsageError` saying how to add one."""
    recipe = env.warm_start
    if not isinstance(recipe, WarmStart):
        raise UsageError(f"environment {env.name} declares no warm start (a 'warm_start' WarmStart attribute: its "
                         "dialogue writer and reply mix, see docs/training.md); add one, or pass a model that "
                         "already has the task's shape")
    return recipe


def warm_name(model: str, env: str) -> str:
    """The name of *model* warm-started for the environment named *env*: ``smollm2-135m+refund``."""
    return f"{model}{SEPARATOR}{env}"


def split_warm_name(text: object) -> tuple[str, str] | None:
    """(registry model, environment name) of a warm-start name, else None."""
    if not isinstance(text, str) or SEPARATOR not in text:
        return None
    model, _, env = text.partition(SEPARATOR)
    return (model, env) if is_model_name(model) and env else None


def is_warm_name(text: object) -> bool:
    return split_warm_name(text) is not None


def _code_digest() -> str:
    """The code that turns a recipe into weights (the chats drawn, the trainer's configuration), by
    its syntax tree: a changed statement there is a new key; the module's prose, comments and line
    breaks are not. What the chats say is the corpus's ``describe()``, in the recipe."""
    digest = hashlib.sha256()
    for function in (warm_dataset, _train):
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        for node in ast.walk(tree):  # the docstring is prose too
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                body[0] = ast.Pass()
        digest.update(ast.dump(tree).encode())
    return digest.hexdigest()[:16]


def _versions() -> dict[str, str]:
    from importlib import metadata

    return {name: metadata.version(name) for name in ("torch", "transformers", "trl", "peft")}


def warm_key(model: str, env: Env, recipe: WarmStart | None = None) -> str:
    """The cache key of base *model* warm-started for *env* with *recipe* (default: its own)."""
    from .load import base_identity  # load.py resolves warm-start names through this module

    recipe = recipe or warm_recipe(env)
    return cache.key(kind=KIND, base=base_identity(model), recipe=recipe.as_dict(),
                     env={**env.describe(), "chat": env.messages_for("{prompt}")}, versions=_versions(),
                     code=_code_digest())


def _command(model: str, env: str) -> str:
    return f"rlgate models warm-start {model} --env {env}"


def warm_model_dir(name: str, *, root: str | os.PathLike[str] | None = None) -> Path:
    """The folder of a warm-start name (``smollm2-135m+refund``); a ``UsageError`` naming the
    command that builds it when it is not built yet."""
    parts = split_warm_name(name)
    if parts is None:
        raise UsageError(f"{name!r} is not a warm-start name; write <registry model>{SEPARATOR}<environment>, "
                         "e.g. smollm2-135m+refund")
    model, env_name = parts
    fetched_model_dir(model, root=root)  # "not fetched yet" first: the fetch comes before the warm start
    folder = cache.cache_root(root) / KIND / warm_key(model, load_env(env_name))
    if not cache.is_complete(folder):
        raise UsageError(f"model {name!r} is not warm-started in {cache.cache_root(root)} yet; run "
                         f"`{_command(model, env_name)}` once (minutes to an hour on a CPU)")
    return folder


def warm_dataset(env: Env, recipe: WarmStart) -> list[Dialogue]:
    """The ``steps x batch_size`` chats a warm start reads, drawn from *env*'s writer with the
    recipe's mix (a chat whose prompt the environment files under another category is dropped)."""
    category_of = (lambda text: env.category_of({"case": env.case_for(text)})) if env.has_case_for else None
    stream = dialogues(recipe.corpus.writer(recipe.seed), recipe.mix, seed=recipe.seed, category_of=category_of)
    return list(itertools.islice(stream, recipe.steps * recipe.batch_size))


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
    key = warm_key(model, environment, recipe)
    return cache.cached_dir(KIND, key, lambda out: _train(out, model, environment, recipe, key, log),
                            root=root, rebuild=rebuild)


def _train(out: Path, model_name: str, env: Env, recipe: WarmStart, key: str,
           log: Callable[[str], None] | None) -> None:
    import tempfile

    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from .load import load_policy

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
