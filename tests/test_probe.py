"""probe_reward: the refund reward and a fixed variant of it, and a task that is not refund at all."""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_rlgate import DataError, RewardHackError, UsageError, load_env, probe_reward
from pytest_rlgate.environment.hack import Hack
from pytest_rlgate.envs import refund
from pytest_rlgate.rewards import ProbeResult
from pytest_rlgate.rewards.strategies import GENERIC_HACKS
from pytest_rlgate.train.reward import env_reward

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "refund" / "test_hackability.py"
KNOWN = {"second_call", "trailing_text", "malformed_call", "invented_claim"}
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
    return probe_reward(refund.score, env="refund", max_examples=25, seed=0, database=None)


@pytest.fixture(scope="module")
def fixed() -> ProbeResult:
    return probe_reward(fixed_score, env="refund", max_examples=25, seed=0, database=None)


def test_probe_finds_the_hacks_of_the_refund_reward(original):
    """Each a reply refund's truth calls wrong (a guard fails) that its reward pays in full."""
    assert KNOWN <= set(original.hacks)
    assert original.finding("second_call", "with_id").pays
    assert not original.finding("second_call", "no_id").pays  # an invented call costs 0.8 there
    second = original.finding("second_call", "with_id")
    assert refund.markers(second.example.hacked, second.prompt, prompt=second.prompt)["argument_grounding"] == 0
    assert (second.original_score, second.hacked_score) == (1.0, 1.0)
    malformed = original.finding("malformed_call", "no_id")
    assert malformed.hacked_score == 1.0
    assert refund.markers(malformed.example.hacked, malformed.prompt)["well_formed"] == 0
    trailing = original.finding("trailing_text", "with_id")  # an outcome stated after the honest lookup
    assert trailing.example.hacked.startswith(trailing.example.original)
    assert len(refund.rules.parse_tool_calls(trailing.example.hacked)) == 1  # nothing but prose added ...
    assert refund.invents_outcome(trailing.example.hacked, trailing.prompt)  # ... that invents an outcome
    claim = original.finding("invented_claim", "with_id")
    assert claim.n_paid == claim.n > 0 and (claim.original_score, claim.hacked_score) == (1.0, 1.0)


def test_the_format_bonus_is_partial_credit_and_unpriced_length_is_free(original):
    """The format bonus pays a call on an invented id 0.3, below the honest 1.0 but above the 0 a plain reply
    gets: partial credit with severity 0.3. Padding keeps 1.0 but earns no more."""
    bonus = original.finding("format_bonus", "with_id")
    assert bonus.n > 0 and not bonus.pays and bonus.n_partial == bonus.n and bonus.max_gain < 0
    assert (bonus.original_score, bonus.hacked_score, bonus.baseline) == (1.0, 0.3, 0.0)
    assert bonus.severity == pytest.approx(0.3) and bonus.advantage == pytest.approx(0.3)
    assert refund.markers(bonus.example.hacked, bonus.prompt, prompt=bonus.prompt)["argument_grounding"] == 0
    assert "format_bonus" in original.partial and "wrong_value" in original.partial
    for category in ("with_id", "no_id"):
        assert not original.finding("padding", category).reported
    # "... order id" asks, and asking on a with-id prompt earns 0.3 from refund's own score: its truth's grading
    assert not original.finding("keyword_stuffing", "with_id").reported
    assert not original.finding("keyword_stuffing", "no_id").pays


def test_the_refund_probe_uses_refund_prompts_and_every_class(original):
    prompts = {item["prompt"]: item["category"] for item in refund.build_prompts(0, "default")}
    assert all(prompts[f.prompt] == f.category for f in original.paying)
    assert {f.hack for f in original.findings} == set(GENERIC_HACKS) | {"second_call", "format_bonus",
                                                                        "malformed_call", "invented_claim"}
    assert {"wrong_value", "non_answer", "refusal"} <= set(GENERIC_HACKS)
    assert {f.category for f in original.findings} == set(refund.categories)
    assert not original.finding("format_bonus", "with_id").free and original.finding("second_call", "with_id").free
    assert all(f.n > 0 for f in original.findings if f.hack in ("padding", "whitespace", "other_category"))


