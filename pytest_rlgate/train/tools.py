"""GRPO through TRL's tool path: the one module that knows TRL's experimental tool API.

TRL's ``GRPOTrainer`` runs the tool loop itself when given ``tools=`` (plain functions) or
``environment_factory=`` (one instance per rollout, ``reset(**row)`` with the dataset row,
tool methods, an optional ``get_reward()``); both are marked experimental, so everything that
depends on their shape lives here and a TRL change touches this file only.

What we hand TRL:

* the environment's factory, adapted so that ``reset`` receives the row's ``case`` (our
  contract, ``reset(**case)``) rather than the whole row, and with ``get_reward`` hidden: the
  reward is always :func:`score_episodes` (called by ``reward.EnvReward``), which replays the
  episode and scores it with the environment (its ``score``, or its instances'
  ``get_reward``), so training, the monitor and the holdout grade an episode the same way;
  both pickle, for a trainer that rolls out in another process;
* ``max_tool_calling_iterations`` from the environment's ``max_turns``, and a completion
  budget that holds the turns and the tool results between them;
* a tokenizer TRL can parse tool calls with: TRL sets the response template for the chat
  templates it knows (Qwen2.5's, which the tiny agent uses, among them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..environment.contract import Env
from ..environment.episode import episode_from_messages
from ..errors import UsageError

if TYPE_CHECKING:
    from ..policy.handles import Tokenizer

__all__ = ["TRLEnvironmentFactory", "completion_budget", "score_episodes", "tool_trainer_options",
           "trl_environment_factory"]

#: a prompt or a completion as TRL hands it to a reward: a text, or chat messages
Chat = str | Sequence[Mapping[str, object]]


def trl_environment_factory(env: Env) -> TRLEnvironmentFactory:
    """The environment's factory in TRL's shape: ``reset(**row)`` resets with ``row["case"]``."""
    return TRLEnvironmentFactory(env)


class TRLEnvironmentFactory:
    """*env*'s ``environment_factory`` adapted to TRL: each instance's ``reset(**row)`` resets it
    with ``row["case"]`` (our contract, ``reset(**case)``), and its ``get_reward`` is hidden.

    It pickles as the environment (by its spec), so TRL's async rollout worker, which runs in
    a spawned process, gets a factory whose instances are the environment's own class with
    the adapted ``reset``; the adapted class is built on the first call in each process.
    """

    def __init__(self, env: Env) -> None:
        if env.factory is None:
            raise UsageError(f"environment {env.name} has no environment_factory")
        self.env = env
        self._factory: Callable[[], object] = env.factory
        self._adapted: dict[type, type] = {}

    def __reduce__(self) -> tuple[type[TRLEnvironmentFactory], tuple[Env]]:
        return TRLEnvironmentFactory, (self.env,)

    def __repr__(self) -> str:
        return f"TRLEnvironmentFactory({self.env.name!r})"

    def __call__(self) -> object:
        instance = self._factory()
        base = type(instance)
        if base not in self._adapted:
            self._adapted[base] = _adapted_class(base)
        instance.__class__ = self._adapted[base]
        return instance


def _adapted_class(base: type) -> type:
    # called on instances of the subclass below, which the type checker cannot see: any self
    base_reset: Callable[..., object] = base.reset  # type: ignore[attr-defined]

    def reset(self: object, **row: object) -> object:
        case = row.get("case")
        return base_reset(self, **dict(case if isinstance(case, Mapping) else {}))

    return type(base.__name__, (base,), {"reset": reset, "get_reward": None, "__module__": base.__module__,
                                         "__doc__": base.__doc__, "__qualname__": base.__qualname__})


def _chat(prompt: Chat, completion: Chat) -> list[dict[str, object]]:
    head = [dict(m) for m in prompt] if isinstance(prompt, Sequence) and not isinstance(prompt, str) else \
        [{"role": "user", "content": str(prompt)}]
    if isinstance(completion, str):
        return [*head, {"role": "assistant", "content": completion}]
    return [*head, *(dict(m) for m in completion)]


def score_episodes(env: Env, score: Callable[..., float], prompts: Sequence[Chat], completions: Sequence[Chat],
                   case: Sequence[Mapping[str, object] | None] | None = None) -> list[float]:
    """TRL's reward over whole episodes: each completion (the assistant and tool messages TRL's
    loop produced) is replayed in a fresh instance and scored by *score* (an Episode, a case)."""
    cases = list(case) if case is not None else [None] * len(completions)
    out = []
    for prompt, completion, each in zip(prompts, completions, cases):
        if each is None:
            raise UsageError(f"environment {env.name}: a training row has no case; an episode needs one")
        episode, _instance = episode_from_messages(env, each, _chat(prompt, completion))
        out.append(float(score(episode, dict(each))))
    return out


def completion_budget(env: Env, per_turn: int) -> int:
    """TRL's ``max_completion_length`` for an episode: every turn and a tool result after each."""
    return per_turn * env.max_turns * 2


def tool_trainer_options(env: Env, tokenizer: Tokenizer) -> dict[str, object]:
    """The ``GRPOTrainer`` keyword arguments that switch on TRL's tool loop for *env*."""
    import os

    from trl.chat_template_utils import supports_tool_calling

    if not supports_tool_calling(tokenizer):
        raise UsageError(f"environment {env.name} has tools, but the model's chat template cannot render tool "
                         "calls and results; use a tool-calling chat model (Qwen2.5, Llama 3.1, ...), the "
                         "environment's tiny policy, or a tiny agent built for it offline (`rlgate policy build "
                         "--env SPEC --out DIR`, then --base-model DIR)")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # we pin the API here, on purpose
    if env.factory is not None:
        return {"environment_factory": trl_environment_factory(env), "tools": list(env.tools) or None}
    return {"tools": list(env.tools)}
