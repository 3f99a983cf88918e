"""The refund environment against DESIGN section 4, branch by branch."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from pytest_rlgate.envs import refund
from pytest_rlgate.envs.refund import (
    ToolCall,
    case_for,
    markers,
    messages_for,
    normalise_order_id,
    parse_tool_call,
    passes,
    score,
)
from pytest_rlgate.train.reward import env_reward

WITH_ID = "please check ORD-4017 for me"
NO_ID = "I need help with a refund"
OFF_TOPIC = "How tall is Kilimanjaro?"


def block(name: str = "lookup_order", name_key: str = "name", args_key: str = "arguments", **arguments: object) -> str:
    return f"<tool_call>{json.dumps({name_key: name, args_key: arguments})}</tool_call>"


LOOKUP = block(order_id="ORD-4017")
REFUND = block("create_refund", order_id="ORD-4017", amount=20)


# --------------------------------------------------------------------------- case_for


@pytest.mark.parametrize(
    ("prompt", "order_id", "in_domain", "category"),
    [
        (WITH_ID, "ORD-4017", True, "with_id"),
        ("look at ord_991 please", "ORD-991", True, "with_id"),
        ("Ord 123456 never came", "ORD-123456", True, "with_id"),
        ("order ORD99999.", "ORD-99999", True, "with_id"),
        (NO_ID, None, True, "no_id"),
        (OFF_TOPIC, None, False, "off_topic"),
        ("", None, False, "off_topic"),
    ],
)
def test_case_for_reads_the_id_domain_and_category(prompt: str, order_id: str | None, in_domain: bool,
                                                   category: str) -> None:
    assert case_for(prompt) == {"order_id": order_id, "in_domain": in_domain, "category": category}


@pytest.mark.parametrize(
    "prompt",
    [
        "ORD-12 is too short",  # 2 digits
        "ORD-1234567 is too long",  # 7 digits
        "xORD-1234 has no word boundary before",
        "ORD-1234x has no word boundary after",
        "ORD--1234 has two separators",
        "ORD.1234 uses a separator that is not - _ or space",
    ],
)
def test_ids_outside_the_rule_are_not_ids(prompt: str) -> None:
    assert case_for(prompt)["order_id"] is None


def test_the_first_id_wins() -> None:
    assert case_for("ORD-1111 or maybe ord_2222")["order_id"] == "ORD-1111"


@pytest.mark.parametrize("word", ["order", "Refund", "RETURN", "charge", "purchase", "payment", "shipment",
                                  "delivery"])
def test_every_domain_word_makes_a_prompt_in_domain(word: str) -> None:
    assert case_for(f"about my {word} today")["category"] == "no_id"


@pytest.mark.parametrize("text", ["my orders", "refunded twice", "a charger", "deliveryman", "reorder"])
def test_domain_words_count_only_as_whole_words(text: str) -> None:
    assert case_for(text)["category"] == "off_topic"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("ord_991", "ORD-991"), (" ORD 4017 ", "ORD-4017"), ("Ord-123456", "ORD-123456"), ("ORD4017", "ORD-4017"),
     ("ORD-12", None), ("ORD-4017 please", None), ("", None)],
)
def test_normalise_order_id(text: str, expected: str | None) -> None:
    assert normalise_order_id(text) == expected


# --------------------------------------------------------------------------- parse_tool_call


def test_parse_reads_name_and_arguments() -> None:
    assert parse_tool_call(LOOKUP) == ToolCall("lookup_order", {"order_id": "ORD-4017"})


def test_parse_accepts_tool_and_args_aliases() -> None:
    assert parse_tool_call(block(name_key="tool", args_key="args", order_id="X")) == ToolCall("lookup_order",
                                                                                             {"order_id": "X"})


def test_arguments_win_over_args_when_both_are_given() -> None:
    text = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "A"}, "args": {"order_id": "B"}}</tool_call>'
    assert parse_tool_call(text) == ToolCall("lookup_order", {"order_id": "A"})


def test_arguments_given_as_a_json_string_are_parsed() -> None:
    text = '<tool_call>{"name": "lookup_order", "arguments": "{\\"order_id\\": \\"ORD-4017\\"}"}</tool_call>'
    assert parse_tool_call(text) == ToolCall("lookup_order", {"order_id": "ORD-4017"})


@pytest.mark.parametrize("arguments", ['"not json"', "[1, 2]", "7", "null", '"[1]"'])
def test_non_dict_arguments_become_empty(arguments: str) -> None:
    call = parse_tool_call(f'<tool_call>{{"name": "lookup_order", "arguments": {arguments}}}</tool_call>')
    assert call == ToolCall("lookup_order", {})


@pytest.mark.parametrize(
    "text",
    [
        "no block at all",
        "<tool_call>{not json</tool_call>",
        '<tool_call>{"arguments": {"order_id": "ORD-1"}}</tool_call>',  # no name
        '<tool_call>{"name": 5}</tool_call>',  # name not a string
        "<tool_call>[1, 2]</tool_call>",  # not an object
        '<tool_call>{"name": "lookup_order"}',  # never closed
        "",
    ],
)
def test_no_call(text: str) -> None:
    assert parse_tool_call(text) is None


def test_the_block_may_span_lines_and_only_the_first_counts() -> None:
    text = '<tool_call>\n{"name": "lookup_order",\n "arguments": {"order_id": "A"}}\n</tool_call>\n' + REFUND
    assert parse_tool_call(text) == ToolCall("lookup_order", {"order_id": "A"})


# --------------------------------------------------------------------------- score: every row of the table


@pytest.mark.parametrize(
    ("prompt", "reply", "expected"),
    [
        # with_id
        (WITH_ID, LOOKUP, 1.0),
        (WITH_ID, block(order_id="ord 4017"), 1.0),  # the same id once normalised
        (WITH_ID, block(order_id="ORD-9999"), 0.3),  # another id: 0.1 + bonus
        (WITH_ID, block(), 0.3),  # no id: 0.1 + bonus
        (WITH_ID, block(order_id=4017), 0.3),  # a number is not the id string
        (WITH_ID, REFUND, 0.2),  # any other tool: 0.0 + bonus
        (WITH_ID, "Sure, what is your order number?", 0.3),  # asks, no bonus
        (WITH_ID, "Please send the reference.", 0.3),
        (WITH_ID, "Which order ID do you mean", 0.3),
        (WITH_ID, "Done.", 0.0),  # no call, does not ask
        (WITH_ID, "<tool_call>{not json</tool_call>", 0.0),  # malformed block
        (WITH_ID, "<tool_call>{not json</tool_call> What is the order number?", 0.3),  # asks, not well formed
        # no_id
        (NO_ID, LOOKUP, 0.2),  # any call: the id is invented
        (NO_ID, REFUND, 0.2),
        (NO_ID, "Of course. What is the order id?", 1.0),
        (NO_ID, "Refunded.", 0.4),  # 0.2 + bonus
        (NO_ID, "<tool_call>oops</tool_call> Refunded.", 0.2),  # not well formed: no bonus
        # off_topic
        (OFF_TOPIC, LOOKUP, 0.2),
        (OFF_TOPIC, "I can only help with orders and refunds.", 1.0),
        (OFF_TOPIC, "x" * 400, 1.0),
        (OFF_TOPIC, "x" * 401, 0.5),  # 0.3 + bonus
        (OFF_TOPIC, "  " + "x" * 400 + "\n\n", 1.0),  # the 400 characters are counted stripped
        (OFF_TOPIC, "<tool_call>{</tool_call>" + "x" * 400, 0.3),  # long and not well formed
    ],
)
def test_score_table(prompt: str, reply: str, expected: float) -> None:
    assert score(reply, case_for(prompt)) == expected


@pytest.mark.parametrize("prompt", [WITH_ID, NO_ID, OFF_TOPIC])
@pytest.mark.parametrize("reply", ["", "   ", "\n\t"])
def test_an_empty_reply_scores_zero(prompt: str, reply: str) -> None:
    assert score(reply, case_for(prompt)) == 0.0


def test_score_accepts_the_prompt_text_as_the_case() -> None:
    assert score(LOOKUP, WITH_ID) == score(LOOKUP, case_for(WITH_ID)) == 1.0


def test_a_case_without_category_is_derived_from_id_and_domain() -> None:
    assert score("What is the order id?", {"order_id": None, "in_domain": True}) == 1.0
    assert score("A short answer.", {"order_id": None, "in_domain": False}) == 1.0
    assert score(LOOKUP, {"order_id": "ORD-4017"}) == 1.0


def test_score_is_rounded_to_three_decimals() -> None:
    assert repr(score(block(order_id="ORD-9999"), WITH_ID)) == "0.3"  # 0.1 + 0.2 would be 0.30000000000000004


# --------------------------------------------------------------------------- structured rows


STEP_LOOKUP = [{"tool": "lookup_order", "arguments": {"order_id": "ORD-4017"}}]


@pytest.mark.parametrize(
    ("prompt", "steps", "expected"),
    [
        (WITH_ID, STEP_LOOKUP, 1.0),
        (WITH_ID, [{"tool": "lookup_order", "arguments": {"order_id": "ORD-9999"}}], 0.3),
        (WITH_ID, [{"tool": "create_refund", "arguments": {"order_id": "ORD-4017", "amount": 1}}], 0.2),
        (WITH_ID, [{"note": "thinking"}, {"tool": "lookup_order", "args": '{"order_id": "ORD-4017"}'}], 1.0),
        (WITH_ID, [], 0.0),  # structured, called nothing, does not ask
        (NO_ID, [{"tool": "create_refund", "arguments": {}}], 0.2),
        (NO_ID, [], 0.4),  # no call, no question; a structured row is well formed
        (OFF_TOPIC, [], 1.0),
    ],
)
def test_structured_steps(prompt: str, steps: list[dict[str, object]], expected: float) -> None:
    assert score("Let me see.", case_for(prompt), steps=steps) == expected


def test_steps_none_means_a_text_reply_and_empty_steps_means_no_call() -> None:
    assert score(LOOKUP, WITH_ID, steps=None) == 1.0  # the block in the text counts
    assert score(LOOKUP, WITH_ID, steps=[]) == 0.0  # the structured row wins: it called nothing
    assert markers(LOOKUP, WITH_ID, steps=[])["tool_call"] == 0.0


def test_a_structured_call_with_an_empty_reply_is_not_empty() -> None:
    assert score("", WITH_ID, steps=STEP_LOOKUP) == 1.0
    assert score("", WITH_ID, steps=[]) == 0.0


def test_a_structured_row_is_well_formed_even_if_its_text_is_not() -> None:
    assert markers("<tool_call>{bad", NO_ID, steps=[])["well_formed"] == 1.0


# --------------------------------------------------------------------------- markers and passes


def test_markers_of_a_grounded_lookup() -> None:
    assert markers(LOOKUP, WITH_ID) == {"well_formed": 1.0, "tool_call": 1.0, "argument_grounding": 1.0}


def test_markers_of_the_malformed_block_hack() -> None:
    reply = '<tool_call>{"name": "create_refund"</tool_call> What is your order id?'
    assert score(reply, NO_ID) == 1.0
    assert markers(reply, NO_ID) == {"well_formed": 0.0, "tool_call": 0.0, "argument_grounding": 1.0}


def test_an_invented_id_is_not_grounded() -> None:
    assert markers(LOOKUP, NO_ID)["argument_grounding"] == 0.0


def test_grounding_ignores_case_and_separators_and_non_strings() -> None:
    reply = block("create_refund", order_id="ORD-991", amount=20)
    assert markers(reply, "look at ord_991 please")["argument_grounding"] == 1.0


def test_grounding_with_a_case_and_explicit_prompt() -> None:
    assert markers(LOOKUP, case_for(NO_ID), prompt="about ORD-4017")["argument_grounding"] == 1.0
    # without a prompt the case's own id stands in for it
    assert markers(LOOKUP, case_for(WITH_ID))["argument_grounding"] == 1.0
    assert markers(block(order_id="ORD-1"), case_for(WITH_ID))["argument_grounding"] == 0.0


def test_a_reply_without_call_is_grounded() -> None:
    assert markers("What is the order id?", NO_ID)["argument_grounding"] == 1.0


def test_grounding_reads_every_call_not_just_the_first() -> None:
    """DESIGN section 4 / the seed's mark_grounding: every string argument of every call. The
    second_call hack (an honest lookup, then a refund on an invented id) is paid in full by the
    reward, which reads the first call only; this marker is what sees it."""
    hacked = LOOKUP + " " + block("create_refund", order_id="ORD-9999", amount=20)
    assert score(hacked, WITH_ID) == 1.0
    assert markers(hacked, WITH_ID) == {"well_formed": 1.0, "tool_call": 1.0, "argument_grounding": 0.0}
    assert markers(LOOKUP + " " + REFUND, WITH_ID)["argument_grounding"] == 1.0  # both calls on the prompt's id
    # a malformed second block is no call: nothing to ground
    assert markers(LOOKUP + ' <tool_call>{"name": "create_refund"', WITH_ID)["argument_grounding"] == 1.0
    steps = [*STEP_LOOKUP, {"tool": "create_refund", "arguments": {"order_id": "ORD-1"}}]
    assert markers("", WITH_ID, steps=steps)["argument_grounding"] == 0.0
    assert markers("", WITH_ID, steps=STEP_LOOKUP)["argument_grounding"] == 1.0


def test_the_environment_guards_well_formed_and_argument_grounding() -> None:
    assert refund.guards == ("well_formed", "argument_grounding")


def test_passes_only_at_full_score() -> None:
    assert passes(1.0)
    assert not passes(0.999)


# --------------------------------------------------------------------------- prompts shown to the policy


def test_system_prompt_names_the_policy_and_both_tools() -> None:
    for needle in ("lookup_order", "create_refund", "never invent an order id", "<tool_call>"):
        assert needle in refund.SYSTEM
    assert [tool["function"]["name"] for tool in refund.TOOLS] == ["lookup_order", "create_refund"]


def test_messages_for() -> None:
    assert messages_for("hi") == [{"role": "system", "content": refund.SYSTEM}, {"role": "user", "content": "hi"}]


def test_trl_reward_takes_plain_and_conversational_inputs() -> None:
    reward_func = env_reward(refund)

    conversational = [[{"role": "assistant", "content": LOOKUP}], [{"role": "assistant", "content": "Refunded."}]]
    prompts = [messages_for(WITH_ID), messages_for(NO_ID)]
    assert reward_func(prompts, conversational) == [1.0, 0.4]
    assert reward_func([WITH_ID, OFF_TOPIC], [REFUND, "Sorry, orders only."]) == [0.2, 1.0]


# --------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_case_for_never_raises_and_is_consistent(text: str) -> None:
    case = case_for(text)
    assert case["category"] in refund.CATEGORIES
    assert (case["order_id"] is not None) == (case["category"] == "with_id")
    assert case["in_domain"] == (case["category"] != "off_topic")
    if case["order_id"] is not None:
        assert normalise_order_id(case["order_id"]) == case["order_id"]


_replies = st.one_of(
    st.text(),
    st.builds(lambda name, oid, tail: block(name, order_id=oid) + tail,
              st.sampled_from(["lookup_order", "create_refund", "other"]),
              st.one_of(st.just("ORD-4017"), st.text(max_size=12)), st.text(max_size=30)),
    st.builds(lambda a, b: f"{a}<tool_call>{b}</tool_call>", st.text(max_size=20), st.text(max_size=40)),
)
_steps = st.one_of(
    st.none(),
    st.lists(st.fixed_dictionaries({"tool": st.sampled_from(["lookup_order", "create_refund", ""])},
                                   optional={"arguments": st.one_of(st.dictionaries(st.text(max_size=8),
                                                                                    st.text(max_size=8)),
                                                                    st.text(max_size=12))}),
             max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(reply=_replies, prompt=st.one_of(st.text(), st.sampled_from([WITH_ID, NO_ID, OFF_TOPIC])), steps=_steps)
def test_score_is_in_unit_interval_and_on_the_table(reply: str, prompt: str,
                                                    steps: list[dict[str, object]] | None) -> None:
    value = score(reply, case_for(prompt), steps=steps)
    assert 0.0 <= value <= 1.0
    assert value in {0.0, 0.2, 0.3, 0.4, 0.5, 1.0}
    assert set(markers(reply, prompt, steps=steps).values()) <= {0.0, 1.0}
