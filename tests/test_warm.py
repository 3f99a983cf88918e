"""Warm starts: an environment's SFT recipe for a real model, cached by content, named ``<model>+<env>``.

The fast tests train the recipe's code path on the tiny refund policy (seconds: the same
``SFTTrainer``, merge and save a real model goes through) and check the names at every door
without real weights; the data the recipe draws is checked against the holdouts it must not see.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re

import pytest

import pytest_rlgate as rg
from pytest_rlgate._io import cache
from pytest_rlgate.cli import main
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy import TINY_POLICY, warm_start
from pytest_rlgate.policy.identity import base_identity
from pytest_rlgate.policy.warm import (
    WARM_INFO,
    WarmStart,
    is_warm_name,
    split_warm_name,
    warm_dataset,
    warm_key,
    warm_model_dir,
    warm_recipe,
)
from pytest_rlgate.train.config import GRPOKnobs

WARM = "smollm2-135m+refund"


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_name_is_a_registry_model_plus_an_environment():
    assert split_warm_name(WARM) == ("smollm2-135m", "refund")
    assert is_warm_name(WARM)
    for other in ("smollm2-135m", "gpt-7+refund", "smollm2-135m+", "rlgate/tiny-refund+refund", None, 3):
        assert not is_warm_name(other)


def test_refunds_recipe_is_balanced_and_looks_up_on_some_with_id_chats_only():
    env = rg.load_env("refund")
    recipe = warm_recipe(env)
    chats = warm_dataset(env, recipe)
    assert len(chats) == recipe.steps * recipe.batch_size
    by_category = collections.Counter(chat.category for chat in chats)
    assert set(by_category) == set(env.categories)
    assert len(set(recipe.mix.category_share.values())) == 1  # balanced shares; each draw within 3 sd of them
    expected = len(chats) / len(env.categories)
    assert all(abs(n - expected) < 3 * (expected * (1 - 1 / len(env.categories))) ** 0.5 for n in by_category.values())
    kinds = collections.Counter((chat.category, chat.kind) for chat in chats)
    assert set(kinds) == {("with_id", "copy"), ("with_id", "ask"), ("no_id", "ask"), ("off_topic", "refuse")}
    share = kinds[("with_id", "copy")] / by_category["with_id"]
    assert abs(share - recipe.mix.kinds["with_id"]["copy"]) < 0.2
    for chat in chats:  # every reply is one refund's reward scores as the kind says
        reward = env.score(chat.reply, env.case_for(chat.prompt))
        assert reward == (1.0 if chat.kind != "ask" or chat.category == "no_id" else 0.3), chat
        assert env.case_for(chat.prompt)["category"] == chat.category


def test_no_chat_repeats_a_prompt_of_the_evaluation_seed_at_any_size():
    env = rg.load_env("refund")
    chats = warm_dataset(env, dataclasses.replace(warm_recipe(env), steps=200))
    masked = re.compile(r"\bORD[-_ ]?\d{3,6}\b", re.IGNORECASE)
    seen = {masked.sub("{id}", item["prompt"])
            for size in env.prompt_sizes for item in rg.build_prompts(0, size, env=env)}
    borrowed = [chat for chat in chats if masked.sub("{id}", chat.prompt) in seen]
    assert borrowed == []


def test_an_environment_without_a_warm_start_is_one_line(empty_cache, capsys):
    with pytest.raises(UsageError, match="environment arith declares no warm start"):
        warm_recipe(rg.load_env("arith"))
    assert main(["models", "warm-start", "smollm2-135m", "--env", "arith"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "declares no warm start" in err[0]


def test_a_name_not_built_is_one_line_naming_the_command_at_every_door(empty_cache, monkeypatch, capsys):
    # the model is "fetched" (an empty published folder stands in), the warm start is not built
    from pytest_rlgate.policy import warm
    from pytest_rlgate.train import config

    for module in (warm, config):
        monkeypatch.setattr(module, "fetched_model_dir", lambda name, root=None: empty_cache)
    monkeypatch.setattr(warm, "model_identity", lambda name: {"model": name, "key": "k"})
    command = "`rlgate models warm-start smollm2-135m --env refund`"
    with pytest.raises(UsageError, match=re.escape(command)):
        warm_model_dir(WARM)
    with pytest.raises(UsageError, match=re.escape(command)):
        rg.load_policy(WARM)
    with pytest.raises(UsageError, match=rf"--base-model '{re.escape(WARM)}': .*{re.escape(command)}"):
        GRPOKnobs(env="refund", base_model=WARM).resolve()


def test_before_the_fetch_the_name_asks_for_the_fetch_first(empty_cache):
    with pytest.raises(UsageError, match=r"`rlgate models fetch smollm2-135m`"):
        warm_model_dir(WARM)


def _tiny_recipe(env: rg.Env, **changes: object) -> WarmStart:
    small: dict[str, object] = {"steps": 2, "batch_size": 4, "learning_rate": 1e-3, "max_length": 256}
    return dataclasses.replace(warm_recipe(env), **{**small, **changes})


def test_a_warm_start_trains_once_merges_and_is_served_from_the_cache(empty_cache):
    """The code path a real model takes, on the tiny policy: SFTTrainer, merge, save, record, cache."""
    env = rg.load_env("refund")
    recipe = _tiny_recipe(env)
    lines: list[str] = []
    folder = warm_start(TINY_POLICY, env, recipe=recipe, log=lines.append)
    assert folder.parent == empty_cache / "warm" and folder.name == warm_key(base_identity(TINY_POLICY), env, recipe)
    info = json.loads((folder / WARM_INFO).read_text(encoding="utf-8"))
    assert info["recipe"] == recipe.as_dict() and info["base"] == TINY_POLICY and info["name"] is None
    assert len(info["loss_curve"]) == recipe.steps == len(lines)
    assert sum(info["data_kinds"].values()) == recipe.steps * recipe.batch_size
    assert (folder / "adapter" / "adapter_config.json").is_file()
    model, tok = rg.load_policy(str(folder))  # the merged model loads as a plain folder: no adapter left
    assert not hasattr(model, "peft_config")
    base, _ = rg.load_policy(TINY_POLICY)
    changed = [n for n, p in model.named_parameters() if not p.detach().equal(dict(base.named_parameters())[n])]
    assert changed, "the merged LoRA changed no weight"
    again: list[str] = []
    assert warm_start(TINY_POLICY, env, recipe=recipe, log=again.append) == folder and again == []
    assert base_identity(str(folder)) == base_identity(str(folder))  # a warm folder is a base like any other


def test_another_recipe_is_another_folder():
    env = rg.load_env("refund")
    tiny = base_identity(TINY_POLICY)
    assert warm_key(tiny, env, _tiny_recipe(env)) != warm_key(tiny, env, _tiny_recipe(env, seed=1))
    assert warm_key(tiny, env, _tiny_recipe(env)) != warm_key(tiny, env, _tiny_recipe(env, learning_rate=2e-3))


@pytest.mark.parametrize("field, value", [("steps", 0), ("batch_size", -1), ("learning_rate", 0.0),
                                          ("learning_rate", 1.5), ("lora_rank", True)])
def test_a_recipe_out_of_range_is_refused_where_it_is_written(field, value):
    env = rg.load_env("refund")
    with pytest.raises(ValueError, match=f"WarmStart.{field}"):
        dataclasses.replace(warm_recipe(env), **{field: value})
