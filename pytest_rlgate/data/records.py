"""The records that flow between the parts: prompt items, cases, markers and graded rows.

They stay plain dicts on disk and in memory (a row file is one JSON object per line and a
user's code builds rows by hand), so they are :class:`~typing.TypedDict`\\ s, not classes:
the type checker sees the fields, nothing pays for a conversion. A value is one of these
only after the door that reads it (:func:`~pytest_rlgate.data.rows.validate_row`, the prompt
set's loader, a harness reader) has checked it; before that it is ``object``.

Functions that only read records take ``Sequence`` / ``Iterable`` / ``Mapping`` of them, so a
caller's ``list[Row]`` or a :class:`~pytest_rlgate.data.rows.Rows` passes unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, TypedDict

__all__ = ["JSON", "Case", "Header", "JSONObject", "Markers", "PromptItem", "Row", "Turn"]

#: a value that JSON can carry
JSON: TypeAlias = "str | int | float | bool | None | list[JSON] | dict[str, JSON]"
JSONObject = dict[str, JSON]

#: what a reply is scored against: the environment's own fields (an order id, the right
#: answer, ...). Generic code passes it through without reading it; the environment that
#: wrote it reads it (and may narrow it with a TypedDict of its own).
Case = Mapping[str, object]

#: per-reply measurements by name (``0``/``1`` flags or numbers), summed per category by the gate
Markers = dict[str, float]

#: the provenance header of a row file (who graded and sampled the rows)
Header = dict[str, object]


class _PromptItemRequired(TypedDict):
    prompt: str
    category: str


class PromptItem(_PromptItemRequired, total=False):
    """One prompt of a prompt set: what the policy is asked, and what it is scored against.

    A checked item's ``scenario_id`` is a string (the prompt loader fills a missing one with
    the folded prompt text); a row's may be null.
    """

    scenario_id: str
    case: Case


class Turn(TypedDict, total=False):
    """One message of an episode's transcript, in the chat-template shape."""

    role: str
    content: str
    tool_calls: list[dict[str, object]]
    name: str
    tool_call_id: str


class _RowRequired(TypedDict):
    prompt: str
    category: str
    rollout_index: int
    reply: str
    score: float
    reward: int
    markers: Markers


class Row(_RowRequired, total=False):
    """One graded reply: the input of every gate.

    ``scenario_id`` clusters rows for the bootstrap (rows without one are clustered by
    prompt); ``case`` lets a changed reward re-score a stored reply; an episode's row adds
    its transcript and counts.
    """

    scenario_id: str | None
    case: Case
    policy: str
    sample_seed: int
    eval_run: int | str
    transcript: list[Turn]
    n_turns: int
    n_tool_calls: int
    stop: str
    turn_markers: list[Markers]
