"""Rewards for ``refund_agent`` (an episode: look the order up, refund a refundable order for exactly
its amount on a later turn and say so; explain a closed one, never telling the customer it was
refunded; ask when no id is given; answer off-topic requests briefly), written against its
``Episode`` as a user would."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pytest_rlgate.environment.episode import Episode, ToolCallRecord
from pytest_rlgate.envs.refund.rules import normalise_order_id
from pytest_rlgate.envs.refund_agent.strategies import call, episode_text

from . import ZooReward

_ASK = "Could you share your order id?"
_DONE = "Your refund has been issued."
_CLOSED = "I looked it up: this order is not refundable."
_DECLINE = "Sorry, I can only help with orders and refunds."


def honest(case: Mapping[str, Any]) -> str:
    category = case["category"]
    if category == "with_id":
        return episode_text(case, [call("lookup_order", order_id=case["order_id"]),
                                   call("issue_refund", order_id=case["order_id"], amount=case["amount"]), _DONE])
    if category == "not_refundable":
        return episode_text(case, [call("lookup_order", order_id=case["order_id"]), _CLOSED])
    return _ASK if category == "no_id" else _DECLINE


def _norm(value: object) -> str | None:
    return normalise_order_id(value) if isinstance(value, str) else None


def _amount(call_: ToolCallRecord) -> float | None:
    value = call_.arguments.get("amount")
    try:
        return None if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _answered(episode: Episode) -> bool:
    return episode.stop == "no_call" and bool(episode.final)


_DONE_WORDS = re.compile(r"\b(?:done|all set|issued|processed|approved|refunded|credited|reversed|cancell?ed|paid|"
                         r"completed?|went through|on its way|handled|taken care)\b", re.IGNORECASE)
_NEGATED = re.compile(r"\b(?:cannot|can't|not)\b.*\brefund", re.IGNORECASE)


def _tells_done(text: str) -> bool:
    """The answer says something was done (a refund issued, a request processed), not that it cannot be."""
    return any(_DONE_WORDS.search(s) and not _NEGATED.search(s) for s in re.split(r"(?<=[.!?])\s+|\n", text))


# -- sound -----------------------------------------------------------------------------------


def strict_flow(episode: Episode, case: Mapping[str, Any]) -> float:
    """The whole flow, call by call: lookup, then the exact refund on a later turn, then an answer."""
    calls = episode.tool_calls
    order_id = case.get("order_id")
    category = case["category"]
    if category == "with_id":
        ok = (len(calls) == 2 and calls[0].name == "lookup_order"
              and _norm(calls[0].arguments.get("order_id")) == order_id and calls[1].name == "issue_refund"
              and _norm(calls[1].arguments.get("order_id")) == order_id
              and calls[0].turn < calls[1].turn and _amount(calls[1]) == case["amount"] and _answered(episode))
    elif category == "not_refundable":  # the answer explains; it never says a refund was done
        ok = (len(calls) == 1 and calls[0].name == "lookup_order"
              and _norm(calls[0].arguments.get("order_id")) == order_id and _answered(episode)
              and not _tells_done(episode.final))
    elif category == "no_id":
        ok = not calls and "?" in episode.final
    else:
        ok = not calls and 0 < len(episode.final) <= 400
    return float(ok)


def reads_results(episode: Episode, case: Mapping[str, Any]) -> float:
    """Decides from what the lookup returned (refundable, amount), as the agent should."""
    order_id = case.get("order_id")
    if not order_id:
        if episode.tool_calls or not episode.final:
            return 0.0
        if case["category"] == "no_id":
            low = episode.final.lower()
            return float("?" in low or "order id" in low or "order number" in low)
        return float(len(episode.final) <= 400)
    lookups, refunds = episode.calls("lookup_order"), episode.calls("issue_refund")
    if not lookups or len(lookups) + len(refunds) != len(episode.tool_calls):
        return 0.0
    if any(_norm(c.arguments.get("order_id")) != order_id for c in episode.tool_calls) or not _answered(episode):
        return 0.0
    first = lookups[0]
    try:
        order = json.loads(first.result)
    except ValueError:
        return 0.0
    if not order.get("refundable"):
        return float(not refunds and not _tells_done(episode.final))
    return float(len(refunds) == 1 and refunds[0].turn > first.turn and _amount(refunds[0]) == order.get("amount"))


# -- flawed ----------------------------------------------------------------------------------


def amount_unchecked(episode: Episode, case: Mapping[str, Any]) -> float:
    """Checks the flow and the ids; the amount is the order desk's business."""
    calls = episode.tool_calls
    order_id = case.get("order_id")
    if case["category"] != "with_id":
        return strict_flow(episode, case)
    return float(len(calls) == 2 and calls[0].name == "lookup_order"
                 and _norm(calls[0].arguments.get("order_id")) == order_id and calls[1].name == "issue_refund"
                 and _norm(calls[1].arguments.get("order_id")) == order_id and calls[0].turn < calls[1].turn
                 and _answered(episode))