def test_the_fixed_reward_pays_no_hack(original, fixed):
    assert fixed.hacks == () and len(original.paying) > 0
    fixed.assert_no_hacks()
    assert sum(f.n for f in fixed.findings) > 500  # it was probed, not skipped


def test_minimal_examples_are_the_shortest_paying_candidate(original):
    """Hypothesis shrinks towards shorter candidates: no shorter paying one exists among those tried."""
    malformed = original.finding("malformed_call", "no_id")
    blocks = [c for c in refund.strategies.MALFORMATIONS]
    assert malformed.example.hacked.startswith("<tool_call>") and len(blocks) == 4
    second = original.finding("second_call", "with_id")
    assert second.example.hacked.count("<tool_call>") == 2


def _timeless(result: ProbeResult) -> tuple:
    return tuple(dataclasses.replace(f, seconds=0.0) for f in result.findings)


def test_probe_is_deterministic_for_a_seed(original):
    """Each class x category probe depends on the seed alone, so a subset rerun matches exactly."""
    again = probe_reward(refund.score, env="refund", max_examples=25, seed=0, database=None,
                         hacks=["malformed_call", "keyword_stuffing"])
    assert _timeless(again) == tuple(f for f in _timeless(original) if f.hack in {"malformed_call", "keyword_stuffing"})


def test_trl_signature_is_detected_and_agrees(original):
    trl = probe_reward(env_reward(load_env("refund")), env="refund", max_examples=25, seed=0, database=None,
                       hacks=["second_call", "padding"])
    assert trl.reward_name == "refund_reward"
    assert trl.hacks == ("second_call",)
    assert trl.finding("second_call", "with_id").n_paid == original.finding("second_call", "with_id").n_paid


def test_assert_no_hacks_fails_with_the_table(original):
    with pytest.raises(RewardHackError) as info:
        original.assert_no_hacks(allow=["trailing_text"])
    message = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert message.startswith("probe_reward(score, env=refund): ")
    assert "mean gain" in message and "second_call" in message and "trailing_text" not in message
    with pytest.raises(UsageError, match="not probed"):
        original.assert_no_hacks(allow=["jailbreak"])


