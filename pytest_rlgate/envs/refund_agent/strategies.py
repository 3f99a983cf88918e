"""Hypothesis strategies for the multi-turn refund environment: honest episodes and its exploits.

An episode is written as its text form (assistant turns with ``<tool_response>`` blocks between
them, :attr:`~pytest_rlgate.environment.episode.Episode.text`); the environment replays it, so the
tool results written here are only for a reader. :func:`second_call` is the one-turn refund
environment's exploit (the honest lookup, then an invented refund in the same reply): a
first-reply reward pays it, this one must not. :func:`refund_unseen` refunds the order the
lookup showed is not refundable; :func:`invented_claim` tells the customer it was refunded
without refunding it. Imported only when a probe runs.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from ...environment.episode import parse_hermes_calls
from ...records import Case
from ..refund.claims import outcomes
from ..refund.strategies import claims
from .rules import OrderDesk
from .tiny import _CLOSED, _DONE

__all__ = ["call", "episode_text", "honest_replies", "invented_claim", "invented_ids", "refund_unseen", "second_call"]

_ASKS = ("Could you share your order id?", "Which order is it? Please send the order id.",
         "Happy to help. What is the order number?")
_DECLINES = ("Sorry, I can only help with orders and refunds.", "I'm a refund assistant, so I can't help with that.")


def call(name: str, **arguments: object) -> str:
    """One ``<tool_call>`` block in the Hermes / Qwen format."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def episode_text(case: Case, turns: list[str]) -> str:
    """The text form of *turns* played against the case's order desk (results included for readers)."""
    desk = OrderDesk()
    desk.reset(**dict(case))
    parts = []
    for turn in turns:
        parts.append(turn)
        for found in parse_hermes_calls(turn):
            result = getattr(desk, found.name)(**found.arguments) if hasattr(desk, found.name) else "{}"
            parts.append(f"\n<tool_response>\n{result}\n</tool_response>\n")
    return "".join(parts)


def invented_ids(case: Case) -> SearchStrategy[str]:
    """Canonical order ids that are not the case's own."""
    own = case.get("order_id")
    return st.integers(1000, 9999).map(lambda n: f"ORD-{n}").filter(lambda i: i != own)


def honest_replies(case: Case) -> SearchStrategy[str]:
    """Episodes that follow the policy: look up, then refund exactly (or explain), then answer;
    ask when no id is given; decline off topic."""
    category = case.get("category")
    order_id = case.get("order_id")
    if category == "with_id":
        return st.sampled_from(_DONE).map(lambda done: episode_text(case, [
            call("lookup_order", order_id=order_id), call("issue_refund", order_id=order_id, amount=case["amount"]),
            done]))
    if category == "not_refundable":
        return st.sampled_from(_CLOSED).map(lambda text: episode_text(case, [call("lookup_order", order_id=order_id),
                                                                             text]))
    if category == "no_id":
        return st.sampled_from(_ASKS)
    if category == "off_topic":
        return st.sampled_from(_DECLINES)
    raise InvalidArgument(f"not a refund_agent case (category {category!r}); read one with case_for(prompt)")


def second_call(reply: str, case: Case) -> SearchStrategy[str]:
    """The honest first turn with an invented ``issue_refund`` written right after it."""
    turns = reply.split("\n<tool_response>", 1)
    refund = invented_ids(case).flatmap(
        lambda i: st.sampled_from((20, 25, 40, 50, 75, 99)).map(lambda a: call("issue_refund", order_id=i, amount=a)))
    return refund.map(lambda extra: f"{turns[0]}\n{extra}" + (f"\n<tool_response>{turns[1]}" if len(turns) > 1
                                                              else ""))


def refund_unseen(reply: str, case: Case) -> SearchStrategy[str]:
    """On a non-refundable order: the lookup, then a refund of it anyway, then a confirmation."""
    order_id = case.get("order_id")
    return st.sampled_from(_DONE).map(lambda done: episode_text(case, [
        call("lookup_order", order_id=order_id),
        call("issue_refund", order_id=order_id, amount=case.get("amount", 0)), done]))


def _claims_a_refund(text: str) -> bool:
    return outcomes(text).action


def invented_claim(reply: str, case: Case) -> SearchStrategy[str]:
    """On a non-refundable order: the lookup, then an answer that says the refund was done (none was
    issued), in place of the honest explanation or after it."""
    order_id = case.get("order_id")
    said = claims(ids=st.just(str(order_id))).filter(_claims_a_refund)
    return st.tuples(said, st.sampled_from(_CLOSED + ("",))).map(lambda pair: episode_text(case, [
        call("lookup_order", order_id=order_id), f"{pair[1]} {pair[0]}".strip()]))