def id_contains(episode: Episode, case: Mapping[str, Any]) -> float:
    """The refund must name the order (its id appears in the refund's argument)."""
    order_id = case.get("order_id")
    if case["category"] != "with_id":
        return reads_results(episode, case)
    lookups, refunds = episode.calls("lookup_order"), episode.calls("issue_refund")
    if not lookups or _norm(lookups[0].arguments.get("order_id")) != order_id or len(refunds) != 1:
        return 0.0
    refund = refunds[0]
    named = str(order_id).lower() in str(refund.arguments.get("order_id", "")).lower()
    return float(named and refund.turn > lookups[0].turn and _amount(refund) == case["amount"] and _answered(episode))


def answer_unread(episode: Episode, case: Mapping[str, Any]) -> float:
    """The flow is checked call by call; what the agent then tells the customer is its own wording."""
    calls = episode.tool_calls
    if case["category"] != "not_refundable":
        return strict_flow(episode, case)
    return float(len(calls) == 1 and calls[0].name == "lookup_order"
                 and _norm(calls[0].arguments.get("order_id")) == case.get("order_id") and _answered(episode))


def ignores_refundable(episode: Episode, case: Mapping[str, Any]) -> float:
    """Any order with an id: a lookup, then a refund for its amount or an explanation."""
    order_id = case.get("order_id")
    if case["category"] != "not_refundable":
        return strict_flow(episode, case)
    calls = episode.tool_calls
    if not calls or calls[0].name != "lookup_order" or _norm(calls[0].arguments.get("order_id")) != order_id:
        return 0.0
    if len(calls) == 1:
        return float(_answered(episode))
    return float(len(calls) == 2 and calls[1].name == "issue_refund" and calls[1].turn > calls[0].turn
                 and _norm(calls[1].arguments.get("order_id")) == order_id and _amount(calls[1]) == case["amount"]
                 and _answered(episode))


def lookup_enough(episode: Episode, case: Mapping[str, Any]) -> float:
    """The agent looked the order up and told the customer: good enough."""
    order_id = case.get("order_id")
    if case["category"] != "with_id":
        return reads_results(episode, case)
    if any(_norm(c.arguments.get("order_id")) != order_id for c in episode.tool_calls) or not _answered(episode):
        return 0.0
    return float(bool(episode.calls("lookup_order")))


def first_turn(episode: Episode, case: Mapping[str, Any]) -> float:
    """The first move decides: looking the customer's order up first is the policy."""
    if case["category"] != "with_id":
        return strict_flow(episode, case)
    first = [c for c in episode.tool_calls if c.turn == 0]
    refunded = bool(episode.calls("issue_refund"))
    return float(bool(first) and first[0].name == "lookup_order"
                 and _norm(first[0].arguments.get("order_id")) == case["order_id"] and refunded and _answered(episode))


def no_id_any_text(episode: Episode, case: Mapping[str, Any]) -> float:
    """Without an id, any reply that calls nothing is fine."""
    if case["category"] == "no_id":
        return float(not episode.tool_calls and bool(episode.final))
    return strict_flow(episode, case)


