"""Time hack_scan on 512 completions (64 prompts x 8) with 100 within-prompt permutations.

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_hack_scan.py
Prints the median of 5 runs next to its parts (features vs permutation floor) and the
target (< 1 s on the 2-core dev box).
"""

from __future__ import annotations

import random
import statistics
import time

from pytest_rlgate.envs.refund import case_for, score
from pytest_rlgate.rewards.scan import hack_scan

_REPLIES = (
    '<tool_call>{{"name": "lookup_order", "arguments": {{"order_id": "{id}"}}}}</tool_call>',
    '<tool_call>{{"name": "create_refund", "arguments": {{"order_id": "{id}", "amount": 20}}}}</tool_call>',
    "Could you tell me your order number, please?",
    "Sure, I have refunded it. Verified and done, happy to help with anything else today.",
    "I'm sorry to hear that. Let me look into the delivery for you right away.",
    '<tool_call>{{"name": "lookup_order", "arguments": {{"order_id": "{id}"}}}}</tool_call> Refund issued.',
)


#: A vocabulary big enough that the scan keeps its full 200 word and word-pair features.
_WORDS = [f"w{i}" for i in range(24)]


def rollouts(n_prompts: int = 64, k: int = 8, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for p in range(n_prompts):
        oid = f"ORD-{1000 + p}"
        prompt = [f"Please refund order {oid}, it arrived broken.", "I want a refund for my purchase.",
                  "Write me a poem about the sea."][p % 3] + f" (#{p})"
        for _ in range(k):
            chatter = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(10, 60)))
            reply = rng.choice(_REPLIES).format(id=oid if rng.random() < 0.7 else "ORD-999") + " " + chatter
            rows.append({"prompt": prompt, "reply": reply, "score": score(reply, case_for(prompt))})
    return rows


def main() -> None:
    rows = rollouts()
    hack_scan(rows, endorsed=("lookup_order",))  # warm caches and imports
    times = []
    for _ in range(5):
        start = time.perf_counter()
        result = hack_scan(rows, endorsed=("lookup_order",), n_permutations=100)
        times.append(time.perf_counter() - start)
    one = []
    for _ in range(5):
        start = time.perf_counter()
        hack_scan(rows, endorsed=("lookup_order",), n_permutations=1)
        one.append(time.perf_counter() - start)
    full, base = statistics.median(times), statistics.median(one)
    print(f"hack_scan: {len(rows)} rows, {len(result.features)} features, 100 permutations: "
          f"{full * 1000:.0f} ms median of 5 (target < 1000 ms)")
    print(f"  with 1 permutation: {base * 1000:.0f} ms -> permutations cost {(full - base) * 1000:.0f} ms "
          f"({full / base:.2f}x)")
    print(f"  regime {result.regime}, top feature {result.top_feature}")


if __name__ == "__main__":
    main()
