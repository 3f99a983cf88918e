"""A short SFT warm start of SmolLM2-135M-Instruct on refund's tool format, through TRL's SFTTrainer.

Shown the format in its prompt the base model still makes one tool call in 38 with-id replies
(docs/training.md), too rare for GRPO's groups. This trains a LoRA adapter with ``SFTTrainer``
on refund's own train split, each prompt paired with the reply refund's reward pays in full (a
lookup of the prompt's id, an ask, a short refusal), then samples the holdout with the adapter
and prints pass@1 per category beside the base's.

    rlgate models fetch smollm2-135m
    OMP_NUM_THREADS=1 python benchmarks/bench_real_refund_sft.py [--steps 12] [--k 2]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import time

import pytest_rlgate as rg
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.pipeline import load_prompts

os.environ.setdefault("OMP_NUM_THREADS", "1")
MODEL = "smollm2-135m"


def target(item: rg.PromptItem) -> str:
    """The reply refund's reward pays in full for this prompt's category."""
    case = item["case"]
    if item["category"] == "with_id":
        call = {"name": "lookup_order", "arguments": {"order_id": case["order_id"]}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    if item["category"] == "no_id":
        return "Could you please share your order id?"
    return "Sorry, I can only help with orders and refunds."


def per_category(rows) -> dict[str, tuple[float, int]]:
    grouped = collections.defaultdict(list)
    for row in rows:
        grouped[row["category"]].append(row["reward"])
    return {c: (statistics.fmean(v), len(v)) for c, v in sorted(grouped.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(1)
    env = rg.load_env("refund")
    sets = load_prompts(GRPOKnobs(env="refund", base_model=MODEL).resolve())
    data = Dataset.from_list([{"prompt": env.messages_for(item["prompt"]),
                               "completion": [{"role": "assistant", "content": target(item)}]}
                              for item in sets.train])
    model, tok = rg.load_policy(MODEL)
    started = time.time()
    with tempfile.TemporaryDirectory() as out:
        trainer = SFTTrainer(
            model=model, processing_class=tok, train_dataset=data,
            args=SFTConfig(output_dir=out, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
                           learning_rate=args.learning_rate, lr_scheduler_type="constant", use_cpu=True,
                           bf16=False, max_length=512, logging_steps=1, save_strategy="no", report_to="none",
                           disable_tqdm=True, seed=0),
            peft_config=LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                   "down_proj"]),
        )
        trainer.train()
        trained = time.time() - started
        losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
        model = trainer.model
        model.eval()
        started = time.time()
        after = rg.sample_rows(model, tok, sets.holdout, k=args.k, env=env, max_new_tokens=args.max_new_tokens,
                               progress=False)
        sampled = time.time() - started
    print(f"SFT: {args.steps} steps x {args.batch_size} of {len(sets.train)} train prompts, lr {args.learning_rate:g}, "
          f"LoRA r16; loss {losses[0]:.3f} -> {losses[-1]:.3f}; {trained:.0f} s")
    print(f"holdout after SFT ({len(sets.holdout)} prompts x k={args.k}, {args.max_new_tokens} tokens, "
          f"{sampled:.0f} s): " + ", ".join(f"{c} {rate:.3f} ({n})" for c, (rate, n) in per_category(after).items()))
    tool_calls = sum(r["markers"]["tool_call"] for r in after if r["category"] == "with_id")
    print(f"with_id replies that call a tool: {tool_calls:.0f} of {sum(r['category'] == 'with_id' for r in after)}")
    for row in list(after)[:6]:
        print(f"  {row['category']:<10} {row['reward']}  {row['reply'][:100]!r}")


if __name__ == "__main__":
    main()
