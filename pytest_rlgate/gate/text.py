"""Text for gate results: aligned tables (tabulate) for the CLI, pytest failures and summaries.

Kept apart from :mod:`pytest_rlgate.gate.adapter` so the statistics read without formatting noise.
Everything renders from the JSON shape (``GateResult.to_dict()``), as
:mod:`~pytest_rlgate.gate.recipe_text` does for a recipe: the CLI, the pytest summary (which
receives results from xdist workers as JSON) and a run's ``gate.json`` show the same rows, and
this module needs nothing of :mod:`~pytest_rlgate.gate.result`.
Conventions : count line first, then the settings that
reproduce the run, the rows, the rule, and the remedy last; signed deltas, three decimals,
no numpy reprs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from .family import FamilyTest
from .flips import Flip
from .numtext import interval
from .options import METHOD_NAMES
from .record import from_record
from .verdicts import BORDERLINE, MIN_UNITS, VERDICTS, verdict_word

#: a gate result's ``to_dict()`` and one of its comparisons: what every face renders
GateRecord = Mapping[str, Any]
ComparisonRecord = Mapping[str, Any]

__all__ = ["blind_lines", "blind_text", "comparison_row", "flip_headings", "interval_heading", "is_borderline",
           "plan_hint", "render_failure", "render_flips", "render_report", "render_table", "settings_line",
           "summary_line", "units_label"]

HEADERS = ("metric", "group", "units×k", "before", "after", "delta", "{level}", "MDE", "verdict", "flags")
REMEDY = (
    "Remedy: find what the fine-tune broke in the failing groups (rebalance the training prompts, "
    "e.g. `rlgate train --balance 0.25`, or fix the reward), retrain and gate the new candidate once; "
    "re-sampling until the gate passes hides real regressions."
)
#: flags that describe a comparison without making it worth a look on their own
_QUIET_FLAGS = ("constant", "no variation")


def is_borderline(verdict: str, flags: Iterable[str]) -> bool:
    """Shown without -v: failing or undecided verdicts, or a flag such as "within noise"."""
    return verdict in BORDERLINE or any(f not in _QUIET_FLAGS for f in flags)


def settings_line(result: GateRecord) -> str:
    """The method, the level and the family: enough to reproduce the intervals from the output alone."""
    resamples = "" if result["method"] == "t" else f", {result['n_resamples']} resamples"
    if result["family"] is None:
        level = f": {result['confidence_level']:.0%} CI, each comparison on its own"
    else:
        family = from_record(FamilyTest, result["family"])
        level = f"; {family.describe()}: an unchanged run fails at most {family.level:.0%}"
    return (f"{METHOD_NAMES[result['method']]} of per-{result['unit']} deltas{level}{resamples}; "
            f"seed {result['seed']}, margin {result['margin']:.2f}")


def interval_heading(result: GateRecord) -> str:
    """``95% CI``, or the two-sided level of the family's intervals (``98.9% CI``)."""
    levels = {c["level"] for c in result["comparisons"] if c["level"] is not None}
    if result["family"] is None or len(levels) != 1:
        return f"{result['confidence_level']:.0%} CI" if result["family"] is None else "CI"
    return f"{1 - 2 * levels.pop():.1%} CI"


def units_label(n_units: int, k: object, k_before: object = None, k_after: object = None) -> str:
    """``15×4``; ``15×4→8`` when the sides sampled a different k (before → after)."""
    if k_before is None or k_before == k_after:
        return f"{n_units}×{k}"
    return f"{n_units}×{k_before}→{k_after}"


def comparison_row(c: ComparisonRecord) -> list[str]:
    return [
        c["metric"],
        c["group"],
        units_label(c["n_units"], c["k"], c["k_before"], c["k_after"]),
        f"{c['before']:.3f}",
        f"{c['after']:.3f}",
        f"{c['delta']:+.3f}",
        interval(c["low"], c["high"]),
        "" if c["mde"] is None else f"{c['mde']:.3f}",
        verdict_word(c["verdict"], c["failure"] is not None),
        ", ".join([*([c["tier"]] if c["tier"] else []), *c["flags"]]),
    ]


