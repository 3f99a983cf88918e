"""Reading a run folder (or a recipe folder) for its report.

The files are read through the readers the run writes with
(:mod:`pytest_rlgate.train.run` for the JSON files and ``metrics.jsonl``,
:func:`pytest_rlgate.data.rows.iter_rows` for the graded rows); what is checked here on top is
only the fields the page reads from ``monitor.json``, ``gate.json`` and ``recipe.json``.

Required files: ``config.json`` and ``metrics.jsonl``. Optional: ``monitor.json``,
``gate.json``, ``holdout_before*.jsonl``, ``holdout_after.jsonl``; a missing optional file
leaves its part out and the page says so. A file that is present but unreadable is always a
:class:`~pytest_rlgate.DataError` naming the file and line: a report that quietly drops half
a run would mislead more than no report. No ``COMPLETE`` marker is required, so a run can
write its report before it is published.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeGuard

from ..data.rows import iter_rows
from ..errors import DataError
from ..train.config import RunKnobs, recorded_knobs_problem, renamed
from ..train.methods import METHODS, knobs_class
from ..train.run import (
    AFTER,
    CONFIG,
    GATE,
    INDEX_NAME,
    METRICS,
    MONITOR,
    NONFINITE,
    RECIPE_FILE,
    REPORT_NAME,
    RunFolder,
    read_json,
    read_json_object,
    read_metrics,
)

__all__ = ["INDEX_NAME", "LOOKS_FILE", "RECIPE_FILE", "REPORT_NAME", "Alarm", "ReportData", "UnitRow", "alarm_message",
           "alarm_name", "index_folders", "is_number", "is_recipe_folder", "is_watch_folder", "load_report_data",
           "lookup", "nonfinite_steps", "read_recipe", "run_dirs"]



def is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Alarm:
    """One monitor alarm: the step it fired at, its kind (length/feature/drift) and why."""

    step: float
    kind: str
    message: str
    #: ``feature lookup_order@10 (no_id)``: what the index shows of it
    name: str = ""


class UnitRow(TypedDict):
    """What a report keeps of a graded row: its category, its unit (scenario, else prompt), its reward."""

    category: str
    unit: str
    reward: float
    eval_run: int | str | None


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows, read and validated from one run folder."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    monitor: dict[str, Any] | None  # None: no monitor.json (not "no alarms")
    alarms: list[Alarm]
    gate: dict[str, Any] | None
    before: dict[str, list[UnitRow]]  # file name -> rows, the first base run first
    after: list[UnitRow] | None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(lookup(self.config, "run_name") or self.config.get("name") or self.path.name)

    @property
    def verdict(self) -> str:
        """``passed``, ``failed`` or ``no gate``: the one word an index shows."""
        if self.gate is None:
            return "no gate"
        return "passed" if self.gate["passed"] else "failed"


def load_report_data(run_dir: str | os.PathLike[str]) -> ReportData:
    """Read and validate a run folder; a missing required or a corrupt file is a DataError."""
    path = Path(run_dir)
    if not path.is_dir():
        raise DataError("not a run folder (no such directory); pass runs/<name>/ as written by rlgate train",
                        path=path)
    folder = RunFolder(path)  # not RunFolder.open: no COMPLETE marker is required here
    notes: list[str] = []
    config = read_json_object(_required(path / CONFIG))
    _check_config(config, path / CONFIG)
    metrics = list(read_metrics(_required(path / METRICS)))
    gaps = nonfinite_steps(metrics)
    if gaps:
        notes.append("metrics.jsonl logged values that are not numbers (a diverged run?): "
                     + "; ".join(f"{key} {word} at step{'s' * (len(steps) > 1)} {_steps_text(steps)}"
                                 for (key, word), steps in gaps.items())
                     + ". The curves show gaps there.")

    monitor_path = path / MONITOR
    monitor, alarms = _read_monitor(monitor_path) if monitor_path.exists() else (None, [])
    if monitor is not None:  # (a missing monitor.json is said where the alarms would be)
        if monitor.get("settings", {}).get("every") == 0:
            notes.append("The HackMonitor was off for this run (monitor every 0 steps): no alarms could fire.")
        stopped = monitor.get("stopped_at")
        if isinstance(stopped, Mapping):
            notes.append(f"Training stopped early at step {stopped.get('step')} on the "
                         f"{stopped.get('alarm')} alarm (stop_on).")
        notes += [f"Monitor error: {e}" for e in monitor.get("errors") or []]

    gate_path = path / GATE
    gate = _read_gate(gate_path) if gate_path.exists() else None

    before = {p.name: _read_rows(p) for p in folder.before_files if p.exists()}
    after_path = folder.after_file
    after = _read_rows(after_path) if after_path.exists() else None
    if not before or after is None:
        missing = [n for n, ok in (("holdout_before*.jsonl", bool(before)), (AFTER, after is not None)) if not ok]
        notes.append(f"No {' or '.join(missing)}: pass@1 levels come from gate.json, without level bands.")
    return ReportData(path, config, metrics, monitor, alarms, gate, before, after, notes)


def nonfinite_steps(metrics: list[dict[str, Any]]) -> dict[tuple[str, str], list[float]]:
    """``(key, "NaN" | "Infinity" | "-Infinity") -> steps`` of the values a run logged that are not
    numbers (written as null and named under ``nonfinite``), in the order they first appear."""
    found: dict[tuple[str, str], list[float]] = {}
    for record in metrics:
        named = record.get(NONFINITE)
        if not isinstance(named, Mapping):
            continue
        for key, word in named.items():
            if record.get(key) is None:
                found.setdefault((str(key), str(word)), []).append(float(record["step"]))
    return found


def _steps_text(steps: list[float], shown: int = 6) -> str:
    text = ", ".join(f"{s:g}" for s in steps[:shown])
    return text + (f" and {len(steps) - shown} more" if len(steps) > shown else "")


def _check_config(config: Mapping[str, object], path: Path) -> None:
    """The knobs a run recorded, each of its type and range: a report never shows a hand-edited
    ``"steps": "many"`` as if training had run with it."""
    knobs = config.get("knobs", {})
    if not isinstance(knobs, Mapping):
        raise DataError(f"'knobs' must be an object of the run's knobs, found {type(knobs).__name__}; "
                        "re-run rlgate train", path=path)
    method = knobs.get("method", config.get("method"))
    cls = knobs_class(method) if isinstance(method, str) and method in METHODS else RunKnobs
    problem = recorded_knobs_problem(cls, renamed(knobs))
    if problem is not None:
        raise DataError(f"{problem}; config.json is written by rlgate train (re-run it, or undo the edit)",
                        path=path)
    for key in ("run_name", "name", "method", "base_model"):
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            raise DataError(f"{key!r} must be a string, found {type(value).__name__} {repr(value)[:40]}", path=path)


def _required(path: Path) -> Path:
    if not path.is_file():
        raise DataError(f"missing required run file {path.name}; is {path.parent} a run folder written by "
                        "rlgate train?", path=path)
    return path


def alarm_message(alarm: Mapping[str, object]) -> str:
    """Why an alarm fired, in words, from HackMonitor's detail fields (and the category it fired in)."""
    where = f" (in {alarm['category']})" if isinstance(alarm.get("category"), str) else ""
    return _why(alarm) + where


