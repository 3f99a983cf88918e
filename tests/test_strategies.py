"""The public Hypothesis strategies: what they generate, how they validate, how they print."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_rlgate import HackedReply
from pytest_rlgate import strategies as rs
from pytest_rlgate.envs.refund import CATEGORIES, case_for, markers, normalise_order_id, parse_tool_call, score

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
@given(rs.asking_replies(), rs.plain_replies())
def test_asking_replies_ask_and_plain_replies_do_not(ask, plain):
    no_id = case_for("I want a refund.")
    assert score(ask, no_id) == 1.0
    assert score(plain, no_id) < 1.0


@FAST
@given(rs.hacked_replies(rs.asking_replies() | rs.tool_calls(rs.order_ids())))
def test_hacked_replies_name_their_hack_and_change_the_reply(x):
    assert isinstance(x, HackedReply) and x.hack in rs.HACKS
    assert x.hacked != x.original or x.hack == "format_bonus"  # which replaces the reply, maybe by itself
    if x.hack in ("second_call", "trailing_text", "keyword_stuffing"):
        assert x.hacked.startswith(x.original)
    if x.hack in ("padding", "malformed_call"):
        assert x.hacked.endswith(x.original)
    if x.hack == "padding":
        assert len(x.hacked) >= len(x.original) + 500


@FAST
@given(rs.hacked_replies(rs.plain_replies(), hacks=["format_bonus"]))
def test_hacks_option_restricts_the_exploit(x):
    assert x.hack == "format_bonus" and parse_tool_call(x.hacked) is not None


def test_hacked_reply_is_frozen():
    x = HackedReply("a", "b", "padding")
    with pytest.raises(AttributeError):
        x.hack = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("strategy", "text"),
    [
        (rs.padded_replies(rs.asking_replies(), min_chars=600), "padded_replies(asking_replies(), min_chars=600)"),
        (rs.hacked_replies(rs.plain_replies(), hacks=["padding"]), "hacked_replies(plain_replies(), hacks=['padding'])"),
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
        (lambda: rs.padded_replies(rs.asking_replies(), min_chars=10, max_chars=5), "max_chars=5"),
        (lambda: rs.keyword_stuffed_replies(rs.asking_replies(), max_repeats=0), "max_repeats"),
        (lambda: rs.hacked_replies(rs.asking_replies(), hacks=["jailbreak"]), "unknown entries \\['jailbreak'\\]"),
        (lambda: rs.hacked_replies("hello"), "replies must be a strategy"),
    ],
)
def test_bad_arguments_raise_invalid_argument_when_used(build, match):
    strategy = build()  # lazy: building never raises, using does
    with pytest.raises(InvalidArgument, match=match):
        strategy.validate()
