"""The multi-turn refund environment's prompts: refund's seeded scenarios, re-read by the order book.

The customer's message is the same as in ``refund``; what changes is what the agent finds
when it looks the order up. A with-id scenario whose order the book marks non-refundable
becomes ``not_refundable``: the prompt alone cannot tell the two apart, only the lookup's
result can, which is exactly what a one-turn gate never sees.
"""

from __future__ import annotations

from ...environment.seeded import dedupe
from ...errors import UsageError
from ...records import PromptItem
from ..refund.templates import write_set
from .rules import case_for

__all__ = ["PROMPT_SIZES", "build_prompts"]

#: size -> refund category -> (scenarios, prompts): refund's sizes as this environment's stories
#: were measured on (its with-id scenarios split into with_id and not_refundable by the book).
PROMPT_SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "small": {"with_id": (27, 27), "no_id": (7, 7), "off_topic": (6, 6)},
    "default": {"with_id": (95, 95), "no_id": (16, 16), "off_topic": (8, 8)},
    "large": {"with_id": (54, 576), "no_id": (7, 74), "off_topic": (6, 57)},
}


def build_prompts(seed: int = 0, size: str = "default") -> list[PromptItem]:
    """Refund's seeded scenarios with cases read by :func:`.rules.case_for` (same seeds, same texts)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"seed must be an integer, got {seed!r}")
    if size not in PROMPT_SIZES:
        raise UsageError(f"unknown prompt set size {size!r}; use one of {', '.join(PROMPT_SIZES)}")
    out: list[PromptItem] = []
    for item in write_set(seed, PROMPT_SIZES[size]):
        case = case_for(item["prompt"])
        category, scenario = str(case["category"]), str(item["scenario_id"])
        if category != item["category"]:
            scenario = category + scenario.removeprefix(item["category"])
        out.append({**item, "case": case, "category": category, "scenario_id": scenario})
    return dedupe(out)
