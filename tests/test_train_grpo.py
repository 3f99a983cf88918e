"""A real GRPO run end to end: the run folder, determinism, `rlgate eval`, round two.

The policy is a random-init tiny Llama (``tests/_tiny_model.py``): these tests check the
training machinery and what it writes, which does not depend on what the policy says.
``test_train_tiny.py`` trains the embedded tiny policy itself.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from _tiny_model import build_tiny  # noqa: E402

from pytest_rlgate import cli  # noqa: E402
from pytest_rlgate.data.prompts import build_prompts  # noqa: E402
from pytest_rlgate.data.rows import read_rows  # noqa: E402
from pytest_rlgate.environment.contract import load_env  # noqa: E402
from pytest_rlgate.envs.refund import case_for  # noqa: E402
from pytest_rlgate.errors import UsageError  # noqa: E402
from pytest_rlgate.train.config import GRPOKnobs  # noqa: E402
from pytest_rlgate.train.grpo import build_trainer, train_grpo  # noqa: E402
from pytest_rlgate.train.reward import env_reward, prompt_text  # noqa: E402
from pytest_rlgate.train.run import RunFolder  # noqa: E402

torch.set_num_threads(1)

#: Small and quick: 40 prompts, 3 steps of one 8-completion group, 24-token completions.
FAST = {"size": "small", "steps": 3, "max_new_tokens": 24, "monitor_every": 2, "base_runs": 2}


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-grpo")
    build_tiny(folder, seed=0)
    return str(folder)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def run(base_dir, runs_dir) -> RunFolder:
    return train_grpo(base_model=base_dir, runs_dir=str(runs_dir), run_name="first", **FAST)


def test_the_run_folder_has_every_file(run):
    names = {p.name for p in run.path.iterdir()}
    assert {"config.json", "metrics.jsonl", "adapter", "holdout_before.jsonl", "holdout_before_seed18.jsonl",
            "holdout_after.jsonl", "gate.json", "monitor.json", "holdout_prompts.jsonl", "COMPLETE"} <= names
    assert {p.name for p in run.adapter.iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    assert not [p for p in run.path.parent.iterdir() if p.name.startswith(".")]  # no partial folder left


def test_config_records_every_knob_versions_prompts_and_seeds(run, base_dir):
    config = run.config
    knobs = config["knobs"]
    assert config["method"] == "grpo" and knobs["base_model"] == base_dir
    for name in ("steps", "num_generations", "learning_rate", "beta", "loss_type", "epsilon_high",
                 "no_scale_rewards", "mask_truncated", "max_new_tokens", "temperature", "top_p",
                 "sample_seed", "base_runs", "monitor_every", "stop_on", "prompt_seed", "size", "prompts_file",
                 "holdout", "balance", "run_name", "from_run", "lora_rank", "lora_alpha", "lora_targets"):
        assert name in knobs
    assert knobs["steps"] == 3 and knobs["loss_type"] == "bnpo"
    assert knobs["learning_rate"] == 5e-6 and "learning_rate" in config["auto_defaults"]  # not the tiny policy
    assert config["seeds"]["base_runs"] == [17, 18] and config["seeds"]["after"] == 17
    assert config["prompts"]["fingerprint"].startswith("sha256:")
    assert sum(config["prompts"]["holdout"].values()) == len(list(read_rows(run.after_file))) // 4
    assert {"torch", "trl", "peft", "transformers"} <= set(config["versions"])
    assert config["lineage"] == [] and config["training"]["steps_done"] == 3

    assert config["env"] == load_env("refund").describe() and knobs["env"] == "refund"


def test_metrics_have_one_row_per_step_with_the_training_signals(run):
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        for key in ("reward", "reward_std", "kl", "completion_length", "clip_ratio_low", "clip_ratio_high",
                    "clipped_ratio", "loss"):
            assert isinstance(row[key], float), key
        assert 0.0 <= row["reward"] <= 1.0 and row["completion_length"] <= 24
    # the monitor's evaluations (step 0, step 2) join the log stream of the next logged step
    assert ["monitor/length" in row for row in rows] == [True, True, False]
    assert rows[1]["monitor/proxy_reward"] == run.monitor["history"][1]["proxy_reward"]


def test_holdout_rows_are_graded_per_base_seed_and_gated(run):
    first, second = (list(read_rows(p)) for p in run.before_files)
    after = list(read_rows(run.after_file))
    assert {r["sample_seed"] for r in first} == {17} and {r["sample_seed"] for r in second} == {18}
    assert {r["sample_seed"] for r in after} == {17} and {r["eval_run"] for r in after} == {"after"}
    assert len(first) == len(second) == len(after)
    assert [r["prompt"] for r in first] == [r["prompt"] for r in after]  # paired
    gate = run.gate
    assert isinstance(gate["passed"], bool) and gate["passed"] == run.config["training"]["passed"]
    assert "well_formed" in json.dumps(gate)  # the guard is part of the rule


def test_monitor_summary_lists_its_evaluations(run):
    summary = run.monitor
    assert [h["step"] for h in summary["history"]] == [0, 2]
    assert summary["settings"]["every"] == 2 and summary["alarms"] == [] and summary["stopped_at"] is None


def test_same_seed_gives_the_same_adapter_bytes(run, base_dir, runs_dir):
    again = train_grpo(base_model=base_dir, runs_dir=str(runs_dir), run_name="again", **FAST)
    weights = "adapter_model.safetensors"
    assert (again.adapter / weights).read_bytes() == (run.adapter / weights).read_bytes()
    def timeless(folder):
        return [{k: v for k, v in row.items() if k != "step_time"} for row in folder.metrics()]

    assert timeless(again) == timeless(run)


def test_rlgate_eval_resamples_the_run_and_reproduces_its_after_rows(run, tmp_path, capsys):
    out = tmp_path / "eval.jsonl"
    code = cli.main(["eval", "--run", str(run.path), "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert code == (0 if run.gate["passed"] else 1)
    assert str(run.path) in text
    fresh, recorded = list(read_rows(out)), list(read_rows(run.after_file))
    assert [r["reply"] for r in fresh] == [r["reply"] for r in recorded]


def test_round_two_merges_the_previous_adapter_and_records_lineage(run, base_dir, runs_dir):
    second = train_grpo(from_run=str(run.path), runs_dir=str(runs_dir), run_name="round2",
                        **{**FAST, "steps": 1, "base_runs": 1, "monitor_every": 0, "difficulty": (0.0, 1.0)})
    config = second.config
    assert config["knobs"]["base_model"] == base_dir
    assert [step["run"] for step in config["lineage"]] == ["first"]
    assert config["lineage"][0]["adapter"] == str(run.adapter.resolve())
    # the round-two base is the merged round-one policy: its before rows are round one's after rows
    assert [r["reply"] for r in read_rows(second.before_files[0])] == [r["reply"] for r in read_rows(run.after_file)]


def test_from_run_that_did_not_finish_is_a_usage_error(tmp_path):
    (tmp_path / "half").mkdir()
    with pytest.raises(UsageError, match="--from-run .*did not finish"):
        train_grpo(from_run=str(tmp_path / "half"), runs_dir=str(tmp_path), run_name="x", **FAST)
    assert not (tmp_path / "x").exists()


def test_rlgate_train_grpo_runs_from_the_command_line(base_dir, runs_dir, capsys):
    code = cli.main(["train", "grpo", "--base-model", base_dir, "--runs-dir", str(runs_dir), "--run-name", "cli",
                     "--size", "small", "--steps", "1", "--base-runs", "1", "--monitor-every", "0",
                     "--max-new-tokens", "16", "--loss-type", "dr_grpo", "--no-scale-rewards",
                     "--epsilon-high", "0.28", "--mask-truncated", "--no-progress"])
    out = capsys.readouterr().out
    folder = RunFolder.open(runs_dir / "cli")
    assert code == (0 if folder.gate["passed"] else 1)
    assert f"run: {folder.path}" in out and "trained 1 steps" in out
    knobs = folder.config["knobs"]
    assert (knobs["loss_type"], knobs["no_scale_rewards"], knobs["epsilon_high"], knobs["mask_truncated"]) == (
        "dr_grpo", True, 0.28, True)
    assert cli.main(["train", "grpo", "--base-model", base_dir, "--runs-dir", str(runs_dir), "--run-name",
                     "cli", "--size", "small"]) == 2  # the name is taken
    assert "--run-name 'cli'" in capsys.readouterr().err


def test_train_grpo_saves_checkpoints_a_watch_reads_and_watches_itself(base_dir, runs_dir, capsys):
    """--save-steps puts each checkpoint-N where a watch started beside the run finds it (printed at the start);
    --watch-every gates the run from inside it into the run folder's rlgate-watch/, which rlgate select reads."""
    code = cli.main(["train", "grpo", "--base-model", base_dir, "--runs-dir", str(runs_dir), "--run-name", "watched",
                     "--size", "small", "--steps", "2", "--base-runs", "1", "--monitor-every", "0",
                     "--max-new-tokens", "16", "--k", "2", "--save-steps", "1", "--watch-every", "1",
                     "--no-progress"])
    out = capsys.readouterr().out
    folder = RunFolder.open(runs_dir / "watched")
    checkpoints = runs_dir / "watched-checkpoints"
    assert code == (0 if folder.gate["passed"] else 1)
    assert out.startswith(f"checkpoints: {checkpoints}/checkpoint-N every 1 steps; `rlgate watch {checkpoints} "
                          "--idle 600` gates them beside the run")
    assert sorted(p.name for p in checkpoints.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    watched = folder.path / "rlgate-watch"
    assert (watched / "looks.json").is_file() and f"`rlgate select {watched}`" in out
    assert folder.config["knobs"]["save_steps"] == 1 and folder.config["knobs"]["watch_every"] == 1
    assert cli.main(["select", str(watched)]) in (0, 1)
    assert cli.main(["watch", str(checkpoints), "--env", "refund", "--size", "small", "--k", "2",
                     "--max-new-tokens", "16", "--looks", "2", "--no-select", "--no-progress"]) in (0, 1)
    assert [look["step"] for look in json.loads((checkpoints / "rlgate-watch" / "looks.json").read_text())[
        "looks"]] == [1, 2]
    with pytest.raises(UsageError, match="regression is the watched run's stop: add --watch-every N"):
        GRPOKnobs(base_model=base_dir, stop_on=("regression",)).resolve()


def _recorded_step(base_dir, tmp_path, items, knobs):
    """One GRPO step with the knobs' environment reward, recording what TRL hands the reward."""
    from transformers import AutoModelForCausalLM, AutoTokenizer


    seen = []
    scored = env_reward(knobs.environment, knobs.reward)

    def recording(prompts, completions, **columns):
        seen.append((prompts, columns))
        return scored(prompts, completions, **columns)

    trainer = build_trainer(AutoModelForCausalLM.from_pretrained(base_dir), AutoTokenizer.from_pretrained(base_dir),
                            items, knobs, output_dir=str(tmp_path), reward=recording)
    trainer.train()
    return seen[0]


def test_the_reward_receives_each_prompts_case_as_a_dataset_column(base_dir, tmp_path):
    knobs = GRPOKnobs(base_model=base_dir, steps=1, max_new_tokens=8).resolve()
    prompts, columns = _recorded_step(base_dir, tmp_path, build_prompts(0, "small"), knobs)
    assert len(columns["case"]) == len(prompts) == knobs.batch_size
    for prompt, case, category in zip(prompts, columns["case"], columns["category"]):
        assert dict(case) == case_for(prompt_text(prompt)) and case["category"] == category
        assert prompt[0]["role"] == "system"  # refund renders its policy as a system prompt


def test_one_grpo_step_on_an_environment_of_its_own(base_dir, tmp_path):
    from _calc_env import CalcEnv, calc_items


    items = calc_items(4)
    knobs = GRPOKnobs(env=CalcEnv(), base_model=base_dir, steps=1, max_new_tokens=8).resolve()
    prompts, columns = _recorded_step(base_dir, tmp_path, items, knobs)
    by_prompt = {item["prompt"]: item for item in items}
    for prompt, case, category in zip(prompts, columns["case"], columns["category"]):
        assert [m["role"] for m in prompt] == ["user"]  # no system prompt: calc has none
        assert dict(case) == by_prompt[prompt[0]["content"]]["case"] and category in CalcEnv.categories


def test_rlgate_eval_through_a_server_loads_the_runs_adapter_into_it(run, tmp_path, capsys):
    pytest.importorskip("httpx")
    from _openai_server import BASE, fake_server

    out = tmp_path / "served.jsonl"
    with fake_server() as fake:
        code = cli.main(["eval", "--run", str(run.path), "--base-url", fake.url, "--model", BASE, "--out", str(out),
                         "--no-progress"])
        loads = [r["lora_path"] for r in fake.requests if "lora_path" in r]
        assert not fake.adapters  # unloaded after
    assert code in (0, 1), capsys.readouterr().err
    assert loads == [str(run.adapter.resolve())]
    assert len(list(read_rows(out))) == len(list(read_rows(run.after_file)))
