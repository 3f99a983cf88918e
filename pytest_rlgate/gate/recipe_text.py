"""Text for recipe gates: the recipe table with per-seed dots, the per-seed table, failures.

Everything renders from the JSON shape (``RecipeGateResult.to_dict()``), because the CLI,
the pytest terminal summary (which receives results from xdist workers as JSON) and the run
reports (which read ``recipe.json``) all show the same rows. Conventions are
:mod:`pytest_rlgate.gate.text`'s: count line first, then the settings, the rows, the rule
and the remedy; signed deltas, three decimals.

Each recipe row carries a dot strip: every seed's own delta as a dot on one line with the
recipe interval ``[──]`` and zero ``|``, so a reader sees at a glance whether the seeds
agree (dots together) or one seed carries the verdict (one dot far from the others).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tabulate import tabulate

from .numtext import interval
from .options import METHOD_NAMES
from .text import REMEDY, is_borderline, units_label
from .verdicts import BORDERLINE, RECIPE_VERDICTS, verdict_word

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    #: a recipe result's ``to_dict()`` and one of its comparisons: what every recipe face renders
    RecipeRecord = Mapping[str, Any]
    RecipeComparisonRecord = Mapping[str, Any]

__all__ = ["DOTS_LEGEND", "render_failure", "render_report", "render_seeds", "render_table", "seed_dots",
           "seeds_cell", "settings_line", "summary_line", "worth_a_look"]

#: characters in a dot strip: enough to tell seeds 0.05 apart on a typical ±0.4 row
DOTS_WIDTH = 21
DOTS_LEGEND = ("per-seed Δ: ● one seed's delta (a digit: that many seeds at one point), [──] the recipe "
               "interval, | zero; each row on its own scale")
HEADERS = ("metric", "group", "units×k", "seeds", "before", "after", "delta", "{level} CI", "MDE", "per-seed Δ",
           "verdict", "regressed", "flags")
SEED_HEADERS = ("metric", "group", "seed", "delta", "{level} CI", "MDE", "verdict")


def seed_dots(deltas: Sequence[float], low: float | None = None, high: float | None = None, *,
              width: int = DOTS_WIDTH) -> str:
    """Each seed's *deltas* as a dot on a *width*-character line with the interval and zero.

    The line spans the dots, zero and the interval (when there is one), so every mark is
    on it; coinciding seeds show as their count.
    """
    points = [*deltas, 0.0, *((low, high) if low is not None and high is not None else ())]
    lo, span = min(points), max(points) - min(points)

    def at(x: float) -> int:
        return width // 2 if span == 0 else round((x - lo) / span * (width - 1))

    cells = [" "] * width
    if low is not None and high is not None:
        left, right = at(low), at(high)
        cells[left:right + 1] = "─" * (right - left + 1)
        cells[at(0.0)] = "|"
        cells[left], cells[right] = "[", "]"
    else:
        cells[at(0.0)] = "|"
    for where, count in Counter(at(d) for d in deltas).items():
        cells[where] = "●" if count == 1 else str(min(count, 9))
    return "".join(cells)


def _dots(c: RecipeComparisonRecord) -> str:
    return seed_dots([s["delta"] for s in c["seeds"]], c.get("low"), c.get("high"))


def seeds_cell(c: RecipeComparisonRecord) -> str:
    """The dot strip and "regressed in k of S seeds" of one recipe comparison (the terminal summary's cell)."""
    return f"{_dots(c)} {c['seeds_line']}"


def _ci(low: float | None, high: float | None) -> str:
    return interval(low, high)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def worth_a_look(c: RecipeComparisonRecord) -> bool:
    """Shown without verbose: an undecided recipe, one any seed regressed on, or a flag."""
    return c["verdict"] in BORDERLINE or c["regressed_seeds"] > 0 or is_borderline(c["verdict"], c["flags"])


def _level(result: RecipeRecord) -> str:
    family = result.get("family")
    return f"{result['confidence_level']:.0%}" if not family else f"{1 - 2 * family['marginal']:.1%}"


def _row(c: RecipeComparisonRecord) -> list[str]:
    return [c["metric"], c["group"], units_label(c["n_units"], c["k"], c.get("k_before"), c.get("k_after")),
            str(c["n_seeds"]), f"{c['before']:.3f}", f"{c['after']:.3f}", f"{c['delta']:+.3f}",
            _ci(c.get("low"), c.get("high")), _num(c.get("mde")), _dots(c),
            verdict_word(c["verdict"], c.get("failure") is not None),
            f"{c['regressed_seeds']} of {c['n_seeds']}", ", ".join(c["flags"])]


def _table(result: RecipeRecord, comparisons: Sequence[RecipeComparisonRecord]) -> str:
    """The rows, the dots' legend and, once each, why a verdict is unresolved or insufficient."""
    headers = [h.format(level=_level(result)) for h in HEADERS]
    table = tabulate([_row(c) for c in comparisons], headers=headers, tablefmt="simple", disable_numparse=True,
                     colalign=("left", "left", "right", "right", "right", "right", "right", "left", "right", "left",
                               "left", "right", "left"))
    reasons = dict.fromkeys((c["verdict"], c["reason"]) for c in comparisons if c.get("reason"))
    return "\n".join([table, DOTS_LEGEND, *(f"{verdict}: {reason}" for verdict, reason in reasons)])


def render_table(result: RecipeRecord, *, verbose: bool = True) -> str:
    """The recipe table (every comparison, or only those worth a look) and the dots' legend."""
    shown = [c for c in result["comparisons"] if verbose or worth_a_look(c)]
    if not shown:
        return "(no regressed or borderline recipe comparisons)"
    return _table(result, shown)


def render_seeds(result: RecipeRecord, *, verbose: bool = True) -> str:
    """Every seed gated on its own, under the recipe rows it belongs to."""
    rows = [[c["metric"], c["group"], str(s["seed"]), f"{s['delta']:+.3f}", _ci(s.get("low"), s.get("high")),
             _num(s.get("mde")), verdict_word(s["verdict"], s["verdict"] == "regressed")]
            for c in result["comparisons"] if verbose or worth_a_look(c) for s in c["seeds"]]
    if not rows:
        return "(no seed to show)"
    return str(tabulate(rows, headers=[h.format(level=_level(result)) for h in SEED_HEADERS], tablefmt="simple",
                    disable_numparse=True, colalign=("left", "left", "right", "right", "left", "right", "left")))


def summary_line(result: RecipeRecord) -> str:
    counts = Counter(c["verdict"] for c in result["comparisons"])
    tally = ", ".join(f"{counts[v]} {v}" for v in RECIPE_VERDICTS if counts.get(v))
    n = len(result["failures"])
    word = "PASSED" if result["passed"] else f"FAILED ({n} failure{'s' if n != 1 else ''})"
    seeds = ", ".join(map(str, result["seeds"]))
    return (f"recipe gate {word} over {len(result['seeds'])} training seed{'s' if len(result['seeds']) != 1 else ''} "
            f"({seeds}): {len(result['comparisons'])} comparisons: {tally}")


def settings_line(result: RecipeRecord) -> str:
    """How the intervals were made: the recipe's, and each seed's own (enough to reproduce them)."""
    resamples = "" if result["method"] == "t" else f", {result['n_resamples']} resamples"
    family = result.get("family")
    held = "" if not family else (f"; {family['members']} comparisons held together by Bonferroni, each at one-sided "
                                  f"{family['marginal']:.2%}: an unchanged recipe fails at most {family['level']:.0%}")
    return (f"recipe: mean over seeds of per-{result['unit']} paired deltas, {_level(result)} CI "
            f"{result['recipe_method']}; each seed alone: {METHOD_NAMES[result['method']]}{resamples}, "
            f"seed {result['seed']}; margin {result['margin']:.2f}{held}")


def render_report(result: RecipeRecord, *, verbose: bool = True) -> str:
    lines = [summary_line(result), settings_line(result), "", render_table(result, verbose=verbose), "",
             "each seed on its own:", render_seeds(result, verbose=verbose), "", f"rule: {result['rule']}"]
    lines += [f"warning: {w}" for w in result["warnings"]]
    lines += [f"FAIL: {f}" for f in result["failures"]]
    return "\n".join(lines)


def render_failure(result: RecipeRecord) -> str:
    """The RegressionError text: what failed, each failing row's seeds, the rule and the remedy."""
    counted = sorted((c for c in result["comparisons"] if c.get("failure")), key=lambda c: c["delta"])
    head = f"{len(counted)} of {len(result['comparisons'])} recipe comparisons failed"
    if counted:
        head += ": " + ", ".join(f"{c['metric']} in {c['group']} ({c['seeds_line']})" for c in counted[:4])
        head += f" and {len(counted) - 4} more" if len(counted) > 4 else ""
    others = [*result["side_failures"], *(c["failure"]["text"] for c in counted
                                          if c["failure"]["kind"] not in ("regressed", "max_drop"))]
    if others:
        head += f"; {len(others)} other failure{'s' if len(others) != 1 else ''}"
    lines = [head, settings_line(result)]
    if counted:
        lines += ["", _table(result, counted), "", "each seed on its own:",
                  render_seeds({**result, "comparisons": counted})]
    if others:
        lines += [""] + [f"- {f}" for f in others]
    rest = len(result["comparisons"]) - len(counted)
    lines += ["", f"rule: {result['rule']}",
              f"{rest} other comparison{'s' if rest != 1 else ''} did not fail (result.table() lists every one).",
              REMEDY]
    return "\n".join(lines)
