"""Text for gate results: aligned tables (tabulate) for the CLI, pytest failures and summaries.

Kept apart from :mod:`pytest_rlgate.gate.adapter` so the statistics read without formatting noise.
Conventions : count line first, then the settings that
reproduce the run, the rows, the rule, and the remedy last; signed deltas, three decimals,
no numpy reprs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tabulate import tabulate

from .numtext import interval
from .options import METHOD_NAMES
from .verdicts import VERDICTS

if TYPE_CHECKING:  # pragma: no cover
    from .result import Comparison, GateResult

__all__ = ["comparison_row", "is_borderline", "plan_hint", "render_failure", "render_flips", "render_report",
           "render_table", "settings_line", "summary_line", "units_label"]

HEADERS = ("metric", "group", "units×k", "before", "after", "delta", "{level} CI", "MDE", "verdict", "flags")
REMEDY = (
    "Remedy: find what the fine-tune broke in the failing groups (rebalance the training prompts, "
    "e.g. `rlgate train --balance 0.25`, or fix the reward), retrain and gate the new candidate once; "
    "re-sampling until the gate passes hides real regressions."
)
_BORDERLINE = ("regressed", "inconclusive", "insufficient")
#: flags that describe a comparison without making it worth a look on their own
_QUIET_FLAGS = ("constant", "no variation")


def is_borderline(verdict: str, flags: Iterable[str]) -> bool:
    """Shown without -v: failing or undecided verdicts, or a flag such as "within noise"."""
    return verdict in _BORDERLINE or any(f not in _QUIET_FLAGS for f in flags)


def settings_line(result: GateResult) -> str:
    resamples = "" if result.method == "t" else f", {result.n_resamples} resamples"
    return (
        f"{METHOD_NAMES[result.method]} of per-{result.unit} deltas: {result.confidence_level:.0%} CI"
        f"{resamples}, seed {result.seed}, margin {result.margin:.2f}, Holm {'on' if result.holm else 'off'}"
    )


def units_label(n_units: int, k: object, k_before: object = None, k_after: object = None) -> str:
    """``15×4``; ``15×4→8`` when the sides sampled a different k (before → after)."""
    if k_before is None or k_before == k_after:
        return f"{n_units}×{k}"
    return f"{n_units}×{k_before}→{k_after}"


def _ci(c: Comparison) -> str:
    return interval(c.low, c.high)


def comparison_row(c: Comparison) -> list[str]:
    return [
        c.metric,
        c.group,
        units_label(c.n_units, c.k, c.k_before, c.k_after),
        f"{c.before:.3f}",
        f"{c.after:.3f}",
        f"{c.delta:+.3f}",
        _ci(c),
        "" if c.mde is None else f"{c.mde:.3f}",
        c.verdict.upper() if c.verdict == "regressed" and c.tier != "advisory" else c.verdict,
        ", ".join([*([c.tier] if c.tier else []), *c.flags]),
    ]


def _table(result: GateResult, comparisons: list[Comparison]) -> str:
    headers = [h.format(level=f"{result.confidence_level:.0%}") for h in HEADERS]
    rows = [comparison_row(c) for c in comparisons]
    return str(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True,
                    colalign=("left", "left", "right", "right", "right", "right", "left", "right", "left", "left")))


def render_table(result: GateResult, *, verbose: bool = True) -> str:
    shown = [c for c in result.comparisons if verbose or is_borderline(c.verdict, c.flags)]
    return _table(result, shown) if shown else "(no regressed or borderline comparisons)"


def summary_line(result: GateResult) -> str:
    counts: dict[str, int] = {}
    for c in result.comparisons:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    tally = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v))
    failures = len(result.failures)
    word = "PASSED" if result.passed else f"FAILED ({failures} failure{'s' if failures != 1 else ''})"
    return f"gate {word}: {len(result.comparisons)} comparisons: {tally}"


def plan_hint(result: GateResult) -> str | None:
    """Where an ``inconclusive`` verdict leads: ``rlgate plan`` on the before rows, or None."""
    groups = list(dict.fromkeys(c.group for c in result.comparisons if c.verdict == "inconclusive"))
    if not groups:
        return None
    before = result.options.get("before") or "BEFORE.jsonl"
    before = "BEFORE.jsonl" if str(before).startswith("<") else before
    shown = ", ".join(groups[:4]) + (f" and {len(groups) - 4} more" if len(groups) > 4 else "")
    return (f"inconclusive in {shown}: too few scenarios to tell a drop of {result.margin:.2f} from noise; "
            f"`rlgate plan {before} --drop {result.margin:.2f}` says how many each category needs")


def render_flips(result: GateResult) -> list[str]:
    """Every comparison's flips: a heading per comparison, then each scenario with its replies."""
    lines: list[str] = []
    for c in result.comparisons:
        if not c.flips:
            continue
        lines += ["", f"flips in {c.metric} {c.group} ({c.verdict}): the {len(c.flips)} scenario"
                      f"{'s' if len(c.flips) != 1 else ''} that lost the most, before -> after"]
        for flip in c.flips:
            lines += flip.lines()
    return lines


def render_report(result: GateResult, *, verbose: bool = True) -> str:
    lines = [summary_line(result), settings_line(result), "", render_table(result, verbose=verbose)]
    lines += render_flips(result)
    lines += ["", f"rule: {result.rule}"]
    hint = plan_hint(result)
    if hint:
        lines.append(hint)
    lines += [f"warning: {w}" for w in result.warnings]
    lines += [f"FAIL: {f}" for f in result.failures]
    return "\n".join(lines)


def render_failure(result: GateResult) -> str:
    failing = sorted((c for c in result.comparisons if c.verdict == "regressed" and c.tier != "advisory"),
                     key=lambda c: c.delta)
    # under a release policy every failure names the line that decided it: list them all
    policy = any(c.decided_by for c in result.comparisons)
    named = " ".join(result.failures)
    below = [c for c in result.comparisons if c.verdict != "regressed" and (
        "below -max_drop" in c.flags or policy and c.tier != "advisory" and f"{c.metric} in {c.group}" in named)]
    counted = failing + below
    head = f"{len(failing)} of {len(result.comparisons)} comparisons regressed"
    if failing:
        head += ": " + ", ".join(f"{c.metric} in {c.group}" for c in failing[:4])
        head += f" and {len(failing) - 4} more" if len(failing) > 4 else ""
    others = [f for f in result.failures if policy or " regressed in " not in f]
    if policy:
        head += f"; {len(others)} failure{'s' if len(others) != 1 else ''} under the release policy"
    elif others:
        head += f"; {len(others)} other failure{'s' if len(others) != 1 else ''}"
    lines = [head, settings_line(result)]
    if counted:
        lines += ["", _table(result, counted)]
    lines += render_flips(result)
    if others:
        lines += [""] + [f"- {f}" for f in others]
    rest = len(result.comparisons) - len(counted)
    lines += ["", f"rule: {result.rule}",
              f"{rest} other comparison{'s' if rest != 1 else ''} did not fail (result.table() lists every one)."]
    hint = plan_hint(result)
    if hint:
        lines.append(hint)
    lines.append(REMEDY)
    return "\n".join(lines)
