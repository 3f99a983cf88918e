"""``rlgate gate BEFORE.jsonl AFTER.jsonl``: gate graded rows from the command line.

Streams both files (``.jsonl`` or ``.jsonl.gz``; memory grows with the number of units, not
rows), prints the table, and exits 0 when the gate passes, 1 when it fails, 2 on a usage or
data error. ``--env`` names the environment that graded the rows: the gate then guards the
markers it declares and requires its categories on both sides. Without it, the markers of
the registered environment the files' headers name are guarded; foreign files (no header)
guard nothing unless ``--guard`` says so, since guarding a marker the rows never had fails
every row. Files whose headers name different environment fingerprints or prompt sets are
refused (exit 2) unless ``--allow-env-change``; a changed holdout (units on one side only)
is refused unless ``--shared-units-only``.

``rlgate gate BEFORE AFTER AFTER ...``, one AFTER per training seed of the same recipe (each
sampled on BEFORE's holdout), gates the recipe instead (:mod:`pytest_rlgate.gate.recipe`):
per metric and category the recipe interval over units and seeds, each seed's own verdict
and "regressed in k of S seeds"; exit 1 when the recipe regressed.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from .._io.atomic import atomic_write
from ..errors import RlgateWarning, UsageError
from ..gate.flips import DEFAULT_SHOW_FLIPS, FLIPS_IN
from ..gate.recipe import compare
from ..gate.stats import DEFAULT_METHOD, METHODS
from ..options import CONFIDENCE, RESAMPLES, SEED, SHARE, Number, output_file
from ..report.markdown import step_summary_path, write_markdown

#: flips shown per failing comparison
FLIP_COUNT = Number(0, 1000, "3", integer=True)

HELP = "gate AFTER against BEFORE graded rows, by category"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("before", metavar="BEFORE.jsonl", help="graded rows of the base policy")
    parser.add_argument("after", metavar="AFTER.jsonl", nargs="+",
                        help="graded rows of the fine-tuned policy; several, one per training seed of the same "
                             "recipe, gate the recipe across seeds")
    parser.add_argument("--by", default="category", choices=["category"], help="group rows by this field")
    parser.add_argument("--env", metavar="SPEC", default=None,
                        help="environment that graded the rows (a registered name, 'module:attr' or 'module'): "
                             "its guards and categories are the defaults of --guard and --category")
    parser.add_argument("--guard", action="append", metavar="NAME", default=None,
                        help="marker that must not regress (repeatable; default: the --env's guards, else none; "
                             "--guard '' for none)")
    parser.add_argument("--category", action="append", metavar="NAME", default=None, dest="categories",
                        help="declared category that must appear on both sides (repeatable; default: the "
                             "--env's categories, else none)")
    parser.add_argument("--seed", type=SEED, default=0, help="resampling seed (default 0)")
    parser.add_argument("--resamples", type=RESAMPLES, default=10_000, metavar="B", help="bootstrap resamples")
    parser.add_argument("--confidence", type=CONFIDENCE, default=0.95, metavar="LEVEL", help="confidence level")
    parser.add_argument("--method", choices=METHODS, default=DEFAULT_METHOD, help="interval method")
    parser.add_argument("--margin", type=SHARE, default=0.10, metavar="M", help="flat means inside ±M")
    parser.add_argument("--max-drop", type=SHARE, default=None, metavar="X",
                        help="also fail when a lower bound is below -X (non-inferiority)")
    parser.add_argument("--holm", action=argparse.BooleanOptionalAction, default=None,
                        help="Holm-adjust the regression test across categories (default: on from 4 categories)")
    parser.add_argument("--require-moved", action="store_true", help="also fail unless overall pass@1 moved up")
    parser.add_argument("--fail-on-inconclusive", action="store_true",
                        help="also fail on any inconclusive or insufficient verdict")
    parser.add_argument("--allow-env-change", action="store_true",
                        help="compare sides whose headers name different environment fingerprints or prompt sets "
                             "(the result says so); the fix is `rlgate regrade` of the older side")
    parser.add_argument("--shared-units-only", action="store_true",
                        help="the holdout changed: gate the units both sides share and report how many were "
                             "dropped from each side (default: unpaired units are an error)")
    parser.add_argument("--show-flips", type=FLIP_COUNT, default=DEFAULT_SHOW_FLIPS, metavar="N",
                        help=f"name the N scenarios that lost the most in each failing comparison, with a reply "
                             f"from each side (default {DEFAULT_SHOW_FLIPS}; 0 for none)")
    parser.add_argument("--flips-in", choices=FLIPS_IN, default="failing",
                        help="which comparisons list their flips: the failing ones (default) or all")
    parser.add_argument("--policy", metavar="FILE", default=None,
                        help="release policy (YAML or TOML): per category, marker or glob a tier (critical, "
                             "supporting, advisory), its confidence and margin, max_drop, max_relative_drop, "
                             "required, min_units")
    parser.add_argument("--markdown", metavar="PATH", type=output_file, default=None,
                        help="write a Markdown summary for the pull request (also to $GITHUB_STEP_SUMMARY when "
                             "it is set and $CI is)")
    parser.add_argument("--json", metavar="PATH", type=output_file, default=None, help="write the result as JSON")


def run(args: argparse.Namespace) -> int:
    guards = None if args.guard is None else tuple(g for g in args.guard if g)
    for name, path in (("before", Path(args.before)), *(("after", Path(p)) for p in args.after)):
        if not path.is_file():
            raise UsageError(f"{name} row file {str(path)!r} does not exist or is not a file")
    one = len(args.after) == 1
    extra = {"show_flips": args.show_flips, "flips_in": args.flips_in, "policy": args.policy} if one else {}
    if not one and args.policy:
        raise UsageError("--policy applies to one AFTER file (an adapter); a recipe across seeds has no policy yet")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RlgateWarning)
        result = compare(
            args.before, args.after[0] if len(args.after) == 1 else args.after, by=args.by, guards=guards,
            margin=args.margin,
            confidence_level=args.confidence, n_resamples=args.resamples, method=args.method, seed=args.seed,
            max_drop=args.max_drop, require_moved=args.require_moved,
            fail_on_inconclusive=args.fail_on_inconclusive, holm=args.holm, categories=args.categories,
            env=args.env, allow_env_change=args.allow_env_change, shared_units_only=args.shared_units_only,
            **extra,
        )
    print(result.report(verbose=True))
    for warning in caught:
        if not issubclass(warning.category, RlgateWarning):
            print(f"warning: {warning.message}")
    if args.json:
        _write_json(Path(args.json), result.to_dict())
    if one:
        for target, append in ((args.markdown, False), (step_summary_path(), True)):
            if target is not None:
                write_markdown(result, target, append=append)
    return 0 if result.passed else 1


def _write_json(target: Path, payload: dict) -> None:
    try:
        atomic_write(target, json.dumps(payload, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write --json {str(target)!r}: {exc.strerror}") from None
