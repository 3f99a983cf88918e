"""Episodes on the shipped tiny agent: sampled, graded, gated and trained through TRL's tool loop (CPU)."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from test_episodes import docs_example  # noqa: E402

import pytest_rlgate as rg  # noqa: E402
from pytest_rlgate.data import grade_episode  # noqa: E402
from pytest_rlgate.data.rows import read_rows  # noqa: E402
from pytest_rlgate.train.config import GRPOKnobs  # noqa: E402
from pytest_rlgate.train.grpo import build_trainer, train_grpo  # noqa: E402

pytestmark = pytest.mark.slow
AGENT = "rlgate/tiny-refund_agent"
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def agent() -> tuple[Any, Any]:
    return rg.load_policy(AGENT)


def test_the_tiny_agent_runs_whole_episodes_reproducibly(agent: tuple[Any, Any]) -> None:
    model, tokenizer = agent
    env = rg.load_env("refund_agent")
    items = env.build_prompts(0, "small")[:12]
    rows = rg.sample_rows(model, tokenizer, items, k=2, env=env, max_new_tokens=48)
    assert any(r["n_turns"] >= 2 and r["n_tool_calls"] >= 1 for r in rows)  # it reads a result and acts again
    assert 0 < sum(r["reward"] for r in rows) < len(rows)
    alone = rg.sample_rows(model, tokenizer, items[3:4], k=2, env=env, max_new_tokens=48)
    assert [r["reply"] for r in alone] == [r["reply"] for r in rows if r["prompt"] == items[3]["prompt"]]
    again = grade_episode(env, rows[0]["case"], rows[0]["transcript"])
    assert again["score"] == rows[0]["score"] and again["turn_markers"] == rows[0]["turn_markers"]


def test_the_tiny_agent_passes_every_category_sometimes(agent: tuple[Any, Any]) -> None:
    model, tokenizer = agent
    env = rg.load_env("refund_agent")
    rows = rg.sample_rows(model, tokenizer, env.build_prompts(0, "small"), k=4, env=env, max_new_tokens=48)
    rates = {c: [r["reward"] for r in rows if r["category"] == c] for c in env.categories}
    assert all(0 < sum(v) < len(v) for v in rates.values()), {c: sum(v) / len(v) for c, v in rates.items()}


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    runs = tmp_path_factory.mktemp("agent-runs")
    return train_grpo(runs_dir=str(runs), run_name="agent", env="refund_agent", size="small", steps=3,
                      base_runs=1, monitor_every=2)


def test_grpo_trains_the_agent_through_trl_and_gates_episodes(agent_run: Any) -> None:
    from safetensors.torch import load_file

    assert agent_run.config["knobs"]["base_model"] == AGENT and agent_run.config["training"]["steps_done"] == 3
    before = list(read_rows(agent_run.before_files[0]))
    assert {r["category"] for r in before} == {"no_id", "not_refundable", "off_topic", "with_id"}
    assert all("transcript" in r and "turn_markers" in r for r in before)
    assert set(agent_run.gate) >= {"passed"}
    weights = load_file(str(agent_run.adapter / "adapter_model.safetensors"))
    assert any(float(t.abs().sum()) > 0 for name, t in weights.items() if "lora_B" in name)


def test_a_docs_tool_environment_takes_one_grpo_step(agent: tuple[Any, Any]) -> None:
    ns = docs_example()
    model, tokenizer = agent
    env = ns["env"]
    seen: list[Any] = []
    reward = rg.env_reward(env)

    def recorded(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
        seen.extend(completions)
        return reward(prompts, completions, **kwargs)

    knobs = GRPOKnobs(env=env, steps=1, num_generations=2, batch_size=2, base_model=AGENT).resolve()
    trainer = build_trainer(model, tokenizer, ns["items"], knobs, output_dir=tempfile.mkdtemp(), reward=recorded,
                            progress=False)
    trainer.train()
    assert trainer.state.global_step == 1 and len(seen) == 2
    assert all(isinstance(c, list) and c[0]["role"] == "assistant" for c in seen)  # TRL's tool-loop completions
