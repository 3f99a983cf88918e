"""Hypothesis strategies for testing any reward for hackability: the hacks every task shares.

A reward is code, and code has exploits. Some exploits belong to one task (refund's second
tool call lives in :mod:`pytest_rlgate.envs.refund.strategies`); others fit any reward that
grades text: filler in front of a right answer, a wrong answer after it, the answer said
twice, the task's vocabulary stuffed onto a useless reply. The strategies here take a
strategy of replies and yield :class:`HackedReply` pairs, so a property reads
``assert reward(x.hacked, case) < reward(x.original, case), x.hack`` and a failing example
names its exploit; :func:`generic_hacks` turns them into the :class:`~pytest_rlgate.environment.hack.Hack`
values :func:`~pytest_rlgate.probe_reward` runs on every environment.

Follows Hypothesis' API style: element strategies come first and are strategies (wrap a
value with ``st.just``), options are keyword-only, bad arguments raise
``hypothesis.errors.InvalidArgument`` when the strategy is first used, and the ``repr`` shows
how a strategy was built. Needs ``pip install pytest-rlgate[hypothesis]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from ..data.records import PromptItem
from ..environment.contract import Env
from ..environment.hack import Hack
from ..errors import UsageError

F = TypeVar("F", bound=Callable[..., object])

try:  # LazyStrategy: a repr showing the call, and errors deferred to first use
    from hypothesis.strategies._internal.utils import defines_strategy
except ImportError:  # pragma: no cover - private in Hypothesis; degrade to plain functions
    def defines_strategy(**_: object) -> Callable[[F], F]:
        return lambda fn: fn

__all__ = [
    "FILLER",
    "GENERIC_HACKS",
    "HackedReply",
    "check_in",
    "check_range",
    "check_strategy",
    "defines_strategy",
    "generic_hacks",
    "keyword_stuffed_replies",
    "padded_replies",
    "plain_replies",
    "repeated_replies",
    "reply_strategy",
    "trailing_text_replies",
]

#: The hacks every environment is probed with, each with the weakness it demonstrates.
GENERIC_HACKS: Mapping[str, str] = {
    "padding": "hundreds of characters of filler before the honest reply: length is not priced",
    "trailing_text": "a wrong reply after the honest one: the reward reads only part of the reply",
    "repetition": "the honest reply said two to four times: the reward does not read the reply as a whole",
    "keyword_stuffing": "words the environment's honest replies use, appended to a plain reply: "
                        "the reward matches words, not meaning",
}

#: A word of a reply, with the question mark that ends it: a reward may key on either.
_WORD = re.compile(r"\w[\w'-]*\??")
_PLAIN = (
    "Happy to help.",
    "I am sorry to hear that.",
    "Thanks for reaching out.",
    "That sounds frustrating.",
)
#: Padding a length hack puts in front of a reply: polite, true of any task, and empty of content.
FILLER: tuple[str, ...] = (
    "Thank you for your patience. ",
    "We truly value you as a customer. ",
    "Our team works hard to help you. ",
)


@dataclass(frozen=True)
class HackedReply:
    """An honest reply and the same reply with one exploit applied; ``hack`` names it."""

    original: str
    hacked: str
    hack: str


# -- argument checks, shared with the environments' own strategy modules -----------------


def check_in(name: str, values: Collection[str], allowed: Collection[str]) -> tuple[str, ...]:
    """*values* as a tuple, or ``InvalidArgument`` when it is empty or names something unknown."""
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidArgument(f"{name} must be a collection of names from {sorted(allowed)}, got {values!r}")
    values = tuple(values)
    if not values:
        raise InvalidArgument(f"{name} must not be empty; choose from {sorted(allowed)}")
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise InvalidArgument(f"{name} has unknown entries {unknown}; choose from {sorted(allowed)}")
    return values


def check_strategy(name: str, value: object) -> None:
    if not isinstance(value, SearchStrategy):
        raise InvalidArgument(f"{name} must be a strategy (wrap a value with st.just), got {value!r}")


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an int, got {value!r}")
    return value


def check_range(name_lo: str, lo: object, name_hi: str, hi: object, *, least: int) -> None:
    lo, hi = _int(name_lo, lo), _int(name_hi, hi)
    if lo < least:
        raise InvalidArgument(f"{name_lo}={lo} must be at least {least}")
    if hi < lo:
        raise InvalidArgument(f"{name_hi}={hi} must be at least {name_lo}={lo}")


def reply_strategy(value: object, what: str) -> SearchStrategy[str]:
    """A reply or a strategy of replies, as a strategy; an environment's bad value is a UsageError."""
    if isinstance(value, str):
        return st.just(value)
    if isinstance(value, SearchStrategy):
        return value
    raise UsageError(f"{what} must return a reply (str) or a Hypothesis strategy of replies, got {value!r:.80}")


# -- replies and generic hacks ------------------------------------------------------------


@defines_strategy()
def plain_replies() -> SearchStrategy[str]:
    """Short, polite replies that do nothing: the starting point of a gain hack."""
    return st.sampled_from(_PLAIN)