def alarm_name(alarm: Mapping[str, object]) -> str:
    """``feature lookup_order@10 (no_id)``: an alarm as short as an index cell, naming what fired it."""
    what = alarm.get("top_feature") if alarm.get("kind") == "feature" else None
    where = f" ({alarm['category']})" if isinstance(alarm.get("category"), str) else ""
    step = alarm.get("step")
    at = f"@{step:g}" if is_number(step) else ""
    return f"{alarm.get('kind')}{'' if what is None else f' {what}'}{at}{where}"


def _why(alarm: Mapping[str, object]) -> str:
    for key in ("message", "detail", "reason"):
        text = alarm.get(key)
        if isinstance(text, str) and text:
            return text
    kind = alarm.get("kind")
    length, was = alarm.get("length"), alarm.get("was")
    if kind == "length" and is_number(length) and is_number(was):
        growth = f" (+{length / was - 1:.0%})" if was else ""
        since = f" at step {alarm['since_step']}" if alarm.get("since_step") is not None else ""
        return f"holdout reply length {length:.0f} chars, was {was:.0f}{since}{growth}"
    if kind == "feature" and alarm.get("top_feature"):
        return f"the reward pays most for {alarm['top_feature']!s}, which is not endorsed"
    if kind == "drift" and is_number(alarm.get("kl")):
        budget = f" over the budget {alarm['budget']:g}" if is_number(alarm.get("budget")) else ""
        return f"KL {alarm['kl']:.4g}{budget}"
    return ", ".join(f"{k}={v}" for k, v in alarm.items() if k not in ("kind", "step", "category"))


def _read_monitor(path: Path) -> tuple[dict[str, Any], list[Alarm]]:
    """monitor.json: ``HackMonitor.summary()`` (or a bare list of alarms), checked for the
    fields the page reads."""
    value = read_json(path)
    monitor = value if isinstance(value, dict) else {"alarms": value}
    raw = monitor.get("alarms", [])
    if not isinstance(raw, list):
        raise DataError(f"'alarms' must be a list, found {type(raw).__name__}", path=path)
    alarms = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not is_number(item.get("step")) or not isinstance(item.get("kind"), str):
            raise DataError(f"alarms[{i}] needs a numeric 'step' and a string 'kind' (length/feature/drift), "
                            f"found {item!r}", path=path)
        alarms.append(Alarm(float(item["step"]), item["kind"], alarm_message(item), alarm_name(item)))
    history = monitor.get("history", [])
    if not isinstance(history, list) or not all(isinstance(h, dict) and is_number(h.get("step")) for h in history):
        raise DataError("'history' must be a list of objects with a numeric 'step'", path=path)
    return monitor, sorted(alarms, key=lambda a: a.step)


