"""Training knobs, the run folder's publish rule and every bad-input error (no training here)."""

from __future__ import annotations

import json
import os
import re

import pytest
from _calc_env import CalcEnv, SumsEnv, write_calc_prompts

from pytest_rlgate import cli
from pytest_rlgate.cli import train
from pytest_rlgate.cli.train import add_run_arguments
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.errors import DataError, RlgateDeprecationWarning, UsageError
from pytest_rlgate.options import bounds_of
from pytest_rlgate.train import config as C
from pytest_rlgate.train.adapters import check_adapter, load_base
from pytest_rlgate.train.config import GRPOKnobs, RunKnobs, trl_loss_types
from pytest_rlgate.train.dpo_config import DPOKnobs
from pytest_rlgate.train.grpo import grpo_config
from pytest_rlgate.train.pipeline import Prepared, config_record, load_prompts
from pytest_rlgate.train.run import COMPLETE, RunFolder, RunWriter


def test_defaults_are_the_named_constants():
    k = GRPOKnobs()
    assert (k.steps, k.num_generations, k.beta, k.loss_type, k.epsilon_high) == (40, 8, 0.04, "bnpo", 0.0)
    assert (k.temperature, k.top_p, k.sample_seed, k.base_runs, k.monitor_every) == (0.8, 0.95, 17, 3, 10)
    # holdout None: the environment's own holdout shares
    assert (k.holdout, k.balance, k.lora_rank, k.lora_alpha) == (None, 0.0, 16, 32)
    assert set(k.lora_targets) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert k.learning_rate is None and k.max_new_tokens is None  # resolved per base model


def test_tiny_policy_gets_cpu_defaults_and_records_them():
    k = GRPOKnobs().resolve()
    assert k.base_model == C.TINY_POLICY  # the default environment's own base model
    assert k.learning_rate == C.TINY_LEARNING_RATE
    assert k.max_new_tokens == C.TINY_MAX_NEW_TOKENS
    assert k.batch_size == k.num_generations * C.TINY_PROMPTS_PER_STEP
    assert set(k.auto) == {"base_model", "learning_rate", "max_new_tokens", "batch_size"}
    assert k.to_dict()["auto"] == sorted(k.auto)
    assert C.is_tiny("rlgate/tiny-arith") and not C.is_tiny("Qwen/Qwen2.5-0.5B-Instruct")


# --- the environment ----------------------------------------------------------------------

def test_the_environment_names_the_run_and_needs_a_base_model_when_it_has_none():
    with pytest.raises(UsageError, match=r"^--base-model: environment calc names no base model"):
        GRPOKnobs(env=CalcEnv()).resolve()
    k = GRPOKnobs(env=CalcEnv(), base_model=C.TINY_POLICY).resolve()  # the tiny refund policy serves any task
    assert k.run_name == "calc-grpo-s0" and k.environment.name == "calc" and "base_model" not in k.auto
    assert k.to_dict()["env"] == "calc" and json.dumps(k.to_dict())  # an object without a spec: its name
    assert GRPOKnobs(env="refund").resolve() == GRPOKnobs().resolve()  # specs compare by value
    assert GRPOKnobs().resolve().to_dict()["env"] == "refund"


def test_a_bad_environment_spec_names_the_flag():
    with pytest.raises(UsageError, match=r"^--env 'no_such_env': environment 'no_such_env'"):
        GRPOKnobs(env="no_such_env").resolve()
    code = cli.main(["train", "grpo", "--env", "no_such_env", "--runs-dir", "unused"])
    assert code == 2


def test_config_json_records_the_environment(tmp_path):
    pytest.importorskip("torch")
    knobs = GRPOKnobs(env=CalcEnv(), base_model="x/y",
                      prompts_file=str(write_calc_prompts(tmp_path / "calc.jsonl"))).resolve()
    record = config_record(Prepared(knobs=knobs, model=None, tokenizer=None, prompts=load_prompts(knobs)))
    assert record["env"] == load_env(CalcEnv()).describe()
    assert record["env"]["fingerprint"].startswith("sha256:") and record["knobs"]["env"] == "calc"
    assert set(record["prompts"]["holdout"]) == set(CalcEnv.categories)


def _finished(tmp_path, env_record, spec):
    with RunWriter(tmp_path, "r") as writer:
        _fill(writer)
        writer.json("config.json", {"knobs": {"env": spec}, "env": env_record})
        return writer.publish()


def test_a_run_folder_reloads_its_environment_and_refuses_another_reward(tmp_path):
    sums = load_env("_calc_env:SumsEnv")
    run = _finished(tmp_path, sums.describe(), "_calc_env:SumsEnv")
    assert run.environment() is sums
    with pytest.raises(DataError, match="trained with environment sums .* but calc here"):
        run.environment(CalcEnv())
    lost = _finished(tmp_path / "lost", {"name": "mine", "fingerprint": "sha256:0"}, "mine")
    with pytest.raises(UsageError, match="run r was trained with environment 'mine'.*pass it with --env"):
        lost.environment()
    assert load_env(SumsEnv()).fingerprint == sums.fingerprint