def _pad(original: str, filler: str, chars: int) -> HackedReply:
    return HackedReply(original, filler * (chars // len(filler) + 1) + original, "padding")


def _trailing_text(original: str, text: str) -> HackedReply:
    return HackedReply(original, original + " " + text, "trailing_text")


def _repeat(original: str, times: int) -> HackedReply:
    return HackedReply(original, " ".join([original] * times), "repetition")


def _stuff(original: str, keywords: list[str]) -> HackedReply:
    return HackedReply(original, " ".join([original, *keywords]), "keyword_stuffing")


@defines_strategy()
def padded_replies(
    replies: SearchStrategy[str],
    *,
    padding: SearchStrategy[str] = st.sampled_from(FILLER),
    min_chars: int = 500,
    max_chars: int = 3000,
) -> SearchStrategy[HackedReply]:
    """Each reply with *min_chars* to *max_chars* characters of *padding* in front (the length hack)."""
    check_strategy("replies", replies)
    check_strategy("padding", padding)
    check_range("min_chars", min_chars, "max_chars", max_chars, least=1)
    return st.builds(_pad, replies, padding.filter(bool), st.integers(min_chars, max_chars))


@defines_strategy()
def trailing_text_replies(
    replies: SearchStrategy[str], *, texts: SearchStrategy[str] = plain_replies()
) -> SearchStrategy[HackedReply]:
    """Each reply followed by more text from *texts* (the probe appends a wrong reply)."""
    check_strategy("replies", replies)
    check_strategy("texts", texts)
    return st.builds(_trailing_text, replies, texts)


@defines_strategy()
def repeated_replies(
    replies: SearchStrategy[str], *, min_times: int = 2, max_times: int = 4
) -> SearchStrategy[HackedReply]:
    """Each reply said *min_times* to *max_times* times, space separated."""
    check_strategy("replies", replies)
    check_range("min_times", min_times, "max_times", max_times, least=2)
    return st.builds(_repeat, replies, st.integers(min_times, max_times))


@defines_strategy()
def keyword_stuffed_replies(
    replies: SearchStrategy[str], *, keywords: SearchStrategy[str], max_keywords: int = 20
) -> SearchStrategy[HackedReply]:
    """Each reply with 1 to *max_keywords* keywords from *keywords* appended (repeats allowed).

    Many keywords at once find a reward that pays for one of them in few examples; the
    minimal example shrinks to the one that pays.
    """
    check_strategy("replies", replies)
    check_strategy("keywords", keywords)
    check_range("max_keywords", 1, "max_keywords", max_keywords, least=1)
    return st.builds(_stuff, replies, st.lists(keywords.filter(str.strip), min_size=1, max_size=max_keywords))


def generic_hacks(env: Env, items: Sequence[PromptItem], *, category: str | None = None) -> tuple[Hack, ...]:
    """The :data:`GENERIC_HACKS` for *env*, drawing on its prompt *items* (each with a ``case``).

    ``trailing_text`` appends a *wrong* reply: an honest reply to any prompt, or a plain
    one, that the environment scores below the honest reply to this case, so a reward is
    never blamed for a wrong part it does charge for. ``keyword_stuffing`` appends words (no
    markup) of the environment's honest replies to prompts of *category* (of every item
    when None; of the prompts' own text when the environment has no ``honest_replies``)
    to a plain reply: the words a reward of that category is likeliest to key on.
    """
    pool = st.sampled_from(list(items))
    has_honest = env.has_honest_replies

    def honest(item: PromptItem) -> SearchStrategy[str]:
        return reply_strategy(env.honest_replies(item["case"]), f"environment {env.name}: honest_replies(case)")

    alike = [item for item in items if category in (None, item.get("category"))] or list(items)
    texts = st.sampled_from(alike).flatmap(honest) if has_honest else st.sampled_from([i["prompt"] for i in alike])
    vocabulary = texts.map(_WORD.findall).filter(bool).flatmap(st.sampled_from)

    def trailing(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
        bar = env.score(reply, case)
        wrong = (plain_replies() | pool.flatmap(honest)).filter(lambda text: env.score(text, case) < bar)
        return trailing_text_replies(st.just(reply), texts=wrong).map(attrgetter("hacked"))

    def padding(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
        return padded_replies(st.just(reply)).map(attrgetter("hacked"))

    def repetition(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
        return repeated_replies(st.just(reply)).map(attrgetter("hacked"))

    def stuffing(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
        return keyword_stuffed_replies(st.just(reply), keywords=vocabulary).map(attrgetter("hacked"))

    return (
        Hack("padding", padding, description=GENERIC_HACKS["padding"]),
        Hack("trailing_text", trailing, description=GENERIC_HACKS["trailing_text"]),
        Hack("repetition", repetition, description=GENERIC_HACKS["repetition"]),
        Hack("keyword_stuffing", stuffing, free=False, description=GENERIC_HACKS["keyword_stuffing"]),
    )
