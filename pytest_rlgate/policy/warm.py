"""A real model warm-started for an environment: SFT on the environment's own replies, merged, cached.

A small instruct model rarely has the shape RL needs on a new task: SmolLM2-135M-Instruct makes
no tool call at all on refund, and a short SFT on refund's train prompts (four fifths with an
id) swings it to calling ``lookup_order`` on everything. What GRPO needs is the shape of the
reference run's base: a policy that asks when it should and sometimes, not always, looks up. So
an environment can declare a ``warm_start`` (a :class:`WarmStart`): its dialogue writer (the same
:class:`~pytest_rlgate.policy.tiny.corpus.Corpus` its tiny policy is built from, or another) and
a :class:`~pytest_rlgate.policy.tiny.corpus.ReplyMix` of category shares and reply kinds, plus
the SFT schedule. :func:`~pytest_rlgate.policy.warm_train.warm_start` draws ``steps x batch_size``
chats from that stream, trains a LoRA adapter on the replies with TRL's ``SFTTrainer``, merges it
and saves the merged model (and the adapter, for inspection) into the artifact cache under
``warm/<key>``. The key (:func:`warm_key`) hashes the recipe, the base model's identity, the
environment (fingerprint and rendered chat), the library versions and the syntax of the code that
trains, so a changed recipe is a new folder, never a stale one.

A registry model warm-started for a named environment is addressed like the model itself:
``smollm2-135m+refund`` (``--base-model``, ``--model``, ``load_policy``). Like a registry model
before its fetch, the name is one line naming the command that builds it
(``rlgate models warm-start smollm2-135m --env refund``) until that has run; nothing is trained
at load time.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
import os
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._io import cache
from ..environment.contract import Env, load_env
from ..errors import UsageError
from .models import fetched_model_dir, is_model_name, model_identity
from .tiny.corpus import Corpus, Dialogue, ReplyMix, dialogues

__all__ = ["WARM_INFO", "WarmStart", "is_warm_name", "split_warm_name", "warm_dataset", "warm_key",
           "warm_model_dir", "warm_name", "warm_recipe"]

#: The cache kind warm-started models live under.
KIND = "warm"
#: What the build writes beside the merged weights: the recipe, the data drawn, the loss curve.
WARM_INFO = "rlgate_warm.json"
#: ``<registry model>+<environment>`` names a warm-started model.
SEPARATOR = "+"
#: The module that trains a recipe (:func:`~pytest_rlgate.policy.warm_train.warm_start`), read for the key.
TRAINER = Path(__file__).with_name("warm_train.py")


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
    its syntax tree: a changed statement there is a new key; the modules' prose, comments and line
    breaks are not. What the chats say is the corpus's ``describe()``, in the recipe. The trainer is
    read from its module's source, not imported: it imports the policy loader, which names warm
    starts through this module."""
    digest = hashlib.sha256()
    trainer = ast.parse(TRAINER.read_text(encoding="utf-8"))
    functions = [ast.parse(textwrap.dedent(inspect.getsource(warm_dataset))).body[0],
                 next(node for node in trainer.body if isinstance(node, ast.FunctionDef) and node.name == "_train")]
    for function in functions:
        tree = ast.Module(body=[function], type_ignores=[])
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


def warm_key(base: Mapping[str, str], env: Env, recipe: WarmStart | None = None) -> str:
    """The cache key of a base model warm-started for *env* with *recipe* (default: its own); *base* is
    the model's identity (``policy.identity.base_identity``; a registry model's is ``model_identity``)."""
    recipe = recipe or warm_recipe(env)
    return cache.key(kind=KIND, base=dict(base), recipe=recipe.as_dict(),
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
    folder = cache.cache_root(root) / KIND / warm_key(model_identity(model), load_env(env_name))
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
