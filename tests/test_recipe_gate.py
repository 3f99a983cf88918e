"""pytest_rlgate.compare with one after side per training seed: the recipe gate over graded rows.

Rows are built per seed from per-scenario failure counts (``test_gate.table_rows``), so each
test knows every seed's delta exactly.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from test_gate import spread, table_rows

from pytest_rlgate import (
    DataError,
    GateResult,
    RegressionError,
    RlgateWarning,
    UsageError,
    assert_no_regression,
    compare,
    write_rows,
)
from pytest_rlgate.data.provenance import row_header
from pytest_rlgate.gate import RecipeGateResult
from pytest_rlgate.gate.recipe import is_seed_sources, seed_labels
from pytest_rlgate.gate.recipe_text import seed_dots

GUARD = ("well_formed",)


def side(with_id: int, no_id: int, *, eval_run: object = None) -> list[dict]:
    """12 with-id and 8 no-id scenarios, k = 4, with this many failed rollouts in each category."""
    return (table_rows("with_id", spread(12, with_id), eval_run=eval_run)
            + table_rows("no_id", spread(8, no_id), eval_run=eval_run))


BEFORE = side(30, 2)


def test_a_mapping_of_seeds_gates_the_recipe_with_every_seeds_verdict() -> None:
    result = compare(BEFORE, {17: side(10, 4), 18: side(12, 3), 19: side(14, 16)}, guards=GUARD)
    assert isinstance(result, RecipeGateResult) and result.passed
    assert result.seeds == (17, 18, 19)
    no_id = result.comparison("pass@1", "no_id")
    assert [s.seed for s in no_id.seeds] == [17, 18, 19]
    assert [s.verdict for s in no_id.seeds][2] == "regressed"  # seed 19 alone: 0.94 -> 0.50
    assert no_id.recipe.seeds_line == "regressed in 1 of 3 seeds"
    assert no_id.verdict == "inconclusive"  # one bad seed of three is not a recipe regression
    assert no_id.delta == pytest.approx(((4 + 3 + 16) / 3 - 2) / -32)
    assert result.comparison("pass@1", "with_id").verdict == "moved"
    assert no_id.mde is not None and no_id.mde > abs(no_id.delta)


def test_a_recipe_that_regresses_fails_naming_the_seeds() -> None:
    afters = [side(30, 14), side(30, 16), side(30, 15)]
    result = compare(BEFORE, afters)
    assert not result.passed
    assert result.seeds == ("#1", "#2", "#3")
    (failure,) = [f for f in result.failures if "no_id" in f]
    assert failure.startswith("pass@1 regressed in no_id across 3 seeds: 0.938 -> 0.531")
    assert "regressed in 3 of 3 seeds" in failure and "8 units x 4 x 3 seeds" in failure
    with pytest.raises(RegressionError) as caught:
        assert_no_regression(BEFORE, {"a": afters[0], "b": afters[1], "c": afters[2]})
    message = str(caught.value)
    assert message.startswith("2 of 3 recipe comparisons failed: pass@1 in no_id (regressed in 3 of 3 seeds), "
                              "pass@1 in overall")
    # the three comparisons are held together: each interval at 1 - 2 x 5 % / 3
    assert "3 comparisons held together by Bonferroni, each at one-sided 1.67%" in message
    assert caught.value.result.comparison("pass@1", "no_id").level == pytest.approx(0.05 / 3)
    assert "each seed on its own:" in message and "Remedy:" in message
    assert caught.value.result.comparison("pass@1", "no_id").verdict == "regressed"


def test_one_seed_is_unresolved_and_its_own_regression_still_fails() -> None:
    with pytest.warns(RlgateWarning, match=r"one training seed \(7\): the recipe is unresolved"):
        result = compare(BEFORE, {7: side(30, 16)})
    no_id = result.comparison("pass@1", "no_id")
    assert no_id.verdict == "unresolved" and "one training seed cannot show" in no_id.recipe.reason
    assert no_id.low is None and no_id.seeds[0].verdict == "regressed"
    assert "the only seed regressed" in no_id.flags
    assert (f"pass@1 regressed in no_id at the only training seed 7: 0.938 -> 0.500, delta -0.438 "
            f"[{no_id.seeds[0].low:+.3f}, {no_id.seeds[0].high:+.3f}], 8 units x 4 x 1 seed (recipe unresolved)"
            in result.failures)
    with pytest.warns(RlgateWarning):
        calm = compare(BEFORE, {7: side(28, 2)})
    assert calm.passed and {c.verdict for c in calm.comparisons} == {"unresolved"}
    with pytest.warns(RlgateWarning):
        strict = compare(BEFORE, {7: side(28, 2)}, fail_on_inconclusive=True)
    assert any("is unresolved" in f for f in strict.failures)


def test_the_gates_other_rules_apply_to_the_recipe_interval() -> None:
    afters = {17: side(30, 2), 18: side(30, 3), 19: side(30, 4)}
    assert compare(BEFORE, afters).passed
    dropped = compare(BEFORE, afters, max_drop=0.01)
    assert any("may have dropped more than max_drop 0.010" in f for f in dropped.failures)
    assert "below -max_drop" in dropped.comparison("pass@1", "no_id").flags
    moved = compare(BEFORE, afters, require_moved=True)
    assert any("did not move" in f and "(require_moved)" in f for f in moved.failures)
    assert "held together at a 5% run-level false-fail" in moved.rule and "on the mean over 3 seeds" in moved.rule
    with pytest.raises(UsageError, match=r"pass\^K / pass@K gate one adapter"):
        compare(BEFORE, afters, metrics=("pass^2",))


def test_every_seed_must_pair_with_the_before_units() -> None:
    short = side(10, 4)[:-4]  # the last no-id scenario missing
    with pytest.raises(DataError, match=r"1 unit\(s\) of <before rows> missing from <after seed 18 rows>: 'no_id-7'"):
        compare(BEFORE, {17: side(10, 4), 18: short})
    with pytest.warns(RlgateWarning, match=r"dropped 1 of <before rows>, 1 of <after seed 17 rows>"):
        result = compare(BEFORE, {17: side(10, 4), 18: short}, shared_units_only=True)
    assert result.comparison("pass@1", "no_id").n_units == 7


def test_a_category_missing_from_one_seed_fails_naming_it() -> None:
    result = compare(BEFORE, {17: side(10, 4), 18: table_rows("with_id", spread(12, 10))})
    assert "category 'no_id' is missing from <after seed 18 rows>" in result.failures


def test_one_after_side_is_still_the_adapter_gate() -> None:
    single = compare(BEFORE, side(10, 4))
    assert isinstance(single, GateResult) and not isinstance(single, RecipeGateResult)


@pytest.mark.parametrize(("after", "several"), [
    ({17: []}, True), ([["rows"], ["rows"]], True), (["a.jsonl", Path("b.jsonl")], True),
    ([{"prompt": "p"}], False), ("after.jsonl", False), ([], False), ((r for r in ()), False),
])
def test_which_after_sides_are_several_seeds(after: object, several: bool) -> None:
    assert is_seed_sources(after) is several


def test_seed_labels_come_from_headers_then_run_folders(tmp_path: Path) -> None:
    paths = []
    for seed in (17, 18):
        path = tmp_path / f"grpo-seed{seed}" / "holdout_after.jsonl"
        path.parent.mkdir()
        write_rows(path, side(10, 4), header=row_header({"name": "refund", "fingerprint": "sha256:x"}, seed=seed))
        paths.append(path)
    assert seed_labels(paths) == [17, 18]
    for path in paths:
        write_rows(path, side(10, 4))
    assert seed_labels(paths) == ["grpo-seed17", "grpo-seed18"]
    assert seed_labels([side(1, 1), side(1, 1)]) == ["#1", "#2"]


def test_the_json_has_the_gates_keys_and_every_seed() -> None:
    result = compare(BEFORE, {17: side(10, 4), 18: side(12, 3), 19: side(14, 16)}, seed=3)
    payload = json.loads(json.dumps(result.to_dict()))
    assert payload["kind"] == "recipe" and payload["seeds"] == [17, 18, 19] and payload["family"]["law"] == "bonferroni"
    row = next(c for c in payload["comparisons"] if c["group"] == "no_id")
    assert {"metric", "group", "n_units", "k", "before", "after", "delta", "low", "high", "verdict", "mde",
            "flags"} <= set(row)
    assert row["seeds_line"] == "regressed in 1 of 3 seeds" and row["n_seeds"] == 3
    assert [s["seed"] for s in row["seeds"]] == [17, 18, 19] and row["seeds"][2]["verdict"] == "regressed"
    again = compare(BEFORE, {17: side(10, 4), 18: side(12, 3), 19: side(14, 16)}, seed=3)
    assert again.to_dict() == result.to_dict()


def test_the_report_shows_the_recipe_table_dots_and_each_seed() -> None:
    result = compare(BEFORE, {17: side(10, 4), 18: side(12, 3), 19: side(14, 16)})
    text = result.report()
    lines = text.splitlines()
    assert lines[0] == "recipe gate PASSED over 3 training seeds (17, 18, 19): 3 comparisons: 2 inconclusive, 1 moved"
    assert "seed + unit components t (Banerjee)" in lines[1] and "held together by Bonferroni" in lines[1]
    header = next(line for line in lines if line.startswith("metric"))
    for column in ("units×k", "seeds", "96.7% CI", "MDE", "per-seed Δ", "verdict", "regressed"):
        assert column in header
    no_id = next(line for line in lines if line.startswith("pass@1") and " no_id " in line)
    c = result.comparison("pass@1", "no_id")
    assert seed_dots([s.delta for s in c.seeds], c.low, c.high) in no_id and "1 of 3" in no_id
    assert "each seed on its own:" in text
    assert any(line.split()[:3] == ["pass@1", "no_id", "19"] and "REGRESSED" in line for line in lines)
    assert " with_id " not in result.table(verbose=False)  # moved on every seed: nothing to look at


def test_seed_dots_place_each_seed_the_interval_and_zero() -> None:
    assert seed_dots([-0.5, 0.5], -1.0, 1.0, width=11) == "[─●──|──●─]"
    assert seed_dots([0.2, 0.2, -0.2], -0.4, 0.4, width=9) == "[─●─|─2─]"
    assert seed_dots([0.3], width=5) == "|   ●"  # no interval: the dot and zero alone
    assert seed_dots([0.0, 0.0, 0.0], 0.0, 0.0, width=5) == "  3  "


def test_a_data_problem_names_the_seed(tmp_path: Path) -> None:
    broken = tmp_path / "seed18.jsonl"
    broken.write_text("{not json\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RlgateWarning)
        with pytest.raises(DataError, match=r"seed18.jsonl:1"):
            compare(BEFORE, [side(10, 4), str(broken)])
