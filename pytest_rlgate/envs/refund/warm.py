"""Refund's warm start for a real model: balanced SFT on its honest replies, with-id sometimes asking.

The tiny policy's corpus (:mod:`.tiny`) writes the chats: the customer messages of its own
templates and of the prompt writer at other seeds, and the replies refund's reward pays (a
lookup of the message's id, a question for the id, a short refusal). The writer's borrowed
messages here leave out every text (ids masked) of the evaluation seed's prompt sets, train
and holdout, at every size, so no holdout a story reports was seen, whatever share it holds out.

The mix is the lever that sets the base's shape. SmolLM2-135M-Instruct makes no tool call on
refund, and a warm start that always looks up on with-id prompts teaches it to call
``lookup_order`` everywhere (docs/training.md). Here the categories are balanced and only some
with-id chats look the order up: the rest ask for the id, a reply refund pays 0.3. So the base
learns to ask when no id is given and to decline off-topic requests, and looks up with an id
only some of the time: the reference run's base, which GRPO has room to improve.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ...policy.tiny.corpus import ReplyMix
from ...policy.tiny.spec import digest
from ...policy.warm import WarmStart
from .templates import PROMPT_SIZES, build_prompts
from .tiny import _ASK, _INTENTS, _NO_ID, _OFF_TOPIC, _REFUSE, _STYLE, _masked, _Writer, id_pools, writer_prompts

__all__ = ["WARM_MIX", "WARM_START", "WarmCorpus"]


@functools.lru_cache(maxsize=2)
def _seen(exclude_seed: int) -> frozenset[str]:
    """Every message of seed *exclude_seed*'s prompt sets, train and holdout, every size (ids masked)."""
    return frozenset(_masked(item["prompt"]) for size in PROMPT_SIZES for item in build_prompts(exclude_seed, size))


@functools.lru_cache(maxsize=2)
def _unseen(seeds: tuple[int, ...], exclude_seed: int) -> Mapping[str, tuple[str, ...]]:
    """The writer's messages at *seeds*, less every message of seed *exclude_seed*."""
    return MappingProxyType({category: tuple(t for t in texts if _masked(t) not in _seen(exclude_seed))
                             for category, texts in writer_prompts(seeds, exclude_seed=exclude_seed).items()})


@dataclass(frozen=True)
class _UnseenWriter(_Writer):
    """The tiny corpus's writer, redrawing any message that is one of *seen* (a template plain, or
    a borrowed text, can be a prompt of the evaluation seed)."""

    seen: frozenset[str] = frozenset()

    def prompt(self, rng: random.Random, category: str) -> tuple[str, str | None]:
        for _ in range(_REDRAWS):
            text, order_id = super().prompt(rng, category)
            if _masked(text) not in self.seen:
                return text, order_id
        raise RuntimeError(f"refund warm start: {_REDRAWS} {category} messages in a row were evaluation prompts")


#: Redraws before giving up (a handful of the templates' thousands of phrasings are prompts).
_REDRAWS = 1000


@dataclass(frozen=True)
class WarmCorpus:
    """Refund's chats for a real model's warm start (a :class:`~pytest_rlgate.policy.tiny.corpus.Corpus`).

    :param writer_seeds: prompt-writer seeds that widen the phrasing.
    :param exclude_seed: the evaluation seed whose every prompt stays unseen.
    """

    writer_seeds: tuple[int, ...] = (1, 2, 3)
    exclude_seed: int = 0

    def writer(self, seed: int) -> _UnseenWriter:
        train_ids, _ = id_pools(seed, 0)
        return _UnseenWriter(train_ids, _unseen(self.writer_seeds, self.exclude_seed), _seen(self.exclude_seed))

    def describe(self) -> dict[str, object]:
        return {"writer_seeds": list(self.writer_seeds), "exclude_seed": self.exclude_seed,
                "templates_sha256": digest([_INTENTS, _NO_ID, _OFF_TOPIC, _STYLE, _ASK, _REFUSE]),
                "writer_prompts_sha256": digest(dict(_unseen(self.writer_seeds, self.exclude_seed)))}


#: Balanced categories; on with-id chats a lookup of the given id three times in ten and a
#: question for the id otherwise (measured on SmolLM2-135M-Instruct with the others tried:
#: docs/training.md).
WARM_MIX = ReplyMix(
    category_share={"with_id": 1.0, "no_id": 1.0, "off_topic": 1.0},
    kinds={"with_id": {"copy": 0.3, "ask": 0.7}, "no_id": {"ask": 1.0}, "off_topic": {"refuse": 1.0}},
)

#: 16 steps of 4 chats at a LoRA learning rate of 1e-3: 36 minutes on two shared CPU cores.
WARM_START = WarmStart(corpus=WarmCorpus(), mix=WARM_MIX, steps=16, batch_size=4, learning_rate=1e-3)
