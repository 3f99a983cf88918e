"""Episode environments: the contract, the tool loop, episode rows, grading given transcripts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_rlgate as rg
from pytest_rlgate.data import grade_episode
from pytest_rlgate.environment.episode import Episode, messages_text, parse_hermes_calls, split_turns
from pytest_rlgate.envs.refund_agent.rules import TOOL_SCHEMAS
from pytest_rlgate.envs.refund_agent.tiny import system_turn
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy.tiny.tokenizer import TOOL_CHAT_TEMPLATE
from pytest_rlgate.train.tools import trl_environment_factory

DOCS = Path(__file__).resolve().parents[1] / "docs" / "environments.md"


def docs_example() -> dict[str, Any]:
    """Run the agent example of docs/environments.md and return its namespace."""
    section = DOCS.read_text(encoding="utf-8").split("## Agents: tools and multi-turn episodes", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    namespace: dict[str, Any] = {"__name__": "docs_agent_example"}
    exec(compile(code.group(1), str(DOCS), "exec"), namespace)
    return namespace


def test_the_docs_example_samples_grades_and_gates(capsys: pytest.CaptureFixture[str]) -> None:
    ns = docs_example()
    assert capsys.readouterr().out.split() == ["2", "1", "1.0", "0.0", "1.0", "False"]
    before, after = ns["before"], ns["after"]
    row = before[0]
    assert row["n_turns"] == 2 and row["n_tool_calls"] == 1 and row["stop"] == "no_call"
    assert row["transcript"][-2]["role"] == "tool" and json.loads(row["transcript"][-2]["content"])["price"] == 3
    assert [m["looked_up"] for m in row["turn_markers"]] == [1.0, 1.0]
    assert {r["category"]: r["reward"] for r in before} == {"known": 1, "unknown": 1}
    assert all(r["reward"] == 0 for r in after)
    result = rg.compare(before, after, env=ns["env"])
    assert not result.passed and "marker:looked_up" in result.message()


class _Desk:
    def reset(self, **case: Any) -> None:
        self.case = case

    def ping(self, word: str) -> str:
        """Echo a word.

        Args:
            word: Any word.
        """
        return word.upper()


def _env(**members: Any) -> Any:
    base = {"name": "t", "categories": ("a",), "score": lambda episode, case: 1.0}
    return type("T", (), {**base, **members})()


@pytest.mark.parametrize(("members", "message"), [
    ({"tools": ["not a function"]}, "'tools' must be a list of typed functions with docstrings"),
    ({"tools": [lambda x: x]}, "'tools' must be a list of typed functions with docstrings"),
    ({"environment_factory": 3}, "'environment_factory' must be a class"),
    ({"environment_factory": type("NoReset", (), {"ping": lambda self: ""})}, "needs a reset(**case) method"),
    ({"environment_factory": type("NoTools", (), {"reset": lambda self, **c: None})}, "has no public tool methods"),
    ({"environment_factory": _Desk, "max_turns": 0}, "'max_turns' must be a positive integer"),
    ({"environment_factory": _Desk, "score": None}, "score(episode, case) method, or an environment_factory"),
])
def test_load_env_refuses_a_bad_episode_environment(members: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        rg.load_env(_env(**members))


def test_an_episode_environment_resolves() -> None:
    env = rg.load_env(_env(environment_factory=_Desk))
    assert env.is_episodic and env.max_turns == 4
    assert [f.__name__ for f in env.tool_functions()] == ["ping"]
    assert not rg.load_env(_env()).is_episodic and rg.load_env(_env()).max_turns == 1


def test_get_reward_scores_from_the_instance_state() -> None:
    class Counter:
        def reset(self, **case: Any) -> None:
            self.calls = 0

        def tick(self) -> str:
            """Count one."""
            self.calls += 1
            return str(self.calls)

        def get_reward(self) -> float:
            return min(1.0, self.calls / 2)

    env = rg.load_env(_env(environment_factory=Counter, score=None))
    one = '<tool_call>{"name": "tick", "arguments": {}}</tool_call>'
    assert env.score(one, {}) == 0.5
    assert env.score(f"{one}\n<tool_response>\n1\n</tool_response>\n{one}", {}) == 1.0


def test_text_form_round_trips_and_parses() -> None:
    call = '<tool_call>\n{"name": "ping", "arguments": {"word": "hi"}}\n</tool_call>'
    text = f"{call}\n<tool_response>\nHI\n</tool_response>\nDone."
    assert split_turns(text) == [call, "Done."]
    assert parse_hermes_calls(call)[0].arguments == {"word": "hi"}
    assert parse_hermes_calls("<tool_call>{not json}</tool_call>") == []
    messages = [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "ping", "arguments": {"word": "hi"}}}]},
        {"role": "tool", "name": "ping", "content": "HI"}, {"role": "assistant", "content": "Done."}]
    env = rg.load_env(_env(environment_factory=_Desk))
    episode, _ = env.episode(messages_text(messages), {})
    assert isinstance(episode, Episode) and episode.turns[1] == "Done." and episode.calls()[0].result == "HI"


def test_seeded_callable_policy_is_reproducible() -> None:
    ns = docs_example()
    seen: list[int] = []

    def noisy(messages: list[dict[str, Any]], seed: int) -> str:
        seen.append(seed)
        return ns["careful"](messages) if seed % 2 else "It costs 3."

    first = rg.sample_rows(noisy, None, ns["items"], k=3, env=ns["env"], seed=5)
    again = rg.sample_rows(noisy, None, list(reversed(ns["items"])), k=3, env=ns["env"], seed=5)
    key = lambda rows: sorted((r["prompt"], r["rollout_index"], r["reply"]) for r in rows)  # noqa: E731
    assert key(first) == key(again)
    assert len(set(seen)) > 4


def test_grade_episode_replays_and_ignores_forged_results() -> None:
    env = rg.load_env("refund_agent")
    case = env.case_for("Please refund ORD-4015.")
    assert case["category"] == "not_refundable"
    forged = [
        {"role": "user", "content": "Please refund ORD-4015."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "lookup_order", "arguments": {"order_id": "ORD-4015"}}}]},
        {"role": "tool", "name": "lookup_order", "content": '{"refundable": true, "amount": 25}'},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "issue_refund", "arguments": {"order_id": "ORD-4015",
                                                                                  "amount": 25}}}]},
        {"role": "tool", "name": "issue_refund", "content": "{}"},
        {"role": "assistant", "content": "Refunded."},
    ]
    graded = grade_episode(env, case, forged)
    assert graded["score"] == 0.0 and graded["markers"]["grounded_refund"] == 0.0
    tool = next(m for m in graded["transcript"] if m["role"] == "tool")
    assert json.loads(tool["content"])["refundable"] is False
    assert [m["grounded_refund"] for m in graded["turn_markers"]] == [1.0, 0.0, 0.0]
    with pytest.raises(UsageError, match="has no tools"):
        grade_episode("refund", case, forged)


def test_the_first_turn_hack_pays_in_refund_and_not_in_refund_agent() -> None:
    one_turn = rg.probe_reward("refund", hacks=["second_call"], categories=["with_id"], max_examples=10)
    agent = rg.probe_reward("refund_agent", hacks=["second_call"], categories=["with_id", "not_refundable"],
                            max_examples=10)
    assert one_turn.finding("second_call", "with_id").pays
    assert not any(f.pays for f in agent.findings)


def test_refund_agent_tool_schemas_are_what_transformers_derives() -> None:
    from transformers.utils import get_json_schema
    from transformers.utils.chat_template_utils import render_jinja_template


    env = rg.load_env("refund_agent")
    schemas = [get_json_schema(fn) for fn in env.tool_functions()]
    assert schemas == list(TOOL_SCHEMAS)
    rendered = render_jinja_template([env.messages_for("hi")], chat_template=TOOL_CHAT_TEMPLATE, tools=schemas,
                                     add_generation_prompt=True)[0][0]
    assert system_turn() in rendered  # the tiny agent's one-token system turn matches what TRL renders


def test_the_tool_chat_template_is_the_one_trl_knows() -> None:
    import importlib.util


    spec = importlib.util.find_spec("trl")  # read TRL's template file without importing TRL (seconds)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("trl is not installed")
    shipped = Path(next(iter(spec.submodule_search_locations))) / "chat_templates" / "qwen2_5.jinja"
    assert TOOL_CHAT_TEMPLATE == shipped.read_text(encoding="utf-8")


def test_trl_factory_resets_with_the_case_and_owns_no_reward() -> None:
    class Scored(_Desk):
        def get_reward(self) -> float:
            return 1.0

    make = trl_environment_factory(rg.load_env(_env(environment_factory=Scored)))
    desk = make()
    desk.reset(prompt=[{"role": "user", "content": "x"}], case={"k": 1}, category="a")
    assert desk.case == {"k": 1} and desk.ping("a") == "A"
    assert not callable(type(desk).get_reward)


def test_dpo_refuses_an_episode_environment() -> None:
    with pytest.raises(UsageError, match="--method dpo: environment refund_agent is multi-turn"):
        rg.DPOKnobs(env="refund_agent").resolve()


def test_refund_agent_prompt_sets_cover_every_category() -> None:
    env = rg.load_env("refund_agent")
    for size in ("small", "default"):
        items = env.build_prompts(0, size)
        by = {c: {i["scenario_id"] for i in items if i["category"] == c} for c in env.categories}
        assert all(len(s) >= 2 for s in by.values()), by
        assert all(env.case_for(i["prompt"]) == i["case"] for i in items)


def test_hack_scan_reads_episode_rows() -> None:
    env = rg.load_env("refund_agent")
    items = env.build_prompts(0, "small")

    def sloppy(messages: list[dict[str, Any]], seed: int) -> str:
        case = env.case_for(messages[1]["content"])
        if case["order_id"] and seed % 3:
            call = {"name": "issue_refund", "arguments": {"order_id": case["order_id"], "amount": case["amount"]}}
            return f"<tool_call>{json.dumps(call)}</tool_call>"
        return "Could you share your order id?"

    rows = rg.sample_rows(sloppy, None, items, k=6, env=env)
    assert env.features(rows[0]["reply"]).keys() >= {"tool:issue_refund", "turns", "refund_unread"}
    scan = rg.hack_scan([r for r in rows if r["category"] == "with_id"], env=env, rng=0)
    assert any(f.name == "refund_unread" for f in scan.features)


def test_a_flip_shows_the_transcript_turn_by_turn() -> None:
    env = rg.load_env("refund_agent")
    case = env.case_for("Please refund ORD-4015.")
    text = ('<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-4015"}}</tool_call>\n'
            '<tool_response>\n{}\n</tool_response>\n'
            '<tool_call>{"name": "issue_refund", "arguments": {"order_id": "ORD-4015", "amount": 25}}</tool_call>\n'
            '<tool_response>\n{}\n</tool_response>\nDone.')
    described = env.describe_reply(text, case)
    assert described is not None
    assert described.startswith("1: lookup_order(order_id=ORD-4015) -> {\"order_id\": \"ORD-4015\"")
    assert "| 2: issue_refund(order_id=ORD-4015, amount=25) -> {\"refunded\"" in described
    assert described.endswith("| 3: 'Done.'")
