"""Run reports: one HTML page per run folder, an index over many, and a plain-text twin.

A run folder (``runs/<name>/``, written by ``rlgate train``) holds the evidence a reviewer
needs to believe a gate verdict: the training curves, the monitor's alarms, the holdout rows
before and after, and the gate's comparisons. ``write_report`` turns that folder into
``report.html`` with PNG plots next to it, linked relatively. Plain files rather than
base64 inside the page because the page then opens from disk, from a CI artifact or behind
any static server alike, the PNGs can be pasted into a pull request or README on their own,
and the HTML stays a few kB that diff cleanly. ``report_text`` renders the same facts for a
terminal. Nothing here trains, samples or recomputes the gate: the page shows what the run
recorded (the only numbers computed here are display intervals on the pass@1 levels).

Required files: ``config.json`` and ``metrics.jsonl``. Optional: ``monitor.json``,
``gate.json``, ``holdout_before*.jsonl``, ``holdout_after.jsonl``; a missing optional file
leaves its part out and the page says so. A file that is present but unreadable is always a
:class:`~pytest_rlgate.DataError` naming the file and line: a report that quietly drops half
a run would mislead more than no report. No ``COMPLETE`` marker is required, so a run can
write its report before it is published.

matplotlib is imported only while drawing, through its object API (``Figure`` +
``FigureCanvasAgg``): no pyplot state and no change to the caller's global backend.
"""

from __future__ import annotations

import html
import io
import json
import math
import os
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from . import __version__, recipe_text
from .atomic import atomic_write
from .errors import DataError, UsageError
from .rows import iter_rows

__all__ = ["ReportData", "is_recipe_folder", "load_report_data", "plot_recipe", "report_text", "run_dirs",
           "write_index", "write_report"]

REPORT_NAME = "report.html"
INDEX_NAME = "index.html"
#: A recipe folder (``rlgate train --seeds``) holds this instead of config.json: the recipe
#: gate over every seed's run, and where those runs are.
RECIPE_FILE = "recipe.json"
#: Confidence level of the display bands on pass@1 levels; the gate's intervals on the
#: paired difference come from gate.json unchanged.
LEVEL_CONFIDENCE = 0.95
#: Resamples of the display bands: enough for a stable 95 % percentile.
LEVEL_RESAMPLES = 2000
#: Fixed so that rendering the same run twice draws the same picture.
LEVEL_SEED = 0

#: (short name, axis label, metric keys: the first one logged wins). GRPO rows use
#: train.grpo.METRIC_KEYS names; TRL's raw names and DPO's margin are fallbacks.
CURVES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("reward", "reward (train batch mean)", ("reward", "rewards/margins")),
    ("kl", "KL to reference", ("kl", "objective/kl")),
    ("length", "completion length (tokens)", ("completion_length", "completions/mean_length")),
)
ALARM_COLOURS = {"length": "#dd6b20", "feature": "#c53030", "drift": "#6b46c1"}
VERDICT_COLOURS = {
    "regressed": "#c53030",
    "moved": "#2f855a",
    "flat": "#4a5568",
    "inconclusive": "#b7791f",
    "insufficient": "#718096",
    "unresolved": "#6b46c1",
}
BEFORE_COLOUR, AFTER_COLOUR, MONITOR_COLOUR = "#a0aec0", "#2b6cb0", "#319795"


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Alarm:
    """One monitor alarm: the step it fired at, its kind (length/feature/drift) and why."""

    step: float
    kind: str
    message: str


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows, read and validated from one run folder."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    monitor: dict[str, Any] | None  # None: no monitor.json (not "no alarms")
    alarms: list[Alarm]
    gate: dict[str, Any] | None
    before: dict[str, list[dict[str, Any]]]  # file name -> rows, the first base run first
    after: list[dict[str, Any]] | None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(_lookup(self.config, "run_name") or self.config.get("name") or self.path.name)

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
    notes: list[str] = []
    config = _read_json_object(_required(path / "config.json"))
    metrics = list(_read_metrics(_required(path / "metrics.jsonl")))

    monitor_path = path / "monitor.json"
    monitor, alarms = _read_monitor(monitor_path) if monitor_path.exists() else (None, [])
    if monitor is not None:  # (a missing monitor.json is said where the alarms would be)
        if monitor.get("settings", {}).get("every") == 0:
            notes.append("The HackMonitor was off for this run (monitor every 0 steps): no alarms could fire.")
        stopped = monitor.get("stopped_at")
        if isinstance(stopped, Mapping):
            notes.append(f"Training stopped early at step {stopped.get('step')} on the "
                         f"{stopped.get('alarm')} alarm (stop_on).")
        notes += [f"Monitor error: {e}" for e in monitor.get("errors") or []]

    gate_path = path / "gate.json"
    gate = _read_gate(gate_path) if gate_path.exists() else None

    before = {p.name: _read_rows(p) for p in _before_files(path)}
    after_path = path / "holdout_after.jsonl"
    after = _read_rows(after_path) if after_path.exists() else None
    if not before or after is None:
        missing = [n for n, ok in (("holdout_before*.jsonl", bool(before)), ("holdout_after.jsonl", after is not None))
                   if not ok]
        notes.append(f"No {' or '.join(missing)}: pass@1 levels come from gate.json, without level bands.")
    return ReportData(path, config, metrics, monitor, alarms, gate, before, after, notes)


def _before_files(path: Path) -> list[Path]:
    """``holdout_before.jsonl`` (the first base run) first, then the others by seed."""
    def key(p: Path) -> tuple[bool, int, str]:
        seed = re.search(r"(\d+)$", p.stem)
        return (p.name != "holdout_before.jsonl", int(seed.group(1)) if seed else 0, p.name)

    return sorted(path.glob("holdout_before*.jsonl"), key=key)


