"""A watched run at a glance: every checkpoint's per-category verdicts as a strip, the pick marked.

Rows are the gated comparisons (pass@1 and each guard, per category and overall), columns
the checkpoints in step order; each cell is the house gate's verdict at that look. The
column the sequential test stopped on, the pick and the checkpoints that cannot be told
apart from it are marked. :func:`strip_text` is the terminal's version (``rlgate select``),
:func:`plot_strip` the PNG a watch folder's ``report.html`` shows
(:func:`~pytest_rlgate.report.pages.write_watch_report`), :func:`watch_text` its terminal twin.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError
from ..watch.looks import Look
from ..watch.select import Selection
from .data import LOOKS_FILE, is_watch_folder
from .plots import VERDICT_COLOURS, _new_figure, _png_bytes, ink_on

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MARKS", "SYMBOLS", "is_watch_folder", "legend_text", "plot_strip", "read_watch", "strip_figure",
           "strip_rows", "strip_text", "watch_text"]

#: one character per verdict, for the terminal
SYMBOLS = {"moved": "+", "flat": "=", "inconclusive": "~", "insufficient": ".", "regressed": "X", "unresolved": "?"}
LOOKS, SELECTION = LOOKS_FILE, "selection.json"
#: the frame round the column the sequential test stopped on (over a white halo: it reads on every verdict)
STOP_FRAME = "#1a202c"


def strip_rows(looks: Sequence[Look]) -> list[tuple[str, list[str | None]]]:
    """(``metric/group``, the verdict at each look or None) for every comparison any look's gate made."""
    names: list[str] = []
    for look in looks:
        for c in () if look.gate is None else look.gate.comparisons:
            name = f"{c.metric.removeprefix('marker:')}/{c.group}"
            if name not in names:
                names.append(name)
    names.sort(key=lambda n: (n.split("/")[0] != "pass@1", n.split("/")[0], n.split("/")[1] == "overall", n))
    rows = []
    for name in names:
        cells: list[str | None] = []
        for look in looks:
            found = None if look.gate is None else next(
                (c.verdict for c in look.gate.comparisons
                 if f"{c.metric.removeprefix('marker:')}/{c.group}" == name), None)
            cells.append(found)
        rows.append((name, cells))
    return rows


#: the marks under (terminal) or above (picture) each checkpoint's column
MARKS = {"!": "the sequential test stopped here", "^": "the pick", "*": "as good as the pick"}


def _marks(looks: Sequence[Look], selection: Selection | None) -> list[str]:
    """Each look's mark: ``!`` where the sequential test stopped, ``^`` the pick, ``*`` as good as it."""
    marks = ["!" if look.regressed else "" for look in looks]
    if selection is not None:
        for i, look in enumerate(looks):
            if look.step == selection.best:
                marks[i] = "^"
            elif look.step in selection.tied:
                marks[i] = "*"
    return marks


def legend_text() -> str:
    """The strip's whole legend: every verdict's symbol, then every mark."""
    return (" ".join(f"{s} {v}" for v, s in SYMBOLS.items()) + "; "
            + ", ".join(f"{m} {meaning}" for m, meaning in MARKS.items()))


def strip_text(looks: Sequence[Look], selection: Selection | None = None) -> str:
    """The strip in monospace: one column per checkpoint, ``!`` where the run stopped, ``^`` the pick."""
    if not looks:
        return "(no looks yet)"
    rows = strip_rows(looks)
    width = max(len(name) for name, _cells in rows)
    cols = [str(look.step) for look in looks]
    cell = max(len(c) for c in cols) + 1
    lines = [" " * width + " " + "".join(c.rjust(cell) for c in cols)]
    for name, cells in rows:
        lines.append(name.ljust(width) + " " + "".join(SYMBOLS.get(v or "", " ").rjust(cell) for v in cells))
    lines.append(" " * width + " " + "".join((m or " ").rjust(cell) for m in _marks(looks, selection)))
    lines.append(legend_text())
    return "\n".join(lines)


def plot_strip(looks: Sequence[Look], selection: Selection | None = None) -> bytes | None:
    """The strip as a PNG (None when no look carries a gate), legible at its own size (:func:`strip_figure`)."""
    fig = strip_figure(looks, selection)
    return None if fig is None else _png_bytes(fig)


