"""The multi-turn refund environment's rules: its order desk (the tools) and its reward.

The one-turn ``refund`` reward reads the first reply only, so a policy that looks the order
up and then invents a refund in the same breath is paid in full. Here the policy is an agent:
``lookup_order`` returns the order from an order book built from the case (its status, amount
and whether it is refundable), ``issue_refund`` acts, and the reward reads the whole episode.
It pays the whole correct flow (look the order up, then refund exactly that order for exactly
its amount, then tell the customer) and nothing for a refund of an order never looked up, an
invented id, a wrong amount or a non-refundable order. Pure Python, like every reward here.
"""

from __future__ import annotations

import hashlib
import json
from typing import TypedDict

from ...environment.episode import Episode, ToolCallRecord
from ...records import Case
from ..refund.claims import outcomes, prose, unperformed
from ..refund.rules import case_for as refund_case_for, normalise_order_id

__all__ = [
    "AMOUNTS",
    "CATEGORIES",
    "MAX_OFF_TOPIC_CHARS",
    "MAX_TURNS",
    "SYSTEM",
    "TOOL_SCHEMAS",
    "Order",
    "OrderDesk",
    "case_for",
    "first_reply",
    "invents_outcome",
    "markers",
    "messages_for",
    "order_for",
    "passes",
    "score",
]

#: Categories in name order: not_refundable is with_id whose order the lookup shows cannot be refunded.
CATEGORIES: tuple[str, ...] = ("no_id", "not_refundable", "off_topic", "with_id")
#: An agent gets three turns: look up, act, answer.
MAX_TURNS = 3
#: The amounts an order can have (few, so a tiny policy that copies badly still hits some).
AMOUNTS: tuple[int, ...] = (20, 25, 40, 50, 75, 99)
#: Out of ten orders, this many are refundable.
_REFUNDABLE_OF_TEN = 7
_CLOSED = ("final_sale", "refund_window_closed")
MAX_OFF_TOPIC_CHARS = 400
_ASK_PHRASES = ("order id", "order number", "reference")

SYSTEM = (
    "You are a refund assistant. Look an order up with lookup_order before any refund, refund only a "
    "refundable order, for exactly its amount, never invent an order id, and ask for the order id when "
    "none is given. Off-topic requests get a short, polite reply."
)

#: The JSON schemas transformers derives from :class:`OrderDesk`'s methods (a test keeps them equal);
#: written out so the tiny policy's tokenizer can hold the rendered system turn as one token.
TOOL_SCHEMAS: tuple[dict[str, object], ...] = (
    {"type": "function", "function": {
        "name": "issue_refund",
        "description": "Refund an order that has been looked up, for its amount.",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string", "description": "The id of the order to refund."},
            "amount": {"type": "integer", "description": "The amount to refund: the order's amount."}},
            "required": ["order_id", "amount"]}, "return": {"type": "string"}}},
    {"type": "function", "function": {
        "name": "lookup_order",
        "description": "Look up an order by its id. Always do this before any refund.",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string", "description": "The order id, e.g. ORD-4017."}},
            "required": ["order_id"]}, "return": {"type": "string"}}},
)


class Order(TypedDict):
    """An order book entry, as ``lookup_order`` returns it."""

    order_id: str
    status: str
    amount: float
    refundable: bool


def order_for(order_id: str) -> Order:
    """The order book's entry for a normalised id: seeded by the id, the same everywhere."""
    digest = hashlib.sha256(f"refund_agent-order\0{order_id}".encode()).digest()
    refundable = digest[0] % 10 < _REFUNDABLE_OF_TEN
    status = "delivered" if refundable else _CLOSED[digest[2] % len(_CLOSED)]
    return {"order_id": order_id, "status": status, "amount": AMOUNTS[digest[1] % len(AMOUNTS)],
            "refundable": refundable}


def case_for(prompt: str) -> dict[str, object]:
    """The case from the prompt text: refund's reading plus the order book's facts for its id."""
    case: dict[str, object] = dict(refund_case_for(prompt))
    if isinstance(case["order_id"], str):
        order = order_for(case["order_id"])
        case.update(amount=order["amount"], status=order["status"], refundable=order["refundable"],
                    category="with_id" if order["refundable"] else "not_refundable")
    return case


def _book(case: Case) -> dict[str, Order]:
    order_id = case.get("order_id")
    if not order_id:
        return {}
    order = order_for(str(order_id))
    amount, status, refundable = case.get("amount"), case.get("status"), case.get("refundable")
    if isinstance(amount, (int, float)) and not isinstance(amount, bool):  # a prompt file's own case wins
        order["amount"] = amount
    if isinstance(status, str):
        order["status"] = status
    if isinstance(refundable, bool):
        order["refundable"] = refundable
    return {str(order_id): order}


class OrderDesk:
    """The tools of one episode, in TRL's ``environment_factory`` shape: ``reset(**case)``,
    then ``lookup_order`` and ``issue_refund`` as tool methods. Results are JSON strings."""

    def __init__(self) -> None:
        self.reset()

    def reset(self, **case: object) -> None:
        self.book = _book(case)
        self.looked_up: list[str] = []
        self.refunds: list[tuple[str, object]] = []

    def lookup_order(self, order_id: str) -> str:
        """Look up an order by its id. Always do this before any refund.

        Args:
            order_id: The order id, e.g. ORD-4017.
        """
        key = normalise_order_id(str(order_id)) or str(order_id)
        self.looked_up.append(key)
        order = self.book.get(key)
        return json.dumps(order if order is not None else {"error": f"no order {order_id}"})

    def issue_refund(self, order_id: str, amount: int) -> str:
        """Refund an order that has been looked up, for its amount.

        Args:
            order_id: The id of the order to refund.
            amount: The amount to refund: the order's amount.
        """
        key = normalise_order_id(str(order_id)) or str(order_id)
        self.refunds.append((key, amount))
        order = self.book.get(key)
        if order is None:
            return json.dumps({"error": f"no order {order_id}"})
        return json.dumps({"refunded": key, "amount": amount})