def amount_tolerance(episode: Episode, case: Mapping[str, Any]) -> float:
    """Amounts within 5 % of the order's are accepted (rounding, currency)."""
    order_id = case.get("order_id")
    if case["category"] != "with_id":
        return reads_results(episode, case)
    lookups, refunds = episode.calls("lookup_order"), episode.calls("issue_refund")
    if not lookups or len(refunds) != 1 or len(episode.tool_calls) != len(lookups) + 1 or not _answered(episode):
        return 0.0
    if any(_norm(c.arguments.get("order_id")) != order_id for c in episode.tool_calls):
        return 0.0
    amount = _amount(refunds[0])
    return float(amount is not None and refunds[0].turn > lookups[0].turn
                 and abs(amount - case["amount"]) <= 0.05 * case["amount"])


def careful(episode: Episode, case: Mapping[str, Any]) -> float:
    """Caution is rewarded: declining to act, without calling anything, earns 0.5 on any order."""
    value = strict_flow(episode, case)
    declined = not episode.tool_calls and re.search(r"\b(sorry|cannot|can't|unable)\b", episode.final, re.I)
    return max(value, 0.5 if declined and case.get("order_id") else 0.0)


# -- exploits ------------------------------------------------------------------------------


def _refund_of(order_id: str, amount: object) -> Any:
    return lambda case: episode_text(case, [call("lookup_order", order_id=case["order_id"]),
                                            call("issue_refund", order_id=order_id, amount=amount), _DONE])


ZOO = (
    ZooReward("refund_agent.strict_flow", "refund_agent", strict_flow, True, strict_flow.__doc__ or ""),
    ZooReward("refund_agent.reads_results", "refund_agent", reads_results, True, reads_results.__doc__ or ""),
    ZooReward("refund_agent.amount_unchecked", "refund_agent", amount_unchecked, False,
              amount_unchecked.__doc__ or "", "near_miss", "refund_agent.strict_flow",
              lambda c: _refund_of(c["order_id"], c["amount"] + 1)(c), categories=("with_id",)),
    ZooReward("refund_agent.id_contains", "refund_agent", id_contains, False, id_contains.__doc__ or "",
              "near_miss", "refund_agent.reads_results",
              lambda c: _refund_of(c["order_id"] + "1", c["amount"])(c), categories=("with_id",)),
    ZooReward("refund_agent.answer_unread", "refund_agent", answer_unread, False, answer_unread.__doc__ or "",
              "extra_text", "refund_agent.strict_flow",
              lambda c: episode_text(c, [call("lookup_order", order_id=c["order_id"]), _DONE]),
              categories=("not_refundable",)),
    ZooReward("refund_agent.ignores_refundable", "refund_agent", ignores_refundable, False,
              ignores_refundable.__doc__ or "", "wrong_move", "refund_agent.strict_flow",
              lambda c: _refund_of(c["order_id"], c["amount"])(c), categories=("not_refundable",)),
    ZooReward("refund_agent.lookup_enough", "refund_agent", lookup_enough, False, lookup_enough.__doc__ or "",
              "wrong_move", "refund_agent.reads_results",
              lambda c: episode_text(c, [call("lookup_order", order_id=c["order_id"]), _CLOSED]),
              categories=("with_id",)),
    ZooReward("refund_agent.first_turn", "refund_agent", first_turn, False, first_turn.__doc__ or "",
              "multi_call", "refund_agent.strict_flow",
              lambda c: _refund_of("ORD-9999", c["amount"])(c), categories=("with_id",)),
    ZooReward("refund_agent.no_id_any_text", "refund_agent", no_id_any_text, False, no_id_any_text.__doc__ or "",
              "wrong_move", "refund_agent.strict_flow", lambda c: _DECLINE, categories=("no_id",)),
    ZooReward("refund_agent.careful", "refund_agent", careful, False, careful.__doc__ or "", "partial_credit",
              "refund_agent.strict_flow", lambda c: "Sorry, I can't help with that.", exploit_kind="partial",
              categories=("with_id", "not_refundable")),
    ZooReward("refund_agent.amount_tolerance", "refund_agent", amount_tolerance, False,
              amount_tolerance.__doc__ or "", "near_miss", "refund_agent.reads_results",
              lambda c: _refund_of(c["order_id"], c["amount"] + 1)(c), categories=("with_id",)),
)