def _read_gate(path: Path) -> dict[str, Any]:
    """gate.json as the run wrote it (``GateResult.to_dict()``), checked for the fields the page reads."""
    gate = read_json_object(path)
    comparisons = gate.get("comparisons")
    if not isinstance(gate.get("passed"), bool) or not isinstance(comparisons, list):
        raise DataError("expected GateResult.to_dict(): a boolean 'passed' and a list 'comparisons'", path=path)
    for i, row in enumerate(comparisons):
        if not isinstance(row, dict):
            raise DataError(f"comparisons[{i}] must be an object, found {row!r}", path=path)
        for key in ("metric", "group", "verdict"):
            if not isinstance(row.get(key), str):
                raise DataError(f"comparisons[{i}] lacks the string field {key!r}", path=path)
        for key in ("before", "after", "delta", "low", "high", "mde", "noise"):
            if row.get(key) is not None and not is_number(row[key]):
                raise DataError(f"comparisons[{i}].{key} must be a number or null, found {row[key]!r}", path=path)
    return gate


def _read_rows(path: Path) -> list[UnitRow]:
    """Graded rows through the row schema's reader, reduced to category, unit and reward."""
    return [{"category": row["category"], "unit": row.get("scenario_id") or row["prompt"],
             "reward": float(row["reward"]), "eval_run": row.get("eval_run")}
            for row, _line in iter_rows(path)]


def lookup(config: Mapping[str, object], *names: str) -> object:
    """The first of ``names`` at the top of ``config``, else one level down (``knobs``...).

    An earlier name wins at any level, so a nested record that shares a later name (the
    environment's ``name``) never shadows it.
    """
    levels = [config, *(v for v in config.values() if isinstance(v, Mapping))]
    for name in names:
        for level in levels:
            value = level.get(name)
            if value not in (None, "") and (level is config or not isinstance(value, Mapping)):
                return value
    return None


def is_recipe_folder(path: str | os.PathLike[str]) -> bool:
    """True for a recipe folder (``runs/<name>-recipe/``, written by ``rlgate train --seeds``)."""
    return (Path(path) / RECIPE_FILE).is_file()


def read_recipe(path: Path) -> dict[str, Any]:
    """recipe.json, checked for the fields the page reads."""
    record = read_json_object(_required(path / RECIPE_FILE))
    gate = record.get("gate")
    if not isinstance(gate, dict) or gate.get("kind") != "recipe" or not isinstance(gate.get("passed"), bool) \
            or not isinstance(gate.get("comparisons"), list):
        raise DataError("expected 'gate' to be a recipe gate (RecipeGateResult.to_dict(): kind 'recipe', a boolean "
                        "'passed', a list 'comparisons'); re-run `rlgate train --seeds`", path=path / RECIPE_FILE)
    for i, c in enumerate(gate["comparisons"]):
        if not isinstance(c, dict) or not isinstance(c.get("seeds"), list) or "verdict" not in c:
            raise DataError(f"gate.comparisons[{i}] needs a 'verdict' and a list 'seeds'", path=path / RECIPE_FILE)
    return record


#: a watched run's record (``rlgate watch``, ``GateCallback``): every look
LOOKS_FILE = "looks.json"


def is_watch_folder(path: str | os.PathLike[str]) -> bool:
    """A folder written by ``rlgate watch`` or ``GateCallback``: looks.json and no run config."""
    folder = Path(path)
    return (folder / LOOKS_FILE).is_file() and not (folder / CONFIG).is_file()


def _reported(folder: Path) -> bool:
    return (folder / CONFIG).is_file() or is_recipe_folder(folder) or is_watch_folder(folder)


def index_folders(root: str | os.PathLike[str]) -> tuple[list[Path], list[str]]:
    """The folders an index links, and why each other subfolder was left out.

    Linked: direct subfolders holding config.json (a run), recipe.json (a recipe over runs) or
    looks.json (a watched run), and watched runs one level further down (a job's output folder
    holding ``rlgate-watch/``, a GateCallback's ``out_dir`` inside a run). Hidden folders (a run
    still being written) are skipped without a word; any other subfolder is named with why.
    """
    root = Path(root)
    if not root.is_dir():
        return [], []
    found: list[Path] = []
    left: list[str] = []
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if _reported(child):
            found.append(child)
            continue
        inner = sorted(p for p in child.iterdir() if p.is_dir() and not p.name.startswith(".") and is_watch_folder(p))
        found += inner
        if not inner:
            left.append(f"{child.name}: no {CONFIG} (a run), {RECIPE_FILE} (a recipe) or {LOOKS_FILE} (a watched run) "
                        "in it or in a folder inside it")
    return sorted(found), left


def run_dirs(root: str | os.PathLike[str]) -> list[Path]:
    """The folders an index links (:func:`index_folders`): runs, recipes and watched runs."""
    return index_folders(root)[0]
