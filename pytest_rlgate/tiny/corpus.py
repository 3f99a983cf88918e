"""The warm-start dialogues: refund-assistant chats with a deliberately *mixed* behaviour.

The tiny policy should look like the seed's base model: it mostly asks for the id when
none is given and mostly declines off-topic requests, but with an id in the prompt it
only sometimes looks up *that* id; otherwise it asks again, refunds first, or looks up an
invented id. Every reply kind is well formed, so GRPO's format bonus pays all of them a
little and the full reward pays only the exact lookup: with_id is learnable.

Ids in training prompts come from a fixed training pool; the rest of ``ORD-1000..9999``
never appears in training, so a policy that gets them right copies rather than recalls.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..envs import refund

__all__ = ["INVENTED_ID", "Dialogue", "ReplyMix", "dialogues", "id_pools", "reply_for", "writer_prompts"]

#: The one id the warm-started policy "invents". A diffuse invented id (uniform over all
#: ids) is sharpened away by temperature 0.8 / top-p 0.95, a fixed one survives sampling.
INVENTED_ID = "ORD-1234"

_INTENTS = (
    "I want a refund for order {id}.",
    "Please refund {id}.",
    "Can you refund my order {id}?",
    "I'd like to return order {id}, it arrived broken.",
    "My order {id} never arrived. I want my money back.",
    "I was charged twice for {id}. Please fix it.",
    "Order {id} is late, can I get a refund?",
    "Refund {id} now.",
    "The item in {id} is the wrong size, I want to return it.",
    "Hi, I need help with a refund for {id}.",
    "Please cancel {id} and refund the payment.",
    "The delivery for {id} was damaged.",
    "Can you check {id}? I think I paid too much.",
    "I returned the package for {id} last week, where is my refund?",
    "{id} - wrong item received, refund please.",
    "Hello! My purchase {id} doesn't work. Can I return it?",
    "I need my money back for order {id}, it's been three weeks.",
    "Could you look into {id}? The shipment is missing.",
    "Why was I charged for {id}? I cancelled it.",
    "Order number {id} arrived empty. Refund me.",
    "I'm really unhappy with {id}. I want a full refund.",
    "Can I get a partial refund on {id}? One item was missing.",
    "Help, {id} was delivered to the wrong address.",
    "Please process a return for {id}.",
)
_NO_ID = (
    "I want a refund.",
    "Where is my order?",
    "Can you refund my last purchase?",
    "I was charged twice, please fix it.",
    "My delivery never arrived.",
    "I'd like to return something I bought.",
    "How do I get a refund?",
    "My order arrived broken. I want my money back.",
    "Please cancel my order and refund me.",
    "The shipment is late again.",
    "I need help with a payment problem.",
    "Refund my order now!",
    "Can you check on my return?",
    "I got the wrong item in my order.",
    "Hi, I'd like a refund for the shoes I ordered.",
    "My package says delivered but there was no delivery.",
    "Why did you charge my card again?",
    "I want to return my purchase, it doesn't fit.",
    "The refund for my return never showed up.",
    "Can I get my money back for the order I placed yesterday?",
    "There's an extra charge on my statement.",
    "My order is missing an item.",
    "I cancelled my order but still got charged.",
    "What's the status of my refund?",
)
_OFF_TOPIC = (
    "Tell me a joke.",
    "What's the weather like today?",
    "Can you write a poem about the sea?",
    "What is the capital of France?",
    "How do I bake bread?",
    "Help me with my math homework: what is 12 times 7?",
    "Who won the football game last night?",
    "Recommend a good book.",
    "What time is it in Tokyo?",
    "Translate hello into Spanish.",
    "Can you write Python code to sort a list?",
    "What's your favourite movie?",
    "How tall is Mount Everest?",
    "Give me a recipe for pancakes.",
    "Tell me a fun fact about cats.",
    "What should I name my dog?",
    "How do I fix a flat tyre?",
    "Explain quantum physics simply.",
    "Sing me a song.",
    "What's the meaning of life?",
    "Which is bigger, the sun or the moon?",
    "Can you help me plan a trip to Rome?",
    "How many legs does a spider have?",
    "Write a haiku about autumn.",
)
_STYLE = (
    "{}",
    "{}",
    "Hi, {}",
    "Hello. {}",
    "{} Thanks.",
    "{} Thank you!",
    "Hey there, {}",
    "{} This is urgent.",
)
_ASK = (
    "Could you please share your order id?",
    "I can help with that. What is your order id?",
    "Sure. Which order is it? Please send the order id.",
    "Happy to help. Could you give me the order number?",
    "Can you tell me the order id so I can look it up?",
)
_REFUSE = (
    "Sorry, I can only help with orders and refunds.",
    "I'm a refund assistant, so I can't help with that.",
    "Sorry, that is outside what I can do. I can help with orders and refunds.",
    "I can only help with questions about orders, returns and refunds.",
)
_AMOUNTS = (10, 15, 20, 25, 30, 40, 50, 60, 75, 99)


@dataclass(frozen=True)
class ReplyMix:
    """How often each reply kind is the warm-start target, per category (sums to 1)."""

    with_id: Mapping[str, float]
    no_id: Mapping[str, float]
    off_topic: Mapping[str, float]
    category_share: Mapping[str, float]

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            "with_id": dict(self.with_id),
            "no_id": dict(self.no_id),
            "off_topic": dict(self.off_topic),
            "category_share": dict(self.category_share),
        }


@dataclass(frozen=True)
class Dialogue:
    """One warm-start example: the customer's message and the target reply."""

    prompt: str
    reply: str
    category: str
    kind: str


