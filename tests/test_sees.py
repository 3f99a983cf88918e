"""A holdout that cannot see the drop it is for is named first: ``BLIND`` in the result and in
pytest's summary, and a release policy's ``sees_drop`` makes it a failure.

The README's first test used to hold out 3 no-id scenarios: a no-id collapse passed it as
``inconclusive``, 13 silent minutes later. The power is ``rlgate plan``'s own figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gate import table_rows

from pytest_rlgate.data.rows import write_rows
from pytest_rlgate.gate import compare
from pytest_rlgate.gate.plan import plan


def _side(fails: dict[str, list[int]], eval_run: str | None = None) -> list[dict]:
    return [row for category, f in fails.items() for row in table_rows(category, f, eval_run=eval_run)]


#: a healthy no_id (1 of 4 fails now and then) of 3 scenarios, and 30 of them
FEW = {"no_id": [0, 1, 0], "with_id": [0, 1, 2, 0, 1, 3, 0, 2] * 3}
MANY = {"no_id": [0, 1, 0, 0, 0, 1] * 5, "with_id": [0, 1, 2, 0, 1, 3, 0, 2] * 3}


def test_a_holdout_too_small_to_see_the_drop_is_named_first(tmp_path: Path) -> None:
    result = compare(_side(FEW), _side(FEW), guards=())
    assert result.passed and [b.category for b in result.blind] == ["no_id"]
    lines = result.report().splitlines()
    assert lines[1].startswith("BLIND: no_id (3 scenarios x 4) sees a 0.20 drop with ")
    assert "power, not 80%: `rlgate plan BEFORE.jsonl --drop 0.20` says how many scenarios it needs" in lines[1]
    assert "BLIND: no_id" in result.message().splitlines()[1]


def test_the_power_is_rlgate_plans_own_figure(tmp_path: Path) -> None:
    before = tmp_path / "before.jsonl"
    write_rows(before, _side(FEW))
    result = compare(before, before, guards=())
    (blind,) = result.blind
    comparison = result.comparison("pass@1", "no_id")
    planned = plan(before, drop=0.20, level=comparison.level, guards=())["no_id"]
    assert blind.power == pytest.approx(planned.power_now) and blind.power < 0.8
    assert f"`rlgate plan {before.name}" in blind.text(str(before)) or str(before) in blind.text(str(before))


def test_a_holdout_that_sees_the_drop_is_not_named(tmp_path: Path) -> None:
    result = compare(_side(MANY), _side(MANY), guards=())
    assert result.blind == () and "BLIND" not in result.report()
    assert compare(_side(FEW), _side(FEW), guards=(), sees_drop=None).blind == ()


def test_a_regressed_category_saw_its_drop_and_is_not_blind() -> None:
    six = {"no_id": [0, 1, 0, 0, 1, 0], "with_id": FEW["with_id"]}
    collapsed = {"no_id": [4, 4, 4, 4, 3, 4], "with_id": FEW["with_id"]}
    assert [b.category for b in compare(_side(six), _side(six), guards=()).blind] == ["no_id"]
    result = compare(_side(six), _side(collapsed), guards=())
    assert result.comparison("pass@1", "no_id").verdict == "regressed" and result.blind == ()


def test_a_release_policy_makes_a_blind_holdout_fail(tmp_path: Path) -> None:
    policy = tmp_path / "release.yaml"
    policy.write_text("rules:\n  no_id: {tier: critical, sees_drop: 0.20}\n", encoding="utf-8")
    result = compare(_side(FEW), _side(FEW), guards=(), release_policy=policy)
    assert not result.passed
    (failure,) = result.failures
    assert failure.startswith("no_id (3 scenarios x 4) sees a 0.20 drop") and failure.endswith(
        f"[{policy}:2 no_id]")
    assert compare(_side(MANY), _side(MANY), guards=(), release_policy=policy).passed


def test_the_rule_is_read_like_the_others(tmp_path: Path) -> None:
    policy = tmp_path / "release.yaml"
    policy.write_text("rules:\n  no_id: {sees_drop: 1.5}\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"release.yaml:2: sees_drop must be a number in \(0, 1\), got 1.5"):
        compare(_side(FEW), _side(FEW), guards=(), release_policy=policy)


def test_pytests_summary_names_a_blind_holdout_first(pytester: pytest.Pytester, tmp_path: Path) -> None:
    before = tmp_path / "before.jsonl"
    write_rows(before, _side({**FEW, "off_topic": MANY["no_id"]}))  # the plugin declares refund's categories
    pytester.makepyfile(test_blind=f"""
        def test_gate(rlgate):
            rlgate.assert_no_regression({str(before)!r}, {str(before)!r}, guards=())
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= rlgate: gates =*", "test_blind.py::test_gate: BLIND: no_id (3 scenarios x 4) "
                                 "sees a 0.20 drop with *power, not 80%*"])
