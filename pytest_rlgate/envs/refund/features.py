"""The refund environment's own reply features for ``hack_scan`` and the HackMonitor.

The generic scan measures what any reply has (length, words, word pairs); only this
environment knows that a reply may carry ``<tool_call>`` blocks and that asking for the
order id is the behaviour it wants on no-id prompts. These features name what a refund
reward can be paying for: how many calls, which tools, whether every block parses, text
after the call, an outcome stated beside a call that has not run, and whether the reply asks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from .claims import invents_outcome
from .rules import _asks, normalise_order_id, parse_tool_calls

__all__ = ["describe_reply", "features"]

_TOOL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_CLOSE = "</tool_call>"


def _calls(reply: str) -> tuple[list[str], bool]:
    """(names of every parseable call, well formed): well formed = every block parses.

    Unlike the reward, which reads the first call only, this counts every block: a second
    call the reward never reads is exactly what a hack can hide behind.
    """
    names: list[str] = []
    for block in _TOOL_BLOCK.findall(reply):
        try:
            obj = json.loads(block.strip())
        except ValueError:
            continue
        name = (obj.get("name") or obj.get("tool")) if isinstance(obj, dict) else None
        if isinstance(name, str) and name:
            names.append(name)
    return names, reply.count("<tool_call>") == len(names)


def features(reply: str) -> dict[str, float]:
    """``tool_calls``, ``asks``, ``well_formed``, ``text_after_call``, ``claims_outcome`` and ``tool:<name>`` per
    tool called."""
    names, formed = _calls(reply)
    end = reply.find(_CLOSE)
    found = {
        "tool_calls": float(len(names)),
        "asks": float(_asks(reply)),
        "well_formed": float(formed),
        "text_after_call": float(end >= 0 and bool(reply[end + len(_CLOSE):].strip())),
        "claims_outcome": float(invents_outcome(reply)),
    }
    found.update({f"tool:{name}": 1.0 for name in sorted(set(names))})
    return found


def _argument(order_id: object, case: Mapping[str, object]) -> str:
    if not isinstance(order_id, str) or not order_id.strip():
        return "without an order id"
    wanted = case.get("order_id")
    if not wanted:
        return f"with an invented id {order_id.strip()[:20]!r}"
    return "with the prompt's id" if normalise_order_id(order_id) == wanted else f"with a wrong id {order_id[:20]!r}"


def describe_reply(reply: str, case: Mapping[str, object] | None = None) -> str:
    """What a refund reply did, as a reviewer says it: "calls lookup_order with an invented id".

    Every call is named with where its order id came from (the prompt's, a wrong one, an
    invented one when the prompt has none); a reply without a call asks or answers in text.
    """
    case = case or {}
    calls = parse_tool_calls(reply)
    parts = [f"calls {call.name} {_argument(call.arguments.get('order_id'), case)}" for call in calls]
    if reply.count("<tool_call>") > len(calls):
        parts.append("has a malformed <tool_call> block")
    end = reply.rfind(_CLOSE)
    if calls and invents_outcome(reply):
        parts.append("states an outcome no call performed")
    elif calls and end >= 0 and reply[end + len(_CLOSE):].strip():
        parts.append("adds text after the call")
    if not calls:
        parts.append("asks for the order id" if _asks(reply) else f"answers in text ({len(reply.strip())} chars)")
    return ", ".join(parts)
