"""The seeded sampler against raw batched ``generate``: throughput side by side.

Both sample k replies for the same prompts with the same temperature, top-p, batch size and
max_new_tokens; raw ``generate(do_sample=True, num_return_sequences=k)`` is what the sampler
replaces. Runs alternate (raw, ours, raw, ours, ...) so CPU contention hits both alike; the
ratio is median(ours) / median(raw) in completions per second (target >= 0.95), against raw
generate over the prompts in their given order and over the prompts sorted by length.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sampling.py [--prompts 96] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from pytest_rlgate.data import prompts
from pytest_rlgate.envs import refund
from pytest_rlgate.policy.load import TINY_POLICY, load_policy
from pytest_rlgate.policy.sampling import SAMPLE_TEMPERATURE, SAMPLE_TOP_P, sample


def raw_generate(model, tok, rendered, *, k, batch_size, temperature, top_p, max_new_tokens):
    replies = []
    for lo in range(0, len(rendered), batch_size):
        enc = tok(rendered[lo : lo + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        out = model.generate(**enc, do_sample=True, temperature=temperature, top_p=top_p, top_k=None,
                             num_return_sequences=k, max_new_tokens=max_new_tokens,
                             pad_token_id=tok.pad_token_id)
        replies += tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return replies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--prompts", type=int, default=96)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policy", default=None, help="a model folder or hub id (default: the tiny policy)")
    args = parser.parse_args()
    torch.set_num_threads(1)


    model, tok = load_policy(args.policy or TINY_POLICY)
    items = prompts.build_prompts(seed=0, size="large")[: args.prompts]
    rendered = tok.apply_chat_template([refund.messages_for(i["prompt"]) for i in items],
                                       add_generation_prompt=True, tokenize=False)
    common = {"k": args.k, "batch_size": args.batch_size, "temperature": SAMPLE_TEMPERATURE,
              "top_p": SAMPLE_TOP_P, "max_new_tokens": args.max_new_tokens}
    n = len(items) * args.k
    # The sampler batches prompts longest-first (less padding); the second raw variant does
    # the same, so the ratio against it isolates the per-step cost of seeded sampling.
    by_length = sorted(rendered, key=lambda text: -len(tok(text)["input_ids"]))
    raw_variants = {"raw generate": rendered, "raw, len-sorted": by_length}
    rates: dict[str, list[float]] = {name: [] for name in [*raw_variants, "rlgate sample"]}
    lengths: dict[str, list[float]] = {name: [] for name in rates}
    with torch.inference_mode():
        raw_generate(model, tok, rendered[:4], **common)  # warm-up
        for rep in range(args.repeats):
            for name, texts_in in raw_variants.items():
                t = time.perf_counter()
                texts = raw_generate(model, tok, texts_in, **common)
                rates[name].append(n / (time.perf_counter() - t))
                lengths[name].append(statistics.mean(len(tok(x)["input_ids"]) for x in texts))
            t = time.perf_counter()
            replies = sample(model, tok, items, seed=17 + rep, progress=False, **common)
            rates["rlgate sample"].append(n / (time.perf_counter() - t))
            lengths["rlgate sample"].append(statistics.mean(len(tok(x)["input_ids"]) for r in replies for x in r))
    print(f"{len(items)} prompts x k={args.k}, batch {args.batch_size} prompts, max_new_tokens "
          f"{args.max_new_tokens}, T={SAMPLE_TEMPERATURE}, top_p={SAMPLE_TOP_P}, {args.repeats} alternating repeats")
    print(f"{'backend':<16}{'completions/s (median)':>24}{'all runs':>30}{'mean reply tokens':>20}")
    for name, values in rates.items():
        print(f"{name:<16}{statistics.median(values):>24.1f}{', '.join(f'{v:.1f}' for v in values):>30}"
              f"{statistics.mean(lengths[name]):>20.1f}")
    ours = statistics.median(rates["rlgate sample"])
    for name in raw_variants:
        print(f"throughput ratio rlgate / {name} = {ours / statistics.median(rates[name]):.3f} (target >= 0.95)")


if __name__ == "__main__":
    main()
