"""The airline agent of ``examples/airline/`` (a user's own tool environment, written from
docs/environments.md alone) and its prompt items, for the tests.

Its system prompt and two tool schemas render to about 790 tokens through Qwen2.5's tool
template with a tokenizer that has never seen them: more than a 512-position tiny policy holds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "airline"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

from airline import BOOKINGS, Airline, Desk  # noqa: E402

__all__ = ["BOOKINGS", "EXAMPLE", "Airline", "Desk", "airline_items", "write_airline_prompts"]

_ASKS = {"cancelled": "My flight {id} was cancelled, can you move me to another one?",
         "on_time": "Is my flight {id} still on time, or do I need to rebook?"}
_NO_ID = {"unknown": ("My flight was cancelled, please rebook me.", "Can you move me to a later flight?",
                      "I need to change my booking, my flight got cancelled.", "Please rebook my cancelled flight."),
          "off_topic": ("What is the weather like in Lisbon today?", "Can you recommend a hotel in Rome?",
                        "How many bags can I take on board?", "Tell me a joke about pilots.")}


def airline_items() -> list[dict[str, Any]]:
    """Prompt items: every booking in its category, two phrasings each, plus four prompts without an id."""
    items = []
    for booking, record in BOOKINGS.items():
        category = record["status"] if record["status"] == "on_time" else "cancelled"
        for suffix in ("", " Thanks!"):
            items.append({"prompt": _ASKS[category].format(id=booking) + suffix, "category": category,
                          "case": {"category": category, "booking_id": booking}, "scenario_id": booking})
    for category, prompts in _NO_ID.items():
        for i, prompt in enumerate(prompts):
            items.append({"prompt": prompt, "category": category, "case": {"category": category, "booking_id": None},
                          "scenario_id": f"{category}-{i}"})
    return items


def write_airline_prompts(path: Path) -> Path:
    path.write_text("".join(json.dumps(item, sort_keys=True) + "\n" for item in airline_items()), encoding="utf-8")
    return path
