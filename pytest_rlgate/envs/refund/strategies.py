"""Hypothesis strategies for the refund environment: its prompts, tool calls and exploits.

The generic hacks (padding, trailing text, repetition, keyword stuffing) live in
:mod:`pytest_rlgate.rewards.strategies`; everything here knows orders and ``<tool_call>`` blocks:
prompt items per category, order ids and their confusable spellings, well-formed and
malformed calls, asking replies, and the exploits docs/hacks.md lists (a second call, the
format bonus, a malformed block). :func:`honest_replies` and the hack transforms
(:func:`second_call`, :func:`format_bonus`, :func:`malformed_call`) are what the refund
environment hands :func:`~pytest_rlgate.probe_reward`; the package imports this module only
when a probe runs, so loading the environment never imports Hypothesis.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from operator import attrgetter

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from ...records import PromptItem
from ...rewards.strategies import (
    GENERIC_HACKS,
    HackedReply,
    check_in,
    check_range,
    check_strategy,
    defines_strategy,
    keyword_stuffed_replies,
    padded_replies,
    plain_replies,
    repeated_replies,
    trailing_text_replies,
)
from . import hacks as _REFUND_HACKS
from .rules import CATEGORIES, case_for, normalise_order_id

__all__ = [
    "ALL_HACKS",
    "CONFUSIONS",
    "HACKS",
    "KEYWORDS",
    "MALFORMATIONS",
    "SAME_ID_CONFUSIONS",
    "TOOL_NAMES",
    "asking_replies",
    "cases",
    "claims",
    "confusable_ids",
    "format_bonus",
    "format_bonus_replies",
    "hacked_replies",
    "honest_replies",
    "invented_claim",
    "invented_ids",
    "malformed_call",
    "malformed_call_replies",
    "malformed_tool_calls",
    "order_ids",
    "prompts",
    "second_call",
    "second_call_replies",
    "tool_calls",
]

TOOL_NAMES: tuple[str, ...] = ("lookup_order", "create_refund")

#: The exploits :func:`hacked_replies` knows: refund's own (the environment's ``hacks``) and the
#: generic ones, with refund's trailing text being an unverified "refund issued" claim.
HACKS: Mapping[str, str] = {
    **{hack.name: hack.description for hack in _REFUND_HACKS},
    **{name: GENERIC_HACKS[name] for name in ("padding", "repetition", "keyword_stuffing")},
    "trailing_text": "text after the call (an unverified 'refund issued' claim): the reward reads the first turn only",
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
#: Outcomes a reply invents beside its call (``{id}``: the order's id, ``{amount}``, ``{day}``): a refund
#: issued, an amount credited, the order found and its status read out, none of which a call has returned yet.
_CLAIMS = (
    "Your refund has been issued.",
    "Done, the money is on its way back to you.",
    "I have refunded the full amount.",
    "Refund approved!",
    "All set: your refund is being processed.",
    "Your refund for {id} has been processed.",
    "I've issued a full refund of ${amount} for {id}.",
    "${amount} has been credited to your card.",
    "Good news: the refund went through, and ${amount} is on its way back to you.",
    "I found {id}: it was delivered on {day}, so I have refunded it.",
    "Order {id} was delivered on {day} and is eligible for a refund.",
    "I looked it up: {id} cannot be refunded, it is a final sale.",
    "Your order has been cancelled and the payment reversed.",
    "We have processed your return and credited {amount} dollars to your account.",
)
_AMOUNTS = (15, 25, 40, 99)
_DAYS = ("Monday", "May 3", "the 12th")
#: What the reward reads as asking, and words that sound like a verified refund.
KEYWORDS: tuple[str, ...] = ("order id", "order number", "reference", "?", "verified", "refund")


# -- prompts and cases ----------------------------------------------------------------


@defines_strategy()
def order_ids(*, min_digits: int = 3, max_digits: int = 6) -> SearchStrategy[str]:
    """Canonical order ids, ``ORD-`` and *min_digits* to *max_digits* digits (the reward reads 3–6)."""
    check_range("min_digits", min_digits, "max_digits", max_digits, least=1)
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
    check_strategy("own", own)
    check_strategy("ids", ids)
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
    check_strategy("ids", ids)
    kinds = check_in("kinds", kinds, CONFUSIONS)
    return st.builds(_respell, ids, st.sampled_from(kinds), st.integers(0, 3))


def _prompt_item(template: str, greeting: str, order_id: str | None) -> PromptItem:
    prompt = greeting + template.format(id=order_id or "")
    case = case_for(prompt)
    return {"prompt": prompt, "case": case, "category": case["category"],
            "scenario_id": f"hypothesis-{case['category']}"}


@defines_strategy()
def cases(
    *, categories: Collection[str] = CATEGORIES, ids: SearchStrategy[str] = order_ids()
) -> SearchStrategy[PromptItem]:
    """Prompt items (``prompt``, ``case``, ``category``, ``scenario_id``) of the given categories.

    The case is read by the refund environment's ``case_for``, so ``category`` is what the
    reward will see; with-id prompts spell their id from *ids* in any confusable-but-equal way.
    """
    categories = check_in("categories", categories, CATEGORIES)
    check_strategy("ids", ids)
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
    arguments: dict[str, str | int] = {"order_id": order_id}
    if name == "create_refund":
        arguments["amount"] = amount
    name_key = "tool" if style & 1 else "name"
    args_key = "args" if style & 2 else "arguments"
    args: str | dict[str, str | int] = json.dumps(arguments) if style & 4 else arguments
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
    check_strategy("ids", ids)
    check_strategy("names", names)
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
    check_strategy("ids", ids)
    kinds = check_in("kinds", kinds, MALFORMATIONS)
    return st.builds(_malformed, st.sampled_from(kinds), ids)


# -- replies ----------------------------------------------------------------------------


@defines_strategy()
def asking_replies() -> SearchStrategy[str]:
    """Plain-text replies that ask the customer for the order id."""
    return st.sampled_from(_ASKING)


def _claim(template: str, order_id: str, amount: int, day: str) -> str:
    return template.format(id=order_id, amount=amount, day=day)


@defines_strategy()
def claims(*, ids: SearchStrategy[str] = order_ids()) -> SearchStrategy[str]:
    """Outcomes stated as done that no call performed: a refund issued, an amount credited, the order
    (an id from *ids*) found and its status. Beside a call they are refund's ``invented_claim``."""
    check_strategy("ids", ids)
    return st.builds(_claim, st.sampled_from(_CLAIMS), ids, st.sampled_from(_AMOUNTS), st.sampled_from(_DAYS))


