"""``rlgate grade REPLIES --env SPEC --out ROWS``: grade replies sampled anywhere into rows.

Replies from vLLM, an API or a user's own loop (JSONL: ``prompt`` or ``scenario_id``,
``category``, ``case``, and ``reply`` or ``replies``) become graded rows that ``rlgate gate``
compares, scored by the environment exactly as sampled rows are
(:mod:`pytest_rlgate.data.replies`). A bad line is one error naming ``file:line``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..data.prompts import read_prompts
from ..data.replies import grade_file
from ..data.rows import write_rows
from ..environment.contract import Env
from ..errors import UsageError
from ..options import add_deprecated, add_env_argument, output_file

HELP = "grade replies sampled anywhere into rows with an environment"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("replies", metavar="REPLIES", help="a JSONL (or .jsonl.gz) file of replies")
    add_env_argument(parser, resolve="always")
    parser.add_argument("--prompts-file", metavar="FILE",
                        help="the prompts file a line's scenario_id is looked up in (default: the environment's "
                             "own prompt set)")
    add_deprecated(parser, "--prompts", "--prompts-file", dest="prompts_file", metavar="FILE")
    parser.add_argument("--out", required=True, type=output_file, metavar="PATH",
                        help="where to write the graded rows (.gz: compressed)")


def run(args: argparse.Namespace) -> int:
    env: Env = args.env  # resolved at the door (cli._resolve_env)
    prompts = None
    if args.prompts_file:
        if not Path(args.prompts_file).is_file():
            raise UsageError(f"--prompts-file {args.prompts_file!r}: no such file")
        prompts = read_prompts(args.prompts_file, env=env)
    rows = grade_file(args.replies, env, prompts=prompts)
    write_rows(args.out, rows)
    passed = sum(row["reward"] for row in rows)
    print(f"graded {len(rows)} replies of {args.replies} with {env.name} ({env.fingerprint[:15]}): "
          f"pass@1 {passed / len(rows):.3f}; wrote {args.out}")
    return 0
