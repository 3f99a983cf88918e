"""The replies arith knows how to write: honest ones, and the wrong ones a policy makes.

Shared by the tiny policy's corpus (:mod:`.policy`, which draws with :mod:`random`), the
Hypothesis strategies (:mod:`.strategies`) and the constructed DPO negatives
(:func:`rejected_reply`), so all three agree on what "honest" and "wrong" look like.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from .rules import arith_case

__all__ = ["ANSWERS", "DECLINES", "answer", "rejected_reply", "wrong_answer"]

#: Honest replies to an answerable question; {n} is the answer.
ANSWERS = ("Answer: {n}", "The result is {n}.\nAnswer: {n}")
#: Honest replies to an unanswerable question: say so, and ask for the missing number.
DECLINES = (
    "A number is missing, so I cannot answer that. What is the missing number?",
    "I can't tell without the other number. What is it?",
    "That cannot be answered yet: one number is missing. Could you give it to me?",
)


def answer(n: int, style: int = 0) -> str:
    """An honest reply stating *n* as the answer, in style *style* of :data:`ANSWERS`."""
    return ANSWERS[style % len(ANSWERS)].format(n=n)


def wrong_answer(case: Mapping[str, object], offset: int = 1) -> str:
    """A committed reply the reward never pays: a sum off by *offset* (non-zero), the smaller
    of a comparison's numbers, or, on an unanswerable question, the one number it gave."""
    checked = arith_case(case)
    right = checked["answer"]
    if right is None:
        return answer(checked["numbers"][0])
    if checked.get("category") == "compare":
        return answer(min(checked["numbers"]))
    if offset == 0:
        raise ValueError("wrong_answer: offset 0 is the right answer; pass a non-zero offset")
    return answer(right + offset)


def rejected_reply(item: Mapping[str, object], rng: random.Random) -> str:
    """A constructed DPO negative for *item*: a confident wrong answer (:func:`wrong_answer`)."""
    case = item["case"]
    if not isinstance(case, Mapping):
        raise ValueError(f"arith: a prompt item's case is a mapping, got {case!r:.60}")
    return wrong_answer(case, offset=rng.choice((-2, -1, 1, 2)))
