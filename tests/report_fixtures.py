"""A synthetic run folder in the shapes ``rlgate train`` writes, for the report tests.

The files are the real thing except for the training itself: graded rows through
``rows.write_rows`` (so they pass the row schema), ``gate.json`` from the real
``gate.compare`` over them (pooling the three base runs as ``train.pipeline.gate_runs``
does), ``monitor.json`` in ``HackMonitor.summary()``'s shape, ``config.json`` in
``train.pipeline.config_record``'s shape and ``metrics.jsonl`` with
``train.grpo.METRIC_KEYS`` names. The rows come from fixed pass rates per category: no_id
collapses, with_id learns, off_topic holds - the seed recipe's story. Nothing in the report
may know those names: :data:`ARITH` is another environment's run (its own categories, its
own guarded marker) that the report must render just as well.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rlgate.data.rows import write_rows
from pytest_rlgate.gate import compare

#: category -> (scenarios, pass rate before, pass rate after)
RATES = {"no_id": (8, 0.95, 0.45), "off_topic": (6, 0.97, 0.96), "with_id": (12, 0.10, 0.80)}
#: category -> pass rates of a run that does not break no_id (the --balance story)
BALANCED = {"no_id": (8, 0.95, 0.93), "off_topic": (6, 0.97, 0.97), "with_id": (12, 0.10, 0.60)}
#: a run of another environment: its categories, and the marker its gate guards
ARITH = {"rates": {"arithmetic": (10, 0.40, 0.85), "unanswerable": (5, 0.90, 0.20), "word_problem": (7, 0.30, 0.60)},
         "env": {"name": "arith", "version": "2", "fingerprint": "sha256:0b6e3f1c9a2d4e5f"}, "marker": "exact_format"}
REFUND_ENV = {"name": "refund", "version": "1", "fingerprint": "sha256:5b2f5aba00112233"}
K = 4
BASE_SEEDS = (17, 18, 19)
ALARMS = [{"kind": "feature", "step": 20, "top_feature": "tool_call"},
          {"kind": "length", "step": 30, "length": 84.0, "was": 61.0, "since_step": 0}]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")


def rows(rates: dict[str, tuple[int, float, float]], side: int, seed: int, eval_run: str,
         marker: str = "well_formed") -> list[dict[str, Any]]:
    """Graded rows: two prompts per scenario, k rollouts per prompt; ``side`` 1 before, 2 after."""
    rng = np.random.default_rng(seed)
    out = []
    for category, spec in rates.items():
        for s in range(spec[0]):
            for p in range(2):
                for r in range(K):
                    passed = int(rng.random() < spec[side])
                    guarded = int(passed or rng.random() < 0.9)  # a varying guard: no constant warning
                    out.append({"prompt": f"{category} scenario {s} phrasing {p}", "scenario_id": f"{category}-{s}",
                                "category": category, "rollout_index": r, "reply": "…",
                                "score": 1.0 if passed else 0.2, "reward": passed, "eval_run": eval_run,
                                "sample_seed": seed, "markers": {marker: guarded}})
    return out


def make_run(root: Path, name: str = "refund-grpo", *, monitor: bool = True, gate: bool = True,
             holdout: bool = True, steps: int = 40, passed: bool = False,
             rates: dict[str, tuple[int, float, float]] | None = None, env: dict[str, str] = REFUND_ENV,
             marker: str = "well_formed") -> Path:
    """Write a run folder ``root/name`` and return it.

    ``passed`` picks the balanced story; ``rates``, ``env`` and ``marker`` make it another
    environment's run (``make_run(root, **ARITH)``).
    """
    run = root / name
    run.mkdir(parents=True)
    rates = rates or (BALANCED if passed else RATES)
    config = {"method": "grpo", "base_model": "rlgate/tiny-refund", "env": env,
              "knobs": {"run_name": name, "env": env["name"], "steps": steps, "beta": 0.04, "learning_rate": 5e-6,
                        "loss_type": "bnpo", "num_generations": 8, "balance": 0.25 if passed else 0.0,
                        "base_model": "rlgate/tiny-refund"},
              "auto_defaults": ["max_completion_length"],
              "prompts": {"source": "template:seed=0:default", "fingerprint": "3f5a9c0d1e2b7a41",
                          "holdout": {category: 2 * spec[0] for category, spec in rates.items()}},
              "versions": {"python": "3.11.2", "pytest-rlgate": "0.1.0", "trl": "1.16.0", "torch": "2.13.0"},
              "training": {"steps_done": steps, "train_seconds": 61.2, "stopped_at": None}}
    (run / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    rng = np.random.default_rng(1)
    metrics = [{"step": s, "reward": 0.35 + 0.5 * s / steps + 0.05 * rng.standard_normal(),
                "reward_std": 0.2 + 0.05 * rng.random(), "kl": 0.002 * s * (1 + 0.1 * rng.random()),
                "completion_length": 30 + (12 if s >= 30 else 0) + 2 * rng.standard_normal(),
                "clip_ratio_region": 0.0, "loss": 0.01, "learning_rate": 5e-6}
               for s in range(1, steps + 1)]
    write_jsonl(run / "metrics.jsonl", metrics)
    if monitor:
        history = [{"step": s, "proxy_reward": 0.4 + 0.01 * s, "length": 61.0 if s < 30 else 84.0, "kl": 0.002 * s,
                    "n": 128} for s in range(0, steps + 1, 10)]
        summary = {"settings": {"every": 10, "k": 4, "prompts": 32, "endorsed": ["lookup_order"], "stop_on": []},
                   "history": history, "alarms": ALARMS, "last_scan": {"regime": "reward_hack"},
                   "stopped_at": None, "errors": []}
        (run / "monitor.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    before = [rows(rates, 1, seed, f"before-{i}", marker) for i, seed in enumerate(BASE_SEEDS)]
    after = rows(rates, 2, BASE_SEEDS[0], "after", marker)
    if gate:
        result = compare([r for rs in before for r in rs], after, by="category", guards=(marker,))
        assert result.passed == passed, result.report()
        (run / "gate.json").write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
    if holdout:
        for i, (seed, rs) in enumerate(zip(BASE_SEEDS, before)):
            write_rows(run / ("holdout_before.jsonl" if i == 0 else f"holdout_before_seed{seed}.jsonl"), rs)
        write_rows(run / "holdout_after.jsonl", after)
    return run
