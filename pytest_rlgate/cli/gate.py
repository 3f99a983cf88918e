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
import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

from .._io.atomic import atomic_write
from ..errors import RlgateWarning, UsageError
from ..gate import compare
from ..gate.options import GateOptions, shown_default
from ..options import Number, output_file
from ..report.markdown import step_summary_path, write_markdown

HELP = "gate AFTER against BEFORE graded rows, by category"

_METAVARS = {"env": "SPEC", "guards": "NAME", "categories": "NAME", "margin": "M", "max_drop": "X",
             "n_resamples": "B", "confidence_level": "LEVEL", "bootstrap_seed": "INT", "show_flips": "N",
             "policy": "FILE"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("before", metavar="BEFORE.jsonl", help="graded rows of the base policy")
    parser.add_argument("after", metavar="AFTER.jsonl", nargs="+",
                        help="graded rows of the fine-tuned policy; several, one per training seed of the same "
                             "recipe, gate the recipe across seeds")
    for spec in dataclasses.fields(GateOptions):
        _add_option(parser, spec)
    parser.add_argument("--json", metavar="PATH", type=output_file, default=None, help="write the result as JSON")
    parser.add_argument("--markdown", metavar="PATH", type=output_file, default=None,
                        help="write a short Markdown summary for the pull request (also appended to "
                             "$GITHUB_STEP_SUMMARY when it is set under CI)")


def _add_option(parser: argparse.ArgumentParser, spec: dataclasses.Field[Any]) -> None:
    """The flag of one :class:`GateOptions` field: its type, bound, default and help from the field."""
    meta = spec.metadata
    kwargs: dict[str, Any] = {"dest": spec.name, "default": spec.default, "help": meta["help"]}
    if spec.name in ("guards", "categories"):
        kwargs.update(action="append", default=None)
    elif spec.name == "holm":
        kwargs["action"] = argparse.BooleanOptionalAction
    elif spec.default is False:
        kwargs["action"] = "store_true"
    else:
        bound = meta["bound"]
        if isinstance(bound, Number):
            kwargs["type"] = bound
        elif bound is not None:
            kwargs["choices"] = bound.choices
        if spec.default is not None:
            kwargs["help"] = f"{meta['help']} (default {shown_default(spec)})"
    if spec.name in _METAVARS:
        kwargs["metavar"] = _METAVARS[spec.name]
    parser.add_argument(meta["flag"], **kwargs)


def options_from(args: argparse.Namespace) -> GateOptions:
    """The :class:`GateOptions` the command line asks for (``--guard ''`` guards nothing)."""
    values = {name: getattr(args, name) for name in GateOptions.names()}
    if values["guards"] is not None:
        values["guards"] = tuple(g for g in values["guards"] if g)
    return GateOptions(**values)


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    for name, path in (("before", Path(args.before)), *(("after", Path(p)) for p in args.after)):
        if not path.is_file():
            raise UsageError(f"{name} row file {str(path)!r} does not exist or is not a file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RlgateWarning)
        result = compare(args.before, args.after[0] if len(args.after) == 1 else args.after, options)
    print(result.report(verbose=True))
    for warning in caught:
        if not issubclass(warning.category, RlgateWarning):
            print(f"warning: {warning.message}")
    if args.json:
        _write_json(Path(args.json), result.to_dict())
    for target, append in ((args.markdown, False), (step_summary_path(), True)):
        if target is not None:
            write_markdown(result, target, append=append)
    return 0 if result.passed else 1


def _write_json(target: Path, payload: dict[str, Any]) -> None:
    try:
        atomic_write(target, json.dumps(payload, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write --json {str(target)!r}: {exc.strerror}") from None
