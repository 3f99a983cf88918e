"""``rlgate regrade ROWS --env SPEC --out PATH``: re-score stored replies with the current environment.

When a reward (or its markers) changes, stored rows graded by the old version no longer
compare with new ones, and the gate refuses them. Re-scoring the stored replies fixes that
without a model: prompts, replies, rollout indices and eval runs stay; score, reward and
markers are recomputed; the header names the new environment fingerprint.
"""

from __future__ import annotations

import argparse

from ..data.rows import read_header, read_rows, regrade_rows, write_rows

HELP = "re-score stored replies with the current environment"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rows", metavar="ROWS", help="a row file (.jsonl or .jsonl.gz), e.g. a stored baseline")
    parser.add_argument("--env", required=True, metavar="SPEC",
                        help="environment to score with: a registered name (refund, arith, ...), 'module:attr' "
                             "or 'module'")
    parser.add_argument("--out", required=True, metavar="PATH",
                        help="where to write the re-scored rows (.gz: compressed; may be ROWS itself)")


def run(args: argparse.Namespace) -> int:
    was = read_header(args.rows)
    rows = regrade_rows(args.rows, args.env)
    passed_before = sum(row["reward"] for row in read_rows(args.rows))
    write_rows(args.out, rows)
    now = rows.header or {}
    graded = f"{was['env']} {str(was['env_fingerprint'])[:15]}" if was else "an unknown environment (no header)"
    print(f"re-scored {len(rows)} rows of {args.rows}: graded by {graded}, now by {now['env']} "
          f"{str(now['env_fingerprint'])[:15]}; pass@1 {passed_before / len(rows):.3f} -> "
          f"{sum(row['reward'] for row in rows) / len(rows):.3f}; wrote {args.out}")
    return 0
