"""The gate's verdict as a short Markdown summary, for a pull request or a CI job's summary page.

A reviewer reads a pull request, not a terminal table. The summary is the same
:class:`~pytest_rlgate.GateResult` the terminal text prints (or its ``to_dict()``, as
gate.json and the session report store it), never recomputed: a headline, one line per
category with its interval drawn as a small text bar, the failing ones first and their
flips under them, the rule, and the command that reproduces the verdict. Under CI, GitHub
Actions shows whatever a step appends to ``$GITHUB_STEP_SUMMARY``; :func:`step_summary_path`
says where that is.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from .._io.atomic import atomic_write
from ..errors import UsageError
from ..gate.numtext import interval, signed
from ..gate.options import MARGIN, GateOptions
from ..gate.record import Record, from_record
from ..gate.text import flip_headings
from ..gate.verdicts import ORDER, verdict_word

if TYPE_CHECKING:
    from ..gate.recipe import RecipeGateResult
    from ..gate.result import GateResult

#: a gate's result, or its ``to_dict()`` record (a run's gate.json, a session's report entry)
Gated = Union["GateResult", "RecipeGateResult", Record]

__all__ = ["BAR_WIDTH", "interval_bar", "markdown_summary", "reproduce_command", "step_summary_path",
           "write_markdown"]

#: characters of an interval bar
BAR_WIDTH = 21


def _record(result: Gated) -> Mapping[str, Any]:
    return result if isinstance(result, Mapping) else result.to_dict()


def _scale(comparisons: Sequence[Mapping[str, Any]]) -> float:
    """Half-width of every bar: the widest bound shown, rounded up to a tenth (at least 0.1)."""
    widest = max([abs(float(c[k])) for c in comparisons for k in ("low", "high", "delta") if c.get(k) is not None]
                 or [0.1])
    return max(0.1, min(1.0, math.ceil(round(widest * 100) / 10) / 10))


def interval_bar(low: float | None, high: float | None, delta: float, scale: float, width: int = BAR_WIDTH) -> str:
    """``·····━━━●━━┼·····``: the interval (━) and estimate (●) against zero (┼ inside, │ outside) on ±scale."""

    def at(x: float) -> int:
        return max(0, min(width - 1, round((x + scale) / (2 * scale) * (width - 1))))

    cells = ["·"] * width
    if low is not None and high is not None:
        for i in range(at(low), at(high) + 1):
            cells[i] = "━"
    zero = at(0.0)
    cells[zero] = "┼" if cells[zero] == "━" else "│"
    cells[at(delta)] = "●"
    return "".join(cells)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """An inline code span that survives backticks in the reply."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _shown(comparisons: Sequence[Mapping[str, Any]], failing: set[tuple[str, str]]) -> list[Mapping[str, Any]]:
    """pass@1 in every group; a guarded marker only where it fails or is borderline."""
    rows = [c for c in comparisons if c["metric"] == "pass@1"
            or (c["metric"], c["group"]) in failing or c["verdict"] in ("regressed", "inconclusive")]
    return sorted(rows, key=lambda c: ((c["metric"], c["group"]) not in failing, ORDER.get(c["verdict"], 9),
                                       c["group"] != "overall", c["metric"], c["group"]))


