"""A user's own tool environment, written from docs/environments.md alone: an airline's
rebooking agent with ``get_booking`` / ``rebook`` over four categories.

Nothing in it names rlgate's tasks: an ``environment_factory`` in TRL's shape, an episode
score and a guarded marker, prompts from a file (:func:`write_airline_prompts`). Its system
prompt and two tool schemas render to about 790 tokens through Qwen2.5's tool template with
a tokenizer that has never seen them, more than a 512-position tiny policy holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BOOKINGS = {f"BK-{100 + i}": {"flight": f"LH{400 + 2 * i}", "status": "cancelled" if i % 2 else "on_time",
                              "alternatives": [f"LH{401 + 2 * i}"] if i % 2 else []} for i in range(12)}


class Desk:
    def reset(self, **case: Any) -> None:
        self.bookings = json.loads(json.dumps(BOOKINGS))
        self.rebooked: tuple[str, str] | None = None

    def get_booking(self, booking_id: str) -> str:
        """Look up a booking by its id.

        Args:
            booking_id: The booking reference, e.g. BK-100.
        """
        found = self.bookings.get(booking_id)
        return json.dumps(found if found else {"error": "no such booking"})

    def rebook(self, booking_id: str, flight: str) -> str:
        """Move a booking to another flight.

        Args:
            booking_id: The booking reference.
            flight: The flight number to move it to, one of the booking's alternatives.
        """
        found = self.bookings.get(booking_id)
        if not found or flight not in found["alternatives"]:
            return json.dumps({"error": "cannot rebook"})
        self.rebooked = (booking_id, flight)
        return json.dumps({"ok": True, "flight": flight})


class Airline:
    name = "airline"
    version = "1"
    categories = ("cancelled", "on_time", "unknown", "off_topic")
    system = ("You are the rebooking assistant of an airline. Look the booking up with get_booking before you "
              "answer; rebook only a cancelled flight, and only onto one of the alternatives the booking lists. "
              "Never invent a booking id; ask for it when the customer gives none.")
    environment_factory = Desk
    max_turns = 3
    guards = ("grounded",)

    def score(self, episode: Any, case: dict[str, Any]) -> float:
        booking = case.get("booking_id")
        looked = any(c.arguments.get("booking_id") == booking for c in episode.calls("get_booking"))
        if case["category"] == "cancelled":
            return 1.0 if looked and any(c.arguments.get("booking_id") == booking for c in episode.calls("rebook")) \
                else 0.0
        if case["category"] == "on_time":
            return 1.0 if looked and not episode.calls("rebook") else 0.0
        return 1.0 if not episode.tool_calls and "?" in episode.final + "?" * (case["category"] == "off_topic") \
            else 0.0

    def markers(self, episode: Any, case: dict[str, Any]) -> dict[str, float]:
        grounded = all(c.arguments.get("booking_id") == case.get("booking_id") for c in episode.tool_calls)
        return {"grounded": float(grounded)}


_ASKS = {"cancelled": "My flight {id} was cancelled, can you move me to another one?",
         "on_time": "Is my flight {id} still on time, or do I need to rebook?",
         "unknown": "My flight was cancelled, please rebook me.",
         "off_topic": "What is the weather like in Lisbon today?"}


def airline_items() -> list[dict[str, Any]]:
    """Prompt items: every booking in its category, two phrasings each, plus the unanswerable ones."""
    items = []
    for booking, record in BOOKINGS.items():
        category = record["status"] if record["status"] == "on_time" else "cancelled"
        for suffix in ("", " Thanks!"):
            items.append({"prompt": _ASKS[category].format(id=booking) + suffix, "category": category,
                          "case": {"category": category, "booking_id": booking}, "scenario_id": booking})
    for category in ("unknown", "off_topic"):
        for i in range(4):
            items.append({"prompt": _ASKS[category] + f" ({i})", "category": category,
                          "case": {"category": category, "booking_id": None}, "scenario_id": f"{category}-{i}"})
    return items


def write_airline_prompts(path: Path) -> Path:
    path.write_text("".join(json.dumps(item, sort_keys=True) + "\n" for item in airline_items()), encoding="utf-8")
    return path