def _required(path: Path) -> Path:
    if not path.is_file():
        raise DataError(f"missing required run file {path.name}; is {path.parent} a run folder written by "
                        "rlgate train?", path=path)
    return path


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg}, column {exc.colno}); re-run the step that wrote it",
                        path=path, line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text ({exc.reason})", path=path) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror}", path=path) from None


def _read_json_object(path: Path) -> dict[str, Any]:
    value = _load_json(path)
    if not isinstance(value, dict):
        raise DataError(f"expected a JSON object, found {type(value).__name__}", path=path)
    return value


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_metrics(path: Path) -> Iterator[dict[str, Any]]:
    """metrics.jsonl: one object per logged step, each with a numeric ``step``."""
    with path.open(encoding="utf-8") as handle:
        number = 0
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    killed = not line.endswith("\n")
                    what = "truncated last line (the writer was killed)" if killed else "not valid JSON"
                    raise DataError(f"{what} ({exc.msg}, column {exc.colno})", path=path, line=number) from None
                if not isinstance(record, dict):
                    raise DataError(f"expected one JSON object per line, found {type(record).__name__}",
                                    path=path, line=number)
                if not _is_number(record.get("step")) or not math.isfinite(record["step"]):
                    raise DataError(f"field 'step' must be a number, found {record.get('step')!r}; every line "
                                    "carries the optimizer step it was logged at", path=path, line=number)
                yield record
        except UnicodeDecodeError:
            raise DataError("not UTF-8 text", path=path, line=number + 1) from None


def _alarm_message(alarm: Mapping[str, Any]) -> str:
    """Why an alarm fired, in words, from HackMonitor's detail fields."""
    for key in ("message", "detail", "reason"):
        if isinstance(alarm.get(key), str) and alarm[key]:
            return alarm[key]
    kind = alarm.get("kind")
    if kind == "length" and _is_number(alarm.get("length")) and _is_number(alarm.get("was")):
        growth = f" (+{alarm['length'] / alarm['was'] - 1:.0%})" if alarm["was"] else ""
        since = f" at step {alarm['since_step']}" if alarm.get("since_step") is not None else ""
        return f"holdout reply length {alarm['length']:.0f} chars, was {alarm['was']:.0f}{since}{growth}"
    if kind == "feature" and alarm.get("top_feature"):
        return f"the reward pays most for {alarm['top_feature']!s}, which is not endorsed"
    if kind == "drift" and _is_number(alarm.get("kl")):
        budget = f" over the budget {alarm['budget']:g}" if _is_number(alarm.get("budget")) else ""
        return f"KL {alarm['kl']:.4g}{budget}"
    return ", ".join(f"{k}={v}" for k, v in alarm.items() if k not in ("kind", "step"))


def _read_monitor(path: Path) -> tuple[dict[str, Any], list[Alarm]]:
    """monitor.json: ``HackMonitor.summary()`` (or a bare list of alarms)."""
    value = _load_json(path)
    monitor = value if isinstance(value, dict) else {"alarms": value}
    raw = monitor.get("alarms", [])
    if not isinstance(raw, list):
        raise DataError(f"'alarms' must be a list, found {type(raw).__name__}", path=path)
    alarms = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not _is_number(item.get("step")) or not isinstance(item.get("kind"), str):
            raise DataError(f"alarms[{i}] needs a numeric 'step' and a string 'kind' (length/feature/drift), "
                            f"found {item!r}", path=path)
        alarms.append(Alarm(float(item["step"]), item["kind"], _alarm_message(item)))
    history = monitor.get("history", [])
    if not isinstance(history, list) or not all(isinstance(h, dict) and _is_number(h.get("step")) for h in history):
        raise DataError("'history' must be a list of objects with a numeric 'step'", path=path)
    return monitor, sorted(alarms, key=lambda a: a.step)


def _read_gate(path: Path) -> dict[str, Any]:
    """gate.json: ``GateResult.to_dict()``, checked for the fields the page reads."""
    gate = _read_json_object(path)
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
            if row.get(key) is not None and not _is_number(row[key]):
                raise DataError(f"comparisons[{i}].{key} must be a number or null, found {row[key]!r}", path=path)
    return gate


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """Graded rows through the row schema's reader, reduced to category, unit and reward."""
    return [{"category": row["category"], "unit": row.get("scenario_id") or row["prompt"],
             "reward": float(row["reward"]), "eval_run": row.get("eval_run")}
            for row, _line in iter_rows(path)]


def _lookup(config: Mapping[str, Any], *names: str) -> Any:
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


# --------------------------------------------------------------------------- numbers


@dataclass(frozen=True)
class Level:
    """pass@1 of one group on one side: the mean over units of each unit's mean, and a band."""

    value: float
    low: float | None
    high: float | None
    n_units: int


def _levels(rows: Sequence[Mapping[str, Any]]) -> dict[str, Level]:
    """Per category and ``overall``: the level as the gate computes it, and a display band.

    The band is a percentile bootstrap over units (how precisely each side alone is known).
    What the gate decided is the interval on the paired difference, read from gate.json.
    """
    import numpy as np

    per_unit: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        per_unit[row["category"]][row["unit"]].append(row["reward"])
        per_unit["overall"][row["unit"]].append(row["reward"])
    rng = np.random.default_rng(LEVEL_SEED)
    tail = (1 - LEVEL_CONFIDENCE) / 2 * 100
    out = {}
    for group, units in per_unit.items():
        means = np.array([np.mean(v) for v in units.values()])
        low = high = None
        if len(means) >= 2:
            boot = means[rng.integers(0, len(means), size=(LEVEL_RESAMPLES, len(means)))].mean(axis=1)
            low, high = (float(x) for x in np.percentile(boot, [tail, 100 - tail]))
        out[group] = Level(float(means.mean()), low, high, len(means))
    return out


