"""The tiny refund agent's recipe: multi-turn warm-start episodes over refund's phrasings.

The base agent should look like a half-trained tool user: with an order id it often looks the
order up, and after the lookup it sometimes refunds exactly that order for its amount, but it
also asks again, refunds before looking, looks up the invented ``ORD-1234``, refunds the wrong
amount, or refunds an order the lookup showed cannot be refunded. Every category passes
sometimes and fails sometimes, so GRPO has something to learn; each turn of an episode is one
warm-start example, rendered with the tools through Qwen2.5's chat template
(:data:`~pytest_rlgate.policy.tiny.tokenizer.TOOL_CHAT_TEMPLATE`), the format TRL's tool loop
parses. The system turn with the tool list is one added token, so a prompt stays short.

Order ids are single tokens with refund's copy head, as in ``rlgate/tiny-refund``; amounts are
plain digits the agent has to carry from the lookup's result to the refund.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...policy.tiny.corpus import ReplyMix
from ...policy.tiny.spec import TINY_PREFIX, TinySpec, digest
from ...policy.tiny.tokenizer import TOOL_CHAT_TEMPLATE
from ...policy.tiny.warmstart import TrainSchedule
from ..refund.tiny import _ASK, _INTENTS, _NO_ID, _OFF_TOPIC, _REFUSE, _STYLE, ORDER_ID_TOKENS, id_pools, writer_prompts
from .rules import AMOUNTS, SYSTEM, TOOL_SCHEMAS, OrderDesk, order_for

__all__ = ["BASE_MODEL", "INVENTED_ID", "MIX", "SPEC", "AgentCorpus", "system_turn"]

BASE_MODEL = TINY_PREFIX + "refund_agent"
INVENTED_ID = "ORD-1234"

_DONE = (
    "Your refund has been issued.",
    "Done: the refund is on its way.",
    "I have refunded the order for you.",
    "The refund is issued. It shows on your card in a few days.",
)
_CLOSED = (
    "Sorry, this order cannot be refunded.",
    "I looked it up: this order is not refundable.",
    "Unfortunately that order is not eligible for a refund.",
    "I checked the order, and it cannot be refunded, sorry.",
)


def system_turn() -> str:
    """The system turn Qwen2.5's template renders with the agent's tools: one added token."""
    tools = "".join("\n" + json.dumps(schema, ensure_ascii=False) for schema in TOOL_SCHEMAS)
    return (SYSTEM + "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" + tools
            + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call>")


def _call_text(name: str, arguments: Mapping[str, object]) -> str:
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + json.dumps(dict(arguments)) + "}\n</tool_call>"


def _call_message(name: str, arguments: Mapping[str, object]) -> dict[str, object]:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": dict(arguments)}}]}


#: kind -> the steps of the episode: ("lookup"|"lookup_invented"|"refund"|"refund_wrong"|"done"|"closed"|"ask"|"refuse")
_PLANS: dict[str, tuple[str, ...]] = {
    "flow": ("lookup", "refund", "done"),
    "wrong_amount": ("lookup", "refund_wrong", "done"),
    "refund_first": ("refund_wrong", "done"),
    "invent": ("lookup_invented", "ask"),
    "ask": ("ask",),
    "explain": ("lookup", "closed"),
    "refund_anyway": ("lookup", "refund", "done"),
    "refuse": ("refuse",),
}


@dataclass(frozen=True)
class _Writer:
    refundable_ids: Sequence[str]
    closed_ids: Sequence[str]
    extra: Mapping[str, Sequence[str]]

    def _message(self, rng: random.Random, templates: Sequence[str], category: str) -> str:
        extra = self.extra.get(category, ())
        pool = extra if extra and rng.random() < 0.5 else templates
        return rng.choice(_STYLE).replace("{}", rng.choice(pool))

    def prompt(self, rng: random.Random, category: str) -> tuple[str, str | None]:
        if category in ("with_id", "not_refundable"):
            order_id = rng.choice(self.refundable_ids if category == "with_id" else self.closed_ids)
            return self._message(rng, _INTENTS, "with_id").replace("{id}", order_id), order_id
        return self._message(rng, _NO_ID if category == "no_id" else _OFF_TOPIC, category), None

    def reply(self, rng: random.Random, kind: str, context: str | None) -> str:  # pragma: no cover - turns() is used
        return self.turns(rng, kind, context)[0][1]

    def turns(self, rng: random.Random, kind: str, context: str | None) -> list[tuple[list[dict[str, object]], str]]:
        desk = OrderDesk()
        desk.reset(**({"order_id": context} if context else {}))
        amount = order_for(context)["amount"] if context else rng.choice(AMOUNTS)
        history: list[dict[str, object]] = []
        out = []
        for step in _PLANS[kind]:
            if step in ("done", "closed", "ask", "refuse"):
                pool = {"done": _DONE, "closed": _CLOSED, "ask": _ASK, "refuse": _REFUSE}[step]
                out.append((list(history), rng.choice(pool)))
                break
            arguments: dict[str, object]
            if step == "lookup" or step == "lookup_invented":
                name, arguments = "lookup_order", {"order_id": context if step == "lookup" else INVENTED_ID}
            else:
                wrong = [a for a in AMOUNTS if a != amount]
                name = "issue_refund"
                arguments = {"order_id": context or INVENTED_ID,
                             "amount": amount if step == "refund" else rng.choice(wrong)}
            out.append((list(history), _call_text(name, arguments)))
            result = getattr(desk, name)(**arguments)
            history += [_call_message(name, arguments), {"role": "tool", "name": name, "content": result}]
        return out


@dataclass(frozen=True)
class AgentCorpus:
    """The agent's warm-start episodes: refund's customer texts, split by the order book."""

    heldout_ids: int = 1500
    writer_seeds: tuple[int, ...] = (1, 2, 3)

    def writer(self, seed: int) -> _Writer:
        train_ids, _ = id_pools(seed, self.heldout_ids)
        refundable = [i for i in train_ids if order_for(i)["refundable"]]
        closed = [i for i in train_ids if not order_for(i)["refundable"]]
        return _Writer(refundable, closed, writer_prompts(self.writer_seeds))

    def describe(self) -> dict[str, object]:
        return {"heldout_ids": self.heldout_ids, "writer_seeds": list(self.writer_seeds), "invented_id": INVENTED_ID,
                "templates_sha256": digest([_DONE, _CLOSED, _ASK, _REFUSE, list(_PLANS.items())]),
                "writer_prompts_sha256": digest(dict(writer_prompts(self.writer_seeds)))}


#: After a lookup the base refunds a refundable order for its amount about half the time; it
#: refunds a closed order a third of the time; before any lookup it often does something else.
MIX = ReplyMix(
    category_share={"with_id": 0.35, "not_refundable": 0.2, "no_id": 0.3, "off_topic": 0.15},
    kinds={
        "with_id": {"flow": 0.35, "wrong_amount": 0.2, "ask": 0.2, "refund_first": 0.15, "invent": 0.1},
        "not_refundable": {"explain": 0.45, "refund_anyway": 0.3, "ask": 0.15, "refund_first": 0.1},
        "no_id": {"ask": 0.85, "invent": 0.15},
        "off_topic": {"refuse": 0.9, "invent": 0.1},
    },
)

SPEC = TinySpec(
    name=BASE_MODEL,
    corpus=AgentCorpus(),
    mix=MIX,
    words=ORDER_ID_TOKENS,
    phrases=(system_turn(),),
    copy_head=True,
    copy_values=tuple(str(a) for a in AMOUNTS),
    chat_template=TOOL_CHAT_TEMPLATE,
    schedule=TrainSchedule(steps=600, batch_size=32),
    tokenizer_dialogues=6000,
)
