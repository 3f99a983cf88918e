"""The multi-turn refund environment's prompts: refund's seeded scenarios, re-read by the order book.

The customer's message is the same as in ``refund``; what changes is what the agent finds
when it looks the order up. A with-id scenario whose order the book marks non-refundable
becomes ``not_refundable``: the prompt alone cannot tell the two apart, only the lookup's
result can, which is exactly what a one-turn gate never sees.
"""

from __future__ import annotations

from typing import Any

from ...environment.seeded import dedupe
from ..refund.templates import PROMPT_SIZES, build_prompts as refund_prompts
from .rules import case_for

__all__ = ["PROMPT_SIZES", "build_prompts"]


def build_prompts(seed: int = 0, size: str = "default") -> list[dict[str, Any]]:
    """Refund's seeded prompt set with cases read by :func:`.rules.case_for` (same seeds, same texts)."""
    out = []
    for item in refund_prompts(seed=seed, size=size):
        case = case_for(item["prompt"])
        scenario = item["scenario_id"]
        if case["category"] != item["category"]:
            scenario = case["category"] + scenario.removeprefix(item["category"])
        out.append({**item, "case": case, "category": case["category"], "scenario_id": scenario})
    return dedupe(out)
