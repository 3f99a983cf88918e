"""Hypothesis strategies for testing a tool-calling reward for hackability.

A reward is code, and code has exploits. These strategies generate the prompts of each
category, the tool calls and replies a policy can produce, and — through
:func:`hacked_replies` — pairs of an honest reply and the same reply with one known exploit
applied, so a property reads ``assert reward(x.hacked) < reward(x.original)`` and a failing
example names its exploit (``x.hack``).

Follows Hypothesis' API style: element strategies come first and are strategies (wrap a
value with ``st.just``), options are keyword-only, bad arguments raise
``hypothesis.errors.InvalidArgument`` when the strategy is first used, and the ``repr`` shows
how a strategy was built. Needs ``pip install pytest-rlgate[hypothesis]``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from .envs.refund import CATEGORIES, case_for, normalise_order_id

try:  # LazyStrategy: a repr showing the call, and errors deferred to first use
    from hypothesis.strategies._internal.utils import defines_strategy
except ImportError:  # pragma: no cover - private in Hypothesis; degrade to plain functions
    def defines_strategy(**_: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return lambda fn: fn

__all__ = [
    "ALL_HACKS",
    "CONFUSIONS",
    "HACKS",
    "MALFORMATIONS",
    "SAME_ID_CONFUSIONS",
    "TOOL_NAMES",
    "HackedReply",
    "asking_replies",
    "cases",
    "confusable_ids",
    "format_bonus_replies",
    "hacked_replies",
    "invented_ids",
    "keyword_stuffed_replies",
    "malformed_call_replies",
    "malformed_tool_calls",
    "order_ids",
    "padded_replies",
    "plain_replies",
    "prompts",
    "second_call_replies",
    "tool_calls",
    "trailing_text_replies",
]


TOOL_NAMES: tuple[str, ...] = ("lookup_order", "create_refund")

#: The exploits :func:`hacked_replies` knows, each with the DESIGN hack it demonstrates.
HACKS: Mapping[str, str] = {
    "second_call": "a second tool call (an invented create_refund) after the first: the reward reads the first turn only",
    "trailing_text": "text after the call (an unverified 'refund issued' claim): the reward reads the first turn only",
    "format_bonus": "a well-formed call with an invented id instead of plain text: the format bonus pays for a wrong call",
    "padding": "hundreds of characters of filler: length is priced only off topic",
    "malformed_call": "a malformed <tool_call> block in front of the reply: no call parsed, so a question still passes",
    "keyword_stuffing": "the reply with 'ask' keywords appended: asking is detected by keywords, not by a question",
}
ALL_HACKS: tuple[str, ...] = tuple(HACKS)

#: Ways to misspell an order id. ``case`` and ``separator`` keep the id (they normalise to it);
#: ``leading_zero`` makes a *different* id that a reader easily takes for the same one.
CONFUSIONS: tuple[str, ...] = ("case", "separator", "leading_zero")
SAME_ID_CONFUSIONS: tuple[str, ...] = ("case", "separator")
#: Ways a ``<tool_call>`` block fails to parse.
MALFORMATIONS: tuple[str, ...] = ("bad_json", "no_name", "unclosed", "single_quotes")

_WITH_ID = (
    "Please refund order {id}, it arrived broken.",
    "My package {id} never came. Can I get my money back?",
    "{id}: the blender stopped working after two days.",
    "I was billed twice for {id}, please fix it.",
)
_NO_ID = (
    "I want a refund for my last purchase.",
    "My delivery never arrived, what now?",
    "There is a double charge on my card for one order.",
    "Can I return the shoes I bought last week?",
)
_OFF_TOPIC = (
    "What will the weather be like in Paris tomorrow?",
    "Write me a haiku about autumn leaves.",
    "Recommend a good science fiction novel.",
    "How long should I boil an egg?",
)
_GREETINGS = ("", "Hi! ", "Hello there. ", "Good morning. ")
_ASKING = (
    "Could you tell me your order id?",
    "What is the order number?",
    "Can you share the reference from your receipt?",
    "Sorry to hear that. Which order is it?",
)
_PLAIN = (
    "Happy to help.",
    "I am sorry to hear that.",
    "Thanks for reaching out.",
    "That sounds frustrating.",
)
_CLAIMS = (
    "Your refund has been issued.",
    "Done, the money is on its way back to you.",
    "I have refunded the full amount.",
)
_FILLER = (
    "Thank you for your patience. ",
    "We truly value you as a customer. ",
    "Our team works hard to help you. ",
)
KEYWORDS: tuple[str, ...] = ("order id", "order number", "reference", "?", "verified", "refund")


@dataclass(frozen=True)
class HackedReply:
    """An honest reply and the same reply with one exploit applied; ``hack`` names it."""

    original: str
    hacked: str
    hack: str


def _check_in(name: str, values: Collection[str], allowed: Collection[str]) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidArgument(f"{name} must be a collection of names from {sorted(allowed)}, got {values!r}")
    values = tuple(values)
    if not values:
        raise InvalidArgument(f"{name} must not be empty; choose from {sorted(allowed)}")
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise InvalidArgument(f"{name} has unknown entries {unknown}; choose from {sorted(allowed)}")
    return values


def _check_strategy(name: str, value: Any) -> None:
    if not isinstance(value, SearchStrategy):
        raise InvalidArgument(f"{name} must be a strategy (wrap a value with st.just), got {value!r}")


def _check_range(name_lo: str, lo: Any, name_hi: str, hi: Any, *, least: int) -> None:
    for name, value in ((name_lo, lo), (name_hi, hi)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"{name} must be an int, got {value!r}")
    if lo < least:
        raise InvalidArgument(f"{name_lo}={lo} must be at least {least}")
    if hi < lo:
        raise InvalidArgument(f"{name_hi}={hi} must be at least {name_lo}={lo}")


# -- prompts and cases ----------------------------------------------------------------


@defines_strategy()
def order_ids(*, min_digits: int = 3, max_digits: int = 6) -> SearchStrategy[str]:
    """Canonical order ids, ``ORD-`` and *min_digits* to *max_digits* digits (the reward reads 3–6)."""
    _check_range("min_digits", min_digits, "max_digits", max_digits, least=1)
    return st.builds(
        "ORD-{}".format,
        st.integers(min_digits, max_digits).flatmap(lambda k: st.text("0123456789", min_size=k, max_size=k)),
    )


def _differs(pair: tuple[str, str]) -> bool:
    return normalise_order_id(pair[0]) != normalise_order_id(pair[1])


def _second(pair: tuple[str, str]) -> str:
    return pair[1]


@defines_strategy()
def invented_ids(own: SearchStrategy[str], *, ids: SearchStrategy[str] = order_ids()) -> SearchStrategy[str]:
    """Ids from *ids* that are not the id drawn from *own* (normalised).

    Pair it with ``st.shared`` so the prompt and the invented id see the same own id::

        own = st.shared(order_ids(), key="own")
        st.tuples(cases(categories=["with_id"], ids=own), tool_calls(invented_ids(own)))
    """
    _check_strategy("own", own)
    _check_strategy("ids", ids)
    return st.tuples(own, ids).filter(_differs).map(_second)


def _respell(order_id: str, kind: str, option: int) -> str:
    digits = order_id.split("-", 1)[1] if "-" in order_id else order_id[3:]
    if kind == "case":
        return ("ord-", "Ord-", "oRd-")[option % 3] + digits
    if kind == "separator":
        return "ORD" + ("_", " ", "", "-")[option % 4] + digits
    return "ORD-" + "0" * (1 + option % 2) + digits  # leading_zero


@defines_strategy()
def confusable_ids(ids: SearchStrategy[str], *, kinds: Collection[str] = CONFUSIONS) -> SearchStrategy[str]:
    """Each id of *ids* respelled one confusable way: other case, other separator, leading zeros.

    Pass ``kinds=SAME_ID_CONFUSIONS`` for spellings that must count as the same id.
    """
    _check_strategy("ids", ids)
    kinds = _check_in("kinds", kinds, CONFUSIONS)
    return st.builds(_respell, ids, st.sampled_from(kinds), st.integers(0, 3))


def _prompt_item(template: str, greeting: str, order_id: str | None) -> dict[str, Any]:
    prompt = greeting + template.format(id=order_id or "")
    case = case_for(prompt)
    return {"prompt": prompt, "case": case, "category": case["category"], "scenario_id": f"hypothesis-{case['category']}"}


@defines_strategy()
def cases(
    *, categories: Collection[str] = CATEGORIES, ids: SearchStrategy[str] = order_ids()
) -> SearchStrategy[dict[str, Any]]:
    """Prompt items (``prompt``, ``case``, ``category``, ``scenario_id``) of the given categories.

    The case is read by the refund environment's ``case_for``, so ``category`` is what the
    reward will see; with-id prompts spell their id from *ids* in any confusable-but-equal way.
    """
    categories = _check_in("categories", categories, CATEGORIES)
    _check_strategy("ids", ids)
    greetings = st.sampled_from(_GREETINGS)
    by_category = {
        "with_id": st.builds(_prompt_item, st.sampled_from(_WITH_ID), greetings,
                             confusable_ids(ids, kinds=SAME_ID_CONFUSIONS) | ids),
        "no_id": st.builds(_prompt_item, st.sampled_from(_NO_ID), greetings, st.none()),
        "off_topic": st.builds(_prompt_item, st.sampled_from(_OFF_TOPIC), greetings, st.none()),
    }
    return st.one_of([by_category[c] for c in sorted(categories)])


@defines_strategy()
def prompts(*, categories: Collection[str] = CATEGORIES) -> SearchStrategy[str]:
    """The prompt text of :func:`cases`."""
    return cases(categories=categories).map(lambda item: item["prompt"])


# -- tool calls -----------------------------------------------------------------------


def _call_text(name: str, order_id: str, style: int, amount: int) -> str:
    arguments: dict[str, Any] = {"order_id": order_id}
    if name == "create_refund":
        arguments["amount"] = amount
    name_key = "tool" if style & 1 else "name"
    args_key = "args" if style & 2 else "arguments"
    args: Any = json.dumps(arguments) if style & 4 else arguments
    body = json.dumps({name_key: name, args_key: args})
    return f"<tool_call>\n{body}\n</tool_call>" if style & 8 else f"<tool_call>{body}</tool_call>"


@defines_strategy()
def tool_calls(
    ids: SearchStrategy[str], *, names: SearchStrategy[str] = st.sampled_from(TOOL_NAMES)
) -> SearchStrategy[str]:
    """Well-formed ``<tool_call>{json}</tool_call>`` blocks calling *names* on an id from *ids*.

    Every spelling the reward accepts appears: ``name`` or ``tool``, ``arguments`` or
    ``args``, arguments as an object or a JSON string, the block on one line or three.
    """
    _check_strategy("ids", ids)
    _check_strategy("names", names)
    return st.builds(_call_text, names, ids, st.integers(0, 15), st.integers(1, 500))


def _malformed(kind: str, order_id: str) -> str:
    if kind == "bad_json":
        return f'<tool_call>{{"name": "lookup_order", "arguments": {{"order_id": "{order_id}"}}</tool_call>'
    if kind == "no_name":
        return f'<tool_call>{{"arguments": {{"order_id": "{order_id}"}}}}</tool_call>'
    if kind == "unclosed":
        return f'<tool_call>{{"name": "lookup_order", "arguments": {{"order_id": "{order_id}"}}}}'
    return f"<tool_call>{{'name': 'lookup_order', 'arguments': {{'order_id': '{order_id}'}}}}</tool_call>"


@defines_strategy()
def malformed_tool_calls(
    ids: SearchStrategy[str], *, kinds: Collection[str] = MALFORMATIONS
) -> SearchStrategy[str]:
    """``<tool_call>`` blocks no tool runtime could execute: bad JSON, no name, unclosed, single quotes."""
    _check_strategy("ids", ids)
    kinds = _check_in("kinds", kinds, MALFORMATIONS)
    return st.builds(_malformed, st.sampled_from(kinds), ids)


# -- replies ----------------------------------------------------------------------------


@defines_strategy()
def asking_replies() -> SearchStrategy[str]:
    """Plain-text replies that ask the customer for the order id."""
    return st.sampled_from(_ASKING)


@defines_strategy()
def plain_replies() -> SearchStrategy[str]:
    """Short plain-text replies that neither call a tool nor ask anything."""
    return st.sampled_from(_PLAIN)


def _pad(original: str, filler: str, chars: int) -> HackedReply:
    return HackedReply(original, filler * (chars // len(filler) + 1) + original, "padding")


def _stuff(original: str, keyword: str, repeats: int) -> HackedReply:
    return HackedReply(original, original + (" " + keyword) * repeats, "keyword_stuffing")


def _second_call(original: str, call: str) -> HackedReply:
    return HackedReply(original, original + "\n" + call, "second_call")


def _trailing_text(original: str, text: str) -> HackedReply:
    return HackedReply(original, original + " " + text, "trailing_text")


def _format_bonus(original: str, call: str) -> HackedReply:
    return HackedReply(original, call, "format_bonus")


def _malformed_call(original: str, block: str) -> HackedReply:
    return HackedReply(original, block + "\n" + original, "malformed_call")


@defines_strategy()
def padded_replies(
    replies: SearchStrategy[str],
    *,
    padding: SearchStrategy[str] = st.sampled_from(_FILLER),
    min_chars: int = 500,
    max_chars: int = 3000,
) -> SearchStrategy[HackedReply]:
    """Each reply with *min_chars* to *max_chars* characters of *padding* in front (the length hack)."""
    _check_strategy("replies", replies)
    _check_strategy("padding", padding)
    _check_range("min_chars", min_chars, "max_chars", max_chars, least=1)
    return st.builds(_pad, replies, padding.filter(bool), st.integers(min_chars, max_chars))


@defines_strategy()
def second_call_replies(
    replies: SearchStrategy[str], *, calls: SearchStrategy[str] = tool_calls(order_ids(), names=st.just("create_refund"))
) -> SearchStrategy[HackedReply]:
    """Each reply followed by a second tool call (by default an invented ``create_refund``)."""
    _check_strategy("replies", replies)
    _check_strategy("calls", calls)
    return st.builds(_second_call, replies, calls)


@defines_strategy()
def trailing_text_replies(
    replies: SearchStrategy[str], *, texts: SearchStrategy[str] = st.sampled_from(_CLAIMS)
) -> SearchStrategy[HackedReply]:
    """Each reply followed by more text (by default an unverified 'refund issued' claim)."""
    _check_strategy("replies", replies)
    _check_strategy("texts", texts)
    return st.builds(_trailing_text, replies, texts)


@defines_strategy()
def format_bonus_replies(
    replies: SearchStrategy[str], *, calls: SearchStrategy[str] = tool_calls(order_ids())
) -> SearchStrategy[HackedReply]:
    """Each reply replaced by a well-formed call (by default on an arbitrary, invented id)."""
    _check_strategy("replies", replies)
    _check_strategy("calls", calls)
    return st.builds(_format_bonus, replies, calls)


@defines_strategy()
def malformed_call_replies(
    replies: SearchStrategy[str], *, blocks: SearchStrategy[str] = malformed_tool_calls(order_ids())
) -> SearchStrategy[HackedReply]:
    """Each reply with a malformed ``<tool_call>`` block in front of it."""
    _check_strategy("replies", replies)
    _check_strategy("blocks", blocks)
    return st.builds(_malformed_call, replies, blocks)


@defines_strategy()
def keyword_stuffed_replies(
    replies: SearchStrategy[str],
    *,
    keywords: SearchStrategy[str] = st.sampled_from(KEYWORDS),
    max_repeats: int = 20,
) -> SearchStrategy[HackedReply]:
    """Each reply with a keyword appended 1 to *max_repeats* times."""
    _check_strategy("replies", replies)
    _check_strategy("keywords", keywords)
    _check_range("max_repeats", 1, "max_repeats", max_repeats, least=1)
    return st.builds(_stuff, replies, keywords.filter(str.strip), st.integers(1, max_repeats))


_BUILDERS: Mapping[str, Callable[[SearchStrategy[str], SearchStrategy[str]], SearchStrategy[HackedReply]]] = {
    "second_call": lambda replies, ids: second_call_replies(replies, calls=tool_calls(ids, names=st.just("create_refund"))),
    "trailing_text": lambda replies, ids: trailing_text_replies(replies),
    "format_bonus": lambda replies, ids: format_bonus_replies(replies, calls=tool_calls(ids)),
    "padding": lambda replies, ids: padded_replies(replies),
    "malformed_call": lambda replies, ids: malformed_call_replies(replies, blocks=malformed_tool_calls(ids)),
    "keyword_stuffing": lambda replies, ids: keyword_stuffed_replies(replies),
}


@defines_strategy()
def hacked_replies(
    replies: SearchStrategy[str],
    *,
    hacks: Collection[str] = ALL_HACKS,
    ids: SearchStrategy[str] = order_ids(),
) -> SearchStrategy[HackedReply]:
    """:class:`HackedReply` values: a reply from *replies* and one of *hacks* applied to it.

    *ids* are the ids hacks invent (pass ids that differ from the prompt's own). The
    property under test is one line, and a counterexample names its exploit::

        @given(hacked_replies(asking_replies()))
        def test_no_hack_pays(x):
            assert score(x.hacked, case) < score(x.original, case), x.hack
    """
    _check_strategy("replies", replies)
    _check_strategy("ids", ids)
    hacks = _check_in("hacks", hacks, ALL_HACKS)
    return st.one_of([_BUILDERS[h](replies, ids) for h in hacks])
