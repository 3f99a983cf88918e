"""The ``rlgate`` fixture gating a recipe (one row file per training seed) in real pytest runs:
the failure text, the terminal summary's per-seed dots, and the --rlgate-report entry."""

from __future__ import annotations

import json

import pytest
from test_gate import spread, table_rows
from test_recipe_gate import side

from pytest_rlgate import write_rows

TESTS = """
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

def test_recipe_regresses(rlgate):
    rlgate.assert_no_regression("before.jsonl", {17: "bad17.jsonl", 18: "bad18.jsonl", 19: "bad19.jsonl"})

def test_one_lucky_seed(rlgate):
    result = rlgate.assert_no_regression("before.jsonl", ["good17.jsonl", "good18.jsonl", "odd19.jsonl"])
    assert result.comparison("pass@1", "no_id").recipe.seeds_line == "regressed in 1 of 3 seeds"
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    files = {"before": side(30, 2), "bad17": side(30, 14), "bad18": side(30, 16), "bad19": side(30, 15),
             "good17": side(10, 4), "good18": side(12, 3), "odd19": side(14, 16)}
    off_topic = table_rows("off_topic", spread(4, 0))  # the session's refund environment declares it
    for name, rows in files.items():
        write_rows(pytester.path / f"{name}.jsonl", rows + off_topic)
    pytester.makepyfile(test_recipes=TESTS)
    return pytester


def test_a_regressing_recipe_fails_its_test_with_every_seed(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--rlgate-report", "gates.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "E *RegressionError: 1 of * recipe comparisons failed: pass@1 in no_id (regressed in 3 of 3 seeds)*",
        "E *metric*group*units×k*seeds*per-seed Δ*verdict*regressed*",
        "E *pass@1*no_id*8×4*3*0.938*REGRESSED*3 of 3*",
        "E *each seed on its own:*",
    ])
    report = json.loads((project.path / "gates.json").read_text(encoding="utf-8"))
    kinds = {g["nodeid"].rsplit("::", 1)[1]: g.get("kind") for g in report["gates"]}
    assert kinds == {"test_recipe_regresses": "recipe", "test_one_lucky_seed": "recipe"}


def test_the_summary_shows_per_seed_dots_beside_the_recipe_interval(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider")
    text = result.stdout.str()
    summary = text[text.index("rlgate: gates"):]
    assert "per-seed Δ" in summary and "per-seed Δ: ● one seed's delta" in summary
    lucky = next(line for line in summary.splitlines() if "test_one_lucky_seed" in line and " no_id " in line)
    assert "regressed in 1 of 3 seeds" in lucky and "●" in lucky and "inconclusive" in lucky
    assert "rlgate: 2 gates, 1 failed; " in summary


def test_a_recipe_test_never_becomes_the_stored_baseline(project: pytest.Pytester) -> None:
    """--rlgate-update-baseline stores one policy's rows; a recipe test has one set per seed."""
    project.makeconftest('''
import pytest
from pytest_rlgate import load_rows

@pytest.fixture
def rlgate_after_rows():
    return {17: load_rows("good17.jsonl"), 18: load_rows("good18.jsonl")}
''')
    project.makepyfile(test_recipes='''
def test_candidate(rlgate, rlgate_after_rows):
    rlgate.assert_no_regression("before.jsonl", rlgate_after_rows)
''')
    stored = (project.path / "before.jsonl").read_bytes()
    result = project.runpytest("-p", "no:cacheprovider", "--rlgate-baseline", "before.jsonl",
                               "--rlgate-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([("baseline before.jsonl left untouched: test_recipes.py::test_candidate: a recipe "
                                  "test has one set of after rows per training seed*")])
    assert (project.path / "before.jsonl").read_bytes() == stored
