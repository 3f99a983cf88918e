"""Re-grade a refund_agent run's holdout rows with the current environment and gate them again.

Rows keep each episode's text, so a changed marker (or reward) is applied by replaying the
stored episodes, not by sampling again:

    python examples/refund_agent/regate.py runs/agent-grpo40
"""

from __future__ import annotations

import sys

import pytest_rlgate as rg
from pytest_rlgate.data import regrade_rows


def main(run: str) -> None:
    env = rg.load_env("refund_agent")
    before = regrade_rows(f"{run}/holdout_before.jsonl", env=env)
    after = regrade_rows(f"{run}/holdout_after.jsonl", env=env)
    result = rg.compare(before, after, env=env)
    print(result.message())
    print(result.table())


if __name__ == "__main__":
    main(sys.argv[1])
