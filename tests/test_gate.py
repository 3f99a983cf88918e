"""pytest_rlgate.gate.adapter: verdicts, the rule, the seed's published tables, and bad pairings."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _calc_env import CalcEnv, calc_items, calc_reply

from pytest_rlgate import (
    DataError,
    GateResult,
    RegressionError,
    RlgateWarning,
    UsageError,
    assert_no_regression,
    compare,
    grade_replies,
    write_rows,
)
from pytest_rlgate.gate import Comparison

K = 4
#: the environment that graded the seed's tables: it guards well_formed and argument_grounding and
#: declares their categories
REFUND = "refund"


def table_rows(category: str, fails: Sequence[int], *, k: int = K, prefix: str = "", eval_run: Any = None,
               tool_calls: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Rows for one category: prompt i fails ``fails[i]`` of its k rollouts.

    ``tool_call`` marks the failing replies (in no_id a tool call is the failure); the
    ``well_formed`` and ``argument_grounding`` markers are 1 everywhere, as in the seed's
    tables (its failing calls carry no argument, so they invent none).
    """
    rows = []
    for i, failed in enumerate(fails):
        for j in range(k):
            row = {
                "prompt": f"{prefix}{category} prompt {i}",
                "scenario_id": f"{category}-{i}",
                "category": category,
                "rollout_index": j,
                "reply": "..." if j >= failed else '<tool_call>{"name": "lookup_order"}</tool_call>',
                "score": 1.0 if j >= failed else 0.0,
                "reward": int(j >= failed),
                "markers": {"well_formed": 1.0, "argument_grounding": 1.0,
                            "tool_call": float(j < (failed if tool_calls is None else tool_calls[i]))},
            }
            if eval_run is not None:
                row["eval_run"] = eval_run
            rows.append(row)
    return rows