def _table(result: GateRecord, comparisons: Sequence[ComparisonRecord]) -> str:
    headers = [h.format(level=interval_heading(result)) for h in HEADERS]
    rows = [comparison_row(c) for c in comparisons]
    return str(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True,
                    colalign=("left", "left", "right", "right", "right", "right", "left", "right", "left", "left")))


def render_table(result: GateRecord, *, verbose: bool = True) -> str:
    shown = [c for c in result["comparisons"] if verbose or is_borderline(c["verdict"], c["flags"])]
    return _table(result, shown) if shown else "(no regressed or borderline comparisons)"


def summary_line(result: GateRecord) -> str:
    counts: dict[str, int] = {}
    for c in result["comparisons"]:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    tally = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v))
    failures = len(result["failures"])
    word = "PASSED" if result["passed"] else f"FAILED ({failures} failure{'s' if failures != 1 else ''})"
    return f"gate {word}: {len(result['comparisons'])} comparisons: {tally}"


def _named(groups: Sequence[str]) -> str:
    return ", ".join(groups[:4]) + (f" and {len(groups) - 4} more" if len(groups) > 4 else "")


def within_noise(c: Mapping[str, Any]) -> bool:
    """A gain the base runs' spread took back: its interval lies above 0, the noise floor made it inconclusive."""
    return c["verdict"] == "inconclusive" and "within noise" in c["flags"] and (c["low"] or 0) > 0


def plan_hint(result: GateRecord) -> str | None:
    """Why ``inconclusive`` verdicts are, and where they lead, or None: a gain no larger than the
    base runs differ from each other (the noise floor: more base runs, not more scenarios), or an
    interval too wide (``rlgate plan`` on the before rows says how many scenarios would do)."""
    comparisons = result["comparisons"]
    noise = list(dict.fromkeys(c["group"] for c in comparisons if within_noise(c)))
    wide = list(dict.fromkeys(c["group"] for c in comparisons
                              if c["verdict"] == "inconclusive" and not within_noise(c)))
    before = result["sides"]["before"] or "BEFORE.jsonl"
    before = "BEFORE.jsonl" if str(before).startswith("<") else before
    margin = result["margin"]
    hints = []
    if noise:
        hints.append(f"inconclusive in {_named(noise)}: a gain no larger than the base runs differ from each other "
                     "(the noise floor), so it is not claimed as a move; more scenarios do not change that")
    if wide:
        hints.append(f"inconclusive in {_named(wide)}: too few scenarios to tell a drop of {margin:.2f} from "
                     f"noise; `rlgate plan {before} --drop {margin:.2f}` says how many each category needs")
    return "\n".join(hints) or None


def flip_headings(comparisons: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, bool]]:
    """(index, heading, repeated) for each comparison with flips, as text and Markdown print them.

    The heading says how many scenarios are shown of how many, how many lost at all, and
    ties at the cut; a comparison whose flips are the same scenarios as an earlier one's in
    its group (a guard that broke with pass@1) is *repeated*: its heading says so and its
    list is not printed again.
    """
    out = []
    seen: dict[tuple[str, tuple[str, ...]], str] = {}
    for at, c in enumerate(comparisons):
        flips = c.get("flips") or ()
        if not flips:
            continue
        units = tuple(f["unit"] for f in flips)
        head = f"flips in {c['metric']} {c['group']} ({c['verdict']}): "
        earlier = seen.get((c["group"], units))
        if earlier is not None:
            out.append((at, head + f"the same {len(units)} scenario{'s' if len(units) != 1 else ''} as {earlier}",
                        True))
            continue
        seen[(c["group"], units)] = c["metric"]
        lost, tied = int(c.get("lost") or len(flips)), int(c.get("tied") or 0)
        text = f"the {len(flips)} of {c['n_units']} scenarios that lost the most"
        if lost > len(flips):
            text += f" ({lost} lost"
            text += f"; {tied} more lost as much as the last shown)" if tied else ")"
        out.append((at, head + text + ", before -> after", False))
    return out


