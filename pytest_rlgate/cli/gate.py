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

BEFORE and AFTER may also be an eval harness's per-sample output (an lm-eval
``--log_samples`` folder, an Inspect ``.eval`` log, a promptfoo ``results.json``, a
verifiers ``results.jsonl``, a NeMo Evaluator bundle; :mod:`pytest_rlgate.data.readers`):
the format is detected (or ``--format``), and ``--category-key``, ``--unit-key``,
``--metric``, ``--pass-threshold`` and ``--filter`` say how a record becomes a row.
``PATH#key=value`` sets a read option for one side (``results.json#provider=ID``).
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from .._io.atomic import atomic_write
from ..data.readers import RowSource, as_side, read_rows, reader_names
from ..errors import RlgateWarning, UsageError
from ..gate.recipe import compare
from ..gate.stats import DEFAULT_METHOD, METHODS
from ..options import CONFIDENCE, RESAMPLES, SEED, SHARE, output_file

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
    parser.add_argument("--json", metavar="PATH", type=output_file, default=None, help="write the result as JSON")
    add_read_arguments(parser)


def add_read_arguments(parser: argparse.ArgumentParser) -> None:
    """How an eval harness's output becomes rows (``rlgate gate`` and ``rlgate convert``)."""
    group = parser.add_argument_group("reading an eval harness's output")
    group.add_argument("--format", choices=reader_names(), default=None,
                       help="the format of every side (default: detected per path)")
    group.add_argument("--category-key", metavar="KEY", default=None,
                       help="dotted path to the category in a harness record (lm-eval: task, group or doc.FIELD; "
                            "Inspect: a metadata key; promptfoo: e.g. testCase.metadata.KEY or namedScores)")
    group.add_argument("--unit-key", metavar="KEY", default=None,
                       help="dotted path to the unit (the resampling cluster; default: the harness's item id)")
    group.add_argument("--metric", metavar="NAME", default=None,
                       help="the score: an lm-eval metric, an Inspect scorer, a promptfoo named score, a verifiers "
                            "metric (default: the harness's first/main one)")
    group.add_argument("--pass-threshold", metavar="X", type=float, default=None,
                       help="a non-binary score passes at >= X (<= X for a lower-is-better lm-eval metric)")
    group.add_argument("--filter", metavar="NAME", default=None,
                       help="lm-eval: the filter to read for tasks scored under several (e.g. strict-match)")
    group.add_argument("--allow-prompt-change", action="store_true",
                       help="lm-eval/Inspect: gate items whose prompt changed between the sides (another chat "
                            "template), reporting how many; default: refused")


def read_sources(specs: list[str], args: argparse.Namespace, names: list[str] | None = None) -> list[RowSource]:
    """Each path as rows in its format, with the read options of *args*; a missing path is a UsageError."""
    out = []
    names = names or ["before", *(["after"] * (len(specs) - 1))]
    for spec, name in zip(specs, names):
        base = spec.rpartition("#")[0] if "#" in spec and not Path(spec).exists() else spec
        if not Path(base).expanduser().exists():
            raise UsageError(f"{name} row file {spec!r} does not exist (a row file, or an eval harness's log)")
        out.append(read_rows(spec, args.format, category=args.category_key, unit=args.unit_key, metric=args.metric,
                             pass_threshold=args.pass_threshold, filter=args.filter,
                             allow_prompt_change=args.allow_prompt_change))
    return out


def run(args: argparse.Namespace) -> int:
    guards = None if args.guard is None else tuple(g for g in args.guard if g)
    before, *afters = (as_side(source) for source in read_sources([args.before, *args.after], args))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RlgateWarning)
        result = compare(
            before, afters[0] if len(afters) == 1 else afters, by=args.by, guards=guards,
            margin=args.margin,
            confidence_level=args.confidence, n_resamples=args.resamples, method=args.method, seed=args.seed,
            max_drop=args.max_drop, require_moved=args.require_moved,
            fail_on_inconclusive=args.fail_on_inconclusive, holm=args.holm, categories=args.categories,
            env=args.env, allow_env_change=args.allow_env_change, shared_units_only=args.shared_units_only,
        )
    print(result.report(verbose=True))
    for warning in caught:
        if not issubclass(warning.category, RlgateWarning):
            print(f"warning: {warning.message}")
    if args.json:
        _write_json(Path(args.json), result.to_dict())
    return 0 if result.passed else 1


def _write_json(target: Path, payload: dict) -> None:
    try:
        atomic_write(target, json.dumps(payload, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write --json {str(target)!r}: {exc.strerror}") from None
