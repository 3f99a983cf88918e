"""The training reward and the GRPO/DPO datasets, for any environment (no model, no training).

The reward TRL calls scores each completion with the environment's ``score`` against the
case TRL hands over from the dataset's ``case`` column; ``--reward`` picks a variant the
environment names or ``module:attr``. The datasets render each prompt with the
environment's ``messages_for``: an environment without a system prompt gets none.
"""

from __future__ import annotations

import pytest
from _calc_env import CalcEnv, SumsEnv, calc_items, calc_reply

from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.errors import DataError, UsageError
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.dpo import dpo_dataset
from pytest_rlgate.train.grpo import grpo_dataset
from pytest_rlgate.train.pairs import Pair
from pytest_rlgate.train.reward import env_reward, score_function

CALC = load_env(CalcEnv())
ITEMS = calc_items(2)


def _chat(item: dict) -> list[dict]:
    return [{"role": "user", "content": item["prompt"]}]


def _completions(right: bool) -> list[list[dict]]:
    return [[{"role": "assistant", "content": calc_reply(item, right)}] for item in ITEMS]


def test_the_reward_scores_any_environment_over_the_case_column() -> None:
    reward = env_reward(CALC)
    prompts, cases = [_chat(item) for item in ITEMS], [item["case"] for item in ITEMS]
    assert reward(prompts, _completions(True), case=cases) == [1.0] * len(ITEMS)
    assert reward(prompts, _completions(False), case=cases) == [0.0] * len(ITEMS)
    assert reward.__name__ == "calc_reward"  # TRL's rewards/<name> column


def test_rows_without_a_case_use_case_for_and_an_environment_without_one_says_what_to_fix() -> None:
    sums = env_reward(load_env(SumsEnv()))
    assert sums(["What is 2 + 3?", "What is 1 + 1?"], ["It is 5.", "It is 3."]) == [1.0, 0.0]
    with pytest.raises(DataError, match="environment calc reads none from the text"):
        env_reward(CALC)(["What is 2 + 3?"], ["It is 5."])


class Lenient(CalcEnv):
    """Offers a deliberately hackable variant: any number at all passes."""

    rewards = {"any_number": lambda reply, case: float(any(ch.isdigit() for ch in reply))}


def lenient_score(reply: str, case: dict) -> float:
    """A score(reply, case) function named by module:attr."""
    return 0.5


def test_reward_names_a_variant_or_a_module_attr_and_rejects_anything_else() -> None:
    env = load_env(Lenient())
    variant = env_reward(env, "any_number")
    assert variant.__name__ == "any_number"
    assert variant(["q"], ["It is 99."], case=[{"answer": 4}]) == [1.0]  # wrong, but paid: the hack
    assert env_reward(env, "calc")(["q"], ["It is 99."], case=[{"answer": 4}]) == [0.0]  # the own score by name
    imported = env_reward(env, "test_train_reward:lenient_score")
    assert imported.__name__ == "lenient_score" and imported(["q"], ["x"], case=[{}]) == [0.5]
    with pytest.raises(UsageError, match=r"--reward 'nope': .*choose one of calc, any_number"):
        score_function(env, "nope")
    with pytest.raises(UsageError, match=r"--reward 'no_such_module:f': cannot import"):
        score_function(env, "no_such_module:f")
    with pytest.raises(UsageError, match=r"--reward 'test_train_reward:missing': .*no attribute"):
        score_function(env, "test_train_reward:missing")


def test_the_reward_knob_is_checked_against_the_knobs_environment() -> None:
    knobs = GRPOKnobs(env=Lenient(), base_model="x/y", reward="any_number").resolve()
    assert knobs.reward == "any_number" and knobs.run_name == "calc-grpo-s0"
    with pytest.raises(UsageError, match=r"--reward 'lookup_anything'"):
        GRPOKnobs(env=CalcEnv(), base_model="x/y", reward="lookup_anything").resolve()


def test_datasets_render_the_environment_s_chats_without_anyone_else_s_system_prompt() -> None:
    pytest.importorskip("datasets")

    rows = grpo_dataset(ITEMS, CALC).to_list()
    assert [r["prompt"] for r in rows] == [_chat(item) for item in ITEMS]  # the user turn only
    assert [r["case"] for r in rows] == [item["case"] for item in ITEMS]
    assert [r["category"] for r in rows] == [item["category"] for item in ITEMS]

    class Tutor(CalcEnv):
        system = "You are a patient maths tutor."

    pair = Pair(ITEMS[0]["prompt"], "It is 4.", "It is 5.", 1.0, 0.0, "sampled", "arithmetic", "add-1", 0)
    (row,) = dpo_dataset([pair], load_env(Tutor())).to_list()
    assert row["prompt"] == [{"role": "system", "content": Tutor.system}, _chat(ITEMS[0])[0]]
    assert row["chosen"] == [{"role": "assistant", "content": "It is 4."}]
