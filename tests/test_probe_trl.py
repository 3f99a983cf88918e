"""probe_reward calls a TRL reward exactly as GRPOTrainer does, or refuses it; and keeps its examples where asked.

GRPOTrainer calls ``reward(prompts=..., completions=..., completion_ids=..., **columns, trainer_state=...,
log_extra=..., log_metric=...)``: keywords only, chat messages for a conversational dataset, every
dataset column under its own name, ``None`` meaning "skip". A reward probed any other way is another
function, so these tests use TRL's own ``think_format_reward`` and the reward shape TRL documents.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_rlgate import UsageError, load_env, probe_reward
from pytest_rlgate.rewards.calling import reward_call
from pytest_rlgate.rewards.probe import _Scorer

trl_rewards = pytest.importorskip("trl.rewards")

ITEMS = [
    *({"prompt": f"What is {a} + {b}?", "case": {"answer": a + b}, "category": "arithmetic"}
      for a, b in [(3, 4), (12, 30), (7, 8), (25, 17), (9, 90), (41, 2)]),
    *({"prompt": f"Ann has {a} pears and buys {b}. How many now?", "case": {"answer": a + b}, "category": "word"}
      for a, b in [(2, 5), (11, 6), (40, 3), (8, 8)]),
]


class Boxed:
    """A task answered as ``\\boxed{N}`` (one box, the right N), the convention of TRL's documented example."""

    name = "boxed"
    categories = ("arithmetic", "word")

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        boxes = re.findall(r"\\boxed\{(.*?)\}", reply)
        return float(len(boxes) == 1 and boxes[0].strip() == str(case["answer"]))


class Think(Boxed):
    """The same task, reasoned inside ``<think></think>`` first (what ``think_format_reward`` checks)."""

    name = "think"

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        shape = re.fullmatch(r"<think>\n?.+?\n?</think>\n?(.*)", reply.strip(), re.DOTALL)
        return super().score(shape.group(1), case) if shape else 0.0

    def honest_replies(self, case: Mapping[str, Any]) -> Any:
        from hypothesis import strategies as st

        return st.just(f"<think>\nAdding gives {case['answer']}.\n</think>\n\\boxed{{{case['answer']}}}")


def reward_func(completions, ground_truth, **kwargs):
    """TRL's documented custom reward (standard-format dataset): the content of the first ``\\boxed{}``."""
    matches = [re.search(r"\\boxed\{(.*?)\}", completion) for completion in completions]
    contents = [match.group(1) if match else "" for match in matches]
    return [1.0 if c == gt else 0.0 for c, gt in zip(contents, ground_truth)]


def test_trls_think_format_reward_is_called_as_grpo_calls_it_and_its_format_pay_is_found():
    """``think_format_reward(completions, **kwargs)`` reads ``completion[0]["content"]``: a positional call with
    plain strings raised a TypeError. Called right, it pays the think format whatever the answer: a wrong
    answer in the honest form is paid like the right one."""
    result = probe_reward(trl_rewards.think_format_reward, env=Think(), items=ITEMS, max_examples=20,
                          database=None)
    assert result.reward_name == "think_format_reward"
    wrong = result.finding("wrong_value", "arithmetic")
    assert wrong.pays and (wrong.original_score, wrong.hacked_score) == (1.0, 1.0)
    assert Think().score(wrong.example.hacked, {"answer": 7}) == 0.0 and "<think>" in wrong.example.hacked


def test_the_documented_reward_func_gets_its_ground_truth_column_by_name():
    """``reward_func(completions, ground_truth, **kwargs)``: called positionally it read the prompts as completions
    and reported no hack; by keyword, with the column mapped from the case, it is probed for what it is."""
    with pytest.raises(UsageError, match=r"needs 'ground_truth', which no dataset column provides.*"
                                         r"columns=\{'ground_truth': 'answer'\}"):
        probe_reward(reward_func, env=Boxed(), items=ITEMS, database=None, conversational=False)
    result = probe_reward(reward_func, env=Boxed(), items=ITEMS, max_examples=20, database=None,
                          conversational=False, columns={"ground_truth": lambda case: str(case["answer"])})
    trailing = result.finding("trailing_text", "arithmetic")  # the first box is read: a second answer is free
    assert trailing.pays and trailing.example.hacked.startswith(trailing.example.original)
    assert Boxed().score(trailing.example.hacked, {"answer": 7}) == 0.0
    assert result.finding("wrong_value", "arithmetic").n_paid == 0  # a wrong boxed answer earns nothing


def test_a_case_field_is_a_column_under_its_own_name():
    seen: list[dict[str, Any]] = []

    def reward(prompts, completions, answer, completion_ids, trainer_state, log_extra, log_metric, **kwargs):
        seen.append({"prompts": prompts, "completions": completions, "answer": answer, "ids": completion_ids,
                     "kwargs": kwargs, "step": trainer_state.global_step})
        log_extra("note", ["x"] * len(completions))
        log_metric("probe", 1.0)
        return [float(str(a) in c[0]["content"]) for a, c in zip(answer, completions)]

    probe_reward(reward, env=Boxed(), items=ITEMS, hacks=["padding"], max_examples=5, database=None)
    call = seen[0]
    assert call["prompts"][0] == [{"role": "user", "content": call["prompts"][0][0]["content"]}]
    assert call["completions"][0][0]["role"] == "assistant" and isinstance(call["answer"][0], int)
    assert call["ids"][0] == list(call["completions"][0][0]["content"].encode())  # no tokenizer: UTF-8 bytes
    assert set(call["kwargs"]) == {"case", "category", "scenario_id"} and call["step"] == 0
    assert all(len(v) == len(call["completions"]) for v in call["kwargs"].values())


