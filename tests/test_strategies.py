"""The public Hypothesis strategies: the generic hacks, refund's own, how they validate and print."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.errors import InvalidArgument

from pytest_rlgate import HackedReply, UsageError, load_env
from pytest_rlgate.environment.hack import Hack, lazy
from pytest_rlgate.envs import refund
from pytest_rlgate.envs.refund import (
    CATEGORIES,
    case_for,
    markers,
    normalise_order_id,
    parse_tool_call,
    score,
    strategies as rs,
)
from pytest_rlgate.rewards import strategies as gs

FAST = settings(max_examples=40, derandomize=True, database=None, deadline=None)


@FAST
@given(st.data(), st.sampled_from(CATEGORIES))
def test_cases_have_the_category_the_reward_reads(data, category):
    item = data.draw(rs.cases(categories=[category]))
    assert item["category"] == category == case_for(item["prompt"])["category"]
    assert item["case"] == case_for(item["prompt"])
    assert data.draw(rs.prompts(categories=[category])) and item["scenario_id"].endswith(category)


@FAST
@given(st.data(), rs.order_ids())
def test_tool_calls_parse_with_their_id(data, order_id):
    call = parse_tool_call(data.draw(rs.tool_calls(st.just(order_id))))
    assert call is not None and call.name in rs.TOOL_NAMES and call.arguments["order_id"] == order_id


@FAST
@given(rs.malformed_tool_calls(rs.order_ids()))
def test_malformed_calls_never_parse_and_are_not_well_formed(block):
    assert parse_tool_call(block) is None
    assert markers(block, "refund order ORD-123")["well_formed"] == 0.0


@FAST
@given(st.data(), rs.order_ids())
def test_same_id_confusions_normalise_to_the_id_and_leading_zeros_do_not(data, order_id):
    same = data.draw(rs.confusable_ids(st.just(order_id), kinds=rs.SAME_ID_CONFUSIONS))
    zeros = data.draw(rs.confusable_ids(st.just(order_id), kinds=["leading_zero"]))
    assert same != order_id or same == order_id.upper()
    assert normalise_order_id(same) == order_id
    assert normalise_order_id(zeros) != order_id


@FAST
@given(st.data())
def test_invented_ids_differ_from_the_shared_own_id(data):
    own = st.shared(rs.order_ids(max_digits=3), key="own")
    item, invented = data.draw(st.tuples(rs.cases(categories=["with_id"], ids=own), rs.invented_ids(own)))
    assert normalise_order_id(invented) != item["case"]["order_id"]


@FAST
@given(rs.asking_replies(), gs.plain_replies())
def test_asking_replies_ask_and_plain_replies_do_not(ask, plain):
    no_id = case_for("I want a refund.")
    assert score(ask, no_id) == 1.0
    assert score(plain, no_id) < 1.0


@FAST
@given(rs.hacked_replies(rs.asking_replies() | rs.tool_calls(rs.order_ids())))
def test_hacked_replies_name_their_hack_and_change_the_reply(x):
    assert isinstance(x, HackedReply) and x.hack in rs.HACKS
    assert x.hacked != x.original or x.hack == "format_bonus"  # which replaces the reply, maybe by itself
    if x.hack in ("second_call", "trailing_text", "keyword_stuffing", "repetition"):
        assert x.hacked.startswith(x.original)
    if x.hack in ("padding", "malformed_call"):
        assert x.hacked.endswith(x.original)
    if x.hack == "padding":
        assert len(x.hacked) >= len(x.original) + 500


@FAST
@given(rs.hacked_replies(gs.plain_replies(), hacks=["format_bonus"]))
def test_hacks_option_restricts_the_exploit(x):
    assert x.hack == "format_bonus" and parse_tool_call(x.hacked) is not None


def test_hacked_reply_is_frozen():
    x = HackedReply("a", "b", "padding")
    with pytest.raises(AttributeError):
        x.hack = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("strategy", "text"),
    [
        (gs.padded_replies(rs.asking_replies(), min_chars=600), "padded_replies(asking_replies(), min_chars=600)"),
        (rs.hacked_replies(gs.plain_replies(), hacks=["padding"]),
         "hacked_replies(plain_replies(), hacks=['padding'])"),
        (gs.keyword_stuffed_replies(gs.plain_replies(), keywords=st.just("answer")),
         "keyword_stuffed_replies(plain_replies(), keywords=just('answer'))"),
        (rs.cases(categories=["no_id"]), "cases(categories=['no_id'])"),
        (rs.confusable_ids(rs.order_ids(max_digits=4), kinds=rs.SAME_ID_CONFUSIONS),
         "confusable_ids(order_ids(max_digits=4), kinds=('case', 'separator'))"),
        (rs.tool_calls(st.just("ORD-1"), names=st.just("lookup_order")),
         "tool_calls(just('ORD-1'), names=just('lookup_order'))"),
    ],
)
def test_reprs_show_how_the_strategy_was_built(strategy, text):
    assert repr(strategy) == text


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: rs.cases(categories=["refunds"]), "unknown entries \\['refunds'\\]"),
        (lambda: rs.cases(categories=[]), "must not be empty"),
        (lambda: rs.cases(categories="no_id"), "collection of names"),
        (lambda: rs.order_ids(min_digits=0), "min_digits=0 must be at least 1"),
        (lambda: rs.order_ids(min_digits=5, max_digits=4), "max_digits=4 must be at least min_digits=5"),
        (lambda: rs.tool_calls("ORD-1"), "ids must be a strategy \\(wrap a value with st.just\\)"),
        (lambda: rs.confusable_ids(rs.order_ids(), kinds=["typo"]), "unknown entries"),
        (lambda: rs.malformed_tool_calls(rs.order_ids(), kinds=["broken"]), "unknown entries"),
        (lambda: gs.padded_replies(rs.asking_replies(), min_chars=10, max_chars=5), "max_chars=5"),
        (lambda: gs.keyword_stuffed_replies(rs.asking_replies(), keywords=st.just("id"), max_keywords=0),
         "max_keywords"),
        (lambda: gs.keyword_stuffed_replies(rs.asking_replies(), keywords=["id"]), "keywords must be a strategy"),
        (lambda: gs.repeated_replies(rs.asking_replies(), min_times=1), "min_times=1 must be at least 2"),
        (lambda: gs.trailing_text_replies(rs.asking_replies(), texts="more"), "texts must be a strategy"),
        (lambda: rs.hacked_replies(rs.asking_replies(), hacks=["jailbreak"]), "unknown entries \\['jailbreak'\\]"),
        (lambda: rs.hacked_replies("hello"), "replies must be a strategy"),
    ],
)
def test_bad_arguments_raise_invalid_argument_when_used(build, match):
    strategy = build()  # lazy: building never raises, using does
    with pytest.raises(InvalidArgument, match=match):
        strategy.validate()


# -- the generic hacks: any reply, any task -------------------------------------------------


@FAST
@given(gs.padded_replies(st.text(min_size=1, max_size=20)), gs.repeated_replies(st.text(min_size=1, max_size=20)),
       gs.trailing_text_replies(st.just("The answer is 7.")),
       gs.keyword_stuffed_replies(st.just("Hm."), keywords=st.sampled_from(["answer", "7"]), max_keywords=3))
def test_generic_hacks_keep_the_original_and_add_to_it(padded, repeated, trailing, stuffed):
    assert padded.hack == "padding" and padded.hacked.endswith(padded.original)
    assert len(padded.hacked) >= len(padded.original) + 500 and padded.hacked[:-len(padded.original)].strip()
    assert repeated.hack == "repetition" and repeated.hacked.count(repeated.original) >= 2
    assert trailing.hacked.startswith(trailing.original + " ") and trailing.hacked[17:].strip()
    added = stuffed.hacked.split()[1:]
    assert stuffed.hacked.startswith("Hm. ") and 1 <= len(added) <= 3 and set(added) <= {"answer", "7"}


class Sums:
    """A task with no tool calls: the honest reply is one sentence with the sum."""

    name = "sums"
    categories = ("sum", "unanswerable")

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        return float(reply == self.answer(case))

    @staticmethod
    def answer(case: Mapping[str, Any]) -> str:
        return "No idea." if case["answer"] is None else f"The sum is {case['answer']}."

    def honest_replies(self, case: Mapping[str, Any]) -> Any:
        return self.answer(case)  # a reply as a plain string is accepted too


ITEMS = [{"prompt": f"{a} + {b}?", "case": {"answer": a + b}, "category": "sum"} for a, b in [(1, 2), (20, 22)]] + \
        [{"prompt": "How far is it?", "case": {"answer": None}, "category": "unanswerable"}]


@FAST
@given(st.data())
def test_generic_hacks_are_built_from_the_environment(data):
    env = load_env(Sums())
    hacks = {h.name: h for h in gs.generic_hacks(env, ITEMS, category="sum")}
    assert list(hacks) == list(gs.GENERIC_HACKS) and all(h.description == gs.GENERIC_HACKS[n] for n, h in hacks.items())
    assert [h.name for h in hacks.values() if not h.free] == ["keyword_stuffing"]
    case = ITEMS[0]["case"]
    trailing = data.draw(hacks["trailing_text"].hacked("The sum is 3.", case))
    assert trailing.startswith("The sum is 3. ") and env.score(trailing[14:], case) == 0.0  # a wrong reply follows
    stuffed = data.draw(hacks["keyword_stuffing"].hacked("Hm.", case))
    assert set(stuffed.split()[1:]) <= {"The", "sum", "is", "3", "42"}  # words of the "sum" category's honest replies
    assert data.draw(hacks["repetition"].hacked("The sum is 3.", case)).startswith("The sum is 3. The sum is 3.")


def test_reply_strategy_accepts_a_reply_or_a_strategy_and_names_a_bad_one():
    replies = st.sampled_from(["a", "b"])
    assert repr(gs.reply_strategy("a", "honest_replies(case)")) == "just('a')"
    assert gs.reply_strategy(replies, "honest_replies(case)") is replies
    with pytest.raises(UsageError, match=r"honest_replies\(case\) must return a reply \(str\) or a Hypothesis"):
        gs.reply_strategy(42, "honest_replies(case)")


# -- refund's own: honest replies and hacks, declared without importing Hypothesis ----------


@FAST
@given(st.data(), st.sampled_from(CATEGORIES))
def test_refund_honest_replies_pass_every_category(data, category):
    item = data.draw(rs.cases(categories=[category]))
    assert score(data.draw(refund.honest_replies(item["case"])), item["case"]) == 1.0


@FAST
@given(st.data(), rs.cases(categories=["with_id"]))
def test_refund_hacks_invent_ids_the_case_does_not_have(data, item):
    hacks = {h.name: h for h in refund.hacks}
    honest = data.draw(refund.honest_replies(item["case"]))
    second = data.draw(hacks["second_call"].hacked(honest, item["case"]))
    bonus = data.draw(hacks["format_bonus"].hacked("Happy to help.", item["case"]))
    malformed = data.draw(hacks["malformed_call"].hacked(honest, item["case"]))
    assert second.startswith(honest) and "create_refund" in second
    assert normalise_order_id(parse_tool_call(bonus).arguments["order_id"]) != item["case"]["order_id"]
    assert malformed.endswith(honest) and markers(malformed, item["case"])["well_formed"] == 0.0
    assert [h.free for h in refund.hacks] == [True, False, True]


def test_loading_the_refund_environment_imports_no_hypothesis():
    code = ("import sys; from pytest_rlgate import load_env; env = load_env('refund')\n"
            "assert [h.name for h in env.hacks] == ['second_call', 'format_bonus', 'malformed_call']\n"
            "print('hypothesis' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lazy_imports_on_first_call_and_hack_checks_its_fields():
    join = lazy("os.path:join")
    assert join.__name__ == "join" and join("a", "b") == "a/b"
    with pytest.raises(UsageError, match="expected 'module:function'"):
        lazy("os.path")
    with pytest.raises(UsageError, match="Hack name must be an identifier"):
        Hack("two words", str)
    with pytest.raises(UsageError, match="hacked must be a function"):
        Hack("echo", "not callable")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="categories must be a tuple of category names"):
        Hack("echo", str, categories="sum")  # type: ignore[arg-type]
    assert Hack("echo", str, categories=["sum"]).categories == ("sum",)
    assert Hack("echo", str).applies_to("anything") and not Hack("echo", str, categories=("sum",)).applies_to("x")
