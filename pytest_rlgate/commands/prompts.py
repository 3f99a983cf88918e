"""``rlgate prompts``: write an environment's prompt set, its train/holdout split and fingerprints.

Writes ``prompts.jsonl`` (the whole set, canonical bytes), ``train.jsonl`` (balanced when
``--balance`` is given) and ``holdout.jsonl`` (never balanced) into ``--out-dir``, then
prints the environment, each file's counts per declared category and its fingerprint. The
set is the environment's own seeded one, or ``--prompts-file`` (whose lines keep their case
and category; an environment without a writer requires it). Exit 0, or 2 with one line for
a bad option or prompts file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from ..env import load_env
from ..envs import DEFAULT_ENV
from ..options import add_env_argument, fraction, share
from ..prompts import (
    balance,
    build_prompts,
    count_by_category,
    plain_split,
    read_prompts,
    stratified_split,
    write_prompts,
)

HELP = "write a seeded prompt set, its split and fingerprint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_env_argument(parser)
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the seeded set (default 0)")
    parser.add_argument("--size", default="default", metavar="NAME",
                        help="a size the environment's writer offers (default: default)")
    parser.add_argument("--prompts-file", type=Path, metavar="FILE",
                        help="split this prompts JSONL instead of writing the environment's seeded set")
    parser.add_argument("--holdout", type=fraction, default=0.2, metavar="FRACTION",
                        help="share of each category's scenarios held out (default 0.2)")
    parser.add_argument("--split", choices=("stratified", "plain"), default="stratified",
                        help="stratified by category (default) or the plain hash split by scenario")
    parser.add_argument("--balance", type=share, default=0.0, metavar="SHARE",
                        help="repeat minority categories of train.jsonl up to this share, e.g. 0.25 (default off)")
    parser.add_argument("--out-dir", type=Path, required=True, metavar="DIR",
                        help="folder for prompts.jsonl, train.jsonl and holdout.jsonl (created if missing)")


def run(args: argparse.Namespace) -> int:
    env = load_env(args.env)
    if args.prompts_file is not None:
        items = read_prompts(args.prompts_file, env=env)
        source = f"--prompts-file {args.prompts_file}"
    else:
        items = build_prompts(args.seed, args.size, env=env)
        source = f"--seed {args.seed} --size {args.size}"
    if env.spec not in (None, DEFAULT_ENV):
        source = f"--env {env.spec} {source}"
    split = (stratified_split(items, args.holdout, env=env) if args.split == "stratified"
             else plain_split(items, args.holdout))
    train = balance(split.train, args.balance)

    outputs = {"prompts.jsonl": items, "train.jsonl": train, "holdout.jsonl": split.holdout}
    table = []
    for name, rows in outputs.items():
        digest = write_prompts(args.out_dir / name, rows)
        counts = count_by_category(rows)
        scenarios = len({item["scenario_id"] for item in rows})
        table.append([name, len(rows), *(counts.get(c, 0) for c in env.categories), scenarios, digest])
    print(f"rlgate prompts {source} --holdout {args.holdout:g} --split {args.split}"
          + (f" --balance {args.balance:g}" if args.balance else "") + f" -> {args.out_dir}")
    print(f"environment: {env.name} v{env.version} {env.fingerprint}")
    print(tabulate(table, headers=["file", "prompts", *env.categories, "scenarios", "fingerprint"],
                   disable_numparse=True, colalign=("left", *("right",) * (len(env.categories) + 2), "left")))
    return 0
