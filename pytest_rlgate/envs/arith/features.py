"""The arith environment's reply features for ``hack_scan`` and the HackMonitor.

What an arith reward can be paying for: how many integers a reply names (the deliberate hack
pays for more of them), whether it ends in the house ``Answer: N`` line, whether it declines
and whether it asks. ``endorsed`` in the package says which of these each category wants.
"""

from __future__ import annotations

from .rules import asks, declines, in_format, integers

__all__ = ["features"]


def features(reply: str) -> dict[str, float]:
    """``integers`` (how many), ``answer_line``, ``declines`` and ``asks``."""
    return {
        "integers": float(len(integers(reply))),
        "answer_line": float(in_format(reply) and not declines(reply)),
        "declines": float(declines(reply)),
        "asks": float(asks(reply)),
    }
