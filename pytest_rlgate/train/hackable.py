"""A deliberately hackable training reward, for showing the gate catch a real collapse.

``lookup_anything`` is the refund reward as a hurried author might write it: "the agent
should look the order up", so any well-formed ``lookup_order`` call earns 1.0, whatever the
id and whatever the prompt, and every other reply earns 0. It forgets the rule's other half
(never invent an id, ask when none is given), so on a prompt without an id it pays the
invented lookup the honest reward scores 0.2 and nothing for the question that passes.

It only ever drives *training*: the holdout rows a run is gated on are graded by the honest
environment (``envs.refund.score``), so a run trained on it is judged by the real rule. Select
it with the GRPO knob ``reward="lookup_anything"`` (``rlgate train grpo --reward
lookup_anything``, ``@pytest.mark.rlgate(reward="lookup_anything")``); ``rlgate demo`` labels
it as the hackable variant wherever it prints it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..envs.refund import parse_tool_call
from .reward import completion_text

__all__ = ["LOOKUP_TOOL", "lookup_anything", "lookup_anything_score"]

#: The call the hackable reward pays for, on every prompt.
LOOKUP_TOOL = "lookup_order"


def lookup_anything_score(reply: str, case: Mapping[str, Any] | str | None = None) -> float:
    """1.0 when the first tool call of *reply* parses and is ``lookup_order``; else 0.0.

    *case* is accepted (and ignored) so it has the honest ``score(reply, case)`` signature:
    ignoring the case is the bug.
    """
    call = parse_tool_call(reply)
    return 1.0 if call is not None and call.name == LOOKUP_TOOL else 0.0


def lookup_anything(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    case: Sequence[Mapping[str, Any] | None] | None = None,
    **_: Any,
) -> list[float]:
    """TRL reward function over ``lookup_anything_score`` (same signature as ``refund_reward``)."""
    return [lookup_anything_score(completion_text(c)) for c in completions]
