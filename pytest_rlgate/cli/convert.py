"""``rlgate convert SRC --out rows.jsonl.gz``: an eval harness's output as an rlgate row file.

Reads SRC in its format (detected, or ``--format``; the read options of ``rlgate gate``)
and writes graded rows whose provenance header names the source harness, its version, the
tasks and task versions it recorded and the read options, so a converted baseline kept in
a repository is refused against a candidate of another task just as the log itself would
be. Written atomically; ``.gz`` compresses.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping

from ..data.readers import describe
from ..data.rows import write_rows
from ..options import output_file
from .gate import add_read_arguments, read_sources

HELP = "write an eval harness's per-sample output (lm-eval, Inspect, ...) as rlgate rows"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SRC", help="an eval harness's output (file or folder), or rlgate rows")
    parser.add_argument("--out", metavar="ROWS.jsonl[.gz]", type=output_file, required=True,
                        help="the row file to write (.gz compresses)")
    add_read_arguments(parser)


def run(args: argparse.Namespace) -> int:
    (source,) = read_sources([args.source], args, ["source"])
    count = 0

    def counted() -> Iterator[Mapping[str, object]]:
        nonlocal count
        for row in source:
            count += 1
            yield row

    write_rows(args.out, counted(), header=source.header)
    print(f"wrote {count} rows of {describe(source.header)} to {args.out}")
    for note in source.notes:
        print(f"note: {note}")
    return 0
