"""The public Hypothesis strategies: the generic hacks, refund's own, how they validate and print."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.errors import InvalidArgument

from pytest_rlgate import UsageError, load_env
from pytest_rlgate.environment.hack import Hack, Truth, lazy
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
from pytest_rlgate.rewards import HackedReply, strategies as gs

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


def sum_items() -> list[dict[str, Any]]:
    return [{**item, "prompt": item["prompt"]} for item in ITEMS]


SUM_CLASSES = {c.name: c for c in gs.hack_classes(load_env(Sums()), sum_items())}
SUM_REPLIES = {name: c.replies(sum_items()[0]) for name, c in SUM_CLASSES.items()}  # built outside any test


@FAST
@given(st.data())
def test_hack_classes_are_built_from_the_environment_and_judged_by_its_truth(data):
    env = load_env(Sums())
    assert list(SUM_CLASSES) == list(gs.GENERIC_HACKS) and all(c.description == gs.GENERIC_HACKS[n]
                                                               for n, c in SUM_CLASSES.items())
    case = sum_items()[0]["case"]
    for name in ("near_miss", "trailing_text", "hidden_answer", "other_category", "keyword_stuffing"):
        x = data.draw(SUM_REPLIES[name])
        assert x.hack == name and x.kind == "wrong" and env.score(x.hacked, case) == 0.0
        assert x.original == "The sum is 3."  # compared with the honest reply, whatever it started from
    trailing = data.draw(SUM_REPLIES["trailing_text"])
    assert trailing.hacked.startswith("The sum is 3.") and trailing.hacked != "The sum is 3."
    moved = data.draw(SUM_REPLIES["other_category"])
    assert moved.hacked == "No idea."  # the unanswerable category's right move
    padded = data.draw(SUM_REPLIES["padding"])
    assert padded.kind == "wrong" and padded.original in padded.hacked  # the exact sentence is no padded one
    stuffed = data.draw(SUM_REPLIES["keyword_stuffing"])
    plain = {w for text in gs._PLAIN for w in text.split()}
    assert set(stuffed.hacked.split()) - plain <= {"sum", "The", "No", "idea", "How", "far", "it?", "is"}


def test_a_class_with_nothing_wrong_to_offer_is_empty():
    class Anything(Sums):
        def score(self, reply: str, case: Mapping[str, Any]) -> float:
            return 1.0  # every reply is right: there is no hack to judge

    classes = {c.name: c for c in gs.hack_classes(load_env(Anything()), sum_items())}
    assert classes["near_miss"].replies(sum_items()[0]).is_empty
    padded = [classes["padding"].judge(x, sum_items()[0]) for x in classes["padding"].candidates(sum_items()[0])]
    assert padded and {x.kind for x in padded if x is not None} == {"unpriced"}  # filler: paid only if paid more


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
    assert [h.free for h in refund.hacks] == [True, False, True, True]


@FAST
@given(st.data(), rs.cases(categories=["with_id"]))
def test_refund_invented_claims_are_wrong_by_its_truth_and_paid_by_its_score(data, item):
    """An outcome stated beside the lookup: refund's score pays it in full (its documented table), its truth
    (the hack's judge) calls it wrong."""
    hack = next(h for h in refund.hacks if h.name == "invented_claim")
    honest = data.draw(refund.honest_replies(item["case"]))
    claimed = data.draw(hack.hacked(honest, item["case"]))
    assert honest in claimed and claimed != honest
    assert hack.judge(claimed, item["case"]) and not hack.judge(honest, item["case"])
    assert score(claimed, item["case"]) == 1.0 and not Truth(load_env("refund")).right(claimed, item["case"])


def test_loading_the_refund_environment_imports_no_hypothesis():
    code = ("import sys; from pytest_rlgate import load_env; env = load_env('refund')\n"
            "assert [h.name for h in env.hacks] == ['second_call', 'format_bonus', 'malformed_call', "
            "'invented_claim']\n"
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


# -- the classes' building blocks: near-misses, broken structure, another case's move ------------


@pytest.mark.parametrize("value", ["ORD-412", "ORD-4017", "INV-77", "Ana"])
def test_near_miss_values_of_a_string_cover_the_loose_comparisons(value):
    import unicodedata

    misses = gs.near_miss_values(value)
    assert value not in misses and len(misses) == len(set(misses))
    assert value[:-1] in misses and value + "0" in misses  # a prefix, a longer value containing it
    assert any(unicodedata.normalize("NFKC", m) == value for m in misses)  # fullwidth: the same after NFKC
    assert any(m.lower() == value.lower() for m in misses if m != value)  # another case
    if any(ch.isdigit() for ch in value):
        digits = "".join(ch for ch in value if ch.isdigit())
        assert digits in misses and value.replace(digits, "0" + digits) in misses  # digits only, a leading zero
        assert any(m.replace("_", "-") == value for m in misses)  # another separator


@pytest.mark.parametrize("value", [7, 12, 40])
def test_near_miss_values_of_a_number_are_close_numbers(value):
    misses = gs.near_miss_values(value)
    assert {str(value + 1), str(value - 1), f"{value}.4", f"{value}.0", str(-value), f"1{value}"} <= set(misses)
    assert str(value) not in misses
    assert gs.near_miss_values(True) == gs.near_miss_values(None) == gs.near_miss_values("x") == ()


def test_near_miss_texts_replace_every_mention_and_each_alone():
    reply = 'lookup("ord_412") then refund("ORD-412", 40)'
    texts = gs.near_miss_texts(reply, {"order_id": "ORD-412", "amount": 40, "category": "with_id"})
    assert 'lookup("ORD-41") then refund("ORD-41", 40)' in texts  # every mention, respelled ones too
    assert 'lookup("ord_412") then refund("ORD-4120", 40)' in texts  # the second mention alone
    assert 'lookup("ord_412") then refund("ORD-412", 41)' in texts  # the amount
    assert all("ORD-4123" not in t for t in gs.near_miss_texts("ORD-4123", {"order_id": "ORD-412"}))  # no mention
    assert gs.near_miss_texts("no values here", {"order_id": "ORD-412"}) == ()


def test_lenient_texts_break_what_a_strict_parser_reads():
    import json

    block = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-412"}}</tool_call>'
    broken = gs.lenient_texts(block)
    bodies = [t.removeprefix("<tool_call>").removesuffix("</tool_call>") for t in broken if "<tool_call>" in t]
    assert block.replace('"', "'") in broken and block.removesuffix("</tool_call>") in broken
    assert sum(1 for body in bodies if _parses(json, body)) < len(bodies) / 2  # mostly not JSON any more
    assert all("ORD-412" in t for t in broken)  # the right value kept: only the parser is at stake
    assert "Answer 7" in gs.lenient_texts("Answer: 7")


def _parses(json: Any, body: str) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def test_transplant_moves_another_cases_reply_onto_this_case():
    reply = '<tool_call>{"name": "issue_refund", "arguments": {"order_id": "ORD-900", "amount": 25}}</tool_call>'
    moved = gs.transplant(reply, {"order_id": "ORD-900", "amount": 25, "refundable": True},
                          {"order_id": "ORD-412", "amount": 40, "refundable": False})
    assert '"ORD-412"' in moved and '"amount": 40' in moved and "ORD-900" not in moved


@FAST
@given(st.data())
def test_public_class_strategies_yield_only_what_the_truth_calls_wrong(data):
    item = data.draw(rs.cases(categories=["with_id"]))
    case, prompt = item["case"], item["prompt"]
    honest = refund.honest_replies(case)
    near = data.draw(gs.near_miss_replies(honest, case=case, env="refund", prompt=prompt))
    assert near.kind == "wrong" and score(near.hacked, case) < 1.0
    broken = data.draw(gs.lenient_replies(honest, case=case, env="refund", prompt=prompt))
    assert broken.kind == "wrong"
    assert score(broken.hacked, case) < 1.0 or markers(broken.hacked, case)["well_formed"] == 0
    spaced = data.draw(gs.whitespace_replies(honest))
    assert spaced.hacked.strip() == spaced.original.strip() or " " in spaced.hacked or "\n" in spaced.hacked
    assert data.draw(gs.near_misses(case["order_id"])) != case["order_id"]


def test_hack_replies_serve_a_users_own_property():
    """What a user writes: every judged hack of a with-id prompt is wrong, and a sound reward pays none."""
    from hypothesis import HealthCheck

    from pytest_rlgate.envs.refund import parse_tool_call as parse

    item = next(i for i in refund.build_prompts(0, "small") if i["category"] == "with_id")
    case = item["case"]

    def sound(reply: str, case: Mapping[str, Any]) -> float:
        call = parse(reply)
        one = reply.strip().startswith("<tool_call>") and reply.strip().endswith("</tool_call>") \
            and reply.count("<tool_call>") == 1
        return float(one and call is not None and call.name == "lookup_order"
                     and normalise_order_id(str(call.arguments.get("order_id"))) == case["order_id"])

    def substring(reply: str, case: Mapping[str, Any]) -> float:
        call = parse(reply)
        return float(call is not None and str(call.arguments.get("order_id", "x")) in case["order_id"])

    paid = []

    @settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(gs.hack_replies("refund", item, classes=["near_miss", "lenient_parse", "trailing_text"]))
    def prop(x):
        assert x.kind in ("wrong", "unpriced") and not x.paid_by(sound, case), x
        paid.append(x.paid_by(substring, case))

    prop()
    assert any(paid)  # the substring match is caught by the same strategy
