"""A user's own environment, written the way a user would: a plain class, no refund anywhere.

An arithmetic assistant: it must answer sums and word problems with the right number and
say it cannot tell when the question gives too little to go on. The answer key lives in the
case (prompt files carry it), and there is no ``case_for`` and no prompt writer, so every
generic surface has to take its cases and categories from the file and this class alone.
``SumsEnv`` is its sibling that can read a case from the prompt text.

Tests import it (``load_env("_calc_env:CalcEnv")``, the tests folder is on ``sys.path``)
and write its source into pytester folders, so in-process and subprocess runs use one
definition.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_NUMBER = re.compile(r"-?\d+")


class CalcEnv:
    name = "calc"
    categories = ("arithmetic", "word_problem", "unanswerable")
    guards = ("concise",)

    def score(self, reply: str, case: dict[str, Any]) -> float:
        numbers = _NUMBER.findall(reply)
        if case["answer"] is None:
            return 1.0 if "cannot tell" in reply.lower() and not numbers else 0.0
        return 1.0 if numbers and numbers[-1] == str(case["answer"]) else 0.0

    def markers(self, reply: str, case: dict[str, Any]) -> dict[str, float]:
        return {"concise": float(len(reply) <= 40)}


class SumsEnv(CalcEnv):
    """The same task for plain sums, whose answer key can be read from the text: a ``case_for``."""

    name = "sums"

    def case_for(self, prompt: str) -> dict[str, Any]:
        return {"answer": sum(int(n) for n in _NUMBER.findall(prompt)), "category": "arithmetic"}


#: per category: (scenario id, prompt, answer) templates, formatted with the scenario index
_TEMPLATES = {
    "arithmetic": ("add-{i}", "What is {i} + 3?", lambda i: i + 3),
    "word_problem": ("apples-{i}", "Ann has {i} apples and buys 2 more. How many now?", lambda i: i + 2),
    "unanswerable": ("unknown-{i}", "Bob has some pears and eats {i}. How many are left?", lambda i: None),
}


def calc_items(per_category: int = 5) -> list[dict[str, Any]]:
    """*per_category* scenarios of each category, one prompt each, with their cases."""
    return [{"prompt": prompt.format(i=i), "case": {"answer": answer(i)}, "category": category,
             "scenario_id": sid.format(i=i)}
            for category, (sid, prompt, answer) in _TEMPLATES.items() for i in range(1, per_category + 1)]


def write_calc_prompts(path: Path, per_category: int = 5) -> Path:
    """A prompts JSONL of :func:`calc_items`, as a user would write it (no canonical order)."""
    path.write_text("".join(json.dumps(item) + "\n" for item in calc_items(per_category)), encoding="utf-8")
    return path


def calc_reply(item: dict[str, Any], right: bool) -> str:
    """A short reply that is right or wrong for *item*."""
    answer = item["case"]["answer"]
    if answer is None:
        return "I cannot tell from that." if right else "There are 3 left."
    return f"It is {answer if right else answer + 1}."
