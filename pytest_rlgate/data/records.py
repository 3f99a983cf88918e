"""The records every layer passes along, as types: a prompt item, a graded row, a case.

They are the JSON objects of the files (a line of a prompts JSONL, a line of a row file), so
they stay dicts: ``TypedDict`` names their keys for the type checker and for a reader of the
code, and costs nothing at run time. A *case* is the environment's own reading of a prompt
(refund's order id, arith's answer key); generic code only carries it to the environment,
so it is a JSON object whose keys belong to the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = ["Case", "Markers", "PromptItem", "Row"]

#: The environment's reading of one prompt: keys are the task's own (``category`` is common).
Case = Mapping[str, Any]
#: Marker name -> its value on one reply (1/0 flags, or a number the environment defines).
Markers = dict[str, float]


class _PromptRequired(TypedDict):
    prompt: str
    category: str


class PromptItem(_PromptRequired, total=False):
    """One line of a prompts JSONL: the prompt, its category, its scenario and its case."""

    scenario_id: str | None
    case: dict[str, Any]


class _RowRequired(TypedDict):
    prompt: str
    category: str
    rollout_index: int
    reply: str
    score: float
    reward: int
    markers: Markers


class Row(_RowRequired, total=False):
    """One graded reply: one line of a row file, the unit of every gate.

    ``reward`` is pass/fail (1 when the score passes); ``eval_run`` tells the base runs of a
    noise floor apart; ``case`` is what the reply was scored against, so stored replies can be
    re-scored when the reward changes.
    """

    scenario_id: str | None
    case: dict[str, Any]
    policy: str
    sample_seed: int
    eval_run: int | str
