"""Whether each category's holdout can see the drop the gate is for, by ``rlgate plan``'s figures.

A gate over 3 no-id scenarios passes a policy that invented an order id on every one of them
as readily as an honest one: its interval is too wide to fall below 0 (or, under 3 scenarios,
it is ``insufficient``). The verdict says ``inconclusive``; what it does not say is that the
test could never have failed on the drop it exists for. So every gate asks, per category, the
question ``rlgate plan`` answers: with these scenarios (their pass rates and reply noise, from
the before side) and the after side's replies per scenario, how often would the gate's own
test, at the level it gave this comparison, call a drop of ``sees_drop`` (0.20 by default:
the README's no-id 0.95 -> 0.75) ``regressed``? Under 80 % the category is *blind* to it: the
result says so above its table, pytest's summary repeats it, and a release policy rule
``sees_drop: D`` makes it a failure for the categories it names.

A category whose verdict is ``regressed`` saw a drop and is never blind; one whose pass rate
is at or below the drop cannot fall by it and is not asked; an advisory one never fails and
is not asked either. Rewards are read as passes (the sum of squares is the sum), which is exact
for rlgate's own rows and overstates the reply noise of a fractional score, so the power is
never overstated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .options import GateOptions
from .plan import DEFAULT_POWER, power_today
from .release import Decision
from .result import Blind, Comparison
from .sides import Paired, Side
from .verdicts import MIN_UNITS

__all__ = ["blind_categories"]


def blind_categories(before: Side, after: Side, comparisons: Sequence[Comparison],
                     decisions: Mapping[tuple[str, str], Decision], opts: GateOptions) -> tuple[Blind, ...]:
    """Every category whose pass@1 holdout sees its drop (the policy rule's ``sees_drop``, else
    ``opts.sees_drop``) with under :data:`~.plan.DEFAULT_POWER`, in the comparisons' order."""
    out = []
    for c in comparisons:
        if c.metric != "pass@1" or c.group == "overall" or c.verdict == "regressed":
            continue
        decision = decisions[(c.metric, c.group)]
        drop = decision.sees_drop if decision.sees_drop is not None else opts.sees_drop
        if drop is None or not decision.can_fail or c.before <= drop:
            continue
        rule = decision.where if decision.sees_drop is not None else None
        if c.n_units < MIN_UNITS or c.level is None:
            out.append(Blind(c.group, c.n_units, c.k, drop, 0.0, rule))
            continue
        paired = Paired.of(before, after, [c.group])
        units = {str(at): {"": [sums[0], sums[2], sums[2]]} for at, sums in enumerate(paired.before.tolist())}
        power = power_today(units, drop, c.level, opts.method if opts.method in ("t", "expanded") else "t",
                            rows=float(paired.after[:, 0].mean()))
        if power is not None and power < DEFAULT_POWER:
            out.append(Blind(c.group, c.n_units, c.k, drop, power, rule))
    return tuple(out)
