"""The report as text: the formatting shared with the HTML page, and the terminal report."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from ..errors import RlgateError
from ..gate import recipe_text
from ..gate.flips import Flip
from ..gate.numtext import interval as format_interval
from ..gate.result import GateResult
from .data import ReportData, is_number, is_recipe_folder, load_report_data, lookup, read_recipe
from .levels import series
from .plots import CURVES
from .strip import is_watch_folder, watch_text

__all__ = ["env_label", "fmt", "gate_settings", "interval", "interval_header", "recipe_summary", "report_text",
           "short_fingerprint", "summary_line", "units"]


def fmt(value: object, digits: int = 3, signed: bool = False) -> str:
    if not is_number(value) or not math.isfinite(value):
        return "–" if value is None or is_number(value) else str(value)
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def interval(row: Mapping[str, object]) -> str:
    low, high = row.get("low"), row.get("high")  # numbers or null: the gate.json reader checked
    return format_interval(low if is_number(low) else None, high if is_number(high) else None, missing="–")


def units(row: Mapping[str, object]) -> str:
    n, k = row.get("n_units"), row.get("k")
    if n is None:
        return "–"
    return f"{n}×{k:g}" if is_number(k) else str(n)


def gate_settings(gate: Mapping[str, object]) -> str:
    """How the gate's intervals were made: the settings line the gate itself printed, from gate.json."""
    try:
        if gate.get("kind") == "recipe":
            return recipe_text.settings_line(gate)
        return GateResult.from_dict(gate).settings_line()
    except (RlgateError, KeyError, TypeError):  # a record this release cannot read back: say nothing wrong
        return ""


def interval_header(gate: Mapping[str, object]) -> str:
    """``97.7% interval``: the two-sided level of the gate's intervals (its family's, when it held one)."""
    family = gate.get("family")
    if isinstance(family, Mapping) and is_number(family.get("marginal")):
        return f"{1 - 2 * float(family['marginal']):.1%} interval"
    level = gate.get("confidence_level")
    return f"{level:.0%} interval" if is_number(level) else "interval"


def env_label(config: Mapping[str, object]) -> str | None:
    """The environment the run was graded with, as config.json records it (``Env.describe()``).

    Shown beside every verdict because categories and markers mean nothing without it: two
    runs' ``with_id`` rows compare only when the same environment graded them.
    """
    env = config.get("env")
    if isinstance(env, Mapping) and env.get("name"):
        version = f" v{env['version']}" if env.get("version") not in (None, "") else ""
        fingerprint = f" {str(env['fingerprint'])[:15]}" if env.get("fingerprint") else ""
        return f"env {env['name']}{version}{fingerprint}"
    spec = lookup(config, "env")
    return f"env {spec}" if isinstance(spec, str) else None


def short_fingerprint(fingerprint: str) -> str:
    """``sha256:c95283e0a1b2…``: a digest as a reader compares it, its algorithm and 12 hex digits."""
    algorithm, _, digest = fingerprint.rpartition(":")
    return f"{algorithm + ':' if algorithm else ''}{digest[:12]}{'…' if len(digest) > 12 else ''}"


def summary_line(run: ReportData) -> str:
    bits = [str(v) for v in (env_label(run.config), lookup(run.config, "method", "trainer"),
                             lookup(run.config, "base_model", "model")) if v]
    steps = {m["step"] for m in run.metrics}
    bits.append(f"{len(steps)} logged steps" + (f" (last {max(steps):g})" if steps else ""))
    prompts = run.config.get("prompts")
    fingerprint = (prompts.get("fingerprint") if isinstance(prompts, Mapping) else None) or \
        lookup(run.config, "prompt_fingerprint")  # not the environment's fingerprint beside it
    if fingerprint:  # enough to tell two sets apart by eye; config.json keeps the whole digest
        bits.append(f"prompts {short_fingerprint(str(fingerprint))}")
    return " · ".join(bits)


def recipe_summary(record: Mapping[str, Any]) -> str:
    gate = record["gate"]
    bits = [f"gate {'PASSED' if gate['passed'] else 'FAILED'}", str(record.get("method") or ""),
            env_label(record) or "", f"trainer seeds {', '.join(map(str, gate.get('seeds') or []))}"]
    return " · ".join(b for b in bits if b)


def report_text(run_dir: str | os.PathLike[str]) -> str:
    """The report for a terminal: header, gate table, curve summary and alarms; no plots.

    A recipe folder's is its recipe gate: the recipe table with per-seed dots, and each seed; a
    watched run's (``rlgate watch``, ``GateCallback``) its strip and selection, as ``report.html`` shows.
    """
    if is_watch_folder(run_dir):
        return watch_text(run_dir)
    if is_recipe_folder(run_dir):
        record = read_recipe(Path(run_dir))
        return "\n".join([f"recipe {Path(run_dir).name}: {recipe_summary(record)}",
                          recipe_text.render_report(record["gate"])])
    run = load_report_data(run_dir)
    lines = [f"run {run.name}: gate {run.verdict.upper()}", summary_line(run)]
    if run.gate is not None:
        settings = gate_settings(run.gate)
        lines += [f"gate: {settings}"] if settings else []
        table = [[c["metric"], c["group"], units(c), fmt(c.get("before")), fmt(c.get("after")),
                  fmt(c.get("delta"), signed=True), interval(c), fmt(c.get("mde")), c["verdict"],
                  ", ".join(map(str, c.get("flags") or []))] for c in run.gate["comparisons"]]
        lines += ["", tabulate(table, headers=["metric", "group", "units×k", "before", "after", "delta",
                                               interval_header(run.gate), "MDE", "verdict", "flags"],
                               disable_numparse=True,
                               colalign=("left", "left", "right", "right", "right", "right", "left", "right", "left",
                                         "left")), ""]
        for c in run.gate["comparisons"]:  # the flips the gate recorded, as it printed them
            if c.get("flips"):
                lines.append(f"flips in {c['metric']} {c['group']} ({c['verdict']}):")
                for flip in c["flips"]:
                    lines += Flip.from_dict(flip).lines()
        if run.gate.get("rule"):
            lines.append(f"rule: {run.gate['rule']}")
        lines += [f"FAIL: {f}" for f in run.gate.get("failures") or []]
    lines.append("")
    for name, _, candidates in CURVES:
        key, steps, values = series(run.metrics, candidates)
        if key is not None:
            label = name if key == candidates[0] else f"{name} [{key}]"
            lines.append(f"{label}: {values[0]:.4g} at step {steps[0]:g} -> {values[-1]:.4g} at step {steps[-1]:g} "
                         f"(min {min(values):.4g}, max {max(values):.4g})")
    if run.monitor is None:
        lines.append("alarms: no monitor.json")
    else:
        lines.append(f"alarms: {len(run.alarms) or 'none'}")
        lines += [f"  step {a.step:g}: {a.kind}" + (f" - {a.message}" if a.message else "") for a in run.alarms]
    lines += [f"note: {n}" for n in run.notes]
    return "\n".join(lines)