@pytest.mark.parametrize(
    ("reward", "match"),
    [
        (lambda prompts, completions: [0.0] * len(completions),
         r"takes no \*\*kwargs, but GRPOTrainer passes completion_ids, trainer_state, log_extra, log_metric"),
        (lambda prompts, completions, /, **kw: [0.0] * len(completions), r"takes 'prompts' positionally only"),
        (lambda completions, solution, **kw: [0.0] * len(completions), r"needs 'solution'"),
    ],
)
def test_a_signature_trls_call_cannot_satisfy_is_refused_in_one_line(reward, match):
    with pytest.raises(UsageError, match=match) as info:
        probe_reward(reward, env=Boxed(), items=ITEMS, database=None)
    assert "\n" not in str(info.value)


def test_none_skips_the_example_as_trl_skips_it():
    """TRL turns None into NaN and leaves the completion out of its group: the probe leaves the example out."""
    def picky(completions, **kwargs):  # scores boxed answers only, and any box alike
        return [float("\\boxed" in c[0]["content"]) if "\\boxed" in c[0]["content"] else None for c in completions]

    result = probe_reward(picky, env=Think(), items=ITEMS, max_examples=10, database=None,
                          hacks=["non_answer", "wrong_value"])
    assert result.finding("non_answer", "arithmetic").n == 0  # every polite non-answer skipped, none scored
    assert result.finding("wrong_value", "arithmetic").pays  # any box is paid


def len_reward(completions: Sequence[Any], solution: Sequence[str], **kwargs: Any) -> list[float]:
    """open-r1's ``len_reward`` (Kimi 1.5's length penalty), its correctness read by string equality here
    (open-r1 parses with math_verify): each reward depends on the shortest and longest of the batch."""
    contents = [completion[0]["content"] for completion in completions]
    correctness = [content.strip().endswith(f"\\boxed{{{sol}}}") for content, sol in zip(contents, solution)]
    lengths = [len(content) for content in contents]
    min_len, max_len = min(lengths), max(lengths)
    if max_len == min_len:
        return [0.0] * len(completions)
    rewards = []
    for length, is_correct in zip(lengths, correctness):
        lambda_val = 0.5 - (length - min_len) / (max_len - min_len)
        rewards.append(float(lambda_val if is_correct else min(0, lambda_val)))
    return rewards


def test_a_group_relative_reward_is_scored_in_whole_groups_and_reproduces():
    """Scored in whatever batch the cache left, len_reward's findings changed with what was asked before; each
    reply is now scored inside one fixed group of the prompt's typical replies, so they do not."""

    columns = {"solution": lambda case: str(case["answer"])}
    kwargs: dict[str, Any] = {"env": Think(), "items": ITEMS, "max_examples": 15, "database": None,
                              "columns": columns}
    alone = probe_reward(len_reward, hacks=["whitespace"], **kwargs)
    after = probe_reward(len_reward, **kwargs)

    def timeless(findings: Sequence[Any]) -> list[Any]:
        return [dataclasses.replace(f, seconds=0.0) for f in findings]

    assert timeless(alone.findings) == timeless([f for f in after.findings if f.hack == "whitespace"])
    call = reward_call(len_reward, "auto", load_env(Think()), columns=columns)
    group = ["Happy to help.", "I cannot answer that.", "\\boxed{1}"]
    honest = "<think>\nx\n</think>\n\\boxed{7}"
    first = _Scorer(call, lambda item: group)(ITEMS[0], [honest])
    assert call.group_relative is True
    warmed = _Scorer(call, lambda item: group)
    warmed(ITEMS[0], ["a much longer wrong reply, which moved the batch's longest length before"])
    assert warmed(ITEMS[0], [honest]) == first


def test_an_async_trl_reward_is_awaited():
    async def reward(completions, **kwargs):
        return [float("\\boxed" in c[0]["content"]) for c in completions]

    result = probe_reward(reward, env=Think(), items=ITEMS, hacks=["wrong_value"], max_examples=5, database=None)
    assert result.finding("wrong_value", "arithmetic").pays


def test_the_probe_never_creates_hypothesis_folder_in_the_working_directory(pytester, monkeypatch):
    """Hypothesis' unconfigured database is ``.hypothesis/`` where it was imported; the probe keeps its examples
    in rlgate's cache instead, unless that folder is already there or the settings name another database."""
    cache = pytester.path / "cache"
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(cache))
    pytester.makepyfile(
        """
        from pytest_rlgate import probe_reward
        from pytest_rlgate.envs.refund import score

        def test_probe():
            found = probe_reward(score, env="refund", hacks=["second_call"], categories=["with_id"], max_examples=5)
            assert found.hacks == ("second_call",)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".hypothesis").exists()
    assert any((cache / "hypothesis").rglob("*"))
    (pytester.path / ".hypothesis").mkdir()  # the user's own Hypothesis folder: used as Hypothesis would
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert any((pytester.path / ".hypothesis").rglob("*"))
