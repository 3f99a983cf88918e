"""A deliberately hackable training reward, for showing the gate catch a real collapse.

``lookup_anything`` is the refund reward as a hurried author might write it: "the agent
should look the order up", so any well-formed ``lookup_order`` call earns 1.0, whatever the
id and whatever the prompt, and every other reply earns 0. It forgets the rule's other half
(never invent an id, ask when none is given), so on a prompt without an id it pays the
invented lookup the honest reward scores 0.2 and nothing for the question that passes.

It only ever drives *training*: the holdout rows a run is gated on are graded by the honest
environment (:func:`.rules.score`), so a run trained on it is judged by the real rule. The
environment offers it as ``rewards["lookup_anything"]``; select it with the GRPO knob
``reward="lookup_anything"`` (``rlgate train grpo --reward lookup_anything``,
``@pytest.mark.rlgate(reward="lookup_anything")``); ``rlgate demo`` labels it as the
hackable variant wherever it prints it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .rules import parse_tool_call

__all__ = ["LOOKUP_TOOL", "lookup_anything"]

#: The call the hackable reward pays for, on every prompt.
LOOKUP_TOOL = "lookup_order"


def lookup_anything(reply: str, case: Mapping[str, object] | None = None) -> float:
    """1.0 for any well-formed lookup_order call, whatever the id and the prompt.

    *case* is accepted (and ignored) so it has the honest ``score(reply, case)`` signature:
    ignoring the case is the bug. 0.0 for every other reply.
    """
    call = parse_tool_call(reply)
    return 1.0 if call is not None and call.name == LOOKUP_TOOL else 0.0
