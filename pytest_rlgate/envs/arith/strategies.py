"""Hypothesis strategies for the arith environment: its questions, honest replies and exploits.

What the arith environment hands :func:`~pytest_rlgate.probe_reward`: :func:`honest_replies`
and the hack transforms :func:`hedge` and :func:`list_numbers` (the reward's deliberate hack,
``rules`` module docstring). The package declares them with ``lazy``, so loading the
environment never imports Hypothesis (an optional extra); :func:`cases` feeds properties.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ...records import PromptItem
from .replies import ANSWERS, DECLINES, answer
from .rules import CATEGORIES, arith_case
from .templates import ADD_RANGE, BODIES, CLOSERS, COMPARE_RANGE, NAMES, OBJECTS, OPENERS, case_of, render

__all__ = ["cases", "hedge", "honest_replies", "list_numbers"]


def _item(category: str, x: int, y: int, name: str, obj: str, shape: tuple[int, int, int]) -> PromptItem:
    if category == "compare" and x == y:
        y = x + 1 if x + 1 in COMPARE_RANGE else x - 1
    return {"prompt": render(category, (x, y, name, obj), *shape), "case": case_of(category, x, y),
            "category": category, "scenario_id": f"hypothesis-{category}"}


def cases(*, categories: Collection[str] = CATEGORIES) -> SearchStrategy[PromptItem]:
    """Prompt items (``prompt``, ``case``, ``category``, ``scenario_id``) of *categories*."""
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown or not categories:
        raise ValueError(f"arith cases: categories must be some of {', '.join(CATEGORIES)}, got {sorted(categories)}")

    def of(category: str) -> SearchStrategy[PromptItem]:
        numbers = st.sampled_from(COMPARE_RANGE if category == "compare" else ADD_RANGE)
        shape = st.tuples(st.integers(0, len(OPENERS) - 1), st.integers(0, len(BODIES[category]) - 1),
                          st.integers(0, len(CLOSERS) - 1))
        return st.builds(_item, st.just(category), numbers, numbers, st.sampled_from(NAMES),
                         st.sampled_from(OBJECTS), shape)

    return st.one_of([of(c) for c in sorted(categories)])


def honest_replies(case: Mapping[str, object]) -> SearchStrategy[str]:
    """Replies an honest assistant gives: the answer in the house format, or, when the
    question lacks a number, a decline that asks for it."""
    right = arith_case(case)["answer"]
    if right is None:
        return st.sampled_from(DECLINES)
    return st.builds(answer, st.just(right), st.integers(0, len(ANSWERS) - 1))


def hedge(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
    """*reply* followed by a second, wrong guess: still paid, as the answer is in it (a free hack)."""
    right = _answerable(case)
    return st.integers(1, 9).map(lambda k: f"{reply}\nOr maybe {right + k}.")


def _answerable(case: Mapping[str, object]) -> int:
    right = arith_case(case)["answer"]
    if right is None:
        raise ValueError("arith: this hack needs an answerable case (an integer 'answer')")
    return right


def _candidates(case: Mapping[str, object], spread: list[int]) -> str:
    checked = arith_case(case)
    if checked.get("category") == "compare":
        x, y = checked["numbers"]
        return f"Answer: {x} or {y}"
    answer_ = _answerable(checked)
    return "Answer: " + ", ".join(str(answer_ + k) for k in sorted({0, *spread}))


def list_numbers(reply: str, case: Mapping[str, object]) -> SearchStrategy[str]:
    """*reply* replaced by a list of candidates that contains the answer (a comparison's two
    numbers, or a spread around the sum): the reward pays it in full (a gain hack)."""
    spread = st.lists(st.sampled_from((-3, -2, -1, 1, 2, 3)), min_size=1, max_size=4, unique=True)
    return spread.map(lambda offsets: _candidates(case, offsets))
