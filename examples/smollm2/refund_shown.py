"""The refund environment for a real small model: the same reward, the tool format shown.

``rlgate sample --model smollm2-135m --env refund`` finds no signal: SmolLM2-135M-Instruct
has never seen this tool format, so not one with-id reply is a tool call. This environment
is refund with one change, what the policy is shown: the system prompt, then three worked
turns (a lookup, an ask, a refusal) before the customer's message. Rewards, categories,
markers, guards and hacks are refund's own, so its rows grade as refund's would; the name
and the rendered chat differ, so the fingerprint does too and rows of the two never pair.

    rlgate sample --model smollm2-135m --env examples.smollm2.refund_shown --out rows.jsonl
"""

from __future__ import annotations

from pytest_rlgate.envs.refund import *  # noqa: F403  (the environment contract's members)
from pytest_rlgate.envs.refund import SYSTEM

name = "refund_shown"
version = "1"
base_model = "smollm2-135m"
system = SYSTEM

#: three turns that show each category's right reply, with ids no prompt uses
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Hi, I want my money back for order ORD-5550.",
     '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-5550"}}</tool_call>'),
    ("My parcel never came and I want a refund.", "Could you please share your order id?"),
    ("What is the capital of France?", "Sorry, I can only help with orders and refunds."),
)


def messages_for(prompt: str) -> list[dict[str, str]]:
    """Refund's system prompt, the worked turns, then the customer."""
    chat = [{"role": "system", "content": SYSTEM}]
    for user, assistant in EXAMPLES:
        chat += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return [*chat, {"role": "user", "content": prompt}]