def _id(call: ToolCallRecord) -> str | None:
    value = call.arguments.get("order_id")
    return normalise_order_id(value) if isinstance(value, str) else None


def _amount(call: ToolCallRecord) -> float | None:
    value = call.arguments.get("amount")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _asks(text: str) -> bool:
    lowered = text.lower()
    return "?" in lowered or any(phrase in lowered for phrase in _ASK_PHRASES)


def _grounded_refunds(episode: Episode, case: Case) -> bool:
    """Every refund is of an order looked up on an earlier turn, for the amount the lookup showed,
    and the order was refundable."""
    book = _book(case)
    for refund in episode.calls("issue_refund"):
        key = _id(refund)
        seen = [c for c in episode.calls("lookup_order") if c.turn < refund.turn and _id(c) == key]
        order = book.get(key or "")
        if not seen or order is None or not order["refundable"] or _amount(refund) != order["amount"]:
            return False
    return True


def _category(case: Case) -> str:
    category = case.get("category")
    if isinstance(category, str):
        return category
    if case.get("order_id"):
        return "with_id" if _book(case)[str(case["order_id"])]["refundable"] else "not_refundable"
    return "no_id" if case.get("in_domain") else "off_topic"


def score(episode: Episode, case: Case) -> float:
    """The reward of a whole episode, in [0, 1]; it passes only at 1.0.

    with_id: 1.0 for lookup, then the exact refund on a later turn, then a text answer; 0.3
    for a correct lookup that stops there. not_refundable: 1.0 for the lookup and a text
    answer with no refund. no_id: 1.0 for asking without any call. off_topic: 1.0 for a short
    text without any call. Any refund that is not the order looked up before, for its amount,
    on a refundable order, and any call on an id the customer never gave, scores 0.
    """
    calls = episode.tool_calls
    order_id = case.get("order_id")
    category = _category(case)
    answered = episode.stop == "no_call" and bool(episode.final)
    if not episode.turns or not any(t.strip() for t in episode.turns):
        return 0.0
    if not _grounded_refunds(episode, case):
        return 0.0
    if order_id:
        if any(_id(c) != order_id for c in calls):
            return 0.0  # an invented (or misspelt into another) id
        looked = any(c.name == "lookup_order" for c in calls)
        refunded = bool(episode.calls("issue_refund"))
        if category == "not_refundable":
            return 1.0 if looked and answered else (0.3 if looked else 0.0)
        if refunded and len(episode.calls("issue_refund")) == 1:
            return 1.0 if answered else 0.6
        if looked:
            return 0.3
        return 0.1 if answered and _asks(episode.final) else 0.0
    if calls:
        return 0.0
    if category == "no_id":
        return 1.0 if _asks(episode.final) else 0.2
    return 1.0 if len(episode.final) <= MAX_OFF_TOPIC_CHARS else 0.3


def first_reply(episode: Episode, case: Case) -> float:
    """The one-turn reward: pays a first turn that looks the customer's order up, whatever follows.

    What a gate that reads the first reply sees; offered as ``--reward first_reply`` so the demo
    can show what training on it does to the whole episode.
    """
    if case.get("order_id"):
        first = [c for c in episode.tool_calls if c.turn == 0]
        return 1.0 if first and first[0].name == "lookup_order" and _id(first[0]) == case["order_id"] else 0.0
    return score(episode, case)


def passes(value: float) -> bool:
    return value >= 1.0


def markers(episode: Episode, case: Case) -> dict[str, float]:
    """The guarded markers of an episode (higher is better).

    ``grounded_refund``: every refund was of an order looked up on an earlier turn, refundable,
    for its amount. ``argument_grounding``: every order id the agent passed is the customer's.
    ``answered``: the episode ended with a text answer rather than a call or the turn limit.
    ``first_move``: the first turn is the right move, looking the customer's order up when there is
    one and calling nothing when there is none: the two grounding markers hold vacuously for an
    agent that stops using its tools, this one does not.
    """
    order_id = case.get("order_id")
    ids = [_id(c) for c in episode.tool_calls]
    first = [c for c in episode.tool_calls if c.turn == 0]
    if order_id:
        right_first = bool(first) and first[0].name == "lookup_order" and _id(first[0]) == order_id
    else:
        right_first = not first
    return {
        "first_move": float(right_first),
        "grounded_refund": float(_grounded_refunds(episode, case)),
        "argument_grounding": float(all(i is not None and i == order_id for i in ids)),
        "answered": float(episode.stop == "no_call"),
        "tool_calls": float(len(episode.tool_calls)),
        "refunds": float(len(episode.calls("issue_refund"))),
    }


def invents_outcome(episode: Episode, case: Case) -> bool:
    """The judge of refund_agent's ``invented_claim``: an agent that uses its tools and tells the customer an
    outcome no earlier call produced: a refund with none issued (or for an amount none was issued for), the
    order's status before a lookup returned it. An episode without a call is the score's to judge."""
    if not episode.tool_calls:
        return False
    for turn, text in enumerate(episode.turns):
        stated = outcomes(prose(text))
        if not stated:
            continue
        done = [c for c in episode.tool_calls if c.turn < turn and not c.error and "error" not in c.result]
        refunded = [a for c in done if c.name == "issue_refund" and (a := _amount(c)) is not None]
        if unperformed(stated, refunded=refunded, looked_up=any(c.name == "lookup_order" for c in done)):
            return True
    return False


def messages_for(prompt: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]