def spread(n: int, total: int, k: int = K) -> list[int]:
    """``total`` failures spread over n prompts as evenly as possible."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def seed_tables(no_id_after: list[int]) -> tuple[list[dict], list[dict]]:
    """The seed's stratified holdout (130/15/18 prompts, k = 4).

    Before: with_id 0.11, no_id 0.95, off_topic 0.99. After: with_id 0.80, off_topic 0.96,
    and no_id as given.
    """
    before = (table_rows("with_id", spread(130, 463)) + table_rows("no_id", [1, 1, 1] + [0] * 12)
              + table_rows("off_topic", [1] + [0] * 17))
    after = (table_rows("with_id", spread(130, 104)) + table_rows("no_id", no_id_after)
             + table_rows("off_topic", [1, 1, 1] + [0] * 15))
    return before, after


#: unbalanced GRPO: no_id 0.95 -> 0.75, the policy now calls a tool on a quarter of the
#: no_id replies, across the prompts (seed: tool-call rate 0.00 -> 0.23)
NO_ID_COLLAPSE = [1] * 15
#: --balance 0.25: no_id 0.95 -> 0.88; a few prompts that read like orders draw tool calls
NO_ID_BALANCED = [1, 0, 0, 2, 1, 1, 1, 1] + [0] * 7


def _cmp(result: GateResult, metric: str, group: str) -> Comparison:
    return next(c for c in result.comparisons if c.metric == metric and c.group == group)


def test_seed_no_id_collapse_regresses_and_fails() -> None:
    before, after = seed_tables(NO_ID_COLLAPSE)
    with pytest.warns(RlgateWarning, match="'well_formed' is constant"):
        result = compare(before, after, env=REFUND)
    no_id = _cmp(result, "pass@1", "no_id")
    assert (no_id.before, no_id.after) == pytest.approx((0.95, 0.75))
    assert no_id.verdict == "regressed" and no_id.high < 0
    assert (no_id.n_units, no_id.k) == (15, 4)
    assert _cmp(result, "pass@1", "with_id").verdict == "moved"
    assert _cmp(result, "pass@1", "overall").verdict == "moved"
    assert _cmp(result, "pass@1", "off_topic").verdict in ("flat", "inconclusive")
    assert not result.passed
    assert len(result.failures) == 1 and result.failures[0].startswith("pass@1 regressed in no_id: 0.950 -> 0.750")
    with pytest.warns(RlgateWarning), pytest.raises(RegressionError) as info:
        assert_no_regression(before, after, env=REFUND)
    assert isinstance(info.value, AssertionError)
    assert info.value.result is not None and not info.value.result.passed


def test_seed_balanced_no_id_does_not_fail() -> None:
    before, after = seed_tables(NO_ID_BALANCED)
    with pytest.warns(RlgateWarning):
        result = assert_no_regression(before, after, env=REFUND)
    no_id = _cmp(result, "pass@1", "no_id")
    assert no_id.after == pytest.approx(0.883, abs=0.001)
    assert no_id.verdict == "inconclusive"  # 15 units cannot tell a 0.07 drop: it says so
    assert no_id.mde is not None and no_id.mde > abs(no_id.delta)
    assert result.passed and result.failures == ()


def test_a_collapse_concentrated_on_few_prompts_is_only_inconclusive_at_15_units() -> None:
    # Same 0.95 -> 0.75, but five prompts fail almost always and ten never: the per-unit
    # differences vary so much that 15 units cannot exclude 0. The gate says so (and how
    # large a drop it could see) instead of passing it as flat.
    before, after = seed_tables([0, 0, 0, 4, 4, 3, 2, 2] + [0] * 7)
    with pytest.warns(RlgateWarning):
        result = compare(before, after, env=REFUND)
    no_id = _cmp(result, "pass@1", "no_id")
    assert no_id.after == pytest.approx(0.75)
    assert no_id.verdict == "inconclusive" and no_id.low < -0.3 and no_id.high >= 0
    assert no_id.mde is not None and no_id.mde > 0.2
    assert result.passed
    with pytest.warns(RlgateWarning):
        assert not compare(before, after, env=REFUND, fail_on_inconclusive=True).passed


def test_failure_message_reads_like_a_small_table() -> None:
    before, after = seed_tables(NO_ID_COLLAPSE)
    with pytest.warns(RlgateWarning), pytest.raises(RegressionError) as info:
        assert_no_regression(before, after, env=REFUND, seed=7, n_resamples=2000)
    lines = str(info.value).splitlines()
    assert lines[0] == "1 of 12 comparisons regressed: pass@1 in no_id"  # pass@1 and two guards x 4 groups
    assert lines[1].startswith("paired t of per-scenario deltas; 12 comparisons held together by min-p over 2,000 "
                               "scenario sign flips, each at one-sided ")
    assert "an unchanged run fails at most 5%; seed 7" in lines[1]
    table = [line for line in lines if line.startswith("pass@1")]
    assert len(table) == 1 and "no_id" in table[0] and "REGRESSED" in table[0] and "15×4" in table[0]
    assert "0.950" in table[0] and "0.750" in table[0] and "-0.200" in table[0]
    assert any(line.startswith("rule: fail if pass@1, marker:well_formed, marker:argument_grounding regressed")
               for line in lines)
    assert lines[-1].startswith("Remedy:")
    header = next(line for line in lines if line.startswith("metric"))
    assert header.index("before") < header.index("after") < header.index("delta") < header.index("% CI")


def test_to_dict_has_the_documented_shape() -> None:
    before, after = seed_tables(NO_ID_COLLAPSE)
    with pytest.warns(RlgateWarning):
        data = compare(before, after, env=REFUND).to_dict()
    json.dumps(data, allow_nan=False)
    assert {"passed", "rule", "comparisons", "failures"} <= set(data)
    assert data["passed"] is False and isinstance(data["rule"], str)
    first = data["comparisons"][0]
    assert {"metric", "group", "n_units", "before", "after", "delta", "low", "high", "verdict"} <= set(first)
    assert first["metric"] == "pass@1" and first["group"] == "overall"
    metrics = {c["metric"] for c in data["comparisons"]}
    assert metrics == {"pass@1", "marker:well_formed", "marker:argument_grounding"}
    assert {c["group"] for c in data["comparisons"]} == {"overall", "no_id", "off_topic", "with_id"}


def test_a_gate_json_reads_back_as_the_result_that_wrote_it() -> None:
    before, after = seed_tables(NO_ID_COLLAPSE)
    with pytest.warns(RlgateWarning):
        result = compare(before, after, env=REFUND)
    again = GateResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result and again.report() == result.report()
    with pytest.raises(DataError, match="not a GateResult record"):
        GateResult.from_dict({"passed": True, "sides": {}})


def test_a_guard_that_regresses_fails_the_gate() -> None:
    before = table_rows("no_id", [0] * 20)
    after = table_rows("no_id", [0] * 20)
    for row in after:
        row["markers"]["well_formed"] = 0.0 if row["rollout_index"] < 2 else 1.0
    result = compare(before, after, guards=("well_formed",))
    guard = _cmp(result, "marker:well_formed", "no_id")
    assert guard.verdict == "regressed"
    assert any(f.startswith("marker:well_formed regressed in no_id") for f in result.failures)


def test_guard_missing_from_rows_is_a_data_error() -> None:
    before = table_rows("no_id", [0] * 5)
    del before[3]["markers"]["well_formed"]
    with pytest.raises(DataError, match=r"<before rows>:4: marker 'well_formed' is missing but guarded"):
        compare(before, table_rows("no_id", [0] * 5), guards=("well_formed",))


def test_category_on_one_side_only_fails() -> None:
    before = table_rows("no_id", [0] * 5) + table_rows("off_topic", [0] * 5)
    after = table_rows("no_id", [0] * 5)
    result = compare(before, after)
    assert not result.passed
    assert result.failures == ("category 'off_topic' has 5 unit(s) in <before rows> but none in <after rows>",)


def test_declared_categories_must_appear() -> None:
    rows = table_rows("no_id", [0, 1, 0, 1])
    result = compare(rows, rows, categories=("no_id", "with_id"))
    assert result.failures == ("declared category 'with_id' is missing from both sides",)


def test_rows_that_do_not_pair_name_the_first_missing_units() -> None:
    before = table_rows("no_id", [0] * 12)
    after = table_rows("no_id", [0] * 4)
    with pytest.raises(DataError, match=r"8 unit\(s\) of <before rows> missing from <after rows>: "
                                        r"'no_id-10' \(no_id\), 'no_id-11' \(no_id\), 'no_id-4' \(no_id\), "
                                        r"'no_id-5' \(no_id\), 'no_id-6' \(no_id\) and 3 more"):
        compare(before, after)


def test_unit_is_the_scenario_not_the_prompt() -> None:
    # three paraphrases per scenario: 6 scenarios, 18 prompts
    def rows(fails: list[int]) -> list[dict]:
        out = []
        for s, failed in enumerate(fails):
            for paraphrase in range(3):
                for row in table_rows("no_id", [failed], prefix=f"s{s} v{paraphrase} "):
                    out.append({**row, "scenario_id": f"scn-{s}"})
        return out

    result = compare(rows([0] * 6), rows([1] * 6), guards=())
    no_id = _cmp(result, "pass@1", "no_id")
    assert no_id.n_units == 6 and no_id.k == 4
    without_scenarios = [{**r, "scenario_id": None} for r in rows([0] * 6)]
    assert _cmp(compare(without_scenarios, without_scenarios, guards=()), "pass@1", "no_id").n_units == 18


def test_fewer_than_three_units_is_insufficient() -> None:
    result = compare(table_rows("no_id", [0, 0]), table_rows("no_id", [4, 4]), guards=())
    c = _cmp(result, "pass@1", "no_id")
    assert c.verdict == "insufficient" and c.low is None and c.high is None
    assert result.passed
    assert not compare(table_rows("no_id", [0, 0]), table_rows("no_id", [4, 4]), guards=(),
                       fail_on_inconclusive=True).passed


def test_flat_needs_the_interval_inside_the_margin() -> None:
    before = table_rows("with_id", spread(200, 300))
    after = table_rows("with_id", spread(200, 300))
    result = compare(before, after, guards=())
    assert _cmp(result, "pass@1", "with_id").verdict == "flat"
    assert _cmp(compare(before, after, guards=(), margin=0.0), "pass@1", "with_id").verdict == "flat"
    small = compare(table_rows("no_id", [0, 4, 2, 1, 3]), table_rows("no_id", [4, 0, 1, 3, 2]), guards=())
    assert _cmp(small, "pass@1", "no_id").verdict == "inconclusive"


def test_max_drop_adds_a_non_inferiority_rule() -> None:
    before, after = seed_tables(NO_ID_BALANCED)
    with pytest.warns(RlgateWarning):
        strict = compare(before, after, env=REFUND, max_drop=0.05)
    assert not strict.passed
    assert any("no_id may have dropped more than max_drop 0.050" in f for f in strict.failures)
    assert "below -max_drop" in _cmp(strict, "pass@1", "no_id").flags
    assert "non-inferiority" in strict.rule


def test_require_moved_fails_a_flat_headline() -> None:
    rows = table_rows("no_id", spread(30, 40))
    assert compare(rows, rows, guards=()).passed
    result = compare(rows, rows, guards=(), require_moved=True)
    assert result.failures == ("headline pass@1 overall did not move: flat, delta +0.000 (require_moved)",)


def test_every_comparison_that_can_fail_is_held_in_one_family() -> None:
    cats = ["a", "b", "c"]
    churn = [0, 1, 2, 3, 1] * 3  # every scenario moves, the category's mean does not
    before = [r for c in cats for r in table_rows(c, churn)]
    after = [r for c in cats for r in table_rows(c, churn[::-1])]
    result = compare(before, after, guards=())
    family = result.family
    assert family is not None and family.level == 0.05 and family.members == 4 and family.law == "sign flips"
    # held together, each comparison is tested below the family's level, and says so
    assert 0 < family.marginal < 0.05 and all(c.level == pytest.approx(family.marginal) for c in result.comparisons)
    assert all(c.p_adjusted is not None and c.p_adjusted >= c.p_less for c in result.comparisons)
    assert "held together at a 5% run-level false-fail" in result.rule
    alone = compare(before, after, guards=(), family_level=None)
    assert alone.family is None and all(c.level == pytest.approx(0.025) for c in alone.comparisons)
    with pytest.warns(RlgateWarning, match="holm= is no longer used"):
        assert compare(before, after, guards=(), holm=True).family is not None


def test_the_family_withdraws_a_marginal_regression_and_its_interval_says_so() -> None:
    # four categories: "a" drops 0.10 (p_less 0.014); in the others every scenario moves, the mean does not
    churn = [0, 1, 2, 3, 1] * 3
    same = [r for c in "bcd" for r in table_rows(c, churn)]
    moved = [r for c in "bcd" for r in table_rows(c, churn[::-1])]
    before = table_rows("a", [0] * 15) + same
    after = table_rows("a", [2, 1, 1, 1, 1] + [0] * 10) + moved
    a_alone = _cmp(compare(before, after, guards=(), family_level=None), "pass@1", "a")
    a_family = _cmp(compare(before, after, guards=()), "pass@1", "a")
    assert a_alone.verdict == "regressed" and a_alone.p_adjusted is None and a_alone.high < 0
    # in the family of five comparisons the drop is not enough: the interval it prints reaches zero (or,
    # with only five scenarios that moved, there is none at a level their sign flips cannot reach)
    assert a_family.p_adjusted > 0.05 and a_family.verdict == "inconclusive"
    assert a_family.high is None and "5 scenarios moved: cannot reach" in a_family.flags[0] or a_family.high >= 0
    # a clear drop survives, and every regressed interval lies below zero
    clear = _cmp(compare(before, table_rows("a", [1] * 7 + [0] * 8) + moved, guards=()), "pass@1", "a")
    # categories that do not move at all cannot reach the tail: they spend nothing of the family's level
    quiet = _cmp(compare(before, after[:15 * K] + same, guards=()), "pass@1", "a")
    assert quiet.level == pytest.approx(0.05) and quiet.verdict == "regressed"
    assert clear.verdict == "regressed" and clear.high < 0 and clear.p_adjusted <= 0.05


def test_noise_floor_from_base_reruns_takes_back_a_gain() -> None:
    # three base re-runs whose pass rate wobbles by a few points; after = a fourth run
    before = (table_rows("with_id", spread(100, 40), eval_run=17) + table_rows("with_id", spread(100, 80), eval_run=18)
              + table_rows("with_id", spread(100, 60), eval_run=19))
    after = table_rows("with_id", spread(100, 0), eval_run=1)
    with_floor = _cmp(compare(before, after, guards=()), "pass@1", "with_id")
    assert with_floor.low > 0 and with_floor.noise is not None and with_floor.noise > abs(with_floor.delta)
    assert with_floor.verdict in ("flat", "inconclusive") and "within noise" in with_floor.flags
    # the same rows as one run per side: no floor, and the gain counts
    plain = _cmp(compare([{**r, "eval_run": None, "prompt": f"{r['eval_run']} {r['prompt']}"} for r in before],
                         after, guards=()), "pass@1", "with_id")
    assert plain.noise is None and plain.verdict == "moved"


def test_noise_floor_never_takes_back_a_regression() -> None:
    # wobbly base re-runs make a wide floor; a clear drop must still regress and fail
    before = (table_rows("with_id", spread(100, 300), eval_run=17)
              + table_rows("with_id", spread(100, 360), eval_run=18)
              + table_rows("with_id", spread(100, 240), eval_run=19))
    after = table_rows("with_id", spread(100, 360), eval_run=1)
    result = compare(before, after, guards=())
    drop = _cmp(result, "pass@1", "with_id")
    assert drop.noise is not None and drop.noise > abs(drop.delta)
    assert drop.high < 0 and drop.verdict == "regressed" and "within noise" in drop.flags
    assert not result.passed


def test_paths_and_rows_give_the_same_result(tmp_path: Path) -> None:
    before, after = seed_tables(NO_ID_BALANCED)
    b, a = write_rows(tmp_path / "b.jsonl", before), write_rows(tmp_path / "a.jsonl", after)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RlgateWarning)
        from_files = compare(b, a, seed=3).to_dict()
        from_rows = compare(before, after, seed=3).to_dict()
    for key in ("passed", "comparisons", "failures"):
        assert from_files[key] == from_rows[key]


def test_seed_fixes_the_intervals() -> None:
    before, after = seed_tables(NO_ID_COLLAPSE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RlgateWarning)
        one, two = compare(before, after, seed=5), compare(before, after, seed=5)
        other = compare(before, after, seed=6)
        t = compare(before, after, method="t", family_level=None)
    assert one.comparisons == two.comparisons and one.family == two.family
    assert other.family is not None and other.family.marginal != one.family.marginal  # the flips follow the seed
    # a t interval on its own draws nothing
    assert t.n_resamples == 0 and "paired t" in t.rule and "paired t" in t.settings_line()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"by": "policy"}, "by='policy' is not supported"),
        ({"margin": 1.5}, r"margin must be a number in \[0, 1\), e.g. 0.10, got 1.5"),
        ({"confidence_level": 0}, r"confidence level must be a number in \[0.5, 0.999\]"),
        ({"n_resamples": 10}, r"resamples must be an integer in \[100, 1000000\]"),
        ({"n_resamples": 10**12}, r"resamples must be an integer in \[100, 1000000\]"),
        ({"method": "bca"}, "method must be one of expanded, percentile, basic, t, got 'bca'"),
        ({"max_drop": -0.1}, "max_drop must be a number in"),
        ({"bootstrap_seed": -1}, "bootstrap_seed must be an integer in"),
        ({"guards": "tool_called"}, "guards must be a list of names"),
        ({"resamples": 2000}, "unknown gate option.s. resamples; the gate takes by, guards, margin"),
    ],
)
def test_bad_options_are_usage_errors(options: dict, message: str) -> None:
    rows = table_rows("no_id", [0, 1, 2])
    with pytest.raises(UsageError, match=message):
        compare(rows, rows, **options)


def test_constant_guard_warns_once_and_is_flagged() -> None:
    rows = table_rows("no_id", [0, 1, 2, 1])
    with pytest.warns(RlgateWarning) as record:
        result = compare(rows, rows, guards=("well_formed",))
    assert len([w for w in record if "constant" in str(w.message)]) == 1
    assert "constant" in _cmp(result, "marker:well_formed", "overall").flags
    assert result.warnings and "cannot fail" in result.warnings[0]


# --------------------------------------------------------------------------- the environment's defaults


def test_without_an_environment_nothing_is_guarded_or_declared() -> None:
    before = [{**r, "markers": {}} for r in table_rows("no_id", [0, 1, 0, 1])]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RlgateWarning)
        result = compare(before, before)
    assert result.passed and {c.metric for c in result.comparisons} == {"pass@1"}
    assert result.sides.env is None and result.sides.categories == ()


def _calc_rows(right: list[bool]) -> list[dict[str, Any]]:
    items = calc_items(per_category=4)
    return grade_replies(items, [[calc_reply(item, ok) for ok in right] for item in items], env=CalcEnv)


def test_an_environment_supplies_its_guards_and_categories() -> None:
    before = _calc_rows([True, True, False, False])
    after = _calc_rows([True, True, True, False])
    with pytest.warns(RlgateWarning, match="guard 'concise' is constant"):  # every calc reply is short
        result = compare(before, after, env=CalcEnv)
    assert {c.metric for c in result.comparisons} == {"pass@1", "marker:concise"}
    assert {c.group for c in result.comparisons} == {"overall", "arithmetic", "unanswerable", "word_problem"}
    assert result.sides.env == "calc" and result.sides.guards == ("concise",)
    assert result.sides.categories == ("arithmetic", "unanswerable", "word_problem")
    assert "marker:concise" in result.rule
    # the environment's categories are declared: one missing from the rows fails the gate
    thin = [r for r in before if r["category"] != "unanswerable"]
    with pytest.warns(RlgateWarning):
        missing = compare(thin, [r for r in after if r["category"] != "unanswerable"], env="_calc_env:CalcEnv")
    assert missing.failures == ("declared category 'unanswerable' is missing from both sides",)
    # explicit guards and categories win over the environment's
    plain = compare(thin, thin, env=CalcEnv, guards=(), categories=())
    assert plain.passed and {c.metric for c in plain.comparisons} == {"pass@1"}