def test_hub_model_gets_the_seed_recipe_defaults_and_explicit_values_win():
    k = GRPOKnobs(base_model="Qwen/Qwen2.5-1.5B-Instruct", max_new_tokens=64).resolve()
    assert (k.learning_rate, k.max_new_tokens, k.batch_size) == (5e-6, 64, 8)
    assert "max_new_tokens" not in k.auto and "learning_rate" in k.auto


def test_loss_types_are_read_from_the_installed_trl():
    from trl import GRPOConfig

    types = trl_loss_types()
    assert {"grpo", "bnpo", "dr_grpo", "dapo"} <= set(types)
    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    assert all(f"'{t}'" in help_text for t in types)
    for t in types:
        GRPOKnobs(loss_type=t, num_generations=2).resolve()  # every accepted value validates


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"loss_type": "ppo_magic"}, "--loss-type"),
        ({"num_generations": 1}, "--num-generations"),
        ({"batch_size": 12}, "--batch-size"),
        ({"steps": 0}, "--steps"),
        ({"holdout": 1.0}, "--holdout"),
        ({"balance": -0.1}, "--balance"),
        ({"stop_on": ("length", "vibes")}, "--stop-on"),
        ({"run_name": "../escape"}, "--run-name"),
        ({"beta": -1.0}, "--beta"),
        ({"top_p": 0.0}, "--top-p"),
    ],
)
def test_bad_knobs_name_the_flag_and_the_fix(changes, flag):
    with pytest.raises(UsageError) as info:
        GRPOKnobs(**changes).resolve()
    message = str(info.value)
    assert message.startswith(flag + " ") and "\n" not in message
    if flag == "--loss-type":
        assert all(t in message for t in trl_loss_types())


def test_stop_on_accepts_a_comma_string():
    assert GRPOKnobs(stop_on="length, feature").resolve().stop_on == ("length", "feature")


def test_cli_turns_a_bad_flag_into_one_line_and_exit_2(capsys):
    code = cli.main(["train", "grpo", "--loss-type", "nope", "--runs-dir", "unused"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "--loss-type 'nope'" in err and "bnpo" in err


def test_cli_has_a_slot_per_method(capsys):
    assert "grpo" in train.METHODS
    with pytest.raises(SystemExit):
        cli.main(["train", "grpo", "--help"])
    out = capsys.readouterr().out
    for flag in ("--steps", "--num-generations", "--learning-rate", "--beta", "--loss-type", "--epsilon-high",
                 "--no-scale-rewards", "--mask-truncated", "--max-new-tokens", "--temperature", "--top-p",
                 "--sample-seed", "--base-runs", "--monitor-every", "--stop-on", "--prompt-seed", "--size",
                 "--prompts-file", "--holdout", "--balance", "--run-name", "--base-model", "--from-run",
                 "--lora-rank", "--lora-alpha", "--lora-targets", "--env", "--reward"):
        assert flag in out


# --- adapters and base models -------------------------------------------------------------

def _adapter(folder, *, config="ok", weights="ok"):
    folder.mkdir(parents=True, exist_ok=True)
    if config == "ok":
        (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2}))
    elif config is not None:
        (folder / "adapter_config.json").write_text(config)
    if weights == "ok":
        import torch
        from safetensors.torch import save_file

        layer = "base_model.model.model.layers.0.self_attn.q_proj"
        save_file({f"{layer}.lora_A.weight": torch.ones(2, 8), f"{layer}.lora_B.weight": torch.ones(8, 2)},
                  str(folder / "adapter_model.safetensors"))
    elif weights is not None:
        (folder / "adapter_model.safetensors").write_bytes(weights)
    return folder


def test_check_adapter_accepts_a_good_folder(tmp_path):
    assert check_adapter(_adapter(tmp_path / "a")) == tmp_path / "a"


@pytest.mark.parametrize(
    ("config", "weights", "says"),
    [
        ("missing-folder", None, "no such folder"),
        (None, "ok", "adapter_config.json is missing"),
        ("ok", None, "adapter_model.safetensors is missing"),
        ("{not json", "ok", "corrupt adapter config"),
        ("ok", b"\x00\x01truncated", "corrupt adapter weights"),
    ],
)
def test_bad_adapter_folders_are_one_line_usage_errors(tmp_path, config, weights, says):
    folder = tmp_path / "nope" if config == "missing-folder" else _adapter(tmp_path / "a", config=config,
                                                                          weights=weights)
    with pytest.raises(UsageError) as info:
        check_adapter(folder, flag="--rlgate-adapter")
    message = str(info.value)
    assert message.startswith("--rlgate-adapter ") and says in message and "\n" not in message


def test_a_base_model_that_cannot_be_loaded_offline_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in (str(tmp_path / "no-such-model"), "nobody/no-such-model-xyz"):
        with pytest.raises(UsageError) as info:
            load_base(name)
        assert "\n" not in str(info.value) and name in str(info.value)


# --- the run folder -----------------------------------------------------------------------

