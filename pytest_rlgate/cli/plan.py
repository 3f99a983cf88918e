"""``rlgate plan ROWS``: how many scenarios each category needs before the gate can see a drop.

Reads one row file (the baseline the gate will compare against) and prints, per category,
the scenarios it has, the spread of a scenario's paired delta, the scenarios needed to call
a drop of ``--drop`` regressed with ``--power``, and the smallest drop today's scenarios can
see (:mod:`pytest_rlgate.gate.plan`). Exit 0 with the plan, 2 on a usage or data error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .._io.atomic import atomic_write
from ..errors import UsageError
from ..gate.options import CONFIDENCE_LEVEL
from ..gate.plan import DEFAULT_DROP, DEFAULT_POWER, plan
from ..options import CONFIDENCE, Number, output_file

HELP = "how many scenarios each category needs to see a drop of a given size"

#: a drop or a power: strictly between 0 and 1
_SHARE_OPEN = Number(0, 1, "0.10", low_open=True, high_open=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rows", metavar="ROWS.jsonl", help="graded rows of the baseline the gate compares against")
    parser.add_argument("--drop", type=_SHARE_OPEN, default=DEFAULT_DROP, metavar="D",
                        help=f"the drop in pass@1 to see (default {DEFAULT_DROP})")
    parser.add_argument("--power", type=_SHARE_OPEN, default=DEFAULT_POWER, metavar="P",
                        help=f"the chance of calling that drop regressed (default {DEFAULT_POWER})")
    parser.add_argument("--confidence", type=CONFIDENCE, default=CONFIDENCE_LEVEL, metavar="LEVEL",
                        help=f"the gate's confidence level (default {CONFIDENCE_LEVEL})")
    parser.add_argument("--category", action="append", metavar="NAME", default=None, dest="categories",
                        help="plan only this category (repeatable; default: every category of ROWS)")
    parser.add_argument("--json", metavar="PATH", type=output_file, default=None, help="write the plan as JSON")


def run(args: argparse.Namespace) -> int:
    path = Path(args.rows)
    if not path.is_file():
        raise UsageError(f"row file {str(path)!r} does not exist or is not a file")
    result = plan(path, drop=args.drop, power=args.power, confidence_level=args.confidence,
                  categories=args.categories)
    print(result.report())
    if args.json:
        try:
            atomic_write(Path(args.json), json.dumps(result.to_dict(), indent=2) + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write --json {str(args.json)!r}: {exc.strerror}") from None
    return 0
