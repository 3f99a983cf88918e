"""Run reports: one HTML page per run folder, an index over many, and a plain-text twin.

A run folder (``runs/<name>/``, written by ``rlgate train``) holds the evidence a reviewer
needs to believe a gate verdict: the training curves, the monitor's alarms, the holdout rows
before and after, and the gate's comparisons. :func:`write_report` turns that folder into
``report.html`` with PNG plots next to it, linked relatively; :func:`report_text` renders
the same facts for a terminal. Nothing here trains, samples or recomputes the gate: the page
shows what the run recorded (the only numbers computed here are display intervals on the
pass@1 levels).

Modules: ``data`` (reading a run or recipe folder through the run's own readers),
``levels`` (pass@1 levels with display bands, and curves), ``plots`` (matplotlib, imported
while drawing), ``html`` (the page's style and parts), ``text`` (shared formatting and the
terminal report), ``pages`` (writing report.html and index.html).
"""

from __future__ import annotations

from .data import (
                   INDEX_NAME,
                   RECIPE_FILE,
                   REPORT_NAME,
                   ReportData,
                   index_folders,
                   is_recipe_folder,
                   load_report_data,
                   run_dirs,
)
from .pages import write_index, write_report
from .plots import plot_recipe
from .text import report_text

__all__ = ["INDEX_NAME", "RECIPE_FILE", "REPORT_NAME", "ReportData", "index_folders", "is_recipe_folder",
           "load_report_data", "plot_recipe", "report_text", "run_dirs", "write_index", "write_report"]
