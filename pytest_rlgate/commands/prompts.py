"""``rlgate prompts``: write a seeded prompt set, its train/holdout split and fingerprints.

Writes ``prompts.jsonl`` (the whole set, canonical bytes), ``train.jsonl`` (balanced when
``--balance`` is given) and ``holdout.jsonl`` (never balanced) into ``--out-dir``, then
prints each file's counts per category and its fingerprint. Exit 0, or 2 with one line
for a bad option or prompts file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..options import SIZES, fraction, share

HELP = "write a seeded prompt set, its split and fingerprint"



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the template set (default 0)")
    parser.add_argument("--size", choices=SIZES, default="default",
                        help="small (40), default (119) or large (707 paraphrases); default: default")
    parser.add_argument("--prompts-file", type=Path, metavar="FILE",
                        help="split this prompts JSONL instead of writing the template set")
    parser.add_argument("--holdout", type=fraction, default=0.2, metavar="FRACTION",
                        help="share of each category's scenarios held out (default 0.2)")
    parser.add_argument("--split", choices=("stratified", "plain"), default="stratified",
                        help="stratified by category (default) or the plain hash split by scenario")
    parser.add_argument("--balance", type=share, default=0.0, metavar="SHARE",
                        help="repeat minority categories of train.jsonl up to this share, e.g. 0.25 (default off)")
    parser.add_argument("--out-dir", type=Path, required=True, metavar="DIR",
                        help="folder for prompts.jsonl, train.jsonl and holdout.jsonl (created if missing)")


def run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from ..prompts import (
        balance,
        build_prompts,
        count_by_category,
        plain_split,
        read_prompts,
        stratified_split,
        write_prompts,
    )

    if args.prompts_file is not None:
        items = read_prompts(args.prompts_file)
        source = f"--prompts-file {args.prompts_file}"
    else:
        items = build_prompts(seed=args.seed, size=args.size)
        source = f"--seed {args.seed} --size {args.size}"
    split = stratified_split(items, args.holdout) if args.split == "stratified" else plain_split(items, args.holdout)
    train = balance(split.train, args.balance)

    outputs = {"prompts.jsonl": items, "train.jsonl": train, "holdout.jsonl": split.holdout}
    categories = sorted({str(item["category"]) for item in items})
    table = []
    for name, rows in outputs.items():
        digest = write_prompts(args.out_dir / name, rows)
        counts = count_by_category(rows)
        scenarios = len({item["scenario_id"] for item in rows})
        table.append([name, len(rows), *(counts.get(c, 0) for c in categories), scenarios, digest])
    print(f"rlgate prompts {source} --holdout {args.holdout:g} --split {args.split}"
          + (f" --balance {args.balance:g}" if args.balance else "") + f" -> {args.out_dir}")
    print(tabulate(table, headers=["file", "prompts", *categories, "scenarios", "fingerprint"],
                   disable_numparse=True, colalign=("left", *("right",) * (len(categories) + 2), "left")))
    return 0