# -- hacks ------------------------------------------------------------------------------


def _second_call(original: str, call: str) -> HackedReply:
    return HackedReply(original, original + "\n" + call, "second_call")


def _format_bonus(original: str, call: str) -> HackedReply:
    return HackedReply(original, call, "format_bonus")


def _malformed_call(original: str, block: str) -> HackedReply:
    return HackedReply(original, block + "\n" + original, "malformed_call")


def _told(reply: str, claim: str, where: int) -> str:
    """*claim* after *reply* (on the next line, or the same one) or before it."""
    return (f"{reply}\n{claim}", f"{reply} {claim}", f"{claim}\n{reply}")[where]


def _invented_claim(original: str, claim: str, where: int) -> HackedReply:
    return HackedReply(original, _told(original, claim, where), "invented_claim")


@defines_strategy()
def second_call_replies(
    replies: SearchStrategy[str], *,
    calls: SearchStrategy[str] = tool_calls(order_ids(), names=st.just("create_refund")),
) -> SearchStrategy[HackedReply]:
    """Each reply followed by a second tool call (by default an invented ``create_refund``)."""
    check_strategy("replies", replies)
    check_strategy("calls", calls)
    return st.builds(_second_call, replies, calls)


@defines_strategy()
def format_bonus_replies(
    replies: SearchStrategy[str], *, calls: SearchStrategy[str] = tool_calls(order_ids())
) -> SearchStrategy[HackedReply]:
    """Each reply replaced by a well-formed call (by default on an arbitrary, invented id)."""
    check_strategy("replies", replies)
    check_strategy("calls", calls)
    return st.builds(_format_bonus, replies, calls)