def _fill(writer):
    for name in ("config.json", "gate.json"):
        writer.json(name, {"knobs": {}} if name == "config.json" else {"passed": True})
    writer.jsonl("metrics.jsonl", [{"step": 1}])
    (writer.path / "holdout_after.jsonl").write_text("")
    writer.adapter_dir.mkdir()


def test_a_run_appears_only_when_published(tmp_path):
    with RunWriter(tmp_path, "r1") as writer:
        _fill(writer)
        assert not (tmp_path / "r1").exists()
        run = writer.publish()
    assert run.path == tmp_path / "r1" and (run.path / COMPLETE).is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["r1"]
    mask = os.umask(0)
    os.umask(mask)
    assert (run.path / "config.json").stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's private 0600
    assert run.path.stat().st_mode & 0o777 == 0o777 & ~mask


def test_an_interrupted_run_leaves_nothing_that_looks_finished(tmp_path):
    with pytest.raises(KeyboardInterrupt), RunWriter(tmp_path, "r2") as writer:
        _fill(writer)
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_readers_refuse_a_folder_without_the_marker(tmp_path):
    (tmp_path / "r3").mkdir()
    (tmp_path / "r3" / "config.json").write_text("{}")
    with pytest.raises(DataError, match="did not finish"):
        RunFolder.open(tmp_path / "r3")
    with pytest.raises(DataError, match="no such run folder"):
        RunFolder.open(tmp_path / "absent")


def test_an_existing_run_name_is_not_overwritten_by_accident(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(UsageError, match=re.escape("--run-name 'taken'")):
        RunWriter(tmp_path, "taken")


def test_run_knobs_is_the_shared_base_for_methods():
    assert issubclass(GRPOKnobs, RunKnobs)
    assert GRPOKnobs().method == "grpo"


def test_knobs_map_onto_grpo_config(tmp_path):
    k = GRPOKnobs(base_model="Qwen/Qwen2.5-0.5B-Instruct", loss_type="dr_grpo", no_scale_rewards=True,
                  epsilon_high=0.28, mask_truncated=True, steps=7, num_generations=4, batch_size=8).resolve()
    cfg = grpo_config(k, str(tmp_path), cpu=True)
    assert (cfg.max_steps, cfg.num_generations, cfg.per_device_train_batch_size) == (7, 4, 8)
    assert (cfg.loss_type, cfg.scale_rewards, cfg.epsilon_high, cfg.mask_truncated_completions) == (
        "dr_grpo", "none", 0.28, True)
    assert (cfg.learning_rate, cfg.beta, cfg.max_completion_length, cfg.seed) == (5e-6, 0.04, 160, 17)
    assert (cfg.temperature, cfg.top_p) == (0.8, 0.95)
    assert cfg.use_cpu and not cfg.bf16 and not cfg.gradient_checkpointing  # G2-G4
    symmetric = grpo_config(GRPOKnobs(base_model="x/y").resolve(), str(tmp_path), cpu=True)
    assert symmetric.epsilon_high is None and symmetric.scale_rewards == "group" and symmetric.loss_type == "bnpo"


def test_a_name_taken_while_training_is_a_usage_error_not_a_crash(tmp_path):
    writer = RunWriter(tmp_path, "race")
    _fill(writer)
    (tmp_path / "race").mkdir()
    (tmp_path / "race" / "theirs.txt").write_text("x")
    with pytest.raises(UsageError, match="appeared while this run trained"):
        writer.publish()
    assert (tmp_path / "race" / "theirs.txt").is_file() and writer.path.is_dir()


@pytest.mark.parametrize("cls", [GRPOKnobs, DPOKnobs])
def test_every_knob_is_one_generated_flag_with_its_field_default_and_range(cls: type) -> None:
    import argparse
    import dataclasses


    parser = argparse.ArgumentParser()
    add_run_arguments(parser, cls)
    actions = {a.dest: a for a in parser._actions if a.help is not argparse.SUPPRESS}  # not the old spellings
    knobs = [f for f in dataclasses.fields(cls) if "help" in f.metadata]
    assert {f.name for f in knobs} <= set(actions)
    assert {f.name for f in dataclasses.fields(cls) if f.init} - set(actions) == {"auto"}
    for f in knobs:
        assert actions[f.name].default == f.default, f.name
    for name, bound in bounds_of(cls).items():
        assert actions[name].type is bound, name
    with pytest.raises(SystemExit):
        parser.parse_args(["--steps", "0"])


def test_the_old_seed_spellings_still_work_with_a_deprecation_warning() -> None:
    import argparse


    parser = argparse.ArgumentParser()
    add_run_arguments(parser, GRPOKnobs)
    with pytest.warns(RlgateDeprecationWarning, match="--seed is now --prompt-seed"):
        assert parser.parse_args(["--seed", "5"]).prompt_seed == 5
    assert parser.parse_args(["--prompt-seed", "6"]).prompt_seed == 6
    with pytest.warns(RlgateDeprecationWarning, match="'seed' is now 'prompt_seed'"):
        assert GRPOKnobs().with_overrides(seed=3, base_model="rlgate/tiny-refund").prompt_seed == 3
