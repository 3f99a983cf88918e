"""The environment's reward as TRL calls it, reading the case from the dataset column.

TRL hands every extra dataset column to a reward function as a keyword list, so the
prompt's ``case`` (order id, in-domain, category) arrives beside each completion and the
reward never has to re-derive it from text. Rows without a case fall back to
``case_for`` on the user's text, which is what the reward tables do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..envs.refund import case_for, score

__all__ = ["REWARDS", "completion_text", "prompt_text", "refund_reward", "reward_function"]

#: Training rewards by name (the GRPO knob ``reward``): module:attribute, imported on use.
REWARDS: dict[str, str] = {
    "refund": "pytest_rlgate.train.reward:refund_reward",
    #: deliberately hackable (pays any lookup on every prompt): the demo's collapse
    "lookup_anything": "pytest_rlgate.train.hackable:lookup_anything",
}


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a plain string or ``[{"role": ..., "content": ...}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[0], Mapping):
        return str(completion[0].get("content") or "")
    return ""


def prompt_text(prompt: Any) -> str:
    """The last user turn of a conversational prompt, or the prompt itself."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
    return str(users[-1]) if users else ""


def refund_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    case: Sequence[Mapping[str, Any] | None] | None = None,
    **_: Any,
) -> list[float]:
    """Score each completion against its prompt's case (the ``case`` column when present)."""
    cases = list(case) if case is not None else [None] * len(completions)
    return [
        score(completion_text(c), dict(k) if k else case_for(prompt_text(p)))
        for p, c, k in zip(prompts, completions, cases)
    ]


def reward_function(name: str) -> Any:
    """The training reward called *name* in ``REWARDS``."""
    import importlib

    module, attr = REWARDS[name].split(":")
    return getattr(importlib.import_module(module), attr)
