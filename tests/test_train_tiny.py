"""GRPO on the embedded tiny policy itself: the CPU defaults, a real reward signal, a real gate.

Loads the shipped tiny policy (package data, nothing is built). A few steps only: the
end-to-end story with a default-length run is the slow suite's job.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from pytest_rlgate.data.rows import read_rows  # noqa: E402
from pytest_rlgate.train import config as C  # noqa: E402
from pytest_rlgate.train.grpo import train_grpo  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("tiny-runs")
    return train_grpo(runs_dir=str(runs), run_name="tiny", size="small", steps=4, base_runs=2, monitor_every=2)


def test_tiny_policy_runs_with_its_cpu_defaults(tiny_run):
    config = tiny_run.config
    knobs = config["knobs"]
    assert knobs["base_model"] == C.TINY_POLICY
    assert knobs["learning_rate"] == C.TINY_LEARNING_RATE
    assert knobs["max_new_tokens"] == C.TINY_MAX_NEW_TOKENS
    assert knobs["batch_size"] == C.NUM_GENERATIONS * C.TINY_PROMPTS_PER_STEP
    assert set(config["auto_defaults"]) == {"base_model", "learning_rate", "max_new_tokens", "batch_size"}
    assert config["env"]["name"] == "refund" and knobs["env"] == "refund"
    assert config["device"] == "cpu" and config["training"]["steps_done"] == 4


def test_the_tiny_policy_gives_grpo_a_signal_and_the_adapter_moves(tiny_run):
    from safetensors.torch import load_file

    metrics = tiny_run.metrics()
    assert len(metrics) == 4
    assert any(m["reward_std"] > 0 for m in metrics)  # groups disagree: there is something to learn
    assert any(m["kl"] > 0 for m in metrics[1:])  # and the policy moved away from the reference
    weights = load_file(str(tiny_run.adapter / "adapter_model.safetensors"))
    assert any(float(t.abs().sum()) > 0 for name, t in weights.items() if "lora_B" in name)


def test_the_tiny_policy_writes_tool_calls_the_gate_can_grade(tiny_run):
    before = list(read_rows(tiny_run.before_files[0]))
    assert {r["category"] for r in before} == {"no_id", "off_topic", "with_id"}
    assert any(r["markers"]["tool_call"] == 1.0 for r in before)  # it calls tools, well-formed or not
    assert 0 < sum(r["reward"] for r in before) < len(before)  # a mixed policy, not all pass or all fail
    assert set(tiny_run.gate) >= {"passed"}


@pytest.fixture(scope="module")
def arith_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("arith-runs")
    return train_grpo(env="arith", runs_dir=str(runs), run_name="arith", size="small", steps=4, base_runs=2,
                      monitor_every=2)


@pytest.mark.filterwarnings("ignore:guard 'format' is constant")  # 4 steps rarely break the format
def test_arith_trains_its_own_tiny_policy_and_guards_its_markers(arith_run):
    """The second environment runs the same flow on the policy the same builder made from its corpus."""
    config = arith_run.config
    assert config["knobs"]["base_model"] == "rlgate/tiny-arith" and config["env"]["name"] == "arith"
    before = list(read_rows(arith_run.before_files[0]))
    assert {r["category"] for r in before} == {"add", "compare", "unanswerable"}
    assert set(before[0]["markers"]) == {"answered", "exact", "format"}
    assert 0 < sum(r["reward"] for r in before) < len(before)  # decent on add, weak on compare
    assert any(m["reward_std"] > 0 for m in arith_run.metrics())
    assert {c["metric"] for c in arith_run.gate["comparisons"]} >= {"pass@1", "marker:exact", "marker:format"}
