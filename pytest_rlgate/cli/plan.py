"""``rlgate plan ROWS``: how many scenarios, or replies per prompt, each category needs to see a drop.

Reads one row file (the baseline the gate will compare against) and prints, per category,
its reply noise and scenario noise, today's power and smallest detectable drop, and both
ways to see a drop of ``--drop`` with ``--power``: add scenarios at today's k, or raise k
with today's scenarios, each with its cost in replies (:mod:`pytest_rlgate.gate.plan`).
The plan sizes for the one-sided level each comparison is tested at: by default the level
the gate's family holds each of its comparisons to at ``--family-level``, ``--level`` to say
it (the gate's rule line prints the level it used), ``--confidence`` for a gate run with
``--family-level none`` at that confidence. ROWS may be an eval harness's output, read by the
read options ``rlgate gate`` takes (``--metric``, ``--category-key``, ``--filter``, ...: the
same declaration), so a plan sizes the holdout of the logs the gate will read.
Exit 0 with the plan, 2 on a usage or data error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .._io.atomic import atomic_write
from ..errors import UsageError
from ..gate.options import DEFAULT_METHOD
from ..gate.plan import DEFAULT_DROP, DEFAULT_POWER, FAMILY_LEVEL, plan
from ..options import CONFIDENCE, Number, output_file
from .gate import add_read_arguments, read_sources

HELP = "how many scenarios, or replies per prompt, each category needs to see a drop of a given size"

#: a drop, a power or a family level: strictly between 0 and 1
_SHARE_OPEN = Number(0, 1, "0.10", low_open=True, high_open=True)
#: a one-sided level per comparison: strictly between 0 and 1/2
_LEVEL = Number(0, 0.5, "0.0125", low_open=True, high_open=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rows", metavar="ROWS.jsonl",
                        help="graded rows of the baseline the gate compares against, or an eval harness's output")
    parser.add_argument("--drop", type=_SHARE_OPEN, default=DEFAULT_DROP, metavar="D",
                        help=f"the drop in pass@1 to see (default {DEFAULT_DROP})")
    parser.add_argument("--power", type=_SHARE_OPEN, default=DEFAULT_POWER, metavar="P",
                        help=f"the chance of calling that drop regressed (default {DEFAULT_POWER})")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--level", type=_LEVEL, default=None, metavar="A",
                       help="one-sided level of each comparison's regression test (default: the level the gate's "
                            "family holds each comparison to at --family-level)")
    level.add_argument("--confidence", type=CONFIDENCE, default=None, metavar="LEVEL",
                       help="plan for a gate run with --family-level none at this confidence "
                            "(level (1 - LEVEL) / 2)")
    parser.add_argument("--method", choices=("t", "expanded"), default=DEFAULT_METHOD,
                        help=f"the gate's interval, whose test the plan simulates (default {DEFAULT_METHOD})")
    parser.add_argument("--family-level", type=_SHARE_OPEN, default=FAMILY_LEVEL, metavar="F",
                        help=f"the run-level false-fail rate the gate holds (default {FAMILY_LEVEL})")
    parser.add_argument("--guard", action="append", metavar="NAME", default=None, dest="guards",
                        help="a marker the gate guards (repeatable; default: the guards of the environment the "
                             "rows' header names; --guard '' for none): each adds comparisons to the family")
    parser.add_argument("--category", action="append", metavar="NAME", default=None, dest="categories",
                        help="plan only this category (repeatable; default: every category of ROWS)")
    parser.add_argument("--json", metavar="PATH", type=output_file, default=None, help="write the plan as JSON")
    add_read_arguments(parser)


def run(args: argparse.Namespace) -> int:
    (source,) = read_sources([args.rows], args, names=["rows"])
    level = args.level if args.confidence is None else (1.0 - args.confidence) / 2.0
    guards = None if args.guards is None else [g for g in args.guards if g]
    result = plan(source.path if source.format == "rlgate" else source, drop=args.drop, power=args.power,
                  level=level, family_level=args.family_level, guards=guards, categories=args.categories,
                  method=args.method)
    print(result.report())
    if args.json:
        try:
            atomic_write(Path(args.json), json.dumps(result.to_dict(), indent=2) + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write --json {str(args.json)!r}: {exc.strerror}") from None
    return 0