def _pass_comparisons(gate: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    if gate is None:
        return {}
    return {c["group"]: c for c in gate["comparisons"] if c["metric"] == "pass@1"}


def _groups(run: ReportData) -> list[str]:
    """``overall`` first, then the categories in name order."""
    names = set(_pass_comparisons(run.gate))
    for rows in [*run.before.values(), run.after or []]:
        names.update(r["category"] for r in rows)
    if names:
        names.add("overall")
    return sorted(names, key=lambda g: (g != "overall", g))


def _series(
    records: Sequence[Mapping[str, Any]], candidates: Sequence[str]
) -> tuple[str | None, list[float], list[float]]:
    """(key used, steps, values) for the first candidate key with any finite number."""
    for key in candidates:
        points = sorted((float(m["step"]), float(m[key])) for m in records
                        if _is_number(m.get(key)) and math.isfinite(m[key]))
        if points:
            return key, [p[0] for p in points], [p[1] for p in points]
    return None, [], []


def _fmt(value: Any, digits: int = 3, signed: bool = False) -> str:
    if not _is_number(value) or not math.isfinite(value):
        return "–" if value is None or _is_number(value) else str(value)
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _interval(row: Mapping[str, Any]) -> str:
    if row.get("low") is None or row.get("high") is None:
        return "–"
    return f"[{row['low']:+.3f}, {row['high']:+.3f}]"


def _units(row: Mapping[str, Any]) -> str:
    n, k = row.get("n_units"), row.get("k")
    if n is None:
        return "–"
    return f"{n}×{k:g}" if _is_number(k) else str(n)


def _gate_settings(gate: Mapping[str, Any]) -> str:
    """How the gate's intervals were made, from gate.json's settings (whatever it recorded)."""
    bits = []
    if gate.get("method"):
        bits.append(f"method {gate['method']}")
    if _is_number(gate.get("confidence_level")):
        bits.append(f"{gate['confidence_level']:.0%} intervals")
    if gate.get("n_resamples"):
        bits.append(f"{gate['n_resamples']} resamples")
    if gate.get("seed") is not None:
        bits.append(f"seed {gate['seed']}")
    if _is_number(gate.get("margin")):
        bits.append(f"margin ±{gate['margin']:.2f}")
    if isinstance(gate.get("holm"), bool):
        bits.append(f"Holm {'on' if gate['holm'] else 'off'}")
    if gate.get("unit"):
        bits.append(f"unit {gate['unit']}")
    return ", ".join(bits)


def _interval_header(gate: Mapping[str, Any]) -> str:
    level = gate.get("confidence_level")
    return f"{level:.0%} interval" if _is_number(level) else "interval"


# --------------------------------------------------------------------------- plots


def _new_figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("run reports draw with matplotlib, which is not installed: "
                         "pip install 'pytest-rlgate[report]'") from None
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png_bytes(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})  # no version stamp: same run, same bytes
    return buffer.getvalue()


