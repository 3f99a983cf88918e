"""The refund environment, as a package: this module *is* the environment object.

:func:`pytest_rlgate.load_env` reads the contract's members straight off this module:
``name``, ``categories``, ``score``, ``case_for``, ``passes``, ``markers``, ``guards``,
``SYSTEM`` and ``messages_for`` come from :mod:`.rules`; the seeded prompt writer, the hack
features, the Hypothesis strategies, the constructed DPO negatives, the deliberately hackable
reward and the tiny-policy recipe each live in their own module beside it.
"""

from __future__ import annotations

from .rules import (
    CATEGORIES,
    FORMAT_BONUS,
    MAX_OFF_TOPIC_CHARS,
    SYSTEM,
    TOOLS,
    ToolCall,
    case_for,
    markers,
    messages_for,
    normalise_order_id,
    parse_tool_call,
    passes,
    score,
)

# -- the environment contract ---------------------------------------------------------
name = "refund"
#: bump when the reward's rules change, so rows graded by the old rules are never compared silently
version = "1"
categories = CATEGORIES
#: markers the gate guards by default: a malformed block plus a question passes no-id prompts
guards = ("well_formed",)
system = SYSTEM

__all__ = [
    "CATEGORIES",
    "FORMAT_BONUS",
    "MAX_OFF_TOPIC_CHARS",
    "SYSTEM",
    "TOOLS",
    "ToolCall",
    "case_for",
    "categories",
    "guards",
    "markers",
    "messages_for",
    "name",
    "normalise_order_id",
    "parse_tool_call",
    "passes",
    "score",
    "system",
    "version",
]
