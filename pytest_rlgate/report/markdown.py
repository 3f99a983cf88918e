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
from ..gate.options import BOOTSTRAP_SEED, CONFIDENCE_LEVEL, DEFAULT_METHOD, MARGIN, N_RESAMPLES, SHOW_FLIPS

if TYPE_CHECKING:
    from ..gate.recipe import RecipeGateResult
    from ..gate.result import GateResult

#: a gate's result, or its ``to_dict()`` record (a run's gate.json, a session's report entry)
Gated = Union["GateResult", "RecipeGateResult", Mapping[str, Any]]

__all__ = ["BAR_WIDTH", "interval_bar", "markdown_summary", "reproduce_command", "step_summary_path",
           "write_markdown"]

#: characters of an interval bar
BAR_WIDTH = 21
_FAILING = ("regressed",)
_ORDER = {"regressed": 0, "insufficient": 1, "inconclusive": 2, "flat": 3, "moved": 4}


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
    return sorted(rows, key=lambda c: ((c["metric"], c["group"]) not in failing, _ORDER.get(c["verdict"], 5),
                                       c["group"] != "overall", c["metric"], c["group"]))


def _failing(record: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The comparisons a failure names (``pass@1 regressed in no_id``, ``... in with_id may have dropped``)."""
    failures = list(record.get("failures") or ())
    out = set()
    for c in record["comparisons"]:
        if c.get("tier") == "advisory":
            continue
        named = (f"{c['metric']} regressed in {c['group']}", f"{c['metric']} in {c['group']} ")
        if any(f.startswith(named[0] + end) for f in failures for end in (":", " ")) or \
                any(f.startswith(named[1]) for f in failures):
            out.add((c["metric"], c["group"]))
    return out


def reproduce_command(result: Gated) -> str:
    """The ``rlgate gate`` command that reproduces *result*, from the options it records."""
    record = _record(result)
    options = record.get("options") or {}
    after = options.get("after")
    afters = after if isinstance(after, list) else [after]
    words = ["rlgate", "gate", str(options.get("before") or "BEFORE.jsonl"),
             *(str(a) for a in afters if a is not None)]
    if options.get("env"):
        words += ["--env", str(options["env"])]
    pairs = (("--seed", record.get("seed"), BOOTSTRAP_SEED), ("--resamples", record.get("n_resamples"), N_RESAMPLES),
             ("--confidence", record.get("confidence_level"), CONFIDENCE_LEVEL),
             ("--method", record.get("method"), DEFAULT_METHOD), ("--margin", record.get("margin"), MARGIN),
             ("--max-drop", options.get("max_drop"), None), ("--policy", options.get("policy"), None),
             ("--show-flips", options.get("show_flips"), SHOW_FLIPS))
    for flag, value, default in pairs:
        if value is not None and value != default and not (flag == "--resamples" and value == 0):
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if options.get("flips_in") == "all":
        words += ["--flips-in", "all"]
    for flag, key in (("--require-moved", "require_moved"), ("--fail-on-inconclusive", "fail_on_inconclusive"),
                      ("--allow-env-change", "allow_env_change"), ("--shared-units-only", "shared_units_only")):
        if options.get(key):
            words.append(flag)
    return " ".join(shlex.quote(w) for w in words)


def _flip_lines(c: Mapping[str, Any]) -> list[str]:
    lines = [f"**Flips in {c['metric']} {c['group']}** ({c['verdict']}): the scenarios that lost the most", ""]
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
    level = f"{record.get('confidence_level', CONFIDENCE_LEVEL):.0%}"
    shown = _shown(comparisons, failing)
    scale = _scale(shown)
    lines = [head, "", "| metric | group | units×k | before → after | Δ | " + level + " CI | "
             f"interval (±{scale:.1f}) | verdict |", "|---|---|---:|---|---:|---|---|---|"]
    for c in shown:
        verdict = c["verdict"].upper() if (c["metric"], c["group"]) in failing else c["verdict"]
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
    flipped = [c for c in sorted(comparisons, key=lambda c: (c["metric"], c["group"]) not in failing)
               if c.get("flips")]
    for c in flipped:
        lines += _flip_lines(c)
    undecided = list(dict.fromkeys(c["group"] for c in comparisons if c["verdict"] == "inconclusive"))
    if undecided:
        before = str((record.get("options") or {}).get("before") or "BEFORE.jsonl")
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
