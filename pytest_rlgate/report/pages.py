"""Writing reports: ``report.html`` of a run or recipe folder with its PNG plots beside it,
and ``index.html`` over many.

Plain PNG files rather than base64 inside the page because the page then opens from disk,
from a CI artifact or behind any static server alike, the PNGs can be pasted into a pull
request or README on their own, and the HTML stays a few kB that diff cleanly. Every file is
written atomically, and nothing is written until the folder has been read and checked.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._io.atomic import atomic_write
from .._version import __version__
from ..errors import DataError
from .data import (
    INDEX_NAME,
    REPORT_NAME,
    index_folders,
    is_recipe_folder,
    is_watch_folder,
    load_report_data,
    read_recipe,
)
from .html import alarms_html, badge, config_html, esc, gate_html, html_page, recipe_html
from .levels import pass_comparisons
from .plots import plot_categories, plot_curves, plot_recipe
from .strip import plot_strip, read_watch
from .text import fmt, recipe_summary, summary_line

__all__ = ["write_index", "write_report", "write_watch_report"]


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
    if is_watch_folder(run_dir):  # rlgate watch / GateCallback: the checkpoints' verdicts as a strip
        return write_watch_report(run_dir, out)
    run = load_report_data(run_dir)
    page = Path(out) if out is not None else run.path / REPORT_NAME
    curves_name, categories_name = f"{page.stem}-curves.png", f"{page.stem}-categories.png"
    curves, categories = plot_curves(run), plot_categories(run)
    atomic_write(page.parent / curves_name, curves)
    if categories is not None:
        atomic_write(page.parent / categories_name, categories)
    else:
        (page.parent / categories_name).unlink(missing_ok=True)  # a stale plot must not outlive its data

    body = [f"<h1>{esc(run.name)} {badge(run.verdict)}</h1>", f'<p class="sub">{esc(summary_line(run))}</p>']
    body += [f'<p class="note">{esc(n)}</p>' for n in run.notes]
    body += ["<h2>Gate</h2>", gate_html(run.gate), "<h2>pass@1 by category</h2>"]
    if categories is not None:
        body.append(f'<img src="{esc(categories_name)}" alt="pass@1 by category, before and after">')
    else:
        body.append('<p class="note">No holdout rows and no gate.json: nothing to compare by category.</p>')
    body += ["<h2>Training</h2>", f'<img src="{esc(curves_name)}" alt="reward, KL and completion length by step">',
             "<h3>Monitor alarms</h3>", alarms_html(run), config_html(run.config),
             f'<p class="sub">pytest-rlgate {esc(__version__)}; '
             '<code>rlgate report RUN_DIR</code> rewrites this page.</p>']
    atomic_write(page, html_page(f"rlgate report: {run.name}", "\n".join(body)).encode("utf-8"))
    return page


def _is_stale(run_dir: Path, page: Path) -> bool:
    if not page.exists():
        return True
    built = page.stat().st_mtime_ns
    inputs = (p for p in run_dir.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
    return any(p.stat().st_mtime_ns > built for p in inputs)


def write_index(runs_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Write ``index.html`` linking every run folder under ``runs_dir`` with its gate verdict.

    A run folder is a direct subfolder holding ``config.json``. A run whose report is
    missing or older than its files gets its report (re)written first, so no link dangles.
    """
    root = Path(runs_dir)
    runs, left_out = index_folders(root)
    if not runs:
        raise DataError("no run folders here (a run folder is a subfolder with config.json, recipe.json or, for a "
                        "watched run, looks.json); pass the folder that holds runs/<name>/", path=root)
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
        if is_watch_folder(run_dir):
            rows.append(_watch_index_row(run_dir, link, page.parent, root))
            continue
        run = load_report_data(run_dir)
        thumb = os.path.relpath(run_dir / f"{Path(REPORT_NAME).stem}-curves.png", page.parent).replace(os.sep, "/")
        pass_rows = pass_comparisons(run.gate)
        regressed = sorted(g for g, c in pass_rows.items() if c["verdict"] == "regressed")
        moves = ", ".join(f"{g}\u00a0{fmt(c.get('delta'), 2, signed=True)}" for g, c in pass_rows.items())
        named = dict.fromkeys(a.name or f"{a.kind}@{a.step:g}" for a in run.alarms)
        alarms = "–" if run.monitor is None else ", ".join(named) or "none"
        rows.append(f'<tr><td class="l"><a href="{esc(link)}">{esc(run.name)}</a></td>'
                    f'<td class="l">{badge(run.verdict)}</td><td class="l">{esc(", ".join(regressed) or "–")}</td>'
                    f'<td class="l">{esc(moves or "–")}</td><td class="l">{esc(alarms)}</td>'
                    f'<td class="l">{esc(summary_line(run))}</td>'
                    f'<td><a href="{esc(link)}"><img class="thumb" src="{esc(thumb)}" alt="curves"></a></td></tr>')
    body = (f"<h1>rlgate runs in {esc(root.resolve().name)}</h1>"
            '<table class="index"><thead><tr><th class="l">run</th><th class="l">gate</th>'
            '<th class="l">regressed</th><th class="l">Δ pass@1</th><th class="l">alarms</th>'
            '<th class="l">details</th><th>curves</th></tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table>")
    if left_out:
        body += "<h2>Left out</h2><ul>" + "".join(f"<li>{esc(why)}</li>" for why in left_out) + "</ul>"
    atomic_write(page, html_page("rlgate runs", body).encode("utf-8"))
    return page


def _write_recipe_report(path: Path, out: str | os.PathLike[str] | None) -> Path:
    """report.html of a recipe folder: the recipe gate table with per-seed dots, and its plot."""
    record = read_recipe(path)
    page = Path(out) if out is not None else path / REPORT_NAME
    plot_name = f"{page.stem}-recipe.png"
    plot = plot_recipe(path.name, record["gate"])
    if plot is not None:
        atomic_write(page.parent / plot_name, plot)
    body = [f"<h1>{esc(path.name)} {badge('passed' if record['gate']['passed'] else 'failed')}</h1>",
            f'<p class="sub">{esc(recipe_summary(record))}</p>', "<h2>Recipe gate</h2>"]
    if plot is not None:
        body.append(f'<img src="{esc(plot_name)}" alt="the recipe interval and each seed, by category">')
    body += [recipe_html(record, page.parent), config_html({"knobs": record.get("knobs") or {}}),
             f'<p class="sub">pytest-rlgate {esc(__version__)}; <code>rlgate report RUN_DIR</code> rewrites '
             "this page.</p>"]
    atomic_write(page, html_page(f"rlgate recipe: {path.name}", "\n".join(body)).encode("utf-8"))
    return page


def _watch_index_row(folder: Path, link: str, index_dir: Path, root: Path) -> str:
    """A watched run's index row: whether there is a checkpoint to ship, where the run stopped, the pick."""
    looks, selection, record = read_watch(folder)
    stopped = record.get("stopped_at")
    step = stopped.get("step") if isinstance(stopped, dict) else None
    shipped = selection is not None and selection.shipped is not None
    verdict = "passed" if looks and step is None and (selection is None or shipped) else "failed"
    pick = "–" if selection is None or selection.best is None else next(
        (f"step {c.step} {fmt(c.score, 2, signed=True)} ({selection.criterion})" for c in selection.candidates
         if c.step == selection.best), "–")
    details = f"{len(looks)} checkpoint(s) watched" + ("" if step is None else f"; the sequential test stopped at "
                                                                               f"step {step}")
    thumb = os.path.relpath(folder / f"{Path(REPORT_NAME).stem}-strip.png", index_dir).replace(os.sep, "/")
    stops = sorted({name for look in looks for name in look.regressed})
    return (f'<tr><td class="l"><a href="{esc(link)}">{esc(folder.relative_to(root).as_posix())}</a></td>'
            f'<td class="l">{badge(verdict)}</td><td class="l">{esc(", ".join(stops) or "–")}</td>'
            f'<td class="l">{esc(pick)} (pick)</td><td class="l">–</td><td class="l">{esc(details)}</td>'
            f'<td><a href="{esc(link)}"><img src="{esc(thumb)}" alt="strip" style="width:220px"></a></td></tr>')


def _recipe_index_row(folder: Path, link: str, index_dir: Path) -> str:
    record = read_recipe(folder)
    gate = record["gate"]
    pass_rows = {c["group"]: c for c in gate["comparisons"] if c["metric"] == "pass@1"}
    regressed = sorted(g for g, c in pass_rows.items() if c["verdict"] == "regressed")
    moves = ", ".join(f"{g} {fmt(c.get('delta'), 2, signed=True)}" for g, c in pass_rows.items())
    thumb = os.path.relpath(folder / f"{Path(REPORT_NAME).stem}-recipe.png", index_dir).replace(os.sep, "/")
    return (f'<tr><td class="l"><a href="{esc(link)}">{esc(folder.name)}</a></td>'
            f'<td class="l">{badge("passed" if gate["passed"] else "failed")}</td>'
            f'<td class="l">{esc(", ".join(regressed) or "–")}</td><td class="l">{esc(moves or "–")} (recipe)</td>'
            f'<td class="l">–</td><td class="l">{esc(recipe_summary(record))}</td>'
            f'<td><a href="{esc(link)}"><img class="thumb" src="{esc(thumb)}" alt="recipe"></a></td></tr>')


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
                   f"<td class=\"l\">{esc(look.judgement())}</td>"
                   f"<td class=\"l\">{esc(', '.join(look.regressed) or '–')}</td></tr>" for look in looks)
    body += ["<h2>Looks</h2>", '<table><thead><tr><th>look</th><th>step</th><th>level</th>'
             '<th class="l">gate</th><th class="l">the sequential test stopped on</th></tr></thead>'
             f'<tbody>{rows}</tbody></table>',
             f'<p class="sub">pytest-rlgate {esc(__version__)}; <code>rlgate report DIR</code> rewrites this page.</p>']
    atomic_write(page, html_page(f"rlgate watch: {root.name}", "\n".join(body)).encode("utf-8"))
    return page
