"""Refund's tiny-policy build spec: its warm-start corpus, reply mix, order-id tokens, copy head.

The tiny refund policy should look like the reference run's base model: it mostly asks for the id
when none is given and mostly declines off-topic requests, but with an id in the prompt it
only sometimes looks up *that* id; otherwise it asks again, refunds first, or looks up an
invented id. Every reply kind is well formed, so GRPO's format bonus pays all of them a
little and the full reward pays only the exact lookup: with_id is learnable.

Ids in training prompts come from a fixed training pool; the rest of ``ORD-1000..9999``
never appears in training, so a policy that gets them right copies rather than recalls. The
ids are single tokens and the copy head (:mod:`pytest_rlgate.policy.tiny.copyhead`) is installed
over them: without it a model this small never learns to copy an id.

The shipped policy was built from exactly this module; changing a template, a weight or a
pool changes what ``rlgate policy build --env refund`` makes (docs/policy.md).
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ...data.prompts import stratified_split
from ...environment.seeded import prompt_key
from ...policy.tiny.corpus import ReplyMix
from ...policy.tiny.spec import TINY_POLICY, TinySpec, digest
from .rules import CATEGORIES, SYSTEM
from .templates import WARM_START_SIZES, write_set

__all__ = [
    "BASE_MODEL",
    "INVENTED_ID",
    "MIX",
    "ORDER_ID_TOKENS",
    "SPEC",
    "RefundCorpus",
    "id_pools",
    "reply_for",
    "writer_prompts",
]

#: The address of refund's tiny policy (shipped as package data).
BASE_MODEL = TINY_POLICY
#: Every canonical 4-digit order id, each one ordinary token the copy head copies.
ORDER_ID_TOKENS = tuple(f"ORD-{n}" for n in range(1000, 10000))

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
    raise ValueError(f"refund corpus: unknown reply kind {kind!r}; use copy, ask, refund, invent or refuse")


def id_pools(seed: int, n_heldout: int) -> tuple[list[str], list[str]]:
    """(training ids, held-out ids) over ``ORD-1000..ORD-9999``; the invented id is in neither."""
    ids = [t for t in ORDER_ID_TOKENS if t != INVENTED_ID]
    random.Random(seed).shuffle(ids)
    return ids[n_heldout:], ids[:n_heldout]


_ID_SPAN = re.compile(r"\bORD[-_ ]?\d{3,6}\b", re.IGNORECASE)


def _masked(text: str) -> str:
    return prompt_key(_ID_SPAN.sub("{id}", text))


@functools.lru_cache(maxsize=4)
def writer_prompts(seeds: tuple[int, ...], *, exclude_seed: int = 0) -> Mapping[str, tuple[str, ...]]:
    """Customer messages from refund's prompt writer, by category, to widen the phrasing.

    Uses other seeds than the evaluation seed *exclude_seed*, and drops every text (ids
    masked) that occurs in that seed's default or large holdout, so the holdouts the
    benchmarks report stay unseen. With-id texts get ``{id}`` where their id was. Cached
    (a build asks twice: for the writer and for the spec's record), hence read-only.
    """
    unseen = {
        _masked(item["prompt"])
        for sizes in WARM_START_SIZES.values()
        for item in stratified_split(write_set(exclude_seed, sizes), 0.2, categories=CATEGORIES).holdout
    }
    out: dict[str, set[str]] = {category: set() for category in CATEGORIES}
    for seed in seeds:
        for item in write_set(seed, WARM_START_SIZES["large"]):
            text = item["prompt"]
            if _masked(text) in unseen:
                continue
            out[item["category"]].add(_ID_SPAN.sub("{id}", text, count=1) if item["category"] == "with_id" else text)
    return MappingProxyType({category: tuple(sorted(texts)) for category, texts in out.items()})


@dataclass(frozen=True)
class _Writer:
    """Refund's :class:`~pytest_rlgate.policy.tiny.corpus.DialogueWriter`; the context is the order id."""

    train_ids: Sequence[str]
    extra: Mapping[str, Sequence[str]]

    def _message(self, rng: random.Random, templates: Sequence[str], category: str) -> str:
        extra = self.extra.get(category, ())
        pool = extra if extra and rng.random() < 0.5 else templates
        return rng.choice(_STYLE).replace("{}", rng.choice(pool))

    def prompt(self, rng: random.Random, category: str) -> tuple[str, str | None]:
        if category == "with_id":
            order_id = rng.choice(self.train_ids)
            return self._message(rng, _INTENTS, category).replace("{id}", order_id), order_id
        return self._message(rng, _NO_ID if category == "no_id" else _OFF_TOPIC, category), None

    def reply(self, rng: random.Random, kind: str, context: str | None) -> str:
        return reply_for(kind, context, rng)


@dataclass(frozen=True)
class RefundCorpus:
    """Refund's warm-start texts: the templates above plus the prompt writer at other seeds.

    :param heldout_ids: ids never seen in warm-start prompts (the copy tests use them).
    :param writer_seeds: prompt-writer seeds that widen the phrasing.
    """

    heldout_ids: int = 1500
    writer_seeds: tuple[int, ...] = (1, 2, 3)

    def writer(self, seed: int) -> _Writer:
        train_ids, _ = id_pools(seed, self.heldout_ids)
        return _Writer(train_ids, writer_prompts(self.writer_seeds))

    def heldout(self, seed: int) -> list[str]:
        """The ids no warm-start prompt of spec seed *seed* contains."""
        return id_pools(seed, self.heldout_ids)[1]

    def describe(self) -> dict[str, object]:
        return {"heldout_ids": self.heldout_ids, "writer_seeds": list(self.writer_seeds), "invented_id": INVENTED_ID,
                "templates_sha256": digest([_INTENTS, _NO_ID, _OFF_TOPIC, _STYLE, _ASK, _REFUSE, _AMOUNTS]),
                "writer_prompts_sha256": digest(dict(writer_prompts(self.writer_seeds)))}


#: The seed-like base behaviour: with an id, only about a third of the targets copy it (and
#: the model learns the copy imperfectly); the rest ask again, refund first or look up the
#: invented id, all well formed, so GRPO's format bonus pays each a little and only the
#: exact lookup pays in full. no_id gets as many examples as with_id because its prompts
#: read like with_id ones minus the id (0.25 of the data left no_id pass@1 near 0.35).
MIX = ReplyMix(
    category_share={"with_id": 0.40, "no_id": 0.40, "off_topic": 0.20},
    kinds={
        "with_id": {"copy": 0.35, "ask": 0.35, "refund": 0.15, "invent": 0.15},
        "no_id": {"ask": 0.95, "invent": 0.05},
        "off_topic": {"refuse": 0.95, "invent": 0.05},
    },
)

#: Refund's build spec: 800 warm-start steps of a 2-layer Llama with the copy head over the ids.
SPEC = TinySpec(
    name=BASE_MODEL,
    corpus=RefundCorpus(),
    mix=MIX,
    words=ORDER_ID_TOKENS,
    phrases=(SYSTEM,),
    copy_head=True,
)
