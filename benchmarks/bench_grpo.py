"""The rlgate GRPO wrapper against bare TRL on the same steps, side by side in one run.

Both train the same policy, prompts, LoRA and GRPOConfig values for the same number of
steps; runs alternate (bare, wrapper, bare, wrapper, ...) so machine load hits both alike,
and the medians are compared. "wrapper" is ``build_trainer`` with the case-column reward,
the HackMonitor reward wrapper and the metrics recorder (monitor evaluations off, since
bare TRL does no evaluation); "wrapper+monitor" adds the default every-10-steps holdout
evaluation, reported for information. Target: wrapper / bare <= 1.10.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_grpo.py --steps 10 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.envs.refund import messages_for
from pytest_rlgate.train.adapters import load_base
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.grpo import build_trainer, grpo_metrics_recorder
from pytest_rlgate.train.monitor import HackMonitor
from pytest_rlgate.train.pipeline import load_prompts
from pytest_rlgate.train.reward import env_reward

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _policy(base: str):
    return load_base(base)


def bare_trl(base: str, knobs, train_items, out: str) -> float:
    """Plain TRL: GRPOConfig + GRPOTrainer + LoraConfig written by hand, the env's reward."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer


    refund_reward = env_reward(load_env("refund"))

    model, tok = _policy(base)
    ds = Dataset.from_list([{"prompt": messages_for(item["prompt"])} for item in train_items])
    args = GRPOConfig(output_dir=out, max_steps=knobs.steps, num_generations=knobs.num_generations,
                      per_device_train_batch_size=knobs.batch_size, learning_rate=knobs.learning_rate,
                      beta=knobs.beta, loss_type=knobs.loss_type, max_completion_length=knobs.max_new_tokens,
                      temperature=knobs.temperature, top_p=knobs.top_p, seed=knobs.sample_seed, logging_steps=1,
                      save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, bf16=False,
                      activation_checkpointing=False, dataloader_pin_memory=False)
    lora = LoraConfig(r=knobs.lora_rank, lora_alpha=knobs.lora_alpha, lora_dropout=0.0,
                      target_modules=list(knobs.lora_targets), task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=model, reward_funcs=refund_reward, args=args, train_dataset=ds, processing_class=tok,
                          peft_config=lora)
    started = time.perf_counter()
    trainer.train()
    return time.perf_counter() - started


def wrapper(base: str, knobs, train_items, holdout, out: str, *, monitor_every: int = 0) -> float:
    """rlgate: build_trainer with the wrapped case-column reward, recorder and HackMonitor."""
    refund_reward = env_reward(load_env("refund"))

    model, tok = _policy(base)
    monitor = HackMonitor(holdout, tok, every=monitor_every, seed=knobs.sample_seed,
                          max_new_tokens=knobs.max_new_tokens)
    trainer = build_trainer(model, tok, train_items, knobs, output_dir=out,
                            callbacks=[monitor, grpo_metrics_recorder()], reward=monitor.wrap(refund_reward))
    started = time.perf_counter()
    trainer.train()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base-model", default="rlgate/tiny-refund")
    parser.add_argument("--no-monitor-row", action="store_true", help="skip the wrapper+monitor row")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)

    knobs = GRPOKnobs(base_model=args.base_model, steps=args.steps).resolve()
    sets = load_prompts(knobs)
    _policy(args.base_model)  # build/cache the policy before timing anything
    times: dict[str, list[float]] = {"bare TRL": [], "rlgate wrapper": [], "rlgate wrapper+monitor": []}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeats):
            times["bare TRL"].append(bare_trl(args.base_model, knobs, sets.train, out))
            times["rlgate wrapper"].append(wrapper(args.base_model, knobs, sets.train, sets.holdout, out))
            if not args.no_monitor_row:
                times["rlgate wrapper+monitor"].append(
                    wrapper(args.base_model, knobs, sets.train, sets.holdout, out, monitor_every=10))
    bare = statistics.median(times["bare TRL"])
    print(f"GRPO {args.steps} steps, batch {knobs.batch_size} x {knobs.max_new_tokens} tokens, "
          f"base {args.base_model}, {args.repeats} alternating repeats (median)")
    for name, values in times.items():
        if values:
            median = statistics.median(values)
            print(f"  {name:24s} {median:7.2f} s  {median / args.steps:6.3f} s/step  ratio {median / bare:5.3f}x  "
                  f"(runs: {', '.join(f'{v:.2f}' for v in values)})")
    ratio = statistics.median(times["rlgate wrapper"]) / bare
    print(f"wrapper / bare TRL = {ratio:.3f}x (target <= 1.10x): {'OK' if ratio <= 1.10 else 'OVER'}")


if __name__ == "__main__":
    main()
