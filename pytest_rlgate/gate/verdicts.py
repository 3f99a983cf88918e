"""The gate's verdicts: the one place that turns an interval into a word.

Every comparison (one adapter's, a recipe's across seeds, a single seed's inside a recipe)
speaks this vocabulary, so a reader learns it once and the rules cannot drift apart.
"""

from __future__ import annotations

__all__ = ["MIN_UNITS", "RECIPE_VERDICTS", "VERDICTS", "interval_verdict"]

#: in the order a summary counts them: what fails first, what passed last
VERDICTS: tuple[str, ...] = ("regressed", "inconclusive", "insufficient", "flat", "moved")
#: the gate's verdicts plus "unresolved": a recipe trained at one seed only
RECIPE_VERDICTS: tuple[str, ...] = ("regressed", "inconclusive", "insufficient", "unresolved", "flat", "moved")
#: fewer units than this cannot support an interval: the verdict is ``insufficient``
MIN_UNITS = 3


def interval_verdict(low: float, high: float, margin: float) -> str:
    """The verdict for an interval: regressed (below 0), moved (above 0), flat (inside ±margin),
    else inconclusive (covers 0 and wider than the margin: too few units to tell)."""
    if high < 0:
        return "regressed"
    if low > 0:
        return "moved"
    if -margin <= low and high <= margin:
        return "flat"
    return "inconclusive"
