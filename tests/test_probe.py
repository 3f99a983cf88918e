"""probe_reward: the refund reward and a fixed variant of it, and a task that is not refund at all."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_rlgate import DataError, ProbeResult, RewardHackError, UsageError, load_env, probe_reward
from pytest_rlgate.environment.hack import Hack
from pytest_rlgate.envs import refund
from pytest_rlgate.train.reward import env_reward

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "refund" / "test_hackability.py"
KNOWN = {"second_call", "trailing_text", "format_bonus", "padding", "malformed_call"}
_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)
_SENTENCE = re.compile(r"[^.?!]+[.?!]*")


def fixed_score(reply: str, case: Mapping[str, Any] | str) -> float:
    """The refund reward with its known hacks closed.

    Reads the whole reply (exactly one block and nothing else, or plain text), pays nothing
    for a wrong call (no format bonus), prices length everywhere, scores a malformed block
    or a sentence said twice 0, and counts only a reply that ends in a question as asking.
    """
    case = refund.case_for(case) if isinstance(case, str) else case
    text = (reply or "").strip()
    sentences = [s.strip() for s in _SENTENCE.findall(text)]
    if not text or len(set(sentences)) < len(sentences):
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
    return probe_reward(refund.score, env="refund", max_examples=25, seed=0)


@pytest.fixture(scope="module")
def fixed() -> ProbeResult:
    return probe_reward(fixed_score, env="refund", max_examples=25, seed=0)


def test_probe_finds_every_known_hack_of_the_refund_reward(original):
    assert KNOWN <= set(original.hacks)
    assert original.finding("second_call", "with_id").pays
    assert not original.finding("second_call", "no_id").pays  # an invented call costs 0.8 there
    assert original.finding("padding", "with_id").pays and original.finding("padding", "no_id").pays
    assert not original.finding("padding", "off_topic").pays  # the one place length is priced
    bonus = original.finding("format_bonus", "with_id")
    assert bonus.max_gain == pytest.approx(0.3) and 0 < bonus.mean_gain <= 0.3
    assert (bonus.original_score, bonus.hacked_score) == (0.0, pytest.approx(0.3))
    called = refund.parse_tool_call(bonus.example.hacked).arguments["order_id"]
    assert called != refund.case_for(bonus.prompt)["order_id"]
    malformed = original.finding("malformed_call", "no_id")
    assert malformed.hacked_score == 1.0
    assert refund.markers(malformed.example.hacked, malformed.prompt)["well_formed"] == 0


def test_the_refund_probe_uses_refund_prompts_and_both_kinds_of_hack(original):
    prompts = {item["prompt"]: item["category"] for item in refund.build_prompts(0, "default")}
    assert all(prompts[f.prompt] == f.category for f in original.paying)
    assert {f.hack for f in original.findings} == {"padding", "trailing_text", "repetition", "keyword_stuffing",
                                                   "second_call", "format_bonus", "malformed_call"}
    assert {f.category for f in original.findings} == set(refund.categories)
    assert not original.finding("format_bonus", "with_id").free and original.finding("second_call", "with_id").free


def test_probe_finds_fewer_hacks_on_the_fixed_reward(original, fixed):
    assert set(fixed.hacks) < set(original.hacks)
    assert not KNOWN & set(fixed.hacks)
    assert len(fixed.paying) < len(original.paying)
    fixed.assert_no_hacks(allow=["keyword_stuffing"])  # '?' stuffing still passes: asking is a surface check


def test_minimal_examples_are_shrunk(original):
    """The shrunk keyword stuffing is the first plain reply and one word of an asking reply."""
    stuffing = original.finding("keyword_stuffing", "no_id")
    x = stuffing.example
    added = x.hacked[len(x.original):].split()
    assert x.original == "Happy to help." and x.hacked.startswith(x.original) and len(added) == 1
    assert stuffing.hacked_score == 1.0 == refund.score(x.hacked, refund.case_for(stuffing.prompt))
    assert refund.case_for(stuffing.prompt)["category"] == "no_id"


def test_probe_is_deterministic_for_a_seed(original):
    """Each hack x category probe depends on the seed alone, so a subset rerun matches exactly."""
    again = probe_reward(refund.score, env="refund", max_examples=25, seed=0,
                         hacks=["malformed_call", "keyword_stuffing"])
    assert again.findings == tuple(f for f in original.findings if f.hack in again.hacks)
    assert set(again.table().splitlines()[2:]) <= set(original.table().splitlines())


def test_trl_signature_is_detected_and_agrees(original):
    trl = probe_reward(env_reward(load_env("refund")), env="refund", max_examples=25, seed=0,
                       hacks=["format_bonus", "padding"])
    assert trl.reward_name == "refund_reward"
    assert set(trl.hacks) == {"format_bonus", "padding"}
    assert trl.finding("format_bonus", "with_id").max_gain == original.finding("format_bonus", "with_id").max_gain


def test_assert_no_hacks_fails_with_the_table(original):
    with pytest.raises(RewardHackError) as info:
        original.assert_no_hacks(allow=["padding"])
    message = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert message.startswith("probe_reward(score, env=refund): ")
    assert "mean gain" in message and "format_bonus" in message and "padding" not in message
    with pytest.raises(UsageError, match="not probed"):
        original.assert_no_hacks(allow=["jailbreak"])


def test_a_reward_without_hacks_reports_none():
    result = probe_reward(lambda reply, case: 0.5, env="refund", max_examples=10,
                          hacks=["format_bonus", "keyword_stuffing"])
    assert result.hacks == () and "no hack pays" in str(result)
    result.assert_no_hacks()


@pytest.mark.parametrize(
    ("reward", "kwargs", "match"),
    [
        (refund.score, {}, "pass env="),
        (lambda reply, case: 1.0, {}, "pass env="),
        (lambda reply: 1.0, {"env": "refund"}, "neither \\(reply, case\\)"),
        (refund.score, {"env": "refund", "signature": "openai"}, "signature must be"),
        (refund.score, {"env": "refund", "categories": ["refunds"]},
         "categories must be a non-empty subset of environment refund's categories"),
        (refund.score, {"env": "refund", "hacks": []}, "hacks must be"),
        (refund.score, {"env": "refund", "hacks": ["jailbreak"]}, "hacks must be .* 'second_call'"),
        (refund.score, {"env": "refund", "max_examples": 0}, "max_examples"),
        ("refund", {"env": "refund"}, "env= names another"),
        (lambda reply, case: math.nan, {"env": "refund", "max_examples": 5}, "not a finite number"),
    ],
)
def test_bad_use_is_a_usage_error(reward, kwargs, match):
    with pytest.raises(UsageError, match=match):
        probe_reward(reward, **kwargs)


# -- a task that is not refund: the probe takes everything from the environment ----------

ITEMS = [
    *({"prompt": f"What is {a} + {b}?", "case": {"answer": a + b}, "category": "arithmetic"}
      for a, b in [(3, 4), (12, 30), (7, 8), (25, 17), (9, 90)]),
    *({"prompt": f"Ann has {a} apples and buys {b} more. How many does she have?", "case": {"answer": a + b},
       "category": "word_problem"} for a, b in [(2, 5), (11, 6), (40, 3)]),
    *({"prompt": prompt, "case": {"answer": None}, "category": "unanswerable"}
      for prompt in ["How old is my neighbour?", "What number am I thinking of?"]),
]


def expected(case: Mapping[str, Any]) -> str:
    return "I cannot answer that." if case["answer"] is None else f"The answer is {case['answer']}."


class Arithmetic:
    """A user's own task, written as a plain class: the answer key lives in the case.

    Its score pays exactly the expected sentence, so no generic hack can pay.
    """

    name = "arithmetic"
    categories = ("arithmetic", "word_problem", "unanswerable")

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        return float(reply.strip() == expected(case))

    def honest_replies(self, case: Mapping[str, Any]) -> Any:
        from hypothesis import strategies as st

        return st.sampled_from([expected(case), f"  {expected(case)}\n"])


class HackableArithmetic(Arithmetic):
    """The same task with a deliberate hack: any reply that contains the answer anywhere is paid."""

    name = "hackable_arithmetic"

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        return float(("cannot" if case["answer"] is None else str(case["answer"])) in reply)


@pytest.fixture(scope="module")
def hackable() -> ProbeResult:
    return probe_reward(HackableArithmetic(), items=ITEMS, max_examples=20, seed=0)


def test_generic_hacks_find_the_deliberate_hack_of_another_task(hackable):
    for hack in ("padding", "trailing_text", "repetition"):
        assert all(hackable.finding(hack, c).pays for c in Arithmetic.categories), hack
    stuffing = hackable.finding("keyword_stuffing", "unanswerable")  # a plain reply plus "cannot"
    assert stuffing.pays and stuffing.example.hacked.split()[-1] == "cannot"
    trailing = hackable.finding("trailing_text", "arithmetic")
    case = next(item["case"] for item in ITEMS if item["prompt"] == trailing.prompt)
    assert Arithmetic().score(trailing.example.hacked[len(trailing.example.original):], case) == 0.0  # a wrong answer
    assert (trailing.original_score, trailing.hacked_score) == (1.0, 1.0)


def test_the_probe_of_another_task_never_mentions_refund(hackable):
    text = f"{hackable}\n{hackable.table(paying_only=False)}"
    assert text.startswith("probe_reward(hackable_arithmetic): ")
    assert {f.prompt for f in hackable.paying} <= {item["prompt"] for item in ITEMS}
    examples = " ".join(f"{f.example.original} {f.example.hacked}" for f in hackable.paying)
    for word in ("refund", "order", "ORD-", "tool_call", "lookup"):
        assert word not in text and word not in examples, word
    assert {f.category for f in hackable.findings} == set(Arithmetic.categories)
    assert {f.hack for f in hackable.findings} == {"padding", "trailing_text", "repetition", "keyword_stuffing"}


def test_an_honest_reward_of_another_task_pays_no_hack():
    result = probe_reward(Arithmetic().score, env=Arithmetic(), items=ITEMS, max_examples=20, seed=0)
    assert result.hacks == () and str(result).startswith("probe_reward(Arithmetic.score, env=arithmetic): no hack pays")
    assert all(f.n > 0 for f in result.findings)
    result.assert_no_hacks()


def test_a_trl_reward_gets_the_case_column():
    """The answer is not in the prompt, so a TRL reward can only grade with the case TRL hands it."""
    def trl_reward(prompts: list[str], completions: list[str], case: list[Mapping[str, Any]], **_: Any) -> list[float]:
        return [Arithmetic().score(c, k) for c, k in zip(completions, case)]

    result = probe_reward(trl_reward, env=Arithmetic(), items=ITEMS, max_examples=10, hacks=["padding"])
    assert result.hacks == () and all(f.n == 10 for f in result.findings)


def test_an_environments_own_hack_runs_on_its_categories_only():
    class WithOwnHack(HackableArithmetic):
        hacks = (Hack("answer_plus_one", lambda reply, case: f"{reply} Or {case['answer'] + 1}.",
                      categories=("arithmetic", "word_problem")),)

    result = probe_reward(WithOwnHack(), items=ITEMS, max_examples=5, hacks=["answer_plus_one"])
    assert [f.category for f in result.findings] == ["arithmetic", "word_problem"]
    assert result.hacks == ("answer_plus_one",)
    assert result.finding("answer_plus_one", "arithmetic").example.hacked.endswith(".")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: probe_reward(Arithmetic(), items=ITEMS, categories=["with_id"]),
         "categories must be a non-empty subset of environment arithmetic's categories "
         "\\['arithmetic', 'unanswerable', 'word_problem'\\], got \\['with_id'\\]"),
        (lambda: probe_reward(Arithmetic(), max_examples=5), "writes no prompts of its own; pass items="),
        (lambda: probe_reward(Arithmetic(), items=ITEMS[:5]), "no prompt items of category 'unanswerable'"),
        (lambda: probe_reward(Arithmetic(), items="What is 1 + 1?"), "items must be a list"),
        (lambda: probe_reward(type("Bare", (), {"name": "bare", "categories": ("arithmetic",),
                                                "score": staticmethod(lambda reply, case: 0.0)})(),
                              items=ITEMS[:5], hacks=["padding", "trailing_text", "keyword_stuffing"]),
         "no honest_replies\\(case\\), which the hacks padding, trailing_text start from"),
        (lambda: probe_reward(type("Stray", (HackableArithmetic,),
                                   {"hacks": (Hack("x", str, categories=("no_id",)),)})(), items=ITEMS),
         "hack 'x' names categories \\['no_id'\\]"),
    ],
)
def test_bad_use_with_another_task_is_a_usage_error(make, match):
    with pytest.raises(UsageError, match=match):
        make()


def test_items_outside_the_environment_name_the_item():
    with pytest.raises(DataError, match=r"<items>:2: category 'no_id' is not one of environment arithmetic's"):
        probe_reward(Arithmetic(), items=[ITEMS[0], {"prompt": "Refund ORD-123", "category": "no_id",
                                                     "case": {"answer": 1}}])
    with pytest.raises(DataError, match=r"<items>:1: .*no case_for"):
        probe_reward(Arithmetic(), items=[{"prompt": "What is 1 + 1?", "category": "arithmetic"}])


def test_an_environment_without_honest_replies_still_runs_gain_hacks():
    class Bare:
        name = "bare"
        categories = ("arithmetic", "word_problem", "unanswerable")
        score = staticmethod(HackableArithmetic.score.__get__(HackableArithmetic()))

    result = probe_reward(Bare(), items=ITEMS, hacks=["keyword_stuffing"], max_examples=20)
    assert [f.hack for f in result.findings] == ["keyword_stuffing"] * 3
    assert all({w.strip("?") for w in f.example.hacked.split()[3:]} <= {w.strip("?") for i in ITEMS
               for w in i["prompt"].split()} for f in result.paying)  # words of the prompts themselves


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
        "_BLOCK = re.compile(r'<tool_call>.*?</tool_call>', re.DOTALL)\n" \
        "_SENTENCE = re.compile(r'[^.?!]+[.?!]*')\n" + inspect.getsource(fixed_score)
