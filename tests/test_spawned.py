"""What rlgate hands TRL pickles and runs the same in a spawned process.

TRL's ``AsyncGRPOTrainer`` scores rollouts in a child process started with multiprocessing's
``spawn`` context, so every reward function, tool and ``environment_factory`` it is given is
pickled there; ``rlgate demo`` trains its runs in spawned workers the same way. Each check here
pickles an object in this process, sends the bytes to one spawned process, unpickles and calls it
there, and compares what came back with the same call made here, on inputs that score both 0 and 1.
"""

from __future__ import annotations

import multiprocessing
import operator
import pickle
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any

import pytest
from _calc_env import CalcEnv, calc_items
from _spawn_envs import CounterEnv, ShopEnv
from hypothesis import Phase, find, settings

import pytest_rlgate as rg
from pytest_rlgate.cli import main
from pytest_rlgate.environment.contract import Env
from pytest_rlgate.environment.episode import split_turns
from pytest_rlgate.envs.refund import FORMAT_BONUS
from pytest_rlgate.errors import UsageError
from pytest_rlgate.train.reward import EnvReward, env_reward
from pytest_rlgate.train.tools import TRLEnvironmentFactory, trl_environment_factory

BUILT_IN = ["refund", "refund_agent", "arith", "reasoning_gym[basic_arithmetic, leg_counting]"]
#: The first example a strategy draws, the same every run (no search for a minimal one, no database).
QUICK = settings(database=None, derandomize=True, phases=[Phase.generate], max_examples=1)
#: A reply no environment here pays.
WRONG = "I am not sure."


def _call(payload: bytes) -> bytes:
    """In the child: unpickle a list of (function, args, kwargs), call each, pickle the results back."""
    return pickle.dumps([fn(*args, **kwargs) for fn, args, kwargs in pickle.loads(payload)])


def _episode(factory: Callable[[], Any], row: Mapping[str, object], calls: list[tuple[str, dict[str, Any]]]) -> dict:
    """What one rollout sees of a factory: the reset text, each tool's result, whether it scores itself."""
    instance = factory()
    intro = instance.reset(**row)
    return {"intro": intro, "results": [getattr(instance, name)(**args) for name, args in calls],
            "class": type(instance).__name__, "owns_reward": callable(getattr(type(instance), "get_reward", None))}


@pytest.fixture(scope="module")
def child() -> Iterator[Pool]:
    """One spawned process for the module (a fresh interpreter: nothing of this one is inherited)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        yield pool


Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def in_child(child: Pool, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` pickled, sent, run in the spawned process, and its result."""
    return all_in_child(child, [(fn, args, kwargs)])[0]


def all_in_child(child: Pool, calls: list[Call]) -> list[Any]:
    """Each call pickled, sent in one message, run in the spawned process; their results."""
    return list(pickle.loads(child.apply(_call, (pickle.dumps(calls),))))


def _load(spec: str) -> Env:
    if spec.startswith("reasoning_gym"):
        pytest.importorskip("reasoning_gym")
    return rg.load_env(spec)


def replies_per_category(env: Env) -> list[tuple[dict[str, Any], str, str]]:
    """(item, reply, prompt) for one item per category: its honest reply (the environment's simplest
    one), each of the environment's hacks of it, and a wrong one."""
    items = env.build_prompts(0, "small") if env.can_build_prompts else calc_items(2)
    firsts = {str(item["category"]): item for item in reversed(items)}
    out = []
    for category, item in sorted(firsts.items()):
        case = item["case"]
        if env.has_honest_replies:
            honest = find(env.honest_replies(case), lambda _: True, settings=QUICK)
        else:
            honest = f"<answer>{case['answer']}</answer>" if env.name.startswith("reasoning_gym") else \
                f"It is {case['answer']}." if case.get("answer") is not None else "I cannot tell."
        replies = [honest, WRONG]
        for hack in env.hacks:
            hacked = hack.hacked(honest, case) if hack.applies_to(category) else None
            if hacked is not None:
                replies.append(hacked if isinstance(hacked, str) else
                               find(hacked, lambda _: True, settings=QUICK))
        out += [(item, reply, str(item["prompt"])) for reply in replies]
    return out


def completion(env: Env, reply: str) -> object:
    """A reply as TRL hands it to a reward: conversational, one assistant message per turn."""
    turns = split_turns(reply) if env.is_episodic else [reply]
    return [{"role": "assistant", "content": turn} for turn in turns]


@pytest.mark.parametrize("spec", BUILT_IN)
def test_a_built_in_environment_scores_and_marks_the_same_in_a_spawned_process(child: Pool, spec: str) -> None:
    env = _load(spec)
    assert pickle.loads(pickle.dumps(env)).fingerprint == env.fingerprint
    cases = replies_per_category(env)
    here = [(env.score(reply, item["case"]), env.markers(reply, item["case"], prompt=prompt))
            for item, reply, prompt in cases]
    there = all_in_child(child, [call for item, reply, prompt in cases for call in (
        (operator.methodcaller("score", reply, item["case"]), (env,), {}),
        (operator.methodcaller("markers", reply, item["case"], prompt=prompt), (env,), {}))])
    assert list(zip(there[::2], there[1::2])) == here
    assert {score for score, _ in here} >= {0.0, 1.0}  # the inputs tell a pass from a fail


