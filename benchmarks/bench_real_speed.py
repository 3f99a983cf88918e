"""Speed on a real model (SmolLM2-135M-Instruct): rlgate against the raw libraries, side by side.

Two ratios, each from runs that alternate so machine load hits both sides alike (medians):

* **sampling**: ``rg.sample`` (seeded per reply, length-sorted batches) against raw batched
  ``model.generate(do_sample=True, num_return_sequences=k)`` on the same rendered arith
  prompts, temperature, top-p, batch size and token budget; completions per second (target
  >= 0.95). Also how many replies of each side ran into the token limit.
* **GRPO step**: rlgate's ``build_trainer`` (the case-column reward, the metrics recorder)
  against bare TRL (``GRPOConfig`` + ``GRPOTrainer`` + ``LoraConfig`` written by hand) with the
  same config, the same LoRA, reward and prompts; seconds per step (target <= 1.10).

    rlgate models fetch smollm2-135m
    OMP_NUM_THREADS=1 python benchmarks/bench_real_speed.py [--repeats 2] [--steps 2]

The real-model story's GRPO configuration (refund, the warm-started base, groups of 4, no reference
model; docs/training.md) is ``--env refund --model smollm2-135m+refund --beta 0 --learning-rate 1e-3
--max-new-tokens 48 --only grpo`` (after ``rlgate models warm-start smollm2-135m --env refund``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import pytest_rlgate as rg
from pytest_rlgate.policy import SAMPLE_TEMPERATURE, SAMPLE_TOP_P
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.grpo import build_trainer, grpo_dataset, grpo_metrics_recorder
from pytest_rlgate.train.pipeline import load_prompts
from pytest_rlgate.train.reward import env_reward

os.environ.setdefault("OMP_NUM_THREADS", "1")
MODEL = "smollm2-135m"
ENV = "arith"
#: set from the command line (--model, --env) before anything loads
SETTINGS = {"model": MODEL, "env": ENV}


def raw_generate(model, tok, rendered, *, k, batch_size, temperature, top_p, max_new_tokens):
    """What the sampler replaces: generate's own sampling over the prompts as given."""
    import torch

    replies, hit = [], 0
    for lo in range(0, len(rendered), batch_size):
        enc = tok(rendered[lo : lo + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**enc, do_sample=True, temperature=temperature, top_p=top_p, top_k=None,
                                 num_return_sequences=k, max_new_tokens=max_new_tokens,
                                 pad_token_id=tok.pad_token_id)
        new = out[:, enc["input_ids"].shape[1]:]
        if new.shape[1] == max_new_tokens:  # rows whose last slot holds neither the end of turn nor padding
            hit += int(((new[:, -1] != tok.pad_token_id) & (new[:, -1] != tok.eos_token_id)).sum())
        replies += tok.batch_decode(new, skip_special_tokens=True)
    return replies, hit


def bench_sampling(args: argparse.Namespace) -> float:
    import torch

    env = rg.load_env(SETTINGS["env"])
    model, tok = rg.load_policy(SETTINGS["model"])
    items = rg.stratified_split(rg.build_prompts(0, "default", env=env), 0.2, env=env).holdout[: args.prompts]
    rendered = list(tok.apply_chat_template([env.messages_for(i["prompt"]) for i in items],
                                            add_generation_prompt=True, tokenize=False))
    common = {"k": args.k, "batch_size": args.batch_size, "temperature": SAMPLE_TEMPERATURE,
              "top_p": SAMPLE_TOP_P, "max_new_tokens": args.max_new_tokens}
    n = len(items) * args.k
    rates: dict[str, list[float]] = {"raw generate": [], "rlgate sample": []}
    limited: dict[str, list[int]] = {"raw generate": [], "rlgate sample": []}
    raw_generate(model, tok, rendered[:1], **{**common, "k": 1, "max_new_tokens": 4})  # warm-up
    for rep in range(args.repeats):
        t = time.perf_counter()
        _texts, hit = raw_generate(model, tok, rendered, **common)
        rates["raw generate"].append(n / (time.perf_counter() - t))
        limited["raw generate"].append(hit)
        t = time.perf_counter()
        replies = rg.sample(model, tok, items, env=env, seed=17 + rep, progress=False, **common)
        rates["rlgate sample"].append(n / (time.perf_counter() - t))
        lengths = [len(tok(x, add_special_tokens=False)["input_ids"]) for r in replies for x in r]
        limited["rlgate sample"].append(sum(m >= args.max_new_tokens - 1 for m in lengths))  # re-encoded: about
    print(f"sampling: {len(items)} {env.name} prompts of {SETTINGS['model']} "
          f"x k={args.k}, batch {args.batch_size} prompts, max_new_tokens "
          f"{args.max_new_tokens}, T={SAMPLE_TEMPERATURE}, top_p={SAMPLE_TOP_P}, {args.repeats} alternating "
          f"repeats, {torch.get_num_threads()} thread(s)")
    for name, values in rates.items():
        print(f"  {name:<16} {statistics.median(values):6.2f} completions/s (runs: "
              f"{', '.join(f'{v:.2f}' for v in values)}); at the token limit: {limited[name]} of {n}")
    ratio = statistics.median(rates["rlgate sample"]) / statistics.median(rates["raw generate"])
    print(f"  rlgate sample / raw generate = {ratio:.2f}x (target >= 0.95): {'OK' if ratio >= 0.95 else 'UNDER'}")
    return ratio


def _knobs(args: argparse.Namespace) -> GRPOKnobs:
    return GRPOKnobs(env=SETTINGS["env"], base_model=SETTINGS["model"], steps=args.steps, num_generations=4,
                     batch_size=8, learning_rate=args.learning_rate, beta=args.beta,
                     max_new_tokens=args.max_new_tokens, monitor_every=0).resolve()


def bare_trl(knobs: GRPOKnobs, train, out: str) -> float:
    """GRPOConfig + GRPOTrainer + LoraConfig by hand, the environment's reward over the case column."""
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    model, tok = rg.load_policy(SETTINGS["model"])
    env = rg.load_env(SETTINGS["env"])
    args = GRPOConfig(output_dir=out, max_steps=knobs.steps, num_generations=knobs.num_generations,
                      per_device_train_batch_size=knobs.batch_size, learning_rate=knobs.learning_rate,
                      beta=knobs.beta, loss_type=knobs.loss_type, max_completion_length=knobs.max_new_tokens,
                      temperature=knobs.temperature, top_p=knobs.top_p, seed=knobs.sample_seed, logging_steps=1,
                      save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, bf16=False,
                      activation_checkpointing=False, dataloader_pin_memory=False)
    lora = LoraConfig(r=knobs.lora_rank, lora_alpha=knobs.lora_alpha, lora_dropout=0.0,
                      target_modules=list(knobs.lora_targets), task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=model, reward_funcs=env_reward(env), args=args, train_dataset=grpo_dataset(train, env),
                          processing_class=tok, peft_config=lora)
    started = time.perf_counter()
    trainer.train()
    return time.perf_counter() - started


def wrapper(knobs: GRPOKnobs, train, out: str) -> float:
    model, tok = rg.load_policy(SETTINGS["model"])
    trainer = build_trainer(model, tok, train, knobs, output_dir=out, callbacks=[grpo_metrics_recorder()],
                            progress=False)
    started = time.perf_counter()
    trainer.train()
    return time.perf_counter() - started


def bench_grpo(args: argparse.Namespace) -> float:
    knobs = _knobs(args)
    train = load_prompts(knobs).train
    times: dict[str, list[float]] = {"bare TRL": [], "rlgate build_trainer": []}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.repeats):
            times["bare TRL"].append(bare_trl(knobs, train, out))
            times["rlgate build_trainer"].append(wrapper(knobs, train, out))
    bare = statistics.median(times["bare TRL"])
    print(f"GRPO on {SETTINGS['env']} with {SETTINGS['model']}: "
          f"{args.steps} steps of {knobs.batch_size} completions ({knobs.num_generations} per prompt) x "
          f"{knobs.max_new_tokens} tokens, beta {knobs.beta:g}, lr {knobs.learning_rate:g}, LoRA "
          f"r{knobs.lora_rank} on {','.join(knobs.lora_targets)}, {args.repeats} alternating repeats")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<22} {median / args.steps:6.1f} s/step (runs: {', '.join(f'{v:.1f}' for v in values)} s)")
    ratio = statistics.median(times["rlgate build_trainer"]) / bare
    print(f"  rlgate / bare TRL = {ratio:.2f}x (target <= 1.10): {'OK' if ratio <= 1.10 else 'OVER'}")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", choices=("sampling", "grpo"), default=None)
    parser.add_argument("--model", default=MODEL, help="a fetched model or NAME+ENV warm start (%(default)s)")
    parser.add_argument("--env", default=ENV, help="the environment (%(default)s)")
    parser.add_argument("--beta", type=float, default=0.04, help="GRPO's KL term (%(default)s)")
    parser.add_argument("--learning-rate", type=float, default=3e-4, help="(%(default)s)")
    args = parser.parse_args()
    SETTINGS.update(model=args.model, env=args.env)
    import torch

    torch.set_num_threads(1)
    started = time.time()
    if args.only != "grpo":
        bench_sampling(args)
    if args.only != "sampling":
        bench_grpo(args)
    print(f"total {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
