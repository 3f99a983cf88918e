"""The multi-turn refund environment's prompts: refund's seeded scenarios, re-read by the order book.

The customer's message is the same as in ``refund``; what changes is what the agent finds
when it looks the order up. A with-id scenario whose order the book marks non-refundable
becomes ``not_refundable``: the prompt alone cannot tell the two apart, only the lookup's
result can, which is exactly what a one-turn gate never sees.
"""

from __future__ import annotations

from ...environment.seeded import dedupe
from ...records import PromptItem
from ..refund.templates import PROMPT_SIZES, build_prompts as refund_prompts
from .rules import case_for

__all__ = ["PROMPT_SIZES", "build_prompts"]


def build_prompts(seed: int = 0, size: str = "default") -> list[PromptItem]:
    """Refund's seeded prompt set with cases read by :func:`.rules.case_for` (same seeds, same texts)."""
    out: list[PromptItem] = []
    for item in refund_prompts(seed=seed, size=size):
        case = case_for(item["prompt"])
        category, scenario = str(case["category"]), str(item["scenario_id"])
        if category != item["category"]:
            scenario = category + scenario.removeprefix(item["category"])
        out.append({**item, "case": case, "category": category, "scenario_id": scenario})
    return dedupe(out)
