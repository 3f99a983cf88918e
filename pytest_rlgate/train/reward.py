"""The training reward as TRL calls it: any environment's score over the dataset's case column.

TRL hands every extra dataset column to a reward function as a keyword list, so the
prompt's ``case`` arrives beside each completion and the reward never has to re-derive it
from text. Rows without a case fall back to the environment's ``case_for`` on the user's
text, which is what the reward tables do.

``--reward`` picks the score the trainer optimises: the environment's own (the default), a
named variant the environment offers (``Env.rewards``, e.g. a deliberately hackable one for
a demo), or ``module:attr`` of any ``score(reply, case)`` function. The holdout the run is
gated on is always graded by the environment's own score.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

from ..environment.calls import scorer
from ..environment.contract import Env, EnvSpec, load_env
from ..environment.episode import messages_text
from ..environment.trust import evaluates_text
from ..errors import DataError, UsageError
from ..records import Case
from .tools import Chat, score_episodes

__all__ = ["EnvReward", "completion_text", "env_reward", "prompt_text", "score_function"]

ScoreFn = Callable[[str, Mapping[str, object]], float]
#: TRL's reward-function shape: (prompts, completions, **dataset columns) -> one float each.
RewardFn = Callable[..., list[float]]


def completion_text(completion: object) -> str:
    """The text of a TRL completion: a plain string or ``[{"role": ..., "content": ...}]``; a
    tool-loop completion (calls, tool messages, more turns) is the episode's text form."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[0], Mapping):
        if len(completion) > 1 or completion[0].get("tool_calls"):
            return messages_text(completion)
        return str(completion[0].get("content") or "")
    return ""


def prompt_text(prompt: Chat) -> str:
    """The last user turn of a conversational prompt, or the prompt itself."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
    return str(users[-1]) if users else ""


def _imported(spec: str) -> ScoreFn:
    module_name, _, attr = spec.partition(":")
    try:
        target: object = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except ImportError as exc:
        raise UsageError(f"--reward {spec!r}: cannot import {module_name} ({exc}); is its folder on PYTHONPATH?") \
            from None
    except AttributeError:
        raise UsageError(f"--reward {spec!r}: {module_name} has no attribute {attr!r}") from None
    except (Exception, SystemExit) as exc:
        raise UsageError(f"--reward {spec!r}: importing {module_name} raised {type(exc).__name__}: {exc}") from None
    if not callable(target):
        raise UsageError(f"--reward {spec!r}: {attr} is not a score(reply, case) function")
    if evaluates_text(target):
        raise UsageError(f"--reward {spec!r}: it evaluates or opens what it is given; name a score(reply, case) "
                         "function, e.g. mypkg.rewards:score")
    return scorer(f"--reward {spec!r}", attr, target)


def score_function(env: Env, name: str | None = None) -> ScoreFn:
    """The ``score(reply, case)`` that ``--reward NAME`` names for *env* (None: its own score)."""
    if name and ":" in name:
        imported: ScoreFn = _imported(name)
        return imported
    try:
        return env.reward(name)
    except UsageError as exc:
        raise UsageError(f"--reward {name!r}: {exc}") from None


def env_reward(env: EnvSpec = None, name: str | None = None) -> RewardFn:
    """The TRL reward function scoring each completion with *env* (or its variant *name*).

    Its ``__name__`` (TRL's ``rewards/<name>`` log column) is the variant's name, or
    ``<env>_reward`` for the environment's own score. It pickles (:class:`EnvReward`).
    """
    return EnvReward(load_env(env), name)


class EnvReward:
    """TRL's reward over *env*'s score (or its variant *name*), as a picklable callable.

    TRL's ``AsyncGRPOTrainer`` scores rollouts in a spawned process, so it pickles every
    reward function: a closure cannot go, and neither can the module objects an environment
    is made of. This pickles as ``(env, name)`` (an :class:`Env` pickles as its spec) and
    looks the score up again on the other side. An episode environment's completions are
    whole tool-loop episodes, replayed and scored (:func:`~pytest_rlgate.train.tools.score_episodes`).
    """

    def __init__(self, env: Env, name: str | None = None) -> None:
        self.env, self.name = env, name
        self._score = score_function(env, name)
        own = name in (None, "", "env", env.name)
        self.__name__ = self.__qualname__ = f"{env.name}_reward" if own else str(name).rpartition(":")[2]

    def __reduce__(self) -> tuple[type[EnvReward], tuple[Env, str | None]]:
        return EnvReward, (self.env, self.name)

    def __repr__(self) -> str:
        return f"EnvReward({self.env.name!r}, {self.name!r})"

    def __call__(self, prompts: Sequence[Chat], completions: Sequence[Chat],
                 case: Sequence[Mapping[str, object] | None] | None = None, **_: object) -> list[float]:
        if self.env.is_episodic:  # TRL's tool loop hands over whole episodes
            return score_episodes(self.env, self._score, prompts, completions, case)
        cases = list(case) if case is not None else [None] * len(completions)
        return [float(self._score(completion_text(c), dict(k) if k is not None else _case_for(self.env,
                                                                                              prompt_text(p))))
                for p, c, k in zip(prompts, completions, cases)]


def _case_for(env: Env, prompt: str) -> Case:
    case = env.case_for(prompt)
    if case is None:
        raise DataError(f"a training prompt has no case and environment {env.name} reads none from the text "
                        f"(it has no case_for): give every prompt-file line its case ({prompt[:60]!r})")
    return case
