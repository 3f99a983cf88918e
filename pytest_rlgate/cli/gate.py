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

BEFORE and AFTER may also be an eval harness's per-sample output, in any format of
:mod:`pytest_rlgate.data.readers` (``--format``'s choices; detected by default): the shared
read flags (``--category-key``, ``--unit-key``, ``--score-key``, ``--pass-threshold``) and those
each reader declares for itself (lm-eval's ``--filter``) say how a record becomes a row.
``PATH#key=value`` sets a read option for one side (``results.json#provider=ID``).
``--json-format eee`` writes the result as an Every Eval Ever aggregate record instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._io.atomic import atomic_write
from ..data.readers import RowSource, as_side, declared_options, read_rows, reader_names
from ..data.readers.eee import eee_record
from ..errors import RlgateWarning, UsageError
from ..gate import compare
from ..gate.options import GateOptions, OrNone, flag_help, shown_default
from ..gate.result import GateResult
from ..options import Number, ReadOptions, add_deprecated, output_file
from ..report.markdown import step_summary_path, write_markdown

HELP = "gate AFTER against BEFORE graded rows, by category"

_METAVARS = {"env": "SPEC", "guards": "NAME", "categories": "NAME", "margin": "M", "max_drop": "X",
             "n_resamples": "B", "confidence_level": "LEVEL", "bootstrap_seed": "INT", "show_flips": "N",
             "release_policy": "FILE", "family_level": "L", "metrics": "pass^K", "base_runs": "FILE",
             "sees_drop": "D"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("before", metavar="BEFORE.jsonl", help="graded rows of the base policy")
    parser.add_argument("after", metavar="AFTER.jsonl", nargs="+",
                        help="graded rows of the fine-tuned policy; several, one per training seed of the same "
                             "recipe, gate the recipe across seeds")
    for name in GateOptions.names():
        add_option(parser, GateOptions.field(name))
    parser.add_argument("--json", metavar="PATH", type=output_file, default=None, help="write the result as JSON")
    parser.add_argument("--json-format", choices=("rlgate", "eee"), default="rlgate",
                        help="--json's shape: rlgate's result record, or an Every Eval Ever aggregate record with "
                             "each comparison's interval in its uncertainty fields (default rlgate)")
    parser.add_argument("--markdown", metavar="PATH", type=output_file, default=None,
                        help="write a short Markdown summary for the pull request (also appended to "
                             "$GITHUB_STEP_SUMMARY when it is set under CI)")
    add_read_arguments(parser)


class _Given(argparse.Action):
    """Stores the value and notes that the flag was given (``args.given``): a release policy's
    family level yields to an explicit ``--family-level``, even one equal to the default."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def add_option(parser: argparse.ArgumentParser, spec: dataclasses.Field[object], *, none: bool = True) -> None:
    """The flag of one :class:`GateOptions` field: its type, bound, default and help from the field.

    *none*: whether this command accepts ``none`` for a field that may be none (``rlgate sample
    --until-decided`` holds one family level across its looks, so its ``--family-level`` is a number).
    """
    meta = spec.metadata
    kwargs: dict[str, Any] = {"dest": spec.name, "default": spec.default, "help": flag_help(spec, none=none),
                              "action": _Given}
    if spec.name in ("guards", "categories", "metrics", "base_runs"):
        kwargs.update(action="append", default=None if spec.default is None else [])
    elif spec.default is False:
        kwargs["action"] = "store_true"
    else:
        bound = meta["bound"]
        if isinstance(bound, OrNone) and not none:
            kwargs["type"] = bound.number
        elif isinstance(bound, (Number, OrNone)):
            kwargs["type"] = bound
        elif bound is not None:
            kwargs["choices"] = bound.choices
        if spec.default is not None:
            kwargs["help"] = f"{kwargs['help']} (default {shown_default(spec)})"
    if spec.name in _METAVARS:
        kwargs["metavar"] = _METAVARS[spec.name]
    parser.add_argument(meta["flag"], **kwargs)
    for old in meta["aliases"]:
        add_deprecated(parser, old, meta["flag"], **{k: v for k, v in kwargs.items() if k in ("dest", "type",
                                                                                              "metavar", "choices")})


def add_read_arguments(parser: argparse.ArgumentParser) -> None:
    """How an eval harness's output becomes rows (``rlgate gate`` and ``rlgate convert``): one flag per
    shared :class:`~pytest_rlgate.options.ReadOptions` field and per option a reader declares with a flag."""
    group = parser.add_argument_group("reading an eval harness's output")
    for spec in ReadOptions.flags().values():
        meta = spec.metadata
        kwargs: dict[str, Any] = {"dest": f"read_{spec.name}", "default": spec.default, "help": meta["help"]}
        if spec.default is False:
            kwargs["action"] = "store_true"
        else:
            kwargs["metavar"] = meta["metavar"]
            if spec.name == "format":
                kwargs["choices"] = reader_names()
                kwargs["help"] = f"{meta['help']}: {', '.join(reader_names())}"
            elif spec.name == "pass_threshold":
                kwargs["type"] = float
        group.add_argument(meta["flag"], **kwargs)
        if meta["old"]:
            add_deprecated(group, f"--{meta['old'].replace('_', '-')}", meta["flag"], dest=kwargs["dest"],
                           metavar=meta["metavar"])
    for name, (option, _formats) in declared_options().items():
        if option.flag is not None:
            group.add_argument(option.flag, dest=f"read_{name}", metavar=option.metavar, default=None,
                               help=option.help)


def read_options_from(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`~pytest_rlgate.data.readers.read_rows` keywords from the command line's read flags."""
    out = {spec.name: getattr(args, f"read_{spec.name}") for spec in ReadOptions.flags().values()
           if spec.name != "format"}
    out.update({name: getattr(args, f"read_{name}") for name, (option, _) in declared_options().items()
                if option.flag is not None})
    return out


def options_from(args: argparse.Namespace) -> GateOptions:
    """The :class:`GateOptions` the command line asks for (``--guard ''`` guards nothing)."""
    values = {name: getattr(args, name) for name in GateOptions.names()}
    if values["guards"] is not None:
        values["guards"] = tuple(g for g in values["guards"] if g)
    values["metrics"] = tuple(values["metrics"] or ())
    values["base_runs"] = tuple(values["base_runs"] or ())
    return GateOptions(**values, given=frozenset(getattr(args, "given", ())))


def read_sources(specs: list[str], args: argparse.Namespace, names: list[str] | None = None) -> list[RowSource]:
    """Each path as rows in its format, with the read options of *args*; a missing path is a UsageError."""
    out = []
    names = names or ["before", *(["after"] * (len(specs) - 1))]
    options = read_options_from(args)
    for spec, name in zip(specs, names):
        base = spec.rpartition("#")[0] if "#" in spec and not Path(spec).exists() else spec
        if not Path(base).expanduser().exists():
            raise UsageError(f"{name} row file {spec!r} does not exist (a row file, or an eval harness's log)")
        out.append(read_rows(spec, args.read_format, **options))
    return out


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    if args.json_format != "rlgate" and args.json is None:
        raise UsageError(f"--json-format {args.json_format} shapes the file --json writes, and there is no --json: "
                         f"add --json PATH")
    if args.json_format == "eee" and len(args.after) > 1:
        raise UsageError("--json-format eee writes one gate's comparisons; a recipe gate (several AFTER, one per "
                         "seed) has no single interval per comparison to write: pass one AFTER, or drop it")
    sources = read_sources([args.before, *args.after], args)
    before, *afters = (as_side(source) for source in sources)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RlgateWarning)
        result = compare(before, afters[0] if len(afters) == 1 else afters, options)
    print(result.report(verbose=True))
    for warning in caught:
        if not issubclass(warning.category, RlgateWarning):
            print(f"warning: {warning.message}")
    if args.json:
        model = sources[-1].header.get("policy")
        # a recipe gate's eee export was refused at the door
        _write_json(Path(args.json), eee_record(result, model=model if isinstance(model, str) else None)
                    if args.json_format == "eee" and isinstance(result, GateResult) else result.to_dict())
    for target, append in ((args.markdown, False), (step_summary_path(), True)):
        if target is not None:
            write_markdown(result, target, append=append)
    return 0 if result.passed else 1


def _write_json(target: Path, payload: Mapping[str, object]) -> None:
    try:
        atomic_write(target, json.dumps(payload, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write --json {str(target)!r}: {exc.strerror}") from None
