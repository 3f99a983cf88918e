"""The story on a real model: the demo's runs scaled to a CPU, the watched run's checkpoints, the CLI;
the slow test trains a few GRPO steps of the warm-started SmolLM2-135M and gates them by category."""

from __future__ import annotations

import pytest

import pytest_rlgate as rg
from pytest_rlgate.cli import main
from pytest_rlgate.data.rows import read_rows
from pytest_rlgate.demo import real
from pytest_rlgate.demo.story import configurations, hackable_configuration
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy import models
from pytest_rlgate.train import config
from pytest_rlgate.train.methods import make_knobs

WARM = "smollm2-135m+refund"


def _fetched() -> bool:
    try:
        models.fetched_model_dir("smollm2-135m")
    except UsageError:
        return False
    return True


def test_the_real_story_is_the_demos_runs_with_knobs_scaled_to_a_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "warm_model_dir", lambda name: tmp_path)  # the knobs check the name is built
    story = real.real_story(WARM, steps=12)
    honest, balanced, dpo = configurations(12, env="refund", real=story)
    hackable = hackable_configuration(12, env="refund", real=story)
    knobs = {c.name: make_knobs(c.method, **c.knobs) for c in (honest, balanced, dpo, hackable)}
    for run in knobs.values():
        assert run.base_model == WARM and run.k == real.REAL_EVAL_K and run.base_runs == real.REAL_BASE_RUNS
        assert run.holdout is None and run.max_new_tokens == real.REAL_COMPLETION
        assert run.steps == 12
    grpo = [knobs[name] for name in ("grpo", "grpo-balance-0.25", "grpo-hackable-reward")]
    assert {(k.num_generations, k.batch_size, k.beta) for k in grpo} == {(real.REAL_GROUP, real.REAL_BATCH, 0.0)}
    assert knobs["grpo"].save_steps == real.REAL_SAVE_STEPS and knobs["grpo-balance-0.25"].save_steps == 0
    assert all(k.monitor_every == 0 for k in knobs.values())  # hack_scan reads the holdout rows instead
    assert knobs["grpo-hackable-reward"].reward == "lookup_anything"
    assert knobs["dpo-constructed"].pair_samples == real.REAL_DPO["pair_samples"]
    assert knobs["dpo-constructed"].constructed_negatives and knobs["dpo-constructed"].monitor_every == 0
    assert real.real_story(WARM, steps=2).watched["save_steps"] == 2  # a short run still keeps a checkpoint


def test_the_base_is_warm_started_only_for_a_registry_model_of_an_environment_with_a_recipe():
    lines: list[str] = []
    assert real.warm_base(rg.TINY_POLICY, rg.load_env("refund"), lines.append) == rg.TINY_POLICY
    assert real.warm_base("smollm2-135m", rg.load_env("arith"), lines.append) == "smollm2-135m"
    assert lines == []


def test_demo_base_model_is_a_flag_that_refuses_the_recipe_story(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--base-model" in capsys.readouterr().out
    assert main(["demo", "--base-model", "smollm2-135m", "--seeds", "3", "--runs-dir", "unused"]) == 2
    assert "--base-model with --seeds" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not _fetched(), reason="smollm2-135m is not fetched (rlgate models fetch smollm2-135m)")
def test_a_few_grpo_steps_of_the_warm_started_real_model_are_gated_per_category(tmp_path):
    """CI's slow step: the refund warm start of SmolLM2-135M (trained once into the cache), two GRPO
    steps on it, and the gate by category, end to end."""
    env = rg.load_env("refund")
    name = real.warm_base("smollm2-135m", env, lambda line: None)
    assert name == WARM
    run = rg.train_grpo(env="refund", base_model=name, size="small", holdout=0.3, steps=2, num_generations=2,
                        batch_size=4, learning_rate=3e-4, beta=0.0, max_new_tokens=48, k=1, base_runs=1,
                        monitor_every=0, runs_dir=str(tmp_path), run_name="real")
    groups = {c["group"] for c in run.gate["comparisons"] if c["metric"] == "pass@1"}
    assert groups == {"overall", *env.categories}
    assert run.config["base_model"] == WARM and run.config["training"]["steps_done"] == 2
    before = list(read_rows(run.before_files[0]))
    # the warm start's shape: it asks where no id is given (the raw model makes no tool call at all)
    asked = [row["reward"] >= 1.0 for row in before if row["category"] == "no_id"]
    assert sum(asked) >= len(asked) / 2
