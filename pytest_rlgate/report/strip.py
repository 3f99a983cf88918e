"""A watched run at a glance: every checkpoint's per-category verdicts as a strip, the pick marked.

Rows are the gated comparisons (pass@1 and each guard, per category and overall), columns
the checkpoints in step order; each cell is the house gate's verdict at that look. The
column the sequential test stopped on, the pick and the checkpoints that cannot be told
apart from it are marked. :func:`strip_text` is the terminal's version (``rlgate select``),
:func:`plot_strip` the PNG a watch folder's ``report.html`` shows (:func:`write_watch_report`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._io.atomic import atomic_write
from .._version import __version__
from ..errors import DataError
from ..watch.looks import Look
from ..watch.select import Selection
from .html import esc, html_page
from .plots import VERDICT_COLOURS, _new_figure, _png_bytes

__all__ = ["SYMBOLS", "is_watch_folder", "plot_strip", "read_watch", "strip_rows", "strip_text", "write_watch_report"]

#: one character per verdict, for the terminal
SYMBOLS = {"moved": "+", "flat": "=", "inconclusive": "~", "insufficient": ".", "regressed": "X", "unresolved": "?"}
LOOKS, SELECTION = "looks.json", "selection.json"


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
    marks = ["!" if look.regressed else " " for look in looks]
    if selection is not None:
        for i, look in enumerate(looks):
            if look.step == selection.best:
                marks[i] = "^"
            elif look.step in selection.tied:
                marks[i] = "*"
    lines.append(" " * width + " " + "".join(m.rjust(cell) for m in marks))
    legend = " ".join(f"{s} {v}" for v, s in SYMBOLS.items())
    lines.append(f"{legend}; ! the sequential test stopped here, ^ the pick, * as good as the pick")
    return "\n".join(lines)


def plot_strip(looks: Sequence[Look], selection: Selection | None = None) -> bytes | None:
    """The strip as a PNG (None when no look carries a gate)."""
    rows = strip_rows(looks)
    if not rows:
        return None
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Rectangle

    fig = _new_figure(max(4.0, 1.2 + 0.45 * len(looks)), max(1.8, 0.9 + 0.32 * len(rows)))
    ax = fig.add_subplot(1, 1, 1)
    blank = to_rgb("#edf2f7")
    grid = [[to_rgb(VERDICT_COLOURS.get(v, "#edf2f7")) if v else blank for v in cells] for _name, cells in rows]
    ax.imshow(grid, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(rows)), [name for name, _cells in rows], fontsize=8)
    ax.set_xticks(range(len(looks)), [str(look.step) for look in looks], fontsize=8)
    ax.set_xlabel("checkpoint (step)", fontsize=9)
    for i, look in enumerate(looks):
        if look.regressed:
            ax.add_patch(Rectangle((i - 0.5, -0.5), 1, len(rows), fill=False, edgecolor="#1a202c", linewidth=2.5))
        if selection is not None and look.step in selection.tied:
            best = look.step == selection.best
            ax.annotate("pick" if best else "as good", (i, -0.5), xytext=(0, 4), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7, color="#1a202c", weight="bold" if best else "normal")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in VERDICT_COLOURS.values()]
    ax.legend(handles, list(VERDICT_COLOURS), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title("verdict of each checkpoint against step 0 (framed: the sequential test stopped)", fontsize=9)
    return _png_bytes(fig)


def is_watch_folder(path: str | os.PathLike[str]) -> bool:
    """A folder written by ``rlgate watch`` or ``GateCallback``: looks.json and no run config."""
    folder = Path(path)
    return (folder / LOOKS).is_file() and not (folder / "config.json").is_file()


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


def write_watch_report(folder: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """``report.html`` of a watch folder: the strip, the selection and the looks' levels."""
    root = Path(folder)
    looks, selection, record = read_watch(root)
    page = Path(out) if out is not None else root / "report.html"
    name = f"{page.stem}-strip.png"
    png = plot_strip(looks, selection)
    if png is not None:
        atomic_write(page.parent / name, png)
    body = [f"<h1>{esc(root.resolve().name)}: {len(looks)} checkpoint(s) watched</h1>"]
    stopped = record.get("stopped_at")
    if stopped:
        body.append(f'<p class="note">The sequential test stopped the run at step {esc(stopped.get("step"))}.</p>')
    if png is not None:
        body.append(f'<img src="{esc(name)}" alt="every checkpoint\'s verdicts by category">')
    if selection is not None:
        body += ["<h2>Selection</h2>", f"<pre>{esc(selection.summary())}</pre>"]
    rows = "".join(f"<tr><td>{look.look}</td><td>{look.step}</td><td>{look.alpha:.2e}</td>"
                   f"<td class=\"l\">{esc(', '.join(look.regressed) or '–')}</td></tr>" for look in looks)
    body += ["<h2>Looks</h2>", '<table><thead><tr><th>look</th><th>step</th><th>level</th>'
             f'<th class="l">stopped on</th></tr></thead><tbody>{rows}</tbody></table>',
             f'<p class="sub">pytest-rlgate {esc(__version__)}; <code>rlgate report DIR</code> rewrites this page.</p>']
    atomic_write(page, html_page(f"rlgate watch: {root.name}", "\n".join(body)).encode("utf-8"))
    return page
