"""``rlgate report RUN_DIR [--out PATH] [--index] [--text]``: write a run's report.html.

Exit 0 when the page was written, whatever the gate said (the verdict is on the page; the
gate's own exit code belongs to ``rlgate gate`` and ``rlgate eval``); exit 2 with one line
naming the missing or corrupt file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..options import output_file
from ..report import index_folders, report_text, run_dirs, write_index, write_report

HELP = "write report.html with plots for a run folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path,
                        help="a run folder (runs/<name>/) as written by rlgate train; with --index, "
                             "the folder that holds several")
    parser.add_argument("--out", metavar="PATH", type=output_file, default=None,
                        help="where to write the page (default RUN_DIR/report.html, or RUN_DIR/index.html "
                             "with --index); the PNG plots go next to it")
    parser.add_argument("--index", action="store_true",
                        help="RUN_DIR holds run folders (runs, recipes and watched runs): (re)write each stale "
                             "report and an index page linking them with their gate verdicts, naming any folder "
                             "left out and why")
    parser.add_argument("--text", action="store_true",
                        help="also print the plain-text report (gate table, curves, alarms)")


def run(args: argparse.Namespace) -> int:
    if args.index:
        page = write_index(args.run_dir, args.out)
        for why in index_folders(args.run_dir)[1]:
            print(f"left out {why}")
        if args.text:  # the runs the index links: a hidden run is still being written
            print("\n\n".join(report_text(p) for p in run_dirs(args.run_dir)))
    else:
        page = write_report(args.run_dir, args.out)
        if args.text:
            print(report_text(args.run_dir))
    print(f"wrote {page}")
    return 0
