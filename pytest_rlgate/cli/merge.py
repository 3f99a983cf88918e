"""``rlgate merge SHARD... --out ROWS``: the shards of one ``rlgate sample --shard I/N`` run, joined.

What a SLURM array's or a Kubernetes indexed job's last step calls. It checks that the
files are the N shards of one run (one header besides the shard record: the same prompt
set, sampling and model), none missing, repeated or overlapping, every prompt in the shard
its hash picks and every shard complete, and writes the rows one unsharded run writes, byte
for byte (:func:`~pytest_rlgate.data.shards.merge_shards`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..data.resume import PARTIAL_SUFFIX
from ..data.rows import header_of, load_rows, write_rows
from ..data.shards import merge_shards
from ..errors import DataError, UsageError
from ..options import output_file
from ..records import Row

HELP = "join the shard files of one sharded `rlgate sample` run into its rows"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shards", nargs="+", metavar="SHARD",
                        help="the N row files the shards of one `rlgate sample` run wrote")
    parser.add_argument("--out", required=True, type=output_file, metavar="ROWS",
                        help="the merged row file (.gz: compressed), as one unsharded run writes it")


def read_shards(paths: list[str]) -> list[tuple[str, dict[str, object] | None, list[Row]]]:
    """Each shard file's (path, header, rows); an unfinished or missing one named with its fix."""
    found = []
    for path in paths:
        if path.endswith(PARTIAL_SUFFIX):
            raise DataError("an unfinished shard (its command stopped before the end); run the command again to "
                            "finish it, then merge the file without .partial", path=path)
        if not Path(path).is_file():
            raise UsageError(f"{path}: no such shard file; sample it with the run's flags and --shard I/N")
        header = header_of(path)
        found.append((path, None if header is None else dict(header), list(load_rows(path))))
    return found


def run(args: argparse.Namespace) -> int:
    header, rows = merge_shards(read_shards(list(args.shards)))
    write_rows(args.out, rows, header=header)
    print(f"merged {len(args.shards)} shard(s): {len(rows)} rows -> {args.out}")
    return 0