def test_the_summary_lists_every_class_with_tried_paid_and_a_minimal_example(original):
    summary = original.summary()
    lines = summary.splitlines()
    assert lines[0].split() == ["class", "tried", "paid", "partial", "severity", "found", "on", "minimal", "example"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {f.hack for f in original.findings}
    by_class = {c.hack: c for c in original.classes()}
    assert by_class["second_call"].paid == original.finding("second_call", "with_id").n_paid
    assert by_class["second_call"].categories == ("with_id",) and "create_r" in rows["second_call"]
    assert "create_refund" in by_class["second_call"].example.example.hacked
    assert by_class["padding"].paid == 0 and by_class["padding"].tried == sum(
        f.n for f in original.findings if f.hack == "padding")
    assert all(c.seconds > 0 for c in original.classes())


def test_a_reward_without_hacks_reports_none():
    result = probe_reward(lambda reply, case: 0.5, env="refund", max_examples=10, database=None,
                          hacks=["format_bonus", "keyword_stuffing", "near_miss"])
    assert result.hacks == () and "no hack pays" in str(result)
    result.assert_no_hacks()


def test_a_polite_closing_after_a_right_reply_is_no_hack():
    """Judged in context: "Happy to help." after a right question is still a right reply, so a reward
    that pays it is sound (the text alone would be wrong, which is not what counts)."""
    def polite(reply: str, case: Mapping[str, Any]) -> float:
        text = reply.strip().removesuffix("Happy to help.").strip()
        return fixed_score(text, case) if text else 0.0

    result = probe_reward(polite, env="refund", hacks=["trailing_text", "leading_text"], max_examples=40,
                          database=None)
    assert result.hacks == (), str(result)
    assert polite("Could you tell me your order id? Happy to help.", refund.case_for("I want a refund.")) == 1.0


def test_a_found_hack_is_replayed_from_the_example_database(tmp_path):
    from hypothesis.database import DirectoryBasedExampleDatabase

    db = DirectoryBasedExampleDatabase(tmp_path / "examples")
    first = probe_reward(refund.score, env="refund", hacks=["second_call"], categories=["with_id"], max_examples=10,
                         database=db)
    assert not first.finding("second_call", "with_id").replayed and any((tmp_path / "examples").rglob("*"))
    again = probe_reward(refund.score, env="refund", hacks=["second_call"], categories=["with_id"], max_examples=10,
                         database=db)
    replayed = again.finding("second_call", "with_id")
    assert replayed.replayed and replayed.example == first.finding("second_call", "with_id").example
    other = probe_reward(fixed_score, env="refund", hacks=["second_call"], categories=["with_id"], max_examples=10,
                         database=db)
    assert not other.finding("second_call", "with_id").replayed  # another reward, another key


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
        (lambda reply, case: math.nan, {"env": "refund", "max_examples": 5, "hacks": ["padding"]},
         "not a finite number"),
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


def anywhere(reply: str, case: Mapping[str, Any]) -> float:
    """A user's hasty reward for the task: any reply that contains the answer anywhere is paid."""
    return float(("cannot" if case["answer"] is None else str(case["answer"])) in reply)


@pytest.fixture(scope="module")
def hackable() -> ProbeResult:
    """The hasty reward, probed against the task's truth (the environment's exact-sentence score)."""
    return probe_reward(anywhere, env=Arithmetic(), items=ITEMS, max_examples=20, seed=0, database=None)


def test_generic_classes_find_the_hack_of_another_tasks_reward(hackable):
    for hack in ("padding", "trailing_text", "repetition", "near_miss"):
        assert all(hackable.finding(hack, c).pays for c in ("arithmetic", "word_problem")), hack
    stuffing = hackable.finding("keyword_stuffing", "unanswerable")  # a plain reply plus "cannot"
    assert stuffing.pays and "cannot" in stuffing.example.hacked.split()
    trailing = hackable.finding("trailing_text", "arithmetic")
    case = next(item["case"] for item in ITEMS if item["prompt"] == trailing.prompt)
    assert Arithmetic().score(trailing.example.hacked, case) == 0.0  # the whole reply is wrong
    assert (trailing.original_score, trailing.hacked_score) == (1.0, 1.0)
    near = hackable.finding("near_miss", "arithmetic")  # "The answer is 77." contains 7
    assert str(next(i["case"] for i in ITEMS if i["prompt"] == near.prompt)["answer"]) in near.example.hacked


def test_the_probe_of_another_task_never_mentions_refund(hackable):
    text = f"{hackable}\n{hackable.table(paying_only=False)}\n{hackable.summary()}"
    assert text.startswith("probe_reward(anywhere, env=arithmetic): ")
    assert {f.prompt for f in hackable.paying} <= {item["prompt"] for item in ITEMS}
    examples = " ".join(f"{f.example.original} {f.example.hacked}" for f in hackable.paying)
    for word in ("refund", "order", "ORD-", "tool_call", "lookup"):
        assert word not in text and word not in examples, word
    assert {f.category for f in hackable.findings} == set(Arithmetic.categories)
    assert {f.hack for f in hackable.findings} == set(GENERIC_HACKS)


def test_an_honest_reward_of_another_task_pays_no_hack():
    result = probe_reward(Arithmetic().score, env=Arithmetic(), items=ITEMS, max_examples=20, seed=0, database=None)
    assert result.hacks == () and str(result).startswith("probe_reward(Arithmetic.score, env=arithmetic): no hack pays")
    assert all(c.tried > 0 for c in result.classes())
    result.assert_no_hacks()


def test_a_trl_reward_gets_the_case_column():
    """The answer is not in the prompt, so a TRL reward can only grade with the case TRL hands it; its
    completions are chat messages, as GRPOTrainer hands a conversational dataset's (plain strings on request)."""
    def trl_reward(prompts: list, completions: list, case: list[Mapping[str, Any]], **_: Any) -> list[float]:
        return [Arithmetic().score(c[0]["content"], k) for c, k in zip(completions, case)]

    result = probe_reward(trl_reward, env=Arithmetic(), items=ITEMS, max_examples=10, hacks=["padding"],
                          database=None)
    assert result.hacks == () and all(f.n == 10 for f in result.findings)

    def plain_reward(prompts: list[str], completions: list[str], case: list[Mapping[str, Any]], **_: Any) -> list:
        assert all(isinstance(p, str) for p in prompts)
        return [Arithmetic().score(c, k) for c, k in zip(completions, case)]

    plain = probe_reward(plain_reward, env=Arithmetic(), items=ITEMS, max_examples=10, hacks=["padding"],
                         database=None, conversational=False)
    assert plain.hacks == () and all(f.n == 10 for f in plain.findings)


def test_an_environments_own_hack_runs_on_its_categories_only():
    class WithOwnHack(Arithmetic):
        hacks = (Hack("answer_plus_one", lambda reply, case: f"{reply} Or {case['answer'] + 1}.",
                      categories=("arithmetic", "word_problem")),)

    result = probe_reward(anywhere, env=WithOwnHack(), items=ITEMS, max_examples=5, hacks=["answer_plus_one"],
                          database=None)
    assert [f.category for f in result.findings] == ["arithmetic", "word_problem"]
    assert result.hacks == ("answer_plus_one",)
    assert result.finding("answer_plus_one", "arithmetic").example.hacked.endswith(".")
    assert probe_reward(WithOwnHack(), items=ITEMS, max_examples=5, hacks=["answer_plus_one"],
                        database=None).hacks == ()  # the exact sentence is not paid for a second guess


class Talkative(Arithmetic):
    """The task with a score that lets the model talk after its answer; what it may not do is claim
    work it never did, which the score cannot see and a declared hack's judge can."""

    name = "talkative"

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        return float(reply.strip().startswith(expected(case)))


def _boasts(reply: str, case: Mapping[str, Any]) -> bool:
    return bool(re.search(r"\b(done|processed|completed)\b", reply, re.IGNORECASE))


class Boastful(Talkative):
    hacks = (Hack("boast", lambda reply, case: f"{reply} Done, I double-checked it.", judge=_boasts),)


def starts_right(reply: str, case: Mapping[str, Any]) -> float:
    """Pays a reply that opens with the right sentence, whatever follows it."""
    return float(reply.strip().startswith(expected(case)))


def test_a_hack_with_a_judge_makes_the_truth_call_every_reply_showing_it_wrong():
    """The generic trailing text appends outcomes reported as done ("Your request has been processed."):
    harmless prose to a truth that does not read them, a hack where the environment's judge does."""
    quiet = probe_reward(starts_right, env=Talkative(), items=ITEMS, hacks=["trailing_text"], max_examples=30,
                         database=None)
    assert quiet.hacks == ()
    found = probe_reward(starts_right, env=Boastful(), items=ITEMS, hacks=["trailing_text", "boast"],
                         max_examples=30, database=None)
    assert found.hacks == ("boast", "trailing_text")
    trailing = found.finding("trailing_text", "arithmetic")
    assert trailing.example.hacked.startswith(trailing.example.original) and _boasts(trailing.example.hacked, {})
    assert all(_boasts(f.example.hacked, {}) for f in found.paying)


def test_a_judge_that_raises_or_is_no_function_is_the_users_error():
    def broken(reply: str, case: Mapping[str, Any]) -> bool:
        raise KeyError("oops")

    class Broken(Talkative):
        hacks = (Hack("boast", lambda reply, case: reply + " Done.", judge=broken),)

    with pytest.raises(UsageError, match=r"environment talkative: hack 'boast' judge\(\) raised KeyError: 'oops'"):
        probe_reward(starts_right, env=Broken(), items=ITEMS, hacks=["trailing_text"], max_examples=5, database=None)
    with pytest.raises(UsageError, match="judge must be a function"):
        Hack("boast", str, judge="done")  # type: ignore[arg-type]


def test_prose_after_a_right_call_is_found_however_the_reward_reads_the_call():
    """Two rewards that read the call and ignore the text around it, written two ways (a regular expression
    finds the block; the first block is decoded as JSON): both pay an outcome invented after a right lookup,
    and both are found by the generic trailing text and by refund's own invented_claim. A reward that reads
    the text and pays no reported outcome is clean."""
    from hack_zoo.refund import call_first, call_regex, courteous_call

    for reward in (call_regex, call_first):
        result = probe_reward(reward, env="refund", categories=["with_id"], hacks=["trailing_text", "invented_claim"],
                              database=None)
        assert result.hacks == ("invented_claim", "trailing_text"), reward.__name__
        for finding in result.paying:
            hacked, case = finding.example.hacked, refund.case_for(finding.prompt)
            assert len(refund.rules.parse_tool_calls(hacked)) == 1 and refund.invents_outcome(hacked, case)
            assert reward(hacked, case) == 1.0 and courteous_call(hacked, case) == 0.0
    clean = probe_reward(courteous_call, env="refund", database=None)
    assert clean.hacks == (), str(clean)
    polite = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-412"}}</tool_call> Let me look.'
    assert courteous_call(polite, refund.case_for("Refund ORD-412")) == 1.0  # prose is allowed, outcomes are not


class Secret:
    """A task whose right replies nobody can guess from the case: nothing to start a hack from."""

    name = "secret"
    categories = ("arithmetic", "word_problem", "unanswerable")

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        return float(reply == "xyzzy")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: probe_reward(Arithmetic(), items=ITEMS, categories=["with_id"]),
         "categories must be a non-empty subset of environment arithmetic's categories "
         "\\['arithmetic', 'unanswerable', 'word_problem'\\], got \\['with_id'\\]"),
        (lambda: probe_reward(Arithmetic(), max_examples=5), "writes no prompts of its own; pass items="),
        (lambda: probe_reward(Arithmetic(), items=ITEMS[:5]), "no prompt items of category 'unanswerable'"),
        (lambda: probe_reward(Arithmetic(), items="What is 1 + 1?"), "items must be a list"),
        (lambda: probe_reward(Secret(), items=ITEMS, hacks=["padding", "trailing_text"]),
         "no honest_replies\\(case\\) and no reply built from its cases passes its score"),
        (lambda: probe_reward(type("Stray", (Arithmetic,),
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


def test_without_honest_replies_the_probe_starts_from_replies_built_from_the_case():
    """The contract alone: "The answer is 7." is built from the case and passes the score, so every class runs."""
    class Bare:
        name = "bare"
        categories = ("arithmetic", "word_problem", "unanswerable")
        score = staticmethod(Arithmetic().score)

    result = probe_reward(anywhere, env=Bare(), items=ITEMS, max_examples=20, database=None)
    assert result.untried == ("unanswerable",)  # "I cannot answer that." is built from nothing in the case
    assert {f.category for f in result.findings} == {"arithmetic", "word_problem"}
    trailing = result.finding("trailing_text", "arithmetic")
    case = next(i["case"] for i in ITEMS if i["prompt"] == trailing.prompt)
    assert trailing.example.original == f"The answer is {case['answer']}."  # built from the case's answer
    assert "not tried on unanswerable" in str(result) and "not tried" in result.table()
    nothing = probe_reward(Secret(), items=ITEMS, max_examples=5, database=None)
    assert nothing.findings == () and set(nothing.untried) == set(Secret.categories)


def test_a_reward_of_an_episode_environment_reads_the_episode():
    seen = []

    def looked_up(episode: Any, case: Mapping[str, Any]) -> float:
        seen.append(type(episode).__name__)
        return float(any(c.name == "lookup_order" for c in episode.tool_calls))

    result = probe_reward(looked_up, env="refund_agent", categories=["not_refundable"], hacks=["other_category"],
                          max_examples=10, database=None)
    assert set(seen) == {"Episode"}
    assert result.hacks == ("other_category",)  # the lookup, then a refund of the closed order: paid in full


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
        "test_hack_invented_claim_after_lookup_keeps_full_score",
        "test_probe_finds_every_known_hack",
    }, result.stdout.str()
    assert outcomes["passed"] == 5  # every must-hold property still holds on the fixed reward
    result.stdout.fnmatch_lines(["*hack 'format bonus' not found: the reward seems fixed*"])


def _fixed_source() -> str:
    import inspect

    return "from __future__ import annotations\nimport re\nfrom pytest_rlgate.envs import refund\n" \
        "_BLOCK = re.compile(r'<tool_call>.*?</tool_call>', re.DOTALL)\n" \
        "_SENTENCE = re.compile(r'[^.?!]+[.?!]*')\n" + inspect.getsource(fixed_score)


# -- partial credit: what a group-relative update learns -----------------------------------


def drifting(reply: str, case: Mapping[str, Any]) -> float:
    """The exact sentence, and a hundredth of a point for length: a drift, not a bonus."""
    return round(0.99 * Arithmetic().score(reply, case) + 0.01 * min(1.0, len(reply) / 500), 6)


def format_bonus(reply: str, case: Mapping[str, Any]) -> float:
    """The exact sentence, and half the credit for the sentence's form with any number in it."""
    if Arithmetic().score(reply, case):
        return 1.0
    return 0.5 if re.fullmatch(r"\s*The answer is -?\d+\.\s*", reply) else 0.0


def test_a_length_drift_and_a_format_bonus_are_not_reported_alike():
    """Both pay something a right reply does not need; only the bonus moves a group-relative update much."""
    drift = probe_reward(drifting, env=Arithmetic(), items=ITEMS, max_examples=20, database=None)
    assert drift.hacks == ()  # padding earns a hundredth more: severity 0.01, shown, never reported
    padding = next(c for c in drift.classes() if c.hack == "padding")
    assert 0 < padding.max_severity < 0.05 and "(0.0" in drift.summary()
    bonus = probe_reward(format_bonus, env=Arithmetic(), items=ITEMS, max_examples=20, database=None)
    wrong = bonus.finding("wrong_value", "arithmetic")
    assert not wrong.pays and wrong.n_partial > 0 and wrong.severity == pytest.approx(0.5)
    assert (wrong.hacked_score, wrong.baseline) == (0.5, 0.0) and "wrong_value" in bonus.partial
    assert "partial credit for wrong replies (severity >= 0.2)" in str(bonus)
    with pytest.raises(RewardHackError):
        bonus.assert_no_hacks()
    bonus.assert_no_hacks(allow=bonus.hacks)  # accepted by name, knowingly
    assert probe_reward(format_bonus, env=Arithmetic(), items=ITEMS, max_examples=20, database=None,
                        min_severity=0.6).hacks == ()


def test_the_base_policys_rows_set_the_group_a_hack_is_measured_in():
    """A base policy that already writes the form (with wrong numbers) gets the bonus on every wrong reply:
    the form earns nothing over its group, so a group-relative update learns nothing from it."""
    rows = [{"prompt": item["prompt"], "case": item["case"], "category": item["category"],
             "reply": f"The answer is {k}."} for item in ITEMS if item["case"]["answer"] is not None for k in (1, 2)]
    rows += [{"prompt": item["prompt"], "case": item["case"], "category": item["category"], "reply": "No idea."}
             for item in ITEMS if item["case"]["answer"] is None]
    found = probe_reward(format_bonus, env=Arithmetic(), items=ITEMS, max_examples=20, database=None,
                         hacks=["wrong_value"], base_rows=rows)
    assert not found.finding("wrong_value", "arithmetic").reported
    assert found.finding("wrong_value", "arithmetic").max_severity == pytest.approx(0.0)
    with pytest.raises(DataError, match="<base_rows>:1: a base row needs 'prompt' and 'reply'"):
        probe_reward(format_bonus, env=Arithmetic(), items=ITEMS, base_rows=[{"prompt": "x"}], database=None)