def render_flips(result: GateRecord) -> list[str]:
    """Every comparison's flips: a heading per comparison, then each scenario with its replies."""
    lines: list[str] = []
    comparisons = result["comparisons"]
    for at, heading, repeated in flip_headings(comparisons):
        lines += ["", heading]
        if not repeated:
            for flip in comparisons[at]["flips"]:
                lines += Flip.from_dict(flip).lines()
    return lines


def _shown_path(path: str) -> str:
    """*path* relative to the current folder when it lies under it (what a reader would type), else as it is."""
    try:
        return str(Path(path).relative_to(Path.cwd())) if Path(path).is_absolute() else path
    except ValueError:
        return path


def blind_text(blind: Mapping[str, Any], before: str = "BEFORE.jsonl") -> str:
    """``no_id (3 scenarios x 4) sees a 0.20 drop with 31% power, not 80%: `rlgate plan ...```: a
    :class:`~.result.Blind`'s record, for the result, its failure message and pytest's summary."""
    before = "BEFORE.jsonl" if not before or before.startswith("<") else _shown_path(before)
    n, drop = blind["n_units"], blind["drop"]
    size = f"{n} scenario{'s' if n != 1 else ''} x {blind['k']:g}"
    if n < MIN_UNITS:
        seen = f"too few for any verdict, let alone a {drop:.2f} drop"
    else:
        seen = f"sees a {drop:.2f} drop with {blind['power']:.0%} power, not 80%"
    rule = f" [{blind['decided_by']}]" if blind.get("decided_by") else ""
    return (f"{blind['category']} ({size}) {seen}: `rlgate plan {before} --drop {drop:.2f}` says how many "
            f"scenarios it needs{rule}")


def blind_lines(result: GateRecord) -> list[str]:
    """``BLIND: no_id (3 scenarios x 4) sees a 0.20 drop ...``: a category whose holdout cannot fail on
    the drop it is for, said before anything else (:mod:`.sees`)."""
    before = str(result["sides"]["before"] or "")
    return [f"BLIND: {blind_text(b, before)}" for b in result.get("blind") or ()]


def render_report(result: GateRecord, *, verbose: bool = True) -> str:
    lines = [summary_line(result), *blind_lines(result), settings_line(result), "",
             render_table(result, verbose=verbose)]
    lines += render_flips(result)
    lines += ["", f"rule: {result['rule']}"]
    hint = plan_hint(result)
    if hint:
        lines.append(hint)
    lines += [f"warning: {w}" for w in result["warnings"]]
    lines += [f"FAIL: {f}" for f in result["failures"]]
    return "\n".join(lines)


def render_failure(result: GateRecord) -> str:
    """The :class:`RegressionError` text: what failed (each comparison by its own judgement), the rule, the remedy."""
    comparisons = result["comparisons"]
    failing = sorted((c for c in comparisons if c["failure"] is not None), key=lambda c: c["delta"])
    regressed = [c for c in failing if c["failure"]["kind"] == "regressed"]
    head = f"{len(regressed)} of {len(comparisons)} comparisons regressed"
    if regressed:
        head += ": " + ", ".join(f"{c['metric']} in {c['group']}" for c in regressed[:4])
        head += f" and {len(regressed) - 4} more" if len(regressed) > 4 else ""
    # under a release policy every failure names the line that decided it: list them all
    policy = any(c["decided_by"] for c in comparisons)
    listed = list(result["failures"]) if policy else [*result["side_failures"], *(
        c["failure"]["text"] for c in failing if c["failure"]["kind"] != "regressed")]
    if listed:
        many = "s" if len(listed) != 1 else ""
        head += f"; {len(listed)} failure{many} under the release policy" if policy else \
            f"; {len(listed)} other failure{many}"
    lines = [head, *blind_lines(result), settings_line(result)]
    if failing:
        lines += ["", _table(result, failing)]
    lines += render_flips(result)
    if listed:
        lines += [""] + [f"- {f}" for f in listed]
    rest = len(comparisons) - len(failing)
    lines += ["", f"rule: {result['rule']}",
              f"{rest} other comparison{'s' if rest != 1 else ''} did not fail (result.table() lists every one)."]
    hint = plan_hint(result)
    if hint:
        lines.append(hint)
    lines.append(REMEDY)
    return "\n".join(lines)
