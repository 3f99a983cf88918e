"""Refund's constructed DPO negatives: a lookup with an invented id where any call is wrong.

Constructed negatives put contrast where on-policy sampling has none: a policy that
almost always asks on no-id prompts yields no no-id pairs, so DPO learns "call the tool"
from the with-id prompts and nothing tells it "unless there is no id". On a no-id or
off-topic prompt the rejected side is a well-formed ``lookup_order`` with an invented id
(the chosen side is the policy's own passing reply, picked by the generic pair builder).
With-id prompts get none: there a lookup is the right answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping

from ...errors import DataError

__all__ = ["CONSTRUCTED_CATEGORIES", "invented_call", "invented_order_id", "rejected_reply"]

#: Categories whose prompts get a constructed negative: the ones where any call is wrong.
CONSTRUCTED_CATEGORIES: tuple[str, ...] = ("no_id", "off_topic")
#: Invented ids come from the range the tiny policy's tokenizer knows as single tokens.
_INVENTED_LOW, _INVENTED_SPAN = 1000, 9000


def invented_order_id(prompt: str, rng: random.Random) -> str:
    """A well-formed order id drawn from *rng* that does not occur in *prompt*."""
    number = rng.randrange(_INVENTED_SPAN)
    for step in range(_INVENTED_SPAN):
        candidate = _INVENTED_LOW + (number + step) % _INVENTED_SPAN
        if str(candidate) not in prompt:
            return f"ORD-{candidate}"
    raise DataError(f"every id ORD-1000..ORD-9999 occurs in the prompt {prompt[:60]!r}")  # pragma: no cover


def invented_call(order_id: str) -> str:
    """The rejected side of a constructed pair: a well-formed ``lookup_order`` call."""
    body = json.dumps({"name": "lookup_order", "arguments": {"order_id": order_id}})
    return f"<tool_call>{body}</tool_call>"


def rejected_reply(item: Mapping[str, object], rng: random.Random) -> str | None:
    """A lookup with an invented id on no-id and off-topic prompts; None on with-id ones."""
    case = item.get("case")
    category = item.get("category") or (case.get("category") if isinstance(case, Mapping) else None)
    if category not in CONSTRUCTED_CATEGORIES:
        return None
    return invented_call(invented_order_id(str(item["prompt"]), rng))