@pytest.mark.parametrize("spec", BUILT_IN)
def test_every_reward_rlgate_hands_trl_pickles_and_pays_the_same_in_a_spawned_process(child: Pool,
                                                                                      spec: str) -> None:
    env = _load(spec)
    cases = replies_per_category(env)
    prompts = [env.messages_for(prompt) for _, _, prompt in cases]
    completions = [completion(env, reply) for _, reply, _ in cases]
    columns = {"case": [item["case"] for item, _, _ in cases], "category": [item["category"] for item, _, _ in cases]}
    for name in (None, *env.rewards):
        reward = env_reward(env, name)
        here = reward(prompts, completions, **columns)
        assert in_child(child, reward, prompts, completions, **columns) == here
        assert pickle.loads(pickle.dumps(reward)).__name__ == reward.__name__
        graded = [env.episode(reply, item["case"])[0] if env.is_episodic and name else reply
                  for item, reply, _ in cases]  # a variant reads the replayed episode
        assert here == [env.reward(name)(what, item["case"]) for what, (item, _, _) in zip(graded, cases)]
    assert set(env_reward(env)(prompts, completions, **columns)) >= {0.0, 1.0}


def test_refunds_hackable_reward_pays_in_the_child_what_the_honest_one_refuses(child: Pool) -> None:
    env = rg.load_env("refund")
    invented = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-1"}}</tool_call>'
    prompt = [env.messages_for("Where is my refund?")]
    hackable, honest = env_reward(env, "lookup_anything"), env_reward(env)
    assert all_in_child(child, [(hackable, (prompt, [invented]), {}), (honest, (prompt, [invented]), {})]) == \
        [[1.0], [FORMAT_BONUS]]  # the honest reward pays an invented lookup its format bonus only


def test_the_agent_factory_pickles_and_resets_with_the_rows_case_in_a_spawned_process(child: Pool) -> None:
    env = rg.load_env("refund_agent")
    factory = trl_environment_factory(env)
    assert isinstance(factory, TRLEnvironmentFactory)
    item = next(i for i in env.build_prompts(0, "small") if i["category"] == "with_id")
    row = {"prompt": env.messages_for(str(item["prompt"])), "case": item["case"], "category": item["category"]}
    calls = [("lookup_order", {"order_id": item["case"]["order_id"]}),
             ("issue_refund", {"order_id": item["case"]["order_id"], "amount": item["case"]["amount"]})]
    here = _episode(factory, row, calls)
    assert in_child(child, _episode, factory, row, calls) == here
    assert here["class"] == "OrderDesk" and not here["owns_reward"] and "refunded" in str(here["results"][-1]).lower()


def test_a_users_environment_loaded_by_spec_or_as_an_object_pickles(child: Pool) -> None:
    by_spec, as_object = rg.load_env("_calc_env:CalcEnv"), rg.load_env(CalcEnv())
    items = calc_items(2)
    prompts = [[{"role": "user", "content": i["prompt"]}] for i in items]
    completions = [[{"role": "assistant", "content": f"It is {i['case']['answer']}."}] for i in items]
    cases = [i["case"] for i in items]
    for env in (by_spec, as_object):
        reward = env_reward(env)
        here = reward(prompts, completions, case=cases)
        assert in_child(child, reward, prompts, completions, case=cases) == here
        assert set(here) == {0.0, 1.0}
    assert pickle.loads(pickle.dumps(as_object)).spec is None  # wrapped again, not loaded by a spec


def test_a_users_tool_functions_and_factory_pickle_and_run_in_a_spawned_process(child: Pool) -> None:
    shop, counter = rg.load_env("_spawn_envs:ShopEnv"), rg.load_env(CounterEnv())
    assert in_child(child, shop.tools[0], "pear") == shop.tools[0]("pear") == 5
    looked = '<tool_call>{"name": "price", "arguments": {"item": "pear"}}</tool_call>'
    for reply, case in ((f"{looked}\n<tool_response>\n5\n</tool_response>\nIt costs 5.", {"price": 5}),
                        (f"{looked}\n<tool_response>\n5\n</tool_response>\nIt costs 3.", {"price": 5})):
        reward = env_reward(shop)
        here = reward([[{"role": "user", "content": "pear?"}]], [completion(shop, reply)], case=[case])
        assert in_child(child, reward, [[{"role": "user", "content": "pear?"}]], [completion(shop, reply)],
                        case=[case]) == here
    row = {"case": {"start": 2}}
    here = _episode(trl_environment_factory(counter), row, [("tick", {"by": 3}), ("tick", {"by": 4})])
    assert in_child(child, _episode, trl_environment_factory(counter), row,
                    [("tick", {"by": 3}), ("tick", {"by": 4})]) == here
    assert here["results"] == [5, 9] and here["intro"] == "The counter starts at 2."
    assert ShopEnv.name == shop.name


def test_an_environment_defined_where_nothing_can_import_it_says_so_when_pickled() -> None:
    class Local:
        name = "local"
        categories = ("a",)

        def score(self, reply: str, case: dict[str, Any]) -> float:
            return 1.0

    with pytest.raises((pickle.PicklingError, AttributeError), match="Local"):
        pickle.dumps(EnvReward(rg.load_env(Local())))



def test_async_is_refused_at_the_door_with_what_blocks_it_here(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    pytest.importorskip("trl")
    import torch

    with pytest.raises(UsageError, match=r"^--async: ") as refused:
        rg.GRPOKnobs(async_trainer=True).resolve()
    line = refused.value.reason
    assert "\n" not in line and "AsyncGRPOTrainer" in line
    if not torch.cuda.is_available():
        assert "missing here: a CUDA GPU" in line and "Drop --async" in line
    assert main(["train", "grpo", "--async", "--steps", "1", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--async: " in err
    assert not (tmp_path / "runs").exists()  # refused before anything loads or is written
