"""``rlgate baseline save RUN_DIR --out PATH``: keep a run's graded rows as a stored baseline.

The CI recipe gates each candidate against the released model's rows kept in the
repository instead of re-sampling the base at every run. After a release, save the
released run's after-rows (its policy is the new "before"), or ``--base-run N`` for one of
its base runs, and commit the file; ``.jsonl.gz`` keeps it small.
"""

from __future__ import annotations

import argparse

from ..data.provenance import sampled_with
from ..options import output_file
from ..train.baseline import save_baseline

HELP = "keep a run's graded rows as a stored baseline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    save = actions.add_parser("save", help="write a finished run's rows as a baseline",
                              description="write a finished run's after-rows (or one base run) as a baseline")
    save.add_argument("run_dir", metavar="RUN_DIR", help="a finished runs/<name>/ folder")
    save.add_argument("--out", required=True, metavar="PATH", type=output_file,
                      help="baseline file to write, e.g. baselines/release.jsonl.gz (.gz: compressed)")
    save.add_argument("--base-run", type=int, default=None, metavar="N",
                      help="save base run N (0 = the first) instead of the trained policy's after-rows")


def run(args: argparse.Namespace) -> int:
    rows = save_baseline(args.run_dir, args.out, base_run=args.base_run)
    header = rows.header or {}
    which = "after-rows" if args.base_run is None else f"base run {args.base_run}"
    print(f"wrote {len(rows)} rows ({which} of {args.run_dir}; env {header.get('env')} "
          f"{str(header.get('env_fingerprint'))[:15]}, k {sampled_with(header, 'k')}) to {args.out}")
    return 0
