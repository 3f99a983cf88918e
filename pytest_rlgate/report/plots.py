"""The report's plots: training curves, pass@1 by category, and a recipe across seeds.

matplotlib is imported only while drawing, through its object API (``Figure`` +
``FigureCanvasAgg``): no pyplot state and no change to the caller's global backend. Every
plot is returned as PNG bytes without a version stamp, so the same run draws the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UsageError
from ..train.run import NONFINITE
from .data import ReportData, is_number
from .levels import LEVEL_CONFIDENCE, Level, gate_confidence, groups, levels, pass_comparisons, series

if TYPE_CHECKING:  # matplotlib loads when a report draws
    from matplotlib.figure import Figure

__all__ = ["ALARM_COLOURS", "CURVES", "VERDICT_COLOURS", "gapped_series", "ink_on", "plot_categories", "plot_curves",
           "plot_recipe"]

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
    "insufficient": "#cbd5e0",  # light, where flat is dark: too few units to tell is not a verdict of no change
    "unresolved": "#6b46c1",
}


def ink_on(colour: str) -> str:
    """The text colour that reads on a ``#rrggbb`` background: dark on a light verdict, white on the others."""
    return "#1a202c" if sum(int(colour[i:i + 2], 16) for i in (1, 3, 5)) > 3 * 0xB0 else "#ffffff"


BEFORE_COLOUR, AFTER_COLOUR, MONITOR_COLOUR = "#a0aec0", "#2b6cb0", "#319795"
GAP_COLOUR = "#c53030"


def _flagged(record: Mapping[str, Any], key: str) -> bool:
    """Whether *record* logged *key* as NaN or infinity (null, named under ``nonfinite``)."""
    named = record.get(NONFINITE)
    return record.get(key) is None and isinstance(named, Mapping) and key in named


def gapped_series(records: Sequence[Mapping[str, Any]], candidates: Sequence[str],
                  ) -> tuple[str | None, list[float], list[float], list[float]]:
    """(key, steps, values, gap steps) of the first candidate logged at all: a step whose value was
    NaN or infinite is NaN in *values* (matplotlib breaks the line there) and listed in the gaps."""
    for key in candidates:
        points = sorted((float(m["step"]), float(m[key]) if is_number(m.get(key)) else math.nan) for m in records
                        if (is_number(m.get(key)) and math.isfinite(m[key])) or _flagged(m, key))
        if points:
            return key, [p[0] for p in points], [p[1] for p in points], [p[0] for p in points if math.isnan(p[1])]
    return None, [], [], []


def _new_figure(width: float, height: float) -> Figure:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("run reports draw with matplotlib, which is not installed: "
                         "pip install 'pytest-rlgate[report]'") from None
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png_bytes(fig: Figure) -> bytes:
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
        key, steps, values, gaps = gapped_series(run.metrics, candidates)
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
        if gaps:  # a diverged step: a gap in the line, and a mark on the axis where it is
            handles.append(ax.scatter(gaps, [0.03] * len(gaps), transform=ax.get_xaxis_transform(), marker="x",
                                      color=GAP_COLOUR, s=28, zorder=5, clip_on=False,
                                      label=f"not a number (NaN/inf) at {len(gaps)} step{'s' * (len(gaps) > 1)}"))
            if len(gaps) == len(steps):
                ax.text(0.5, 0.5, f"every logged {key} is NaN or infinite", ha="center", va="center",
                        transform=ax.transAxes, color=GAP_COLOUR)
        if name == "reward" and key == "reward":
            _, std_steps, stds, _ = gapped_series(run.metrics, ("reward_std",))
            if std_steps == steps:
                mean, spread = np.array(values), np.array(stds)
                handles.append(ax.fill_between(steps, mean - spread, mean + spread, color=AFTER_COLOUR, alpha=0.15,
                                               linewidth=0, label="± reward_std (within group)"))
        monitor_key = {"reward": "proxy_reward", "length": "length"}.get(name)
        _, m_steps, m_values = series(history, (monitor_key,)) if monitor_key else (None, [], [])
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
    names = groups(run)
    if not names:
        return None
    comparisons = pass_comparisons(run.gate)
    pooled = [r for rows in run.before.values() for r in rows]
    confidence = gate_confidence(run.gate)  # the bars at the table's level, not a level of their own
    before_levels = levels(pooled, confidence) if pooled else {}
    after_levels = levels(run.after, confidence) if run.after else {}
    per_base_run = [levels(rows, confidence) for rows in run.before.values()] if len(run.before) > 1 else []

    def level(by_group: dict[str, Level], group: str, side: str) -> Level | None:
        if group in by_group:
            return by_group[group]
        value = comparisons.get(group, {}).get(side)
        return None if value is None else Level(float(value), None, None, 0)

    fig = _new_figure(11.0, max(3.2, 1.2 + 0.6 * len(names)))
    left, right = fig.subplots(1, 2, width_ratios=[3, 2], sharey=True)
    y = np.arange(len(names))[::-1].astype(float)
    height = 0.38
    sides = ((height / 2, "before", before_levels, BEFORE_COLOUR, "before (base)"),
             (-height / 2, "after", after_levels, AFTER_COLOUR, "after"))
    for offset, side, side_levels, colour, label in sides:
        got = [level(side_levels, g, side) for g in names]
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
    for i, base_levels in enumerate(per_base_run):
        xs = [base_levels[g].value if g in base_levels else np.nan for g in names]
        left.plot(xs, y + height / 2, "d", color="#4a5568", markersize=4, label="each base run" if i == 0 else None)
    left.set_xlim(0, 1.12)
    left.set_xticks(np.linspace(0, 1, 6))
    left.set_yticks(y, names)
    shown = sorted({f"{confidence.get(g, LEVEL_CONFIDENCE):.1%}" for g in names})
    at = shown[0] + ", the gate's level" if len(shown) == 1 and confidence else " / ".join(shown)
    left.set_xlabel(f"pass@1 (error bars: {at}, bootstrap over units)")
    left.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, fontsize=8, frameon=False)
    left.grid(axis="x", alpha=0.3)

    margin = (run.gate or {}).get("margin")
    if is_number(margin) and margin > 0:
        right.axvspan(-margin, margin, color="#edf2f7", label=f"±{margin:g} margin (flat)")
    right.axvline(0, color="#1a202c", linewidth=0.8)
    for yy, group in zip(y, names):
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
    elif is_number(margin) and margin > 0:
        right.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8, frameon=False)
    fig.suptitle(f"{run.name}: pass@1 by category", fontsize=11)
    return _png_bytes(fig)


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
    if is_number(margin) and margin > 0:
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