def _call(name: str, **arguments: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def reply_for(kind: str, order_id: str | None, rng: random.Random) -> str:
    """The target reply of a kind: ``copy``, ``ask``, ``refund``, ``invent`` or ``refuse``."""
    if kind == "copy":
        return _call("lookup_order", order_id=order_id)
    if kind == "refund":
        return _call("create_refund", order_id=order_id, amount=rng.choice(_AMOUNTS))
    if kind == "invent":
        return _call("lookup_order", order_id=INVENTED_ID)
    if kind == "ask":
        return rng.choice(_ASK)
    if kind == "refuse":
        return rng.choice(_REFUSE)
    raise ValueError(f"unknown reply kind {kind!r}")


def id_pools(seed: int, n_heldout: int) -> tuple[list[str], list[str]]:
    """(training ids, held-out ids) over ``ORD-1000..ORD-9999``; the invented id is in neither."""
    ids = [f"ORD-{n}" for n in range(1000, 10000) if f"ORD-{n}" != INVENTED_ID]
    random.Random(seed).shuffle(ids)
    return ids[n_heldout:], ids[:n_heldout]


def _pick(rng: random.Random, weights: Mapping[str, float]) -> str:
    names = sorted(weights)
    return rng.choices(names, weights=[weights[n] for n in names])[0]


def _message(rng: random.Random, templates: Sequence[str], extra: Sequence[str]) -> str:
    pool = extra if extra and rng.random() < 0.5 else templates
    return rng.choice(_STYLE).replace("{}", rng.choice(pool))


def dialogues(
    mix: ReplyMix,
    *,
    seed: int,
    train_ids: Sequence[str],
    extra_prompts: Mapping[str, Sequence[str]] | None = None,
) -> Iterator[Dialogue]:
    """An endless, seeded stream of warm-start dialogues drawn with *mix*.

    *extra_prompts* (category -> texts, e.g. the prompt writer's training prompts) widen the
    phrasing; with_id texts in it must carry ``{id}`` where the id goes.
    """
    rng = random.Random(seed)
    extra = extra_prompts or {}
    while True:
        category = _pick(rng, mix.category_share)
        if category == "with_id":
            order_id = rng.choice(train_ids)
            text = _message(rng, _INTENTS, extra.get("with_id", ())).replace("{id}", order_id)
            kind = _pick(rng, mix.with_id)
        elif category == "no_id":
            order_id = None
            text = _message(rng, _NO_ID, extra.get("no_id", ()))
            kind = _pick(rng, mix.no_id)
        else:
            order_id = None
            text = _message(rng, _OFF_TOPIC, extra.get("off_topic", ()))
            kind = _pick(rng, mix.off_topic)
        if refund.case_for(text)["category"] != category:  # a style wrapper changed the case
            continue
        yield Dialogue(text, reply_for(kind, order_id, rng), category, kind)


_ID_SPAN = re.compile(r"\bORD[-_ ]?\d{3,6}\b", re.IGNORECASE)


def _masked(text: str) -> str:
    return " ".join(_ID_SPAN.sub("{id}", text).lower().split())


def writer_prompts(seeds: Sequence[int], *, exclude_seed: int = 0) -> dict[str, list[str]]:
    """Customer messages from the project's prompt writer, by category, to widen the phrasing.

    Uses other seeds than the evaluation seed *exclude_seed*, and drops every text (ids
    masked) that occurs in that seed's default or large holdout, so the holdouts the
    benchmarks report stay unseen. With-id texts get ``{id}`` where their id was.
    """
    from .. import prompts

    unseen = {
        _masked(item["prompt"])
        for size in ("default", "large")
        for item in prompts.stratified_split(prompts.build_prompts(seed=exclude_seed, size=size)).holdout
    }
    out: dict[str, set[str]] = {"with_id": set(), "no_id": set(), "off_topic": set()}
    for seed in seeds:
        for item in prompts.build_prompts(seed=seed, size="large"):
            text = item["prompt"]
            if _masked(text) in unseen or item["category"] not in out:
                continue
            out[item["category"]].add(_ID_SPAN.sub("{id}", text, count=1) if item["category"] == "with_id" else text)
    return {category: sorted(texts) for category, texts in out.items()}
