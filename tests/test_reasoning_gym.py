"""The reasoning-gym adapter against the real package (CI installs it through ``.[all]``)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

pytest.importorskip("reasoning_gym")

from importlib.metadata import version

from pytest_rlgate import UsageError, grade_replies
from pytest_rlgate.environment.contract import Env, load_env
from pytest_rlgate.envs import reasoning_gym as adapter
from pytest_rlgate.envs.reasoning_gym import ReasoningGymEnv, extract_answer

SPEC = "reasoning_gym[basic_arithmetic,leg_counting]"


@pytest.fixture(scope="module")
def env() -> Env:
    return load_env(SPEC)


@pytest.fixture(scope="module")
def items(env: Env) -> list[dict[str, Any]]:
    return env.build_prompts(seed=3, size="small")


def round_trip(value: Any) -> Any:
    return json.loads(json.dumps(value))


def tagged(answer: str) -> str:
    return f"Let me work it out.\n<answer>{answer}</answer>"


def test_spec_resolves_to_the_declared_tasks(env: Env) -> None:
    assert env.name == "reasoning_gym-basic_arithmetic-leg_counting"
    assert env.categories == ("basic_arithmetic", "leg_counting")
    assert env.version == f"{adapter.ADAPTER_VERSION}+reasoning-gym-{version('reasoning-gym')}"
    assert env.guards == ()
    assert env.prompt_sizes == ("small", "default", "large")
    assert env.messages_for("q")[0] == {"role": "system", "content": adapter.SYSTEM}
    assert load_env("reasoning_gym[leg_counting, basic_arithmetic]").fingerprint == env.fingerprint
    assert load_env("reasoning_gym[leg_counting]").fingerprint != env.fingerprint


def test_many_tasks_get_a_short_name() -> None:
    tasks = ("basic_arithmetic", "chain_sum", "leg_counting", "word_sorting")
    name = ReasoningGymEnv(*tasks).name
    assert name.startswith("reasoning_gym-4tasks-") and len(name) < 40
    assert ReasoningGymEnv(*reversed(tasks)).name == name


def test_build_prompts_is_seeded_and_carries_cases(env: Env, items: list[dict[str, Any]]) -> None:
    assert env.build_prompts(seed=3, size="small") == items
    assert env.build_prompts(seed=4, size="small") != items
    assert [item["category"] for item in items[:4]] == ["basic_arithmetic", "leg_counting"] * 2
    assert len({item["scenario_id"] for item in items}) == len(items)
    import reasoning_gym

    first = reasoning_gym.create_dataset("leg_counting", seed=3, size=10)[0]
    item = next(i for i in items if i["scenario_id"] == "leg_counting-3-0")
    assert item["prompt"] == first["question"]
    assert item["case"] == {"category": "leg_counting", **round_trip(first), "dataset": {"seed": 3, "size": 10}}
    assert round_trip(items) == items


def test_size_option_scales_every_prompt_set() -> None:
    sized = load_env("reasoning_gym[leg_counting, size=5]")
    counts = {size: len(sized.build_prompts(0, size)) for size in ("small", "default", "large")}
    assert counts == {"small": 1, "default": 5, "large": 20}


def test_right_answer_scores_one_and_nonsense_zero(env: Env, items: list[dict[str, Any]]) -> None:
    for item in items:
        case, answer = item["case"], item["case"]["answer"]
        assert env.score(tagged(answer), case) == 1.0
        assert env.score(f"Working...\nAnswer: {answer}", case) == 1.0
        assert env.score(f"Working...\n{answer}\n", case) == 1.0
        assert env.score("banana", case) == 0.0
        assert env.score(tagged("banana") + f"\n{answer}", case) == 0.0  # the tag wins over the last line
        assert env.passes(env.score(tagged(answer), case))


def test_grade_replies_uses_the_environment(env: Env, items: list[dict[str, Any]]) -> None:
    picked = items[:2]
    replies = [[tagged(item["case"]["answer"]), "no idea", item["case"]["answer"]] for item in picked]
    rows = grade_replies(picked, replies, env=env, policy="test")
    assert [(r["category"], r["score"], r["reward"], r["markers"]["answered"]) for r in rows] == [
        ("basic_arithmetic", 1.0, 1, 1.0), ("basic_arithmetic", 0.0, 0, 0.0), ("basic_arithmetic", 1.0, 1, 0.0),
        ("leg_counting", 1.0, 1, 1.0), ("leg_counting", 0.0, 0, 0.0), ("leg_counting", 1.0, 1, 0.0),
    ]
    assert {r["policy"] for r in rows} == {"test"}


def test_cases_score_after_json_in_a_fresh_state() -> None:
    # arc_agi compares tuples its metadata loses in JSON: the generator's own entry is used again.
    arc = load_env("reasoning_gym[arc_agi, basic_arithmetic, size=2]")
    lines = [json.dumps(item) for item in arc.build_prompts(seed=1)]
    adapter._dataset.cache_clear()
    adapter._entry.cache_clear()
    for line in lines:
        case = json.loads(line)["case"]
        assert arc.score(tagged(case["answer"]), case) == 1.0
        assert arc.score("banana", case) == 0.0


def test_an_edited_case_is_scored_as_written(env: Env, items: list[dict[str, Any]]) -> None:
    case = round_trip(items[0]["case"])
    right = case["answer"]
    case["answer"] = "7"
    assert env.score(tagged("7"), case) == 1.0
    assert env.score(tagged(right), case) < 1.0


def test_a_scorer_that_raises_counts_as_wrong() -> None:
    primes = load_env("reasoning_gym[prime_factorization, size=1]")
    case = primes.build_prompts(0)[0]["case"]
    assert primes.score(tagged("banana"), case) == 0.0  # its scorer raises ValueError on words
    assert primes.score(tagged(case["answer"]), case) == 1.0


def test_a_case_of_another_task_is_refused(env: Env) -> None:
    other = load_env("reasoning_gym[chain_sum, size=1]").build_prompts(0)[0]["case"]
    with pytest.raises(UsageError, match="task 'chain_sum' is not one of its tasks"):
        env.score("1", other)
    with pytest.raises(UsageError, match="needs 'question'"):
        env.score("1", {"category": "leg_counting", "answer": "4"})


@pytest.mark.parametrize(("reply", "answer", "explicit"), [
    ("<answer> 42 </answer>", "42", True),
    ("<answer>1</answer> then <ANSWER>2</ANSWER>", "2", True),
    ("thinking\nanswer: 3, 1, 2\n", "3, 1, 2", True),
    ("Answer:\n1 2\n3 4", "1 2\n3 4", True),
    ("the answer: is not a marker\n5", "5", False),
    ("Answer:   ", None, False),
    ("  \n", None, False),
])
def test_extract_answer(reply: str, answer: str | None, explicit: bool) -> None:
    assert extract_answer(reply) == (answer, explicit)


@pytest.mark.parametrize(("spec", "message"), [
    ("reasoning_gym", r"name at least one task, e\.g\. reasoning_gym\[basic_arithmetic, leg_counting\]"),
    ("reasoning_gym[basic_arithmetc]", r"unknown task 'basic_arithmetc'; did you mean basic_arithmetic.*"
                                       r"known tasks: .*leg_counting"),
    ("reasoning_gym[composite]", r"unknown task 'composite'; known tasks: ab, acre"),
    ("reasoning_gym[leg_counting, seed=1]", r"unknown option 'seed'; the only option is size=N"),
    ("reasoning_gym[leg_counting, size=0]", r"size must be at least 1"),
])
def test_bad_specs_are_one_clear_error(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_env(spec)


def test_bad_prompt_set_arguments(env: Env) -> None:
    with pytest.raises(UsageError, match="no prompt set size 'huge'; use one of small, default, large"):
        env.build_prompts(0, "huge")
    with pytest.raises(UsageError, match="unknown prompt set size 'huge'"):
        env.raw.build_prompts(0, "huge")
    with pytest.raises(UsageError, match="seed must be an integer"):
        env.raw.build_prompts(True)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    with pytest.raises(UsageError, match=r'pip install "pytest-rlgate\[reasoning-gym\]"'):
        ReasoningGymEnv("leg_counting")
