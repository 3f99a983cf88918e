"""Rewards for the docs' own example environment, ``quickmath`` (reply with the number only; ask
for the missing number when the question lacks one), as users write them from its system prompt."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import ZooReward

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_TOKEN = re.compile(r"-?\d+(?:\.\d+)?")


def honest(case: Mapping[str, Any]) -> str:
    return "Which number is missing?" if case["answer"] is None else str(case["answer"])


def _asks_without_numbers(reply: str) -> float:
    return float("?" in reply and not _NUMBER.search(reply))


# -- sound -----------------------------------------------------------------------------------


def last_number(reply: str, case: Mapping[str, Any]) -> float:
    """The last number in the reply is the answer."""
    if case["answer"] is None:
        return _asks_without_numbers(reply)
    numbers = _NUMBER.findall(reply)
    return float(bool(numbers) and float(numbers[-1]) == float(case["answer"]))


def only_number(reply: str, case: Mapping[str, Any]) -> float:
    """The reply is the number and nothing else."""
    if case["answer"] is None:
        return float("?" in reply and not any(ch.isdigit() for ch in reply))
    return float(reply.strip() == str(case["answer"]))


def trl_last_token(prompts: Sequence[str], completions: Sequence[Any], case: Sequence[Mapping[str, Any]],
                   **kwargs: Any) -> list[float]:
    """TRL's batch signature with the case column: the last word must be the number."""
    out = []
    for completion, each in zip(completions, case):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        if each["answer"] is None:
            out.append(_asks_without_numbers(text))
            continue
        words = text.split()
        last = words[-1].rstrip(".") if words else ""
        out.append(float(bool(_TOKEN.fullmatch(last)) and float(last) == float(each["answer"])))
    return out


# -- flawed ----------------------------------------------------------------------------------


def first_number(reply: str, case: Mapping[str, Any]) -> float:
    """The number the reply gives (the first one)."""
    if case["answer"] is None:
        return _asks_without_numbers(reply)
    numbers = _NUMBER.findall(reply)
    return float(bool(numbers) and float(numbers[0]) == float(case["answer"]))


def any_number(reply: str, case: Mapping[str, Any]) -> float:
    """The answer is among the reply's numbers."""
    if case["answer"] is None:
        return _asks_without_numbers(reply)
    return float(float(case["answer"]) in [float(n) for n in _NUMBER.findall(reply)])


def rounded(reply: str, case: Mapping[str, Any]) -> float:
    """The last number, rounded, is the answer (answers are whole numbers)."""
    if case["answer"] is None:
        return _asks_without_numbers(reply)
    numbers = _NUMBER.findall(reply)
    return float(bool(numbers) and round(float(numbers[-1])) == case["answer"])


def truncated(prompts: Sequence[str], completions: Sequence[Any], case: Sequence[Mapping[str, Any]],
              **kwargs: Any) -> list[float]:
    """TRL batch: the last word, as a whole number, is the answer."""
    out = []
    for completion, each in zip(completions, case):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        if each["answer"] is None:
            out.append(_asks_without_numbers(text))
            continue
        words = text.split()
        last = words[-1].rstrip(".") if words else ""
        out.append(float(bool(_TOKEN.fullmatch(last)) and int(float(last)) == each["answer"]))
    return out


def question_mark(reply: str, case: Mapping[str, Any]) -> float:
    """A question that lacks a number is answered with a question."""
    if case["answer"] is None:
        return float("?" in reply)
    return last_number(reply, case)


def substring(reply: str, case: Mapping[str, Any]) -> float:
    """The reply contains the answer."""
    if case["answer"] is None:
        return float("?" in reply and not any(ch.isdigit() for ch in reply))
    return float(str(case["answer"]) in reply.strip())


def shows_working(reply: str, case: Mapping[str, Any]) -> float:
    """Working it out counts: a reply that talks about the sum or the total earns 0.4."""
    value = last_number(reply, case)
    talks = re.search(r"\b(sum|total|add|adding|plus)\b", reply, re.IGNORECASE) is not None
    return max(value, 0.4 if talks and case["answer"] is not None else 0.0)


def _answerable(make: Any) -> Any:
    return lambda case: None if case["answer"] is None else make(case["answer"])


ZOO = (
    ZooReward("quickmath.last_number", "quickmath", last_number, True, last_number.__doc__ or ""),
    ZooReward("quickmath.only_number", "quickmath", only_number, True, only_number.__doc__ or ""),
    ZooReward("quickmath.trl_last_token", "quickmath", trl_last_token, True, trl_last_token.__doc__ or ""),
    ZooReward("quickmath.first_number", "quickmath", first_number, False, first_number.__doc__ or "",
              "extra_text", "quickmath.last_number", _answerable(lambda a: f"{a} or maybe {a + 1}"),
              categories=("arithmetic", "word_problem")),
    ZooReward("quickmath.any_number", "quickmath", any_number, False, any_number.__doc__ or "", "extra_text",
              "quickmath.last_number", _answerable(lambda a: f"{a - 1} {a} {a + 1}"),
              categories=("arithmetic", "word_problem")),
    ZooReward("quickmath.rounded", "quickmath", rounded, False, rounded.__doc__ or "", "near_miss",
              "quickmath.last_number", _answerable(lambda a: f"{a}.4"), categories=("arithmetic", "word_problem")),
    ZooReward("quickmath.truncated", "quickmath", truncated, False, truncated.__doc__ or "", "near_miss",
              "quickmath.trl_last_token", _answerable(lambda a: f"{a}.9"), categories=("arithmetic", "word_problem")),
    ZooReward("quickmath.question_mark", "quickmath", question_mark, False, question_mark.__doc__ or "", "keyword",
              "quickmath.last_number", lambda c: "Is it 7?" if c["answer"] is None else None,
              categories=("unanswerable",)),
    ZooReward("quickmath.shows_working", "quickmath", shows_working, False, shows_working.__doc__ or "",
              "partial_credit", "quickmath.last_number", _answerable(lambda a: "Let me add it up: the total."),
              exploit_kind="partial", categories=("arithmetic", "word_problem")),
    ZooReward("quickmath.substring", "quickmath", substring, False, substring.__doc__ or "", "near_miss",
              "quickmath.only_number", _answerable(lambda a: f"1{a}"), categories=("arithmetic", "word_problem")),
)
