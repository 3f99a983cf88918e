"""pass^K and pass@K as gated metrics, the severe-flip rule, and the reproduce command round trip."""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import warnings
from typing import Any

import numpy as np
import pytest
from test_gate import table_rows

import pytest_rlgate as rg
from pytest_rlgate.cli import gate as cli_gate
from pytest_rlgate.errors import DataError, RlgateWarning, UsageError
from pytest_rlgate.gate.options import GateOptions
from pytest_rlgate.report.markdown import reproduce_command


def _brute_pass_k(passes: list[bool], k: int, kind: str) -> float:
    """The share of all K-subsets of the replies in which every one (^) or any one (@) passes."""
    subsets = list(itertools.combinations(passes, k))
    hit = [all(s) if kind == "^" else any(s) for s in subsets]
    return sum(hit) / len(subsets)


@pytest.mark.parametrize("kind", ["^", "@"])
def test_the_estimators_equal_the_share_of_k_subsets(kind: str) -> None:
    rng = np.random.default_rng(3)
    rows = []
    expected: dict[str, list[float]] = {}
    for scenario in range(6):
        for prompt in range(2):
            passes = [bool(x) for x in rng.random(6) < 0.6]
            expected.setdefault(f"s{scenario}", []).append(_brute_pass_k(passes, 3, kind))
            rows += [{"prompt": f"s{scenario} p{prompt}", "scenario_id": f"s{scenario}", "category": "c",
                      "rollout_index": i, "reply": "x", "score": float(p), "reward": int(p), "markers": {}}
                     for i, p in enumerate(passes)]
    metric = f"pass{kind}3"
    result = rg.compare(rows, rows, metrics=(metric,), guards=())
    c = result.comparison(metric, "c")
    assert c.before == pytest.approx(np.mean([np.mean(v) for v in expected.values()]))
    assert c.delta == 0 and c.verdict == "flat"


def _agent(reliable: float):
    """A scripted refund agent: right every time on no_id and off_topic; on an order it looks the
    order up and then acts on what the lookup showed, except that a share ``1 - reliable`` of its
    episodes (by seed) refunds straight away, unread."""
    env = rg.load_env("refund_agent")

    def policy(messages: list[dict[str, Any]], seed: int) -> str:
        case = env.case_for(messages[1]["content"])
        last = messages[-1]
        if not case.get("order_id"):
            return "Could you share your order id?" if case.get("in_domain") else "Happy to help with that."
        if last["role"] == "tool":
            order = json.loads(last["content"])
            if "refunded" in order:
                return "Your refund is on its way."
            if not order.get("refundable"):
                return "Sorry, this order cannot be refunded."
            call = {"name": "issue_refund", "arguments": {"order_id": order["order_id"], "amount": order["amount"]}}
            return f"<tool_call>{json.dumps(call)}</tool_call>"
        if (seed * 2654435761 % 1000) / 1000 >= reliable:
            call = {"name": "issue_refund", "arguments": {"order_id": case["order_id"], "amount": 1}}
        else:
            call = {"name": "lookup_order", "arguments": {"order_id": case["order_id"]}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"

    return env, policy


def test_pass_k_gates_an_agent_that_became_unreliable() -> None:
    env, steady = _agent(1.0)
    _, flaky = _agent(0.8)
    items = env.build_prompts(0, "default")
    before = rg.sample_rows(steady, None, items, k=4, env=env, seed=1)
    after = rg.sample_rows(flaky, None, items, k=4, env=env, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RlgateWarning)
        result = rg.compare(before, after, env=env, metrics=("pass^4",), guards=())
    one, four = result.comparison("pass@1", "with_id"), result.comparison("pass^4", "with_id")
    # one reply in five goes wrong: pass@1 drops by about a fifth, pass^4 (all four right) by far more
    assert one.before == four.before == 1.0
    assert four.delta < one.delta < 0 and four.delta < -0.4
    assert four.verdict == "regressed" and four.failed
    assert result.comparison("pass^4", "no_id").verdict == "flat"
    assert any(f.startswith("pass^4 regressed in with_id") for f in result.failures)
    with pytest.raises(DataError, match=r"pass\^8 needs at least 8 replies of every prompt"):
        rg.compare(before, after, env=env, metrics=("pass^8",), guards=())
    with pytest.raises(UsageError, match=r"metric 'pass@0'"):
        rg.compare(before, after, env=env, metrics=("pass@0",))


def test_severe_flips_fail_a_flat_category_in_a_policy(tmp_path) -> None:
    # 30 scenarios: one goes 4/4 -> 0/4 while another recovers 0/4 -> 4/4; the mean does not move
    before = table_rows("no_id", [0] + [4] + [1, 2, 0, 3, 1, 0] * 4 + [0, 0, 0, 0])
    after = table_rows("no_id", [4] + [0] + [1, 2, 0, 3, 1, 0] * 4 + [0, 0, 0, 0])
    plain = rg.compare(before, after, guards=())
    no_id = plain.comparison("pass@1", "no_id")
    assert plain.passed and no_id.delta == 0 and no_id.severe == 1
    policy = tmp_path / "release.yaml"
    policy.write_text("rules:\n  no_id: {tier: critical, severe_flips: true}\n", encoding="utf-8")
    strict = rg.compare(before, after, guards=(), release_policy=str(policy))
    failure = strict.comparison("pass@1", "no_id").failure
    assert not strict.passed and failure is not None and failure.kind == "severe_flips"
    assert failure.text.startswith("pass@1 in no_id: 1 scenario went from every reply passing to none")
    assert f"[critical ({policy}:2 no_id)]" in failure.text
    assert "severe flips" in strict.comparison("pass@1", "no_id").flags and "severe_flips" in strict.rule


def test_the_reproduce_command_parses_back_to_the_same_options(tmp_path) -> None:
    before = table_rows("a", [0, 1, 2, 0, 1] * 3) + table_rows("b", [1, 0, 0, 2, 1] * 3)
    after = table_rows("a", [1, 1, 2, 0, 2] * 3) + table_rows("b", [1, 0, 1, 2, 1] * 3)
    policy = tmp_path / "p.yaml"
    policy.write_text("rules:\n  a: critical\n", encoding="utf-8")
    parser = argparse.ArgumentParser()
    cli_gate.add_arguments(parser)
    cases = [
        GateOptions(),
        GateOptions(guards=("well_formed", "tool_call"), margin=0.05, family_level=0.1, categories=("a", "b")),
        GateOptions(family_level=None, confidence_level=0.9, method="expanded", n_resamples=2000, bootstrap_seed=4,
                    max_drop=0.2, require_moved=True, fail_on_inconclusive=True, show_flips=1, flips_in="all",
                    metrics=("pass^2", "pass@2"), allow_env_change=True, shared_units_only=True, guards=()),
        GateOptions(release_policy=str(policy), env="refund"),
    ]
    for options in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RlgateWarning)
            try:
                result = rg.compare(before, after, options)
            except rg.RlgateError:  # the refund environment declares categories these rows lack
                result = None
        words = shlex.split(reproduce_command(result) if result is not None else
                            " ".join(["rlgate", "gate", "B", "A", *map(shlex.quote, options.to_argv())]))
        assert words[:2] == ["rlgate", "gate"]
        parsed = cli_gate.options_from(parser.parse_args(words[2:]))
        assert parsed == options, (words, parsed)