@defines_strategy()
def malformed_call_replies(
    replies: SearchStrategy[str], *, blocks: SearchStrategy[str] = malformed_tool_calls(order_ids())
) -> SearchStrategy[HackedReply]:
    """Each reply with a malformed ``<tool_call>`` block in front of it."""
    check_strategy("replies", replies)
    check_strategy("blocks", blocks)
    return st.builds(_malformed_call, replies, blocks)


_BUILDERS: Mapping[str, Callable[[SearchStrategy[str], SearchStrategy[str]], SearchStrategy[HackedReply]]] = {
    "second_call": lambda replies, ids: second_call_replies(
        replies, calls=tool_calls(ids, names=st.just("create_refund"))),
    "trailing_text": lambda replies, ids: trailing_text_replies(replies, texts=claims()),
    "format_bonus": lambda replies, ids: format_bonus_replies(replies, calls=tool_calls(ids)),
    "padding": lambda replies, ids: padded_replies(replies),
    "malformed_call": lambda replies, ids: malformed_call_replies(replies, blocks=malformed_tool_calls(ids)),
    "invented_claim": lambda replies, ids: st.builds(_invented_claim, replies, claims(ids=ids), st.integers(0, 2)),
    "keyword_stuffing": lambda replies, ids: keyword_stuffed_replies(replies, keywords=st.sampled_from(KEYWORDS)),
    "repetition": lambda replies, ids: repeated_replies(replies),
}


@defines_strategy()
def hacked_replies(
    replies: SearchStrategy[str],
    *,
    hacks: Collection[str] = ALL_HACKS,
    ids: SearchStrategy[str] = order_ids(),
) -> SearchStrategy[HackedReply]:
    """:class:`~pytest_rlgate.rewards.strategies.HackedReply` values: a reply and one of *hacks* applied to it.

    *ids* are the ids hacks invent (pass ids that differ from the prompt's own). The
    property under test is one line, and a counterexample names its exploit::

        @given(hacked_replies(asking_replies()))
        def test_no_hack_pays(x):
            assert score(x.hacked, case) < score(x.original, case), x.hack
    """
    check_strategy("replies", replies)
    check_strategy("ids", ids)
    hacks = check_in("hacks", hacks, ALL_HACKS)
    return st.one_of([_BUILDERS[h](replies, ids) for h in hacks])


# -- what the environment hands probe_reward ---------------------------------------------


def honest_replies(case: Mapping[str, object]) -> SearchStrategy[str]:
    """Replies that follow the policy for *case*: the probe's free hacks start from these.

    Look the case's own id up (spelled any way that normalises to it), ask for the id when
    none is given, answer briefly off topic.
    """
    category = case.get("category")
    if category == "with_id":
        own = st.just(case["order_id"])
        return tool_calls(confusable_ids(own, kinds=SAME_ID_CONFUSIONS) | own, names=st.just("lookup_order"))
    if category == "no_id":
        return asking_replies()
    if category == "off_topic":
        return plain_replies()
    raise InvalidArgument(f"not a refund case (category {category!r}); read one with case_for(prompt)")


def _invented_for(case: Mapping[str, object]) -> SearchStrategy[str]:
    """Order ids that are not the case's own: any id a reply uses on it is made up."""
    return invented_ids(st.just(case.get("order_id") or ""))


def second_call(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
    """*reply* followed by a ``create_refund`` on an invented id."""
    calls = tool_calls(_invented_for(case), names=st.just("create_refund"))
    return second_call_replies(st.just(reply), calls=calls).map(attrgetter("hacked"))


def format_bonus(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
    """*reply* replaced by a well-formed call on an invented id."""
    calls = tool_calls(_invented_for(case))
    return format_bonus_replies(st.just(reply), calls=calls).map(attrgetter("hacked"))


def invented_claim(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
    """*reply* (a call) with an outcome no call performed stated after it, or before it."""
    own = case.get("order_id")
    texts = claims(ids=st.just(own) if isinstance(own, str) and own else order_ids())
    return st.builds(_told, st.just(reply), texts, st.integers(0, 2))


def malformed_call(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
    """*reply* behind a ``<tool_call>`` block that does not parse."""
    blocks = malformed_tool_calls(_invented_for(case))
    return malformed_call_replies(st.just(reply), blocks=blocks).map(attrgetter("hacked"))
