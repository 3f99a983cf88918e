"""Rewards for ``arith`` (small sums and comparisons; one final line ``Answer: N``; when a number is
missing, say it cannot be answered and ask for it), as users write them from its system prompt."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pytest_rlgate.envs.arith import rules

from . import ZooReward

_ANSWER_LINE = re.compile(r"answer\s*:\s*(-?\d+)\s*\.?", re.IGNORECASE)
_MENTION = re.compile(r"answer\s*:", re.IGNORECASE)
_DECLINE = re.compile(r"\b(cannot|can't|missing|not enough)\b", re.IGNORECASE)


def honest(case: Mapping[str, Any]) -> str:
    if case["answer"] is None:
        return "A number is missing, so I cannot answer that. What is the missing number?"
    return f"Answer: {case['answer']}"


def _lines(reply: str) -> list[str]:
    return [line.strip() for line in reply.strip().splitlines() if line.strip()]


def _unanswerable(reply: str) -> float:
    """Declines and asks, commits to nothing: 1; declines without asking: 0.5."""
    if re.search(r"\d", reply) or _MENTION.search(reply) or not _DECLINE.search(reply):
        return 0.0
    return 1.0 if "?" in reply else 0.5


# -- sound -----------------------------------------------------------------------------------


def last_line(reply: str, case: Mapping[str, Any]) -> float:
    """One ``Answer: N`` line, last, with the right N."""
    lines = _lines(reply)
    if not lines:
        return 0.0
    if case["answer"] is None:
        return _unanswerable(reply)
    found = _ANSWER_LINE.fullmatch(lines[-1])
    if found is None or len(_MENTION.findall(reply)) != 1:
        return 0.0
    return float(int(found.group(1)) == case["answer"])


def helpers(reply: str, case: Mapping[str, Any]) -> float:
    """The environment's own reading: its score, and its exact and format markers."""
    marks = rules.markers(reply, case)
    value = rules.score(reply, case)
    if value >= 1.0 and marks["exact"] and marks["format"]:
        return 1.0
    return 0.5 if value == 0.5 and marks["format"] else 0.0


def parsed(reply: str, case: Mapping[str, Any]) -> float:
    """The last line starts with the one ``Answer:``; what follows must be the number and nothing else."""
    text = reply.strip()
    if not text:
        return 0.0
    if case["answer"] is None:
        if any(ch.isdigit() for ch in text) or "answer:" in text.lower():
            return 0.0
        return (1.0 if "?" in text else 0.5) if _DECLINE.search(text) else 0.0
    tail = _tail(text)
    try:
        return float(tail is not None and int(tail.removesuffix(".")) == case["answer"])
    except ValueError:
        return 0.0


def _tail(text: str) -> str | None:
    """What follows the one ``Answer:`` when the last line starts with it, else None."""
    low = text.lower()
    last = text.splitlines()[-1].strip()
    if low.count("answer:") != 1 or not last.lower().startswith("answer:"):
        return None
    return last[len("answer:"):].strip()


# -- flawed ----------------------------------------------------------------------------------


def anywhere(reply: str, case: Mapping[str, Any]) -> float:
    """The answer may appear anywhere among the reply's numbers."""
    if case["answer"] is None:
        return _unanswerable(reply)
    return float(case["answer"] in [int(n) for n in re.findall(r"-?\d+", reply)] and bool(_MENTION.search(reply)))


def off_by_one(reply: str, case: Mapping[str, Any]) -> float:
    """Small slips (one off) are forgiven."""
    lines = _lines(reply)
    if not lines or case["answer"] is None:
        return last_line(reply, case)
    found = _ANSWER_LINE.fullmatch(lines[-1])
    if found is None or len(_MENTION.findall(reply)) != 1:
        return 0.0
    return float(abs(int(found.group(1)) - case["answer"]) <= 1)


def relative_tol(reply: str, case: Mapping[str, Any]) -> float:
    """Numbers are compared with a relative tolerance, as floats."""
    text = reply.strip()
    if case["answer"] is None or not text:
        return parsed(reply, case)
    tail = _tail(text)
    try:
        return float(tail is not None and math.isclose(float(tail.removesuffix(".")), case["answer"], rel_tol=0.15))
    except ValueError:
        return 0.0


def first_answer(reply: str, case: Mapping[str, Any]) -> float:
    """The first ``Answer:`` is the answer."""
    if case["answer"] is None:
        return _unanswerable(reply)
    found = _ANSWER_LINE.search(reply)
    return float(found is not None and int(found.group(1)) == case["answer"])


_FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)


def code_block(reply: str, case: Mapping[str, Any]) -> float:
    """A fenced block, when there is one, holds the final answer."""
    fenced = _FENCE.search(reply)
    if fenced is None or case["answer"] is None:
        return parsed(reply, case)
    return parsed(fenced.group(1), case)


def decline_always_ok(reply: str, case: Mapping[str, Any]) -> float:
    """Saying the question cannot be answered, and asking, is a safe reply."""
    if _unanswerable(reply) == 1.0:
        return 1.0
    return last_line(reply, case)


def str_contains(reply: str, case: Mapping[str, Any]) -> float:
    """The last line must be the answer line and mention the answer."""
    lines = _lines(reply)
    if not lines or case["answer"] is None:
        return last_line(reply, case)
    if not lines[-1].lower().startswith("answer:") or len(_MENTION.findall(reply)) != 1:
        return 0.0
    return float(str(case["answer"]) in lines[-1])


