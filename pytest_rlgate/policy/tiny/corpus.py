"""The warm-start corpus: an environment's dialogue writer driven by a seeded reply mix.

The tiny policy is warm-started on (prompt, target reply) chats with a deliberately *mixed*
behaviour, so RL has something to learn and something to break. What the chats say belongs
to the environment (its :class:`DialogueWriter`); how often each category and each kind of
reply appears is the :class:`ReplyMix`. This module only draws from both, in one fixed
order from one :class:`random.Random`, so a spec seed always yields the same stream.

``random`` is fine here, unlike in prompt writers: the stream only has to be the same for
one spec on one Python (the built weights are shipped, and a rebuild is checked for
behaviour, not bytes), and ``random.Random(seed)`` is stable across CPython versions for
``random()``, ``choice`` and ``choices``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Corpus", "Dialogue", "DialogueWriter", "ReplyMix", "dialogues", "pick"]


@dataclass(frozen=True)
class Dialogue:
    """One warm-start example: the user's message, the target reply, and what drew them.

    *history* is what came between the user's message and the target in a multi-turn
    episode (the assistant's earlier tool calls and the tool results), as chat messages.
    """

    prompt: str
    reply: str
    category: str
    kind: str
    history: tuple[Mapping[str, object], ...] = ()


@dataclass(frozen=True)
class ReplyMix:
    """How often each category is drawn, and within it each reply kind (weights, any scale).

    The kinds are the environment's own names (refund: ``copy``, ``ask``, ...; arith:
    ``right``, ``off_by_one``, ...); its writer turns a kind into a reply.
    """

    category_share: Mapping[str, float]
    kinds: Mapping[str, Mapping[str, float]]

    def __post_init__(self) -> None:
        missing = sorted(set(self.category_share) - set(self.kinds))
        if missing:
            raise ValueError(f"ReplyMix: category {missing[0]!r} has a share but no reply kinds; "
                             "add kinds={category: {kind: weight}} for it")
        for where, weights in [("category_share", self.category_share),
                               *((f"kinds[{c!r}]", w) for c, w in self.kinds.items())]:
            if not weights or any(not w >= 0 for w in weights.values()) or not sum(weights.values()) > 0:
                raise ValueError(f"ReplyMix.{where}: weights must be non-negative numbers with a positive sum, "
                                 f"got {dict(weights)!r}")

    def as_dict(self) -> dict[str, object]:
        return {"category_share": dict(self.category_share),
                "kinds": {category: dict(kinds) for category, kinds in self.kinds.items()}}


class DialogueWriter(Protocol):
    """Writes one environment's warm-start chats; the stream decides category and kind.

    ``prompt`` returns the user's message and a *context* (whatever ``reply`` needs: refund
    passes the order id, arith the case). Both draw only from the *rng* they are given. A
    multi-turn writer also has ``turns(rng, kind, context)``: the episode's (history, target)
    pairs, one warm-start example per assistant turn; it is used instead of ``reply``.
    """

    def prompt(self, rng: random.Random, category: str) -> tuple[str, Any]: ...

    def reply(self, rng: random.Random, kind: str, context: Any) -> str: ...


class Corpus(Protocol):
    """An environment's warm-start texts: a writer per spec seed, and their description.

    ``describe()`` is JSON of everything that shapes the texts beyond the code (pools,
    writer seeds, a digest of borrowed prompt texts): it is recorded beside the built
    weights and is part of a local build's cache key.
    """

    def writer(self, seed: int) -> DialogueWriter: ...

    def describe(self) -> dict[str, object]: ...


def pick(rng: random.Random, weights: Mapping[str, float]) -> str:
    """A name drawn by weight (names in sorted order, so dict order never matters)."""
    names = sorted(weights)
    return rng.choices(names, weights=[weights[n] for n in names])[0]


def dialogues(
    writer: DialogueWriter,
    mix: ReplyMix,
    *,
    seed: int,
    category_of: Callable[[str], str | None] | None = None,
) -> Iterator[Dialogue]:
    """An endless, seeded stream of warm-start dialogues drawn with *mix*.

    Each draw: a category, the writer's prompt, a reply kind, then (unless dropped) the
    writer's reply. When *category_of* (the environment reading a prompt text) files a
    prompt under another category, the draw is dropped before its reply is written, so a
    phrasing wrapper can never mislabel a chat.
    """
    rng = random.Random(seed)
    while True:
        category = pick(rng, mix.category_share)
        text, context = writer.prompt(rng, category)
        kind = pick(rng, mix.kinds[category])
        if category_of is not None and category_of(text) != category:
            continue
        turns = getattr(writer, "turns", None)
        if turns is None:
            yield Dialogue(text, writer.reply(rng, kind, context), category, kind)
            continue
        for history, reply in turns(rng, kind, context):
            yield Dialogue(text, reply, category, kind, tuple(history))
