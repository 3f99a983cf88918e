"""Numbers as the gate's tables print them: signed deltas and ``[low, high]`` intervals.

One helper for every table (the gate's text, the pytest summary, run reports, the demo) so
an interval reads the same wherever it is shown; each caller picks the digits, the word for
a missing interval and, for prose, the typographic minus.
"""

from __future__ import annotations

__all__ = ["interval", "signed"]


def signed(x: float | None, digits: int = 3, *, missing: str = "", minus: str = "-") -> str:
    """``+0.123`` / ``-0.045``; *missing* for None; *minus* replaces the ASCII ``-``."""
    if x is None:
        return missing
    text = f"{x:+.{digits}f}"
    return text if minus == "-" else text.replace("-", minus)


def interval(low: float | None, high: float | None, digits: int = 3, *, missing: str = "", minus: str = "-") -> str:
    """``[-0.120, +0.340]``; *missing* when either end is None."""
    if low is None or high is None:
        return missing
    return f"[{signed(low, digits, minus=minus)}, {signed(high, digits, minus=minus)}]"
