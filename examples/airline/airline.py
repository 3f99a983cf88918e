"""An airline's rebooking agent: a tool environment written from docs/environments.md alone.

``get_booking`` / ``rebook`` on a fresh ``Desk`` per episode (TRL's ``environment_factory``
shape), four categories, an episode score and one guarded marker; the prompts, with their
cases, are in ``prompts.jsonl`` beside this file. ``rlgate policy build --env airline:Airline
--prompts-file examples/airline/prompts.jsonl --out tiny-airline/`` builds a tiny agent for it.
"""

from __future__ import annotations

import json
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
        if case["category"] == "cancelled":  # looked up, then moved onto one of its alternatives
            moved = any(c.arguments.get("booking_id") == booking and json.loads(c.result).get("ok")
                        for c in episode.calls("rebook"))
            return 1.0 if looked and moved else 0.0
        if case["category"] == "on_time":
            return 1.0 if looked and not episode.calls("rebook") else 0.0
        if case["category"] == "unknown":  # no id given: the right move is to ask for it, calling nothing
            return 1.0 if not episode.tool_calls and "?" in episode.final else 0.0
        return 0.0 if episode.tool_calls else 1.0  # off_topic: no booking to touch

    def markers(self, episode: Any, case: dict[str, Any]) -> dict[str, float]:
        grounded = all(c.arguments.get("booking_id") == case.get("booking_id") for c in episode.tool_calls)
        return {"grounded": float(grounded)}
