"""``rlgate prompts``: write an environment's prompt set, its train/holdout split and fingerprints.

Writes ``prompts.jsonl`` (the whole set, canonical bytes), ``train.jsonl`` (decontaminated
against the holdout, then balanced when ``--balance`` is given) and ``holdout.jsonl`` (never
balanced) into ``--out-dir`` as one unit (:mod:`pytest_rlgate.data.promptset`), then prints the
environment, the decontamination line, each file's counts per declared category and its
fingerprint. The set is the environment's own seeded one, ``--prompts-file``, or ``--keep``:
a model-written file (``prompt``, ``scenario_id``, ``category`` a line) passed through the
keep filter first, whose drops are printed by reason. Exit 0, or 2 with one line for a bad
option or file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from ..data.hygiene import KeepResult, keep_prompts
from ..data.jsonl import iter_json_lines
from ..data.prompts import SPLITS, build_prompts, count_by_category, describe_holdout, prepare_split, read_prompts
from ..data.promptset import write_prompt_set
from ..environment.contract import DEFAULT_ENV, Env
from ..errors import DataError
from ..options import SEED, add_deprecated, add_env_argument, fraction, share
from ..records import PromptItem

HELP = "write a seeded prompt set, its split and fingerprint"

#: What a line of a ``--keep`` file holds (named in its errors).
KEEP_LINE = '{"prompt": "...", "scenario_id": "...", "category": "..."}'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_env_argument(parser, resolve="always")
    parser.add_argument("--prompt-seed", type=SEED, default=0, metavar="N",
                        help="seed of the environment's seeded prompt set (default 0)")
    add_deprecated(parser, "--seed", "--prompt-seed", dest="prompt_seed", type=SEED, metavar="N")
    parser.add_argument("--size", default="default", metavar="NAME",
                        help="a size the environment's writer offers (default: default)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--prompts-file", type=Path, metavar="FILE",
                        help="split this prompts JSONL instead of writing the environment's seeded set")
    source.add_argument("--keep", type=Path, metavar="FILE",
                        help="filter this model-written JSONL (prompt, scenario_id, category a line) with the keep "
                             "filter, then split what it keeps")
    parser.add_argument("--holdout", type=fraction, default=None, metavar="FRACTION",
                        help="share of every category's scenarios held out (default: the environment's own "
                             "shares, else 0.2)")
    parser.add_argument("--split", choices=SPLITS, default="stratified",
                        help="stratified by category (default) or the plain hash split by scenario")
    parser.add_argument("--balance", type=share, default=0.0, metavar="SHARE",
                        help="repeat minority categories of train.jsonl up to this share, e.g. 0.25 (default off)")
    parser.add_argument("--no-decontaminate", action="store_true",
                        help="keep train prompts that repeat a holdout prompt (default: drop them)")
    parser.add_argument("--out-dir", type=Path, required=True, metavar="DIR",
                        help="folder for prompts.jsonl, train.jsonl and holdout.jsonl (created if missing; "
                             "replaced whole)")


def keep_written(path: Path, env: Env) -> KeepResult:
    """The keep filter over a model-written file; a line that is not JSON names file:line."""
    numbered = list(iter_json_lines(path, what="--keep file",
                                    fix=f"pass a JSONL of model-written prompts, {KEEP_LINE} a line"))
    rows = [row for _, row in numbered]
    if not rows:
        raise DataError(f"no prompts in the file; each line is {KEEP_LINE}", path=path)
    result = keep_prompts(rows, env, path=str(path), lines=[number for number, _ in numbered])
    if not result.kept:
        raise DataError(f"the keep filter kept none of the prompts ({result.summary()})", path=path)
    return result


def run(args: argparse.Namespace) -> int:
    env: Env = args.env  # resolved at the door (cli._resolve_env)
    kept = None
    if args.keep is not None:
        kept = keep_written(args.keep, env)
        items, source = kept.kept, f"--keep {args.keep}"
    elif args.prompts_file is not None:
        items = read_prompts(args.prompts_file, env=env)
        source = f"--prompts-file {args.prompts_file}"
    else:
        items = build_prompts(args.prompt_seed, args.size, env=env)
        source = f"--prompt-seed {args.prompt_seed} --size {args.size}"
    if env.spec not in (None, DEFAULT_ENV):
        source = f"--env {env.spec} {source}"
    try:
        prepared = prepare_split(items, args.holdout, env=env, how=args.split, share=args.balance,
                                 decontaminate_train=not args.no_decontaminate)
    except DataError as exc:
        if kept is None:
            raise
        # what was dropped is likely why the rest cannot be split: say both
        raise DataError(f"{exc.reason} (after the keep filter: {kept.summary()})", path=args.keep) from None
    outputs: dict[str, list[PromptItem]] = {"prompts.jsonl": items, "train.jsonl": prepared.train,
                                            "holdout.jsonl": prepared.holdout}
    digests = write_prompt_set(args.out_dir, outputs)

    table = []
    for name, rows in outputs.items():
        counts = count_by_category(rows)
        scenarios = len({item.get("scenario_id") for item in rows})
        table.append([name, len(rows), *(counts.get(c, 0) for c in env.categories), scenarios, digests[name]])
    held = "" if args.holdout is None else f" --holdout {args.holdout:g}"
    print(f"rlgate prompts {source}{held} --split {args.split}"
          + (f" --balance {args.balance:g}" if args.balance else "")
          + (" --no-decontaminate" if args.no_decontaminate else "") + f" -> {args.out_dir}")
    print(f"environment: {env.name} v{env.version} {env.fingerprint}; held out: {describe_holdout(args.holdout, env)}")
    if kept is not None:
        print(kept.summary())
    print(prepared.decontamination.summary())
    print(tabulate(table, headers=["file", "prompts", *env.categories, "scenarios", "fingerprint"],
                   disable_numparse=True, colalign=("left", *("right",) * (len(env.categories) + 2), "left")))
    return 0
