"""What a one-turn gate passes that the episode gate fails, on the tiny refund agent's own episodes.

Samples the shipped tiny agent (``rlgate/tiny-refund_agent``) on refund_agent's seeded prompt
set, then reads every episode twice: with ``first_reply`` (the one-turn reward: a first turn
that looks the customer's order up passes, whatever follows) and with the environment's
episode reward. Prints, per category, both pass rates and how many episodes the first reading
passes while the agent then refunds the wrong amount, an unseen id or a non-refundable order.

    python examples/refund_agent/first_reply_vs_episode.py [POLICY] [SIZE]
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

import pytest_rlgate as rg
from pytest_rlgate.envs.refund_agent.rules import first_reply


def main(policy: str = "rlgate/tiny-refund_agent", size: str = "default") -> None:
    import torch

    torch.set_num_threads(1)
    env = rg.load_env("refund_agent")
    model, tokenizer = rg.load_policy(policy)
    rows = rg.sample_rows(model, tokenizer, env.build_prompts(0, size), k=4, env=env, max_new_tokens=48)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        episode, _ = env.episode(row["reply"], row["case"])
        first = first_reply(episode, row["case"]) >= 1.0
        c = counts[row["category"]]
        c["n"] += 1
        c["episode"] += row["reward"]
        c["first"] += first
        if first and not row["reward"]:
            c["first_only"] += 1
            c["bad_refund"] += row["markers"]["grounded_refund"] == 0.0
    print(f"{'category':15} {'n':>4} {'first-reply pass':>16} {'episode pass':>12} "
          f"{'first passes, episode fails':>27} {'bad refund':>10}")
    for category, c in sorted(counts.items()):
        print(f"{category:15} {c['n']:4d} {c['first'] / c['n']:16.3f} {c['episode'] / c['n']:12.3f} "
              f"{c['first_only']:27d} {c['bad_refund']:10d}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