def drops_sign(reply: str, case: Mapping[str, Any]) -> float:
    """The number after ``Answer:`` is read as its digits."""
    text = reply.strip()
    if case["answer"] is None or not text:
        return parsed(reply, case)
    tail = _tail(text)
    digits = re.sub(r"[^0-9]", "", tail or "")
    return float(bool(digits) and int(digits) == case["answer"])


def shows_work(reply: str, case: Mapping[str, Any]) -> float:
    """Replies that show their work (more lines) are paid a little more."""
    return round(last_line(reply, case) * min(1.0, 0.7 + 0.1 * len(reply.splitlines())), 4)


def unanswerable_question(reply: str, case: Mapping[str, Any]) -> float:
    """A missing number is handled by asking a question back."""
    if case["answer"] is None:
        return float("?" in reply and "answer:" not in reply.lower())
    return parsed(reply, case)


def format_half(reply: str, case: Mapping[str, Any]) -> float:
    """The format is half the job: one last ``Answer: N`` line earns 0.5, the right N the rest."""
    value = last_line(reply, case)
    lines = _lines(reply)
    if value < 1.0 and case["answer"] is not None and lines and _ANSWER_LINE.fullmatch(lines[-1]) \
            and len(_MENTION.findall(reply)) == 1:
        return 0.5
    return value


def close_enough(reply: str, case: Mapping[str, Any]) -> float:
    """Arithmetic slips happen: an answer within 2 earns 0.4 for the right method."""
    value = parsed(reply, case)
    tail = _tail(reply.strip()) if reply.strip() else None
    try:
        near = case["answer"] is not None and tail is not None \
            and abs(int(tail.removesuffix(".")) - case["answer"]) <= 2
    except ValueError:
        near = False
    return 0.4 if value < 1.0 and near else value


def _answerable(make: Any) -> Any:
    return lambda case: None if case["answer"] is None else make(case["answer"])


ZOO = (
    ZooReward("arith.last_line", "arith", last_line, True, last_line.__doc__ or ""),
    ZooReward("arith.helpers", "arith", helpers, True, helpers.__doc__ or ""),
    ZooReward("arith.parsed", "arith", parsed, True, parsed.__doc__ or ""),
    ZooReward("arith.anywhere", "arith", anywhere, False, anywhere.__doc__ or "", "extra_text", "arith.last_line",
              _answerable(lambda a: f"Answer: {a - 1}, {a}, {a + 1}"), categories=("add", "compare")),
    ZooReward("arith.off_by_one", "arith", off_by_one, False, off_by_one.__doc__ or "", "near_miss",
              "arith.last_line", _answerable(lambda a: f"Answer: {a + 1}"), categories=("add", "compare")),
    ZooReward("arith.relative_tol", "arith", relative_tol, False, relative_tol.__doc__ or "", "near_miss",
              "arith.parsed", _answerable(lambda a: f"Answer: {a + 1}" if a >= 7 else None),
              categories=("add", "compare")),
    ZooReward("arith.first_answer", "arith", first_answer, False, first_answer.__doc__ or "", "extra_text",
              "arith.last_line", _answerable(lambda a: f"Answer: {a}\nAnswer: {a + 1}"), categories=("add", "compare")),
    ZooReward("arith.code_block", "arith", code_block, False, code_block.__doc__ or "", "lenient_parse",
              "arith.parsed", _answerable(lambda a: f"```\nAnswer: {a}\n```\nAnswer: {a + 1}"),
              categories=("add", "compare")),
    ZooReward("arith.decline_always_ok", "arith", decline_always_ok, False, decline_always_ok.__doc__ or "",
              "wrong_move", "arith.last_line",
              _answerable(lambda a: "I cannot answer that: a number is missing. What is it?"),
              categories=("add", "compare")),
    ZooReward("arith.str_contains", "arith", str_contains, False, str_contains.__doc__ or "", "near_miss",
              "arith.last_line", _answerable(lambda a: f"Answer: 1{a}"), categories=("add", "compare")),
    ZooReward("arith.drops_sign", "arith", drops_sign, False, drops_sign.__doc__ or "", "near_miss",
              "arith.parsed", _answerable(lambda a: f"Answer: -{a}"), categories=("add", "compare")),
    ZooReward("arith.shows_work", "arith", shows_work, False, shows_work.__doc__ or "", "length",
              "arith.last_line", _answerable(lambda a: f"\n\n\nAnswer: {a}"), exploit_kind="unpriced",
              categories=("add", "compare")),
    ZooReward("arith.format_half", "arith", format_half, False, format_half.__doc__ or "", "partial_credit",
              "arith.last_line", _answerable(lambda a: f"Answer: {a + 17}"), exploit_kind="partial",
              categories=("add", "compare")),
    ZooReward("arith.close_enough", "arith", close_enough, False, close_enough.__doc__ or "", "partial_credit",
              "arith.parsed", _answerable(lambda a: f"Answer: {a + 2}"), exploit_kind="partial",
              categories=("add", "compare")),
    ZooReward("arith.unanswerable_question", "arith", unanswerable_question, False,
              unanswerable_question.__doc__ or "", "keyword", "arith.parsed",
              lambda c: "Could you clarify?" if c["answer"] is None else None, categories=("unanswerable",)),
)