def strip_figure(looks: Sequence[Look], selection: Selection | None = None) -> Figure | None:
    """The strip's figure (None when no look carries a gate), laid out to be read at its own size.

    One cell per comparison and checkpoint in its verdict's colour, with the verdict's
    symbol written in it (so the strip reads in grey too, as the terminal's does); the
    checkpoint's mark (``!``, ``^``, ``*``, as in the terminal) on a second row of labels
    above the columns, where neither the title nor a neighbour can cover it; a thick frame
    round the column where the sequential test stopped, near black over a white halo so it
    stands out on any cell; the legend (verdicts, then marks) beside it.
    """
    rows = strip_rows(looks)
    if not rows:
        return None
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch, Rectangle

    label = max(len(name) for name, _cells in rows)
    width = 2.6 + 0.075 * label + 0.42 * len(looks)  # the labels, the columns and the legend all fit
    fig = _new_figure(max(5.0, width), max(2.4, 1.2 + 0.3 * len(rows)))
    ax = fig.add_subplot(1, 1, 1)
    blank = to_rgb("#ffffff")
    grid = [[to_rgb(VERDICT_COLOURS.get(v, "#ffffff")) if v else blank for v in cells] for _name, cells in rows]
    ax.imshow(grid, aspect="auto", interpolation="nearest")
    for r, (_name, cells) in enumerate(rows):
        for i, verdict in enumerate(cells):
            if verdict:
                ax.text(i, r, SYMBOLS.get(verdict, ""), ha="center", va="center", fontsize=7,
                        color=ink_on(VERDICT_COLOURS.get(verdict, "#ffffff")))
    ax.set_yticks(range(len(rows)), [name for name, _cells in rows], fontsize=8)
    ax.set_xticks(range(len(looks)), [str(look.step) for look in looks], fontsize=8)
    ax.set_xlabel("checkpoint (step)", fontsize=9)
    top = ax.secondary_xaxis("top")
    top.set_xticks(range(len(looks)), _marks(looks, selection), fontsize=9, weight="bold")
    top.tick_params(length=0)
    for i, look in enumerate(looks):
        if look.regressed:
            for colour, line in (("#ffffff", 6.0), (STOP_FRAME, 3.0)):
                ax.add_patch(Rectangle((i - 0.5, -0.5), 1, len(rows), fill=False, edgecolor=colour, linewidth=line,
                                       clip_on=False))
    handles = [Patch(facecolor=c, edgecolor="#4a5568", label=f"{SYMBOLS.get(v, '')} {v}")
               for v, c in VERDICT_COLOURS.items() if v in SYMBOLS]
    handles += [Patch(facecolor="none", edgecolor="none", label=f"{m} {meaning}") for m, meaning in MARKS.items()]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title("each checkpoint's verdict against step 0", fontsize=9, pad=14)
    return fig


def read_watch(folder: str | os.PathLike[str]) -> tuple[list[Look], Selection | None, Mapping[str, Any]]:
    """The looks, the selection (if any) and the raw looks.json of a watch folder."""
    root = Path(folder)
    try:
        record = json.loads((root / LOOKS).read_text(encoding="utf-8"))
        looks = [Look.from_dict(r) for r in record["looks"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"not a watch record ({exc}); it is written by rlgate watch or GateCallback",
                        path=root / LOOKS) from None
    selection = None
    if (root / SELECTION).is_file():
        try:
            selection = Selection.from_dict(json.loads((root / SELECTION).read_text(encoding="utf-8")))
        except ValueError as exc:
            raise DataError(f"unreadable selection ({exc})", path=root / SELECTION) from None
    return looks, selection, record


def watch_text(folder: str | os.PathLike[str]) -> str:
    """The terminal's report of a watch folder (``rlgate report DIR --text``): the strip and the selection."""
    root = Path(folder)
    looks, selection, record = read_watch(root)
    lines = [f"watch {root.resolve().name}: {len(looks)} checkpoint(s) watched", "", strip_text(looks, selection)]
    stopped = record.get("stopped_at")
    if isinstance(stopped, Mapping):
        lines += ["", f"the sequential test stopped the run at step {stopped.get('step')}"]
    if selection is not None:
        lines += ["", selection.summary()]
    return "\n".join(lines)
