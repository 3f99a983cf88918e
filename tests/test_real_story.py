"""The story on a real model: the demo's runs scaled to a CPU, the watched run's checkpoints, the CLI;
the slow test runs the story's watched GRPO run on the warm-started SmolLM2-135M at its smallest, gated by category."""

from __future__ import annotations

import pytest

import pytest_rlgate as rg
from pytest_rlgate.cli import main
from pytest_rlgate.data.rows import read_rows
from pytest_rlgate.demo import real
from pytest_rlgate.demo.story import configurations, hackable_configuration, train_config
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy import TINY_POLICY, models
from pytest_rlgate.train import config
from pytest_rlgate.train.cached import cached_run
from pytest_rlgate.train.methods import make_knobs
from pytest_rlgate.train.run import RunFolder
from pytest_rlgate.watch.folder import checkpoints

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
    assert real.warm_base(TINY_POLICY, rg.load_env("refund"), lines.append) == TINY_POLICY
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
def test_the_real_story_trains_gates_and_keeps_checkpoints_at_its_smallest(tmp_path):
    """CI's slow step, the story's own path at its smallest: refund's warm start of SmolLM2-135M (trained
    once into the cache), the story's watched GRPO run on the small prompt set for two steps, trained
    through the run cache and published as the demo and the benchmark publish it, gated by category on
    the environment's own holdout; its checkpoints kept beside the cache entry, and hack_scan of its rows."""
    env = rg.load_env("refund")
    name = real.warm_base("smollm2-135m", env, lambda line: None)
    assert name == WARM
    honest = configurations(2, quick=True, env="refund", real=real.real_story(name, steps=2))[0]
    trained = train_config(honest, tmp_path)
    assert trained.summary is not None, trained.error
    run = RunFolder.open(tmp_path / honest.name)
    assert run.config["base_model"] == WARM and run.config["training"]["steps_done"] == 2
    groups = {c["group"] for c in run.gate["comparisons"] if c["metric"] == "pass@1"}
    assert groups == {"overall", *env.categories}
    before = [list(read_rows(path)) for path in run.before_files]
    after = list(read_rows(run.after_file))
    assert len(before) == real.REAL_BASE_RUNS
    held = {c: sum(row["category"] == c for row in after) for c in env.categories}
    assert held == {"with_id": 5, "no_id": 5, "off_topic": 4}  # the small set's own shares, one reply a prompt
    # the warm start's shape: it declines or asks somewhere (the plain SFT warm start looked up on everything)
    assert any(row["reward"] >= 1.0 for rows in before for row in rows if row["category"] != "with_id")
    knobs = make_knobs(honest.method, **honest.knobs)
    served = cached_run(knobs)
    assert served.hit  # the run just trained is served, not trained again
    kept = knobs.with_overrides(runs_dir=str(served.run.path.parent), run_name=served.run.path.name).checkpoints_dir
    assert [step for step, _ in checkpoints(kept)] == [2]
    scan = rg.hack_scan(after, before=[row for rows in before for row in rows], env=env)
    assert set(scan.by_category) <= set(env.categories)
