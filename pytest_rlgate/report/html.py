"""The report's HTML: one self-contained page style and the page's parts (gate table,
alarms, config, a recipe's table).

The style sits in the page (no stylesheet file beside it), so a page copied anywhere with its
PNGs renders alike.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..gate import recipe_text
from .data import REPORT_NAME, ReportData
from .plots import ALARM_COLOURS, VERDICT_COLOURS, ink_on
from .text import fmt, gate_settings, interval, interval_header, units

__all__ = ["CSS", "alarms_html", "badge", "config_html", "esc", "flips_html", "gate_html", "html_page", "recipe_html"]

CSS = """
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
table.index td{vertical-align:top}table.index td.l{white-space:normal;overflow-wrap:anywhere}
table.index img.thumb{width:340px;max-width:none}
.note{background:#fffaf0;border-left:4px solid #dd6b20;padding:.4rem .8rem;margin:.4rem 0}
details{margin-top:1rem}summary{cursor:pointer;font-weight:600}
code,pre{background:#f7fafc;font-size:.88rem}
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def html_page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def badge(verdict: str) -> str:
    css = {"passed": "passed", "failed": "failed"}.get(verdict, "nogate")
    return f'<span class="badge {css}">{esc(verdict.upper())}</span>'


def verdict_cell(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict, "#1a202c")
    ink = "" if ink_on(colour) == "#ffffff" else f";color:{ink_on(colour)}"
    return f'<td class="l"><span class="v" style="background:{colour}{ink}">{esc(verdict)}</span></td>'


def gate_html(gate: Mapping[str, Any] | None) -> str:
    if gate is None:
        return '<p class="note">No gate.json: the run was not gated (<code>rlgate eval --run RUN_DIR</code>).</p>'
    parts = []  # the verdict badge sits in the page title
    if gate.get("rule"):
        parts.append(f"<p><b>Rule:</b> {esc(gate['rule'])}</p>")
    settings = gate_settings(gate)
    if settings:
        parts.append(f'<p class="sub">{esc(settings)}</p>')
    parts += [f'<p class="note">{esc(w)}</p>' for w in gate.get("warnings") or []]
    if gate.get("failures"):
        parts.append('<ul class="failures">' + "".join(f"<li>{esc(f)}</li>" for f in gate["failures"]) + "</ul>")
    head = ["metric", "group", "units×k", "before", "after", "Δ", interval_header(gate), "MDE", "noise", "verdict",
            "flags"]
    rows = []
    for c in gate["comparisons"]:
        cls = ' class="fail"' if c["verdict"] == "regressed" else ""
        cells = [f'<td class="l">{esc(c["metric"])}</td>', f'<td class="l">{esc(c["group"])}</td>',
                 f"<td>{esc(units(c))}</td>", f"<td>{fmt(c.get('before'))}</td>", f"<td>{fmt(c.get('after'))}</td>",
                 f"<td>{fmt(c.get('delta'), signed=True)}</td>", f"<td>{esc(interval(c))}</td>",
                 f"<td>{fmt(c.get('mde'))}</td>", f"<td>{fmt(c.get('noise'))}</td>", verdict_cell(c["verdict"]),
                 f'<td class="l">{esc(", ".join(map(str, c.get("flags") or [])))}</td>']
        rows.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    header = "".join(f'<th class="l">{h}</th>' if h in ("metric", "group", "verdict", "flags") else f"<th>{esc(h)}</th>"
                     for h in head)
    parts.append(f'<table class="gate"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    parts += [flips_html(c) for c in gate["comparisons"] if c.get("flips")]
    return "\n".join(parts)


def flips_html(c: Mapping[str, Any]) -> str:
    """A comparison's flips as the gate recorded them: each scenario's counts and one reply from each side."""
    items = []
    for f in c["flips"]:
        sides = []
        for side in ("before", "after"):
            reply = f.get(f"{side}_reply")
            if reply is None:
                continue
            about = f.get(f"{side}_described")
            note = f' <span class="sub">({esc(about)})</span>' if about else ""
            sides.append(f"<li>{side}: <code>{esc(reply)}</code>{note}</li>")
        items.append(f"<li><b>{esc(f['unit'])}</b> {esc(f.get('counts', ''))}<ul>{''.join(sides)}</ul></li>")
    return (f'<details class="flips" open><summary>Flips in {esc(c["metric"])} {esc(c["group"])} '
            f'({esc(c["verdict"])}): the {len(c["flips"])} scenarios that lost the most</summary>'
            f'<ul>{"".join(items)}</ul></details>')


def alarms_html(run: ReportData) -> str:
    if run.monitor is None:
        return '<p class="note">No monitor.json: the run was trained without the HackMonitor; no alarms are marked.</p>'
    if not run.alarms:
        return "<p>The monitor raised no alarms.</p>"
    rows = "".join(f'<tr><td>{a.step:g}</td><td class="l" style="color:{ALARM_COLOURS.get(a.kind, "#1a202c")}">'
                   f'<b>{esc(a.kind)}</b></td><td class="l">{esc(a.message)}</td></tr>' for a in run.alarms)
    return ('<table class="alarms"><thead><tr><th>step</th><th class="l">alarm</th><th class="l">detail</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>")


def flatten(value: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    if isinstance(value, Mapping) and value:
        for key in value:
            yield from flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def config_html(config: Mapping[str, Any]) -> str:
    rows = "".join(f'<tr><td class="l"><code>{esc(k)}</code></td><td class="l">'
                   f"{esc(v if isinstance(v, str) else json.dumps(v))}</td></tr>" for k, v in flatten(config))
    return ("<details><summary>Run config (every knob, versions, prompt fingerprint)</summary>"
            f'<table class="config"><tbody>{rows}</tbody></table></details>')


def recipe_html(record: Mapping[str, Any], folder: Path) -> str:
    gate = record["gate"]
    parts = [f"<p><b>Rule:</b> {esc(gate.get('rule', ''))}</p>",
             f'<p class="sub">{esc(recipe_text.settings_line(gate))}</p>']
    parts += [f'<p class="note">{esc(w)}</p>' for w in gate.get("warnings") or []]
    if gate.get("failures"):
        parts.append('<ul class="failures">' + "".join(f"<li>{esc(f)}</li>" for f in gate["failures"]) + "</ul>")
    head = ["metric", "group", "units×k", "seeds", "before", "after", "Δ", interval_header(gate), "MDE",
            "per-seed Δ", "verdict", "regressed", "each seed", "flags"]
    rows = []
    for c in gate["comparisons"]:
        each = "; ".join(f"{s['seed']}: {fmt(s.get('delta'), signed=True)} {s['verdict']}" for s in c["seeds"])
        dots = recipe_text.seed_dots([s["delta"] for s in c["seeds"]], c.get("low"), c.get("high"))
        flags = [*map(str, c.get("flags") or []), *([c["reason"]] if c.get("reason") else [])]
        cls = ' class="fail"' if c["verdict"] == "regressed" else ""
        cells = [f'<td class="l">{esc(c["metric"])}</td>', f'<td class="l">{esc(c["group"])}</td>',
                 f"<td>{esc(units(c))}</td>", f"<td>{esc(c.get('n_seeds'))}</td>",
                 f"<td>{fmt(c.get('before'))}</td>", f"<td>{fmt(c.get('after'))}</td>",
                 f"<td>{fmt(c.get('delta'), signed=True)}</td>", f"<td>{esc(interval(c))}</td>",
                 f"<td>{fmt(c.get('mde'))}</td>", f'<td class="l"><code>{esc(dots)}</code></td>',
                 verdict_cell(c["verdict"]), f"<td>{esc(c.get('regressed_seeds'))} of {esc(c.get('n_seeds'))}</td>",
                 f'<td class="l">{esc(each)}</td>', f'<td class="l">{esc(", ".join(flags))}</td>']
        rows.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    header = "".join(f'<th class="l">{esc(h)}</th>' if h in ("metric", "group", "per-seed Δ", "verdict", "each seed",
                                                           "flags") else f"<th>{esc(h)}</th>" for h in head)
    parts.append(f'<table class="gate"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    parts.append(f'<p class="sub">{esc(recipe_text.DOTS_LEGEND)}</p>')
    links = []
    for seed, where in (record.get("runs") or {}).items():
        target = (folder / str(where) / REPORT_NAME)
        href = os.path.relpath(target, folder).replace(os.sep, "/")
        links.append(f'<li>seed {esc(seed)}: <a href="{esc(href)}">{esc(Path(str(where)).name)}</a></li>')
    if links:
        parts.append("<h2>Each seed's run</h2><ul>" + "".join(links) + "</ul>")
    return "\n".join(parts)