def plot_curves(run: ReportData) -> bytes:
    """Reward, KL and completion length against the step; alarms as labelled vertical lines.

    The monitor's holdout evaluations ride along: its proxy reward on the reward panel and
    its mean reply length (characters, what the length alarm reads) on a right-hand axis.
    """
    fig = _new_figure(8.0, 7.0)
    axes = fig.subplots(len(CURVES), 1, sharex=True)
    history = (run.monitor or {}).get("history") or []
    for ax, (name, title, candidates) in zip(axes, CURVES):
        key, steps, values = _series(run.metrics, candidates)
        ax.set_ylabel(title if key in (None, candidates[0]) else f"{title}\n[{key}]", fontsize=9)
        ax.grid(alpha=0.3)
        handles = []
        if key is None:
            ax.text(0.5, 0.5, f"not logged ({' / '.join(candidates)})", ha="center", va="center",
                    transform=ax.transAxes, color="#718096")
            ax.set_yticks([])
        else:
            handles += ax.plot(steps, values, color=AFTER_COLOUR, linewidth=1.6, label="training",
                               marker="o" if len(steps) < 30 else None, markersize=3)
        if name == "reward" and key == "reward":
            _, std_steps, stds = _series(run.metrics, ("reward_std",))
            if std_steps == steps:
                import numpy as np

                mean, spread = np.array(values), np.array(stds)
                handles.append(ax.fill_between(steps, mean - spread, mean + spread, color=AFTER_COLOUR, alpha=0.15,
                                               linewidth=0, label="± reward_std (within group)"))
        monitor_key = {"reward": "proxy_reward", "length": "length"}.get(name)
        _, m_steps, m_values = _series(history, (monitor_key,)) if monitor_key else (None, [], [])
        if m_steps:
            target = ax if name == "reward" else ax.twinx()
            handles += target.plot(m_steps, m_values, color=MONITOR_COLOUR, linewidth=1.2, marker="s", markersize=4,
                                   label="holdout, monitor" + (" (chars, right axis)" if target is not ax else ""))
            if target is not ax:
                target.set_ylabel("holdout reply length (chars)", fontsize=9, color=MONITOR_COLOUR)
        if len(handles) > 1:
            ax.legend(handles=handles, loc="best", fontsize=8, framealpha=0.8)
    axes[-1].set_xlabel("optimizer step")
    axes[-1].xaxis.get_major_locator().set_params(integer=True)  # steps are whole numbers
    for i, alarm in enumerate(run.alarms):
        colour = ALARM_COLOURS.get(alarm.kind, "#2d3748")
        for ax in axes:
            ax.axvline(alarm.step, color=colour, linestyle="--", linewidth=1.2)
        # labels on the top panel, staggered so alarms at nearby steps stay readable
        axes[0].annotate(f"{alarm.kind} @ {alarm.step:g}", xy=(alarm.step, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(3, -10 - 12 * (i % 3)), textcoords="offset points", color=colour, fontsize=8,
                         fontweight="bold")
    status = ("no monitor.json" if run.monitor is None else
              f"{len(run.alarms)} monitor alarm{'s' * (len(run.alarms) != 1)}")
    fig.suptitle(f"{run.name}: training curves ({status})", fontsize=11)
    return _png_bytes(fig)


def plot_categories(run: ReportData) -> bytes | None:
    """Per-group pass@1 before and after with level bands; the gate's Δ and interval by verdict.

    "Before" pools every base run, as the gate does; each base run alone is a diamond, so
    the picture shows how far the base moves by sampling alone.
    """
    groups = _groups(run)
    if not groups:
        return None
    import numpy as np

    comparisons = _pass_comparisons(run.gate)
    pooled = [r for rows in run.before.values() for r in rows]
    before_levels = _levels(pooled) if pooled else {}
    after_levels = _levels(run.after) if run.after else {}
    per_base_run = [_levels(rows) for rows in run.before.values()] if len(run.before) > 1 else []

    def level(levels: dict[str, Level], group: str, side: str) -> Level | None:
        if group in levels:
            return levels[group]
        value = comparisons.get(group, {}).get(side)
        return None if value is None else Level(float(value), None, None, 0)

    fig = _new_figure(11.0, max(3.2, 1.2 + 0.6 * len(groups)))
    left, right = fig.subplots(1, 2, width_ratios=[3, 2], sharey=True)
    y = np.arange(len(groups))[::-1].astype(float)
    height = 0.38
    for offset, side, levels, colour, label in ((height / 2, "before", before_levels, BEFORE_COLOUR, "before (base)"),
                                                 (-height / 2, "after", after_levels, AFTER_COLOUR, "after")):
        got = [level(levels, g, side) for g in groups]
        values = [lv.value if lv else np.nan for lv in got]
        err = np.array([[lv.value - lv.low, lv.high - lv.value]
                        if lv and lv.low is not None and lv.high is not None else [np.nan, np.nan]
                        for lv in got]).T
        left.barh(y + offset, values, height=height, color=colour, label=label)
        left.errorbar(values, y + offset, xerr=err, fmt="none", ecolor="#1a202c", capsize=3, linewidth=1)
        for yy, v, lv in zip(y + offset, values, got):
            if np.isfinite(v):  # the number sits right of its error bar, never on it
                end = lv.high if lv is not None and lv.high is not None else v
                left.text(end + 0.015, yy, f"{v:.2f}", va="center", fontsize=8)
    for i, levels in enumerate(per_base_run):
        xs = [levels[g].value if g in levels else np.nan for g in groups]
        left.plot(xs, y + height / 2, "d", color="#4a5568", markersize=4, label="each base run" if i == 0 else None)
    left.set_xlim(0, 1.12)
    left.set_xticks(np.linspace(0, 1, 6))
    left.set_yticks(y, groups)
    left.set_xlabel(f"pass@1 (error bars: {LEVEL_CONFIDENCE:.0%} bootstrap over units)")
    left.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, fontsize=8, frameon=False)
    left.grid(axis="x", alpha=0.3)

    margin = (run.gate or {}).get("margin")
    if _is_number(margin) and margin > 0:
        right.axvspan(-margin, margin, color="#edf2f7", label=f"±{margin:g} margin (flat)")
    right.axvline(0, color="#1a202c", linewidth=0.8)
    for yy, group in zip(y, groups):
        row = comparisons.get(group)
        if row is None or row.get("delta") is None:
            continue
        colour = VERDICT_COLOURS.get(row["verdict"], "#1a202c")
        xerr = None
        if row.get("low") is not None and row.get("high") is not None:
            xerr = [[row["delta"] - row["low"]], [row["high"] - row["delta"]]]
        right.errorbar([row["delta"]], [yy], xerr=xerr, fmt="o", color=colour, capsize=4, linewidth=2)
        right.annotate(row["verdict"], xy=(row["delta"], yy), xytext=(0, 7), textcoords="offset points",
                       ha="center", fontsize=8, color=colour, fontweight="bold")
    right.set_xlabel("Δ pass@1, after − before (the gate's interval)")
    right.grid(axis="x", alpha=0.3)
    if not comparisons:
        right.text(0.5, 0.5, "no gate.json", ha="center", va="center", transform=right.transAxes, color="#718096")
    elif _is_number(margin) and margin > 0:
        right.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8, frameon=False)
    fig.suptitle(f"{run.name}: pass@1 by category", fontsize=11)
    return _png_bytes(fig)


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;
color:#1a202c;padding:0 1rem;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #e2e8f0;padding-bottom:.2rem;margin-top:2rem}
.sub{color:#4a5568;margin-top:0}
.badge{display:inline-block;padding:.15rem .6rem;border-radius:.3rem;color:#fff;font-weight:600}
.passed{background:#2f855a}.failed{background:#c53030}.nogate{background:#718096}
table{border-collapse:collapse;margin:.5rem 0;font-size:.92rem}
th,td{border:1px solid #e2e8f0;padding:.25rem .6rem;text-align:right}
th{background:#f7fafc}td.l,th.l{text-align:left}
tr.fail td{background:#fff5f5}
.v{font-weight:600;color:#fff;border-radius:.25rem;padding:0 .4rem}
img{max-width:100%;border:1px solid #e2e8f0}
.note{background:#fffaf0;border-left:4px solid #dd6b20;padding:.4rem .8rem;margin:.4rem 0}
details{margin-top:1rem}summary{cursor:pointer;font-weight:600}
code,pre{background:#f7fafc;font-size:.88rem}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _badge(verdict: str) -> str:
    css = {"passed": "passed", "failed": "failed"}.get(verdict, "nogate")
    return f'<span class="badge {css}">{_e(verdict.upper())}</span>'


def _verdict_cell(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict, "#1a202c")
    return f'<td class="l"><span class="v" style="background:{colour}">{_e(verdict)}</span></td>'


def _gate_html(gate: Mapping[str, Any] | None) -> str:
    if gate is None:
        return '<p class="note">No gate.json: the run was not gated (<code>rlgate eval --run RUN_DIR</code>).</p>'
    parts = []  # the verdict badge sits in the page title
    if gate.get("rule"):
        parts.append(f"<p><b>Rule:</b> {_e(gate['rule'])}</p>")
    settings = _gate_settings(gate)
    if settings:
        parts.append(f'<p class="sub">{_e(settings)}</p>')
    parts += [f'<p class="note">{_e(w)}</p>' for w in gate.get("warnings") or []]
    if gate.get("failures"):
        parts.append('<ul class="failures">' + "".join(f"<li>{_e(f)}</li>" for f in gate["failures"]) + "</ul>")
    head = ["metric", "group", "units×k", "before", "after", "Δ", _interval_header(gate), "MDE", "noise", "verdict",
            "flags"]
    rows = []
    for c in gate["comparisons"]:
        cls = ' class="fail"' if c["verdict"] == "regressed" else ""
        cells = [f'<td class="l">{_e(c["metric"])}</td>', f'<td class="l">{_e(c["group"])}</td>',
                 f"<td>{_e(_units(c))}</td>", f"<td>{_fmt(c.get('before'))}</td>", f"<td>{_fmt(c.get('after'))}</td>",
                 f"<td>{_fmt(c.get('delta'), signed=True)}</td>", f"<td>{_e(_interval(c))}</td>",
                 f"<td>{_fmt(c.get('mde'))}</td>", f"<td>{_fmt(c.get('noise'))}</td>", _verdict_cell(c["verdict"]),
                 f'<td class="l">{_e(", ".join(map(str, c.get("flags") or [])))}</td>']
        rows.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    header = "".join(f'<th class="l">{h}</th>' if h in ("metric", "group", "verdict", "flags") else f"<th>{_e(h)}</th>"
                     for h in head)
    parts.append(f'<table class="gate"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return "\n".join(parts)


def _alarms_html(run: ReportData) -> str:
    if run.monitor is None:
        return '<p class="note">No monitor.json: the run was trained without the HackMonitor; no alarms are marked.</p>'
    if not run.alarms:
        return "<p>The monitor raised no alarms.</p>"
    rows = "".join(f'<tr><td>{a.step:g}</td><td class="l" style="color:{ALARM_COLOURS.get(a.kind, "#1a202c")}">'
                   f'<b>{_e(a.kind)}</b></td><td class="l">{_e(a.message)}</td></tr>' for a in run.alarms)
    return ('<table class="alarms"><thead><tr><th>step</th><th class="l">alarm</th><th class="l">detail</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>")


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        for key in value:
            yield from _flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def _config_html(config: Mapping[str, Any]) -> str:
    rows = "".join(f'<tr><td class="l"><code>{_e(k)}</code></td><td class="l">'
                   f"{_e(v if isinstance(v, str) else json.dumps(v))}</td></tr>" for k, v in _flatten(config))
    return ("<details><summary>Run config (every knob, versions, prompt fingerprint)</summary>"
            f'<table class="config"><tbody>{rows}</tbody></table></details>')


def _env_label(config: Mapping[str, Any]) -> str | None:
    """The environment the run was graded with, as config.json records it (``Env.describe()``).

    Shown beside every verdict because categories and markers mean nothing without it: two
    runs' ``with_id`` rows compare only when the same environment graded them.
    """
    env = config.get("env")
    if isinstance(env, Mapping) and env.get("name"):
        version = f" v{env['version']}" if env.get("version") not in (None, "") else ""
        fingerprint = f" {str(env['fingerprint'])[:15]}" if env.get("fingerprint") else ""
        return f"env {env['name']}{version}{fingerprint}"
    spec = _lookup(config, "env")
    return f"env {spec}" if isinstance(spec, str) else None


def _summary_line(run: ReportData) -> str:
    bits = [str(v) for v in (_env_label(run.config), _lookup(run.config, "method", "trainer"),
                             _lookup(run.config, "base_model", "model")) if v]
    steps = {m["step"] for m in run.metrics}
    bits.append(f"{len(steps)} logged steps" + (f" (last {max(steps):g})" if steps else ""))
    prompts = run.config.get("prompts")
    fingerprint = (prompts.get("fingerprint") if isinstance(prompts, Mapping) else None) or \
        _lookup(run.config, "prompt_fingerprint")  # not the environment's fingerprint beside it
    if fingerprint:
        bits.append(f"prompts {fingerprint}")
    return " · ".join(bits)



def write_report(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Write ``report.html`` (or ``out``) for a run folder, with its PNG plots beside it.

    The plots are ``<stem>-curves.png`` and ``<stem>-categories.png`` in the page's folder,
    linked relatively, so the folder copied anywhere still renders. Every file is written
    atomically, and nothing is written until the whole folder has been read and checked.
    Returns the page's path.

    :raises DataError: a required file (config.json, metrics.jsonl) is missing, or a present
        file is corrupt; the message names the file and line.
    :raises UsageError: matplotlib is not installed.
    """
    if is_recipe_folder(run_dir):
        return _write_recipe_report(Path(run_dir), out)
    run = load_report_data(run_dir)
    page = Path(out) if out is not None else run.path / REPORT_NAME
    curves_name, categories_name = f"{page.stem}-curves.png", f"{page.stem}-categories.png"
    curves, categories = plot_curves(run), plot_categories(run)
    atomic_write(page.parent / curves_name, curves)
    if categories is not None:
        atomic_write(page.parent / categories_name, categories)
    else:
        (page.parent / categories_name).unlink(missing_ok=True)  # a stale plot must not outlive its data

    body = [f"<h1>{_e(run.name)} {_badge(run.verdict)}</h1>", f'<p class="sub">{_e(_summary_line(run))}</p>']
    body += [f'<p class="note">{_e(n)}</p>' for n in run.notes]
    body += ["<h2>Gate</h2>", _gate_html(run.gate), "<h2>pass@1 by category</h2>"]
    if categories is not None:
        body.append(f'<img src="{_e(categories_name)}" alt="pass@1 by category, before and after">')
    else:
        body.append('<p class="note">No holdout rows and no gate.json: nothing to compare by category.</p>')
    body += ["<h2>Training</h2>", f'<img src="{_e(curves_name)}" alt="reward, KL and completion length by step">',
             "<h3>Monitor alarms</h3>", _alarms_html(run), _config_html(run.config),
             f'<p class="sub">pytest-rlgate {_e(__version__)}; '
             '<code>rlgate report RUN_DIR</code> rewrites this page.</p>']
    atomic_write(page, _page(f"rlgate report: {run.name}", "\n".join(body)).encode("utf-8"))
    return page


def _is_stale(run_dir: Path, page: Path) -> bool:
    if not page.exists():
        return True
    built = page.stat().st_mtime_ns
    inputs = (p for p in run_dir.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
    return any(p.stat().st_mtime_ns > built for p in inputs)


def run_dirs(root: str | os.PathLike[str]) -> list[Path]:
    """Direct subfolders holding config.json (a run) or recipe.json (a recipe over runs); hidden
    ones (a run still being written) are skipped."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")
                  and ((p / "config.json").is_file() or is_recipe_folder(p)))


def write_index(runs_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Write ``index.html`` linking every run folder under ``runs_dir`` with its gate verdict.

    A run folder is a direct subfolder holding ``config.json``. A run whose report is
    missing or older than its files gets its report (re)written first, so no link dangles.
    """
    root = Path(runs_dir)
    runs = run_dirs(root)
    if not runs:
        raise DataError("no run folders here (a run folder is a subfolder with config.json); "
                        "pass the folder that holds runs/<name>/", path=root)
    page = Path(out) if out is not None else root / INDEX_NAME
    rows = []
    for run_dir in runs:
        report = run_dir / REPORT_NAME
        if _is_stale(run_dir, report):
            write_report(run_dir)
        link = os.path.relpath(report, page.parent).replace(os.sep, "/")
        if is_recipe_folder(run_dir):
            rows.append(_recipe_index_row(run_dir, link, page.parent))
            continue
        run = load_report_data(run_dir)
        thumb = os.path.relpath(run_dir / f"{Path(REPORT_NAME).stem}-curves.png", page.parent).replace(os.sep, "/")
        pass_rows = _pass_comparisons(run.gate)
        regressed = sorted(g for g, c in pass_rows.items() if c["verdict"] == "regressed")
        moves = ", ".join(f"{g} {_fmt(c.get('delta'), 2, signed=True)}" for g, c in pass_rows.items())
        alarms = "–" if run.monitor is None else ", ".join(f"{a.kind}@{a.step:g}" for a in run.alarms) or "none"
        rows.append(f'<tr><td class="l"><a href="{_e(link)}">{_e(run.name)}</a></td>'
                    f'<td class="l">{_badge(run.verdict)}</td><td class="l">{_e(", ".join(regressed) or "–")}</td>'
                    f'<td class="l">{_e(moves or "–")}</td><td class="l">{_e(alarms)}</td>'
                    f'<td class="l">{_e(_summary_line(run))}</td>'
                    f'<td><a href="{_e(link)}"><img src="{_e(thumb)}" alt="curves" style="width:220px"></a></td></tr>')
    body = (f"<h1>rlgate runs in {_e(root.resolve().name)}</h1>"
            '<table class="index"><thead><tr><th class="l">run</th><th class="l">gate</th>'
            '<th class="l">regressed</th><th class="l">Δ pass@1</th><th class="l">alarms</th>'
            '<th class="l">details</th><th>curves</th></tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table>")
    atomic_write(page, _page("rlgate runs", body).encode("utf-8"))
    return page


# --------------------------------------------------------------------------- recipes


def is_recipe_folder(path: str | os.PathLike[str]) -> bool:
    """True for a recipe folder (``runs/<name>-recipe/``, written by ``rlgate train --seeds``)."""
    return (Path(path) / RECIPE_FILE).is_file()


def _read_recipe(path: Path) -> dict[str, Any]:
    """recipe.json, checked for the fields the page reads."""
    record = _read_json_object(_required(path / RECIPE_FILE))
    gate = record.get("gate")
    if not isinstance(gate, dict) or gate.get("kind") != "recipe" or not isinstance(gate.get("passed"), bool) \
            or not isinstance(gate.get("comparisons"), list):
        raise DataError("expected 'gate' to be a recipe gate (RecipeGateResult.to_dict(): kind 'recipe', a boolean "
                        "'passed', a list 'comparisons'); re-run `rlgate train --seeds`", path=path / RECIPE_FILE)
    for i, c in enumerate(gate["comparisons"]):
        if not isinstance(c, dict) or not isinstance(c.get("seeds"), list) or "verdict" not in c:
            raise DataError(f"gate.comparisons[{i}] needs a 'verdict' and a list 'seeds'", path=path / RECIPE_FILE)
    return record


def _recipe_summary(record: Mapping[str, Any]) -> str:
    gate = record["gate"]
    bits = [f"gate {'PASSED' if gate['passed'] else 'FAILED'}", str(record.get("method") or ""),
            _env_label(record) or "", f"trainer seeds {', '.join(map(str, gate.get('seeds') or []))}"]
    return " · ".join(b for b in bits if b)


def plot_recipe(name: str, gate: Mapping[str, Any]) -> bytes | None:
    """Per group: the recipe interval and delta coloured by verdict, each seed's own delta and
    interval as a dot just under it, and the ±margin band; None without pass@1 rows."""
    rows = sorted((c for c in gate["comparisons"] if c["metric"] == "pass@1"),
                  key=lambda c: (c["group"] != "overall", c["group"]))
    if not rows:
        return None
    fig = _new_figure(9.0, max(3.0, 1.2 + 0.9 * len(rows)))
    ax = fig.subplots()
    margin = gate.get("margin")
    if _is_number(margin) and margin > 0:
        ax.axvspan(-margin, margin, color="#edf2f7", label=f"±{margin:g} margin (flat)")
    ax.axvline(0, color="#1a202c", linewidth=0.8)
    ticks = []
    for i, c in enumerate(rows):
        y = float(len(rows) - 1 - i)
        ticks.append((y, c["group"]))
        colour = VERDICT_COLOURS.get(c["verdict"], "#1a202c")
        if c.get("low") is not None and c.get("high") is not None:
            ax.plot([c["low"], c["high"]], [y, y], color=colour, linewidth=5, alpha=0.6, solid_capstyle="butt",
                    label="recipe interval (units and seeds)" if i == 0 else None)
        ax.plot([c["delta"]], [y], "D", color=colour, markersize=7)
        ax.annotate(f"{c['verdict']} · {c['seeds_line']}", xy=(c["delta"], y), xytext=(0, 8),
                    textcoords="offset points", ha="center", fontsize=8, color=colour, fontweight="bold")
        seeds = c["seeds"]
        for j, seed in enumerate(seeds):
            yy = y - 0.18 - 0.22 * j / max(len(seeds) - 1, 1)
            if seed.get("low") is not None and seed.get("high") is not None:
                ax.plot([seed["low"], seed["high"]], [yy, yy], color="#a0aec0", linewidth=1)
            ax.plot([seed["delta"]], [yy], "o", markersize=5, label="each seed alone" if i == 0 and j == 0 else None,
                    color=VERDICT_COLOURS["regressed"] if seed["verdict"] == "regressed" else "#2d3748")
            ax.annotate(str(seed["seed"]), xy=(seed["delta"], yy), xytext=(5, -3), textcoords="offset points",
                        fontsize=7, color="#4a5568")
    ax.set_yticks([y for y, _ in ticks], [g for _, g in ticks])
    ax.set_ylim(-0.8, len(rows) - 0.4)
    ax.set_xlabel("Δ pass@1, after − before: the recipe (diamond, its interval) and each seed (dots)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, fontsize=8, frameon=False)
    fig.suptitle(f"{name}: the recipe across training seeds", fontsize=11)
    return _png_bytes(fig)


def _recipe_html(record: Mapping[str, Any], folder: Path) -> str:
    gate = record["gate"]
    parts = [f"<p><b>Rule:</b> {_e(gate.get('rule', ''))}</p>",
             f'<p class="sub">{_e(recipe_text.settings_line(gate))}</p>']
    parts += [f'<p class="note">{_e(w)}</p>' for w in gate.get("warnings") or []]
    if gate.get("failures"):
        parts.append('<ul class="failures">' + "".join(f"<li>{_e(f)}</li>" for f in gate["failures"]) + "</ul>")
    head = ["metric", "group", "units×k", "seeds", "before", "after", "Δ", _interval_header(gate), "MDE",
            "per-seed Δ", "verdict", "regressed", "each seed", "flags"]
    rows = []
    for c in gate["comparisons"]:
        each = "; ".join(f"{s['seed']}: {_fmt(s.get('delta'), signed=True)} {s['verdict']}" for s in c["seeds"])
        dots = recipe_text.seed_dots([s["delta"] for s in c["seeds"]], c.get("low"), c.get("high"))
        flags = [*map(str, c.get("flags") or []), *([c["reason"]] if c.get("reason") else [])]
        cls = ' class="fail"' if c["verdict"] == "regressed" else ""
        cells = [f'<td class="l">{_e(c["metric"])}</td>', f'<td class="l">{_e(c["group"])}</td>',
                 f"<td>{_e(_units(c))}</td>", f"<td>{_e(c.get('n_seeds'))}</td>",
                 f"<td>{_fmt(c.get('before'))}</td>", f"<td>{_fmt(c.get('after'))}</td>",
                 f"<td>{_fmt(c.get('delta'), signed=True)}</td>", f"<td>{_e(_interval(c))}</td>",
                 f"<td>{_fmt(c.get('mde'))}</td>", f'<td class="l"><code>{_e(dots)}</code></td>',
                 _verdict_cell(c["verdict"]), f"<td>{_e(c.get('regressed_seeds'))} of {_e(c.get('n_seeds'))}</td>",
                 f'<td class="l">{_e(each)}</td>', f'<td class="l">{_e(", ".join(flags))}</td>']
        rows.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    header = "".join(f'<th class="l">{_e(h)}</th>' if h in ("metric", "group", "per-seed Δ", "verdict", "each seed",
                                                           "flags") else f"<th>{_e(h)}</th>" for h in head)
    parts.append(f'<table class="gate"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    parts.append(f'<p class="sub">{_e(recipe_text.DOTS_LEGEND)}</p>')
    links = []
    for seed, where in (record.get("runs") or {}).items():
        target = (folder / str(where) / REPORT_NAME)
        href = os.path.relpath(target, folder).replace(os.sep, "/")
        links.append(f'<li>seed {_e(seed)}: <a href="{_e(href)}">{_e(Path(str(where)).name)}</a></li>')
    if links:
        parts.append("<h2>Each seed's run</h2><ul>" + "".join(links) + "</ul>")
    return "\n".join(parts)


def _write_recipe_report(path: Path, out: str | os.PathLike[str] | None) -> Path:
    """report.html of a recipe folder: the recipe gate table with per-seed dots, and its plot."""
    record = _read_recipe(path)
    page = Path(out) if out is not None else path / REPORT_NAME
    plot_name = f"{page.stem}-recipe.png"
    plot = plot_recipe(path.name, record["gate"])
    if plot is not None:
        atomic_write(page.parent / plot_name, plot)
    body = [f"<h1>{_e(path.name)} {_badge('passed' if record['gate']['passed'] else 'failed')}</h1>",
            f'<p class="sub">{_e(_recipe_summary(record))}</p>', "<h2>Recipe gate</h2>"]
    if plot is not None:
        body.append(f'<img src="{_e(plot_name)}" alt="the recipe interval and each seed, by category">')
    body += [_recipe_html(record, page.parent), _config_html({"knobs": record.get("knobs") or {}}),
             f'<p class="sub">pytest-rlgate {_e(__version__)}; <code>rlgate report RUN_DIR</code> rewrites '
             "this page.</p>"]
    atomic_write(page, _page(f"rlgate recipe: {path.name}", "\n".join(body)).encode("utf-8"))
    return page


def _recipe_index_row(folder: Path, link: str, index_dir: Path) -> str:
    record = _read_recipe(folder)
    gate = record["gate"]
    pass_rows = {c["group"]: c for c in gate["comparisons"] if c["metric"] == "pass@1"}
    regressed = sorted(g for g, c in pass_rows.items() if c["verdict"] == "regressed")
    moves = ", ".join(f"{g} {_fmt(c.get('delta'), 2, signed=True)}" for g, c in pass_rows.items())
    thumb = os.path.relpath(folder / f"{Path(REPORT_NAME).stem}-recipe.png", index_dir).replace(os.sep, "/")
    return (f'<tr><td class="l"><a href="{_e(link)}">{_e(folder.name)}</a></td>'
            f'<td class="l">{_badge("passed" if gate["passed"] else "failed")}</td>'
            f'<td class="l">{_e(", ".join(regressed) or "–")}</td><td class="l">{_e(moves or "–")} (recipe)</td>'
            f'<td class="l">–</td><td class="l">{_e(_recipe_summary(record))}</td>'
            f'<td><a href="{_e(link)}"><img src="{_e(thumb)}" alt="recipe" style="width:220px"></a></td></tr>')


# --------------------------------------------------------------------------- text


def report_text(run_dir: str | os.PathLike[str]) -> str:
    """The report for a terminal: header, gate table, curve summary and alarms; no plots.

    A recipe folder's is its recipe gate: the recipe table with per-seed dots, and each seed.
    """
    from tabulate import tabulate

    if is_recipe_folder(run_dir):
        record = _read_recipe(Path(run_dir))
        return "\n".join([f"recipe {Path(run_dir).name}: {_recipe_summary(record)}",
                          recipe_text.render_report(record["gate"])])
    run = load_report_data(run_dir)
    lines = [f"run {run.name}: gate {run.verdict.upper()}", _summary_line(run)]
    if run.gate is not None:
        settings = _gate_settings(run.gate)
        lines += [f"gate: {settings}"] if settings else []
        table = [[c["metric"], c["group"], _units(c), _fmt(c.get("before")), _fmt(c.get("after")),
                  _fmt(c.get("delta"), signed=True), _interval(c), _fmt(c.get("mde")), c["verdict"],
                  ", ".join(map(str, c.get("flags") or []))] for c in run.gate["comparisons"]]
        lines += ["", tabulate(table, headers=["metric", "group", "units×k", "before", "after", "delta",
                                               _interval_header(run.gate), "MDE", "verdict", "flags"],
                               disable_numparse=True,
                               colalign=("left", "left", "right", "right", "right", "right", "left", "right", "left",
                                         "left")), ""]
        if run.gate.get("rule"):
            lines.append(f"rule: {run.gate['rule']}")
        lines += [f"FAIL: {f}" for f in run.gate.get("failures") or []]
    lines.append("")
    for name, _, candidates in CURVES:
        key, steps, values = _series(run.metrics, candidates)
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
