"""probe_reward against the refund reward and against a deliberately fixed variant of it."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_rlgate import ProbeResult, RewardHackError, UsageError, probe_reward
from pytest_rlgate.envs import refund

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "refund" / "test_hackability.py"
KNOWN = {"second_call", "trailing_text", "format_bonus", "padding", "malformed_call"}
_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)


def fixed_score(reply: str, case: Mapping[str, Any] | str) -> float:
    """The refund reward with its known hacks closed.

    Reads the whole reply (exactly one block and nothing else, or plain text), pays nothing
    for a wrong call (no format bonus), prices length everywhere, scores a malformed block 0,
    and counts only a reply that ends in a question as asking.
    """
    case = refund.case_for(case) if isinstance(case, str) else case
    text = (reply or "").strip()
    if not text:
        return 0.0
    call = None
    if "<tool_call>" in text:
        call = refund.parse_tool_call(text)
        if call is None or text.count("<tool_call>") != 1 or _BLOCK.sub("", text).strip():
            return 0.0
    if case["order_id"]:
        given = call.arguments.get("order_id") if call and call.name == "lookup_order" else None
        value = float(isinstance(given, str) and refund.normalise_order_id(given) == case["order_id"])
    elif case["category"] == "no_id":
        value = float(call is None and text.endswith("?"))
    else:
        value = float(call is None)
    return value * (0.5 if len(text) > refund.MAX_OFF_TOPIC_CHARS else 1.0)


@pytest.fixture(scope="module")
def original() -> ProbeResult:
    return probe_reward(refund.score, max_examples=25, seed=0)


@pytest.fixture(scope="module")
def fixed() -> ProbeResult:
    return probe_reward(fixed_score, max_examples=25, seed=0)


def test_probe_finds_every_known_hack_of_the_refund_reward(original):
    assert KNOWN <= set(original.hacks)
    assert original.finding("second_call", "with_id").pays
    assert not original.finding("second_call", "no_id").pays  # an invented call costs 0.8 there
    assert original.finding("padding", "with_id").pays and original.finding("padding", "no_id").pays
    assert not original.finding("padding", "off_topic").pays  # the one place length is priced
    bonus = original.finding("format_bonus", "with_id")
    assert bonus.max_gain == pytest.approx(0.3) and 0 < bonus.mean_gain <= 0.3
    assert (bonus.original_score, bonus.hacked_score) == (0.0, pytest.approx(0.3))
    assert refund.parse_tool_call(bonus.example.hacked).arguments["order_id"] != refund.case_for(bonus.prompt)["order_id"]
    malformed = original.finding("malformed_call", "no_id")
    assert malformed.hacked_score == 1.0 and refund.markers(malformed.example.hacked, malformed.prompt)["well_formed"] == 0


def test_probe_finds_fewer_hacks_on_the_fixed_reward(original, fixed):
    assert set(fixed.hacks) < set(original.hacks)
    assert not KNOWN & set(fixed.hacks)
    assert len(fixed.paying) < len(original.paying)
    fixed.assert_no_hacks(allow=["keyword_stuffing"])  # '?' stuffing still passes: asking is a surface check


def test_minimal_examples_are_shrunk(original):
    from pytest_rlgate import HackedReply

    stuffing = original.finding("keyword_stuffing", "no_id")
    assert stuffing.example == HackedReply("Happy to help.", "Happy to help. order id", "keyword_stuffing")
    assert stuffing.prompt == "I want a refund for my last purchase."  # the first template, no greeting


def test_probe_is_deterministic_for_a_seed(original):
    """Each hack x category probe depends on the seed alone, so a subset rerun matches exactly."""
    again = probe_reward(refund.score, max_examples=25, seed=0, hacks=["malformed_call", "keyword_stuffing"])
    assert again.findings == tuple(f for f in original.findings if f.hack in again.hacks)
    assert set(again.table().splitlines()[2:]) <= set(original.table().splitlines())


def test_trl_signature_is_detected_and_agrees(original):
    from pytest_rlgate import refund_reward

    trl = probe_reward(refund_reward, max_examples=25, seed=0, hacks=["format_bonus", "padding"])
    assert trl.reward_name == "refund_reward"
    assert set(trl.hacks) == {"format_bonus", "padding"}
    assert trl.finding("format_bonus", "with_id").max_gain == original.finding("format_bonus", "with_id").max_gain


def test_assert_no_hacks_fails_with_the_table(original):
    with pytest.raises(RewardHackError) as info:
        original.assert_no_hacks(allow=["padding"])
    message = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert "mean gain" in message and "format_bonus" in message and "padding" not in message
    with pytest.raises(UsageError, match="not probed"):
        original.assert_no_hacks(allow=["jailbreak"])


def test_a_reward_without_hacks_reports_none():
    result = probe_reward(lambda reply, case: 0.5, max_examples=10, hacks=["format_bonus", "keyword_stuffing"])
    assert result.hacks == () and "no hack pays" in str(result)
    result.assert_no_hacks()


@pytest.mark.parametrize(
    ("reward", "kwargs", "match"),
    [
        (lambda reply: 1.0, {}, "neither \\(reply, case\\)"),
        (refund.score, {"signature": "openai"}, "signature must be"),
        (refund.score, {"categories": ["refunds"]}, "categories must be"),
        (refund.score, {"hacks": []}, "hacks must be"),
        (refund.score, {"max_examples": 0}, "max_examples"),
        (lambda reply, case: math.nan, {"max_examples": 5}, "not a finite number"),
    ],
)
def test_bad_use_is_a_usage_error(reward, kwargs, match):
    with pytest.raises(UsageError, match=match):
        probe_reward(reward, **kwargs)


def test_the_refund_suite_fails_its_hack_tests_on_the_fixed_reward(pytester):
    """The example hack tests pass by finding their hack, so each must fail once it is fixed."""
    shutil.copy(EXAMPLE, pytester.path / "test_hackability_on_fixed.py")  # a basename of its own
    pytester.makeconftest(
        "import pytest\nfrom fixed_refund_reward import fixed_score\n"
        "@pytest.fixture\ndef reward():\n    return fixed_score\n"
    )
    pytester.makepyfile(fixed_refund_reward=_fixed_source())
    result = pytester.runpytest("-q", "-p", "no:cacheprovider", "test_hackability_on_fixed.py")
    outcomes = result.parseoutcomes()
    failed = {line.split("::")[1].split(" ")[0] for line in result.outlines if line.startswith("FAILED")}
    assert failed == {
        "test_hack_first_turn_only_refund_after_lookup_keeps_full_score",
        "test_hack_format_bonus_wrong_call_outscores_plain_text",
        "test_hack_length_unpriced_padding_keeps_pass[with_id]",
        "test_hack_length_unpriced_padding_keeps_pass[no_id]",
        "test_hack_malformed_block_plus_question_passes_no_id",
        "test_probe_finds_every_known_hack",
    }, result.stdout.str()
    assert outcomes["passed"] == 5  # every must-hold property still holds on the fixed reward
    result.stdout.fnmatch_lines(["*hack 'format bonus' not found: the reward seems fixed*"])


def _fixed_source() -> str:
    import inspect

    return "from __future__ import annotations\nimport re\nfrom pytest_rlgate.envs import refund\n" \
        "_BLOCK = re.compile(r'<tool_call>.*?</tool_call>', re.DOTALL)\n" + inspect.getsource(fixed_score)