def _failing(record: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The comparisons that failed the gate, as each recorded its own judgement."""
    return {(c["metric"], c["group"]) for c in record["comparisons"] if c.get("failure")}


def reproduce_command(result: Gated) -> str:
    """The ``rlgate gate`` command that reproduces *result*: its sides, then every option that is not its default.

    The flags come from the result's :class:`~pytest_rlgate.gate.options.GateOptions`
    (:meth:`~pytest_rlgate.gate.options.GateOptions.to_argv`), so every option the gate took
    is repeated, whichever door it came in by.
    """
    record = _record(result)
    sides = record.get("sides") or {}
    after = sides.get("after") or ["AFTER.jsonl"]
    options = from_record(GateOptions, record.get("options") or {})
    words = ["rlgate", "gate", str(sides.get("before") or "BEFORE.jsonl"),
             *(str(a) for a in (after if isinstance(after, list) else [after])), *options.to_argv()]
    return " ".join(shlex.quote(w) for w in words)


def _flip_lines(c: Mapping[str, Any], heading: str, repeated: bool) -> list[str]:
    lines = [f"**{heading.replace(' -> ', ' → ')}**", ""]
    if repeated:
        return lines
    for f in c["flips"]:
        lines.append(f"- `{_cell(f['unit'])}` {f.get('counts', '').replace('->', '→')}")
        for side in ("before", "after"):
            reply = f.get(f"{side}_reply")
            if reply is not None:
                about = f.get(f"{side}_described")
                lines.append(f"  - {side}: {_code(reply)}" + (f" ({about})" if about else ""))
    return lines + [""]


def markdown_summary(result: Gated, *, title: str | None = None, reproduce: str | None = None) -> str:
    """The summary of *result* (a GateResult or its ``to_dict()``) as Markdown text.

    *reproduce* is the command printed under "Reproduce" (default: :func:`reproduce_command`).
    """
    record = _record(result)
    comparisons = record["comparisons"]
    failing = _failing(record)
    passed = bool(record.get("passed"))
    word = "PASSED" if passed else "FAILED"
    failures = record.get("failures") or []
    head = f"### {title or 'rlgate gate'}: {'✅' if passed else '❌'} {word}"
    if not passed:
        head += f" ({len(failures)} failure{'s' if len(failures) != 1 else ''})"
    family = record.get("family")
    level = f"{record['confidence_level']:.0%}" if not family else f"{1 - 2 * family['marginal']:.1%}"
    shown = _shown(comparisons, failing)
    scale = _scale(shown)
    lines = [head, "", "| metric | group | units×k | before → after | Δ | " + level + " CI | "
             f"interval (±{scale:.1f}) | verdict |", "|---|---|---:|---|---:|---|---|---|"]
    for c in shown:
        verdict = verdict_word(c["verdict"], (c["metric"], c["group"]) in failing)
        if c.get("tier"):
            verdict += f" · {c['tier']}"
        size = f"{c['n_units']}×{c['k']}"
        lines.append(
            f"| {_cell(c['metric'])} | {_cell(c['group'])} | {size} | {c['before']:.3f} → {c['after']:.3f} | "
            f"{signed(c['delta'])} | {interval(c.get('low'), c.get('high'), missing='–')} | "
            f"`{interval_bar(c.get('low'), c.get('high'), c['delta'], scale)}` | {verdict} |")
    lines += ["", f"`━` the {level} interval, `●` the estimate, `┼`/`│` zero; "
                  f"{len(comparisons) - len(shown)} other comparison(s) passed quietly.", ""]
    if failures:
        lines += ["**Failures**", ""] + [f"- {_cell(f)}" for f in failures] + [""]
    ordered = sorted(comparisons, key=lambda c: (c["metric"], c["group"]) not in failing)
    for at, heading, repeated in flip_headings(ordered):
        lines += _flip_lines(ordered[at], heading, repeated)
    undecided = list(dict.fromkeys(c["group"] for c in comparisons if c["verdict"] == "inconclusive"
                                   and not ("within noise" in (c.get("flags") or ()) and (c.get("low") or 0) > 0)))
    if undecided:
        before = str((record.get("sides") or {}).get("before") or "BEFORE.jsonl")
        before = "BEFORE.jsonl" if before.startswith("<") else before
        margin = float(record.get("margin") or MARGIN)
        lines += [f"**Inconclusive** in {', '.join(undecided)}: too few scenarios to tell a drop of {margin:.2f} "
                  f"from noise; `rlgate plan {before} --drop {margin:.2f}` says how many each needs.", ""]
    lines += [f"**Rule:** {record.get('rule', '')}", ""]
    lines += [f"> warning: {w}" for w in record.get("warnings") or []]
    if record.get("warnings"):
        lines.append("")
    lines += ["**Reproduce:**", "", "```sh", reproduce or reproduce_command(record), "```", ""]
    return "\n".join(lines)


def step_summary_path() -> Path | None:
    """``$GITHUB_STEP_SUMMARY`` when it is set under CI (``$CI``), else None."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(target) if target and os.environ.get("CI") else None


def write_markdown(result: Gated, path: str | os.PathLike[str], *, reproduce: str | None = None,
                   append: bool = False, title: str | None = None) -> Path:
    """Write (or, for a CI step summary, *append*) the summary of *result* to *path*."""
    target = Path(path)
    text = markdown_summary(result, title=title, reproduce=reproduce)
    try:
        if append:
            with target.open("a", encoding="utf-8") as out:
                out.write(text + "\n")
        else:
            atomic_write(target, text)
    except OSError as exc:
        raise UsageError(f"cannot write the Markdown summary {str(target)!r}: {exc.strerror}") from None
    return target
