"""The ``rlgate`` fixture in real pytest runs: failure text, summary, report, JUnit, xdist, and
the environment (``--rlgate-env``, ``@pytest.mark.rlgate(env=...)``) that sets its defaults."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import _calc_env
import pytest
from _calc_env import CalcEnv, calc_items, calc_reply
from test_gate import NO_ID_BALANCED, NO_ID_COLLAPSE, seed_tables

from pytest_rlgate import grade_replies, write_rows

TESTS = """
import warnings, pytest
from pytest_rlgate import RlgateWarning

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

def test_collapse(rlgate):
    rlgate.assert_no_regression("before.jsonl", "collapse.jsonl")

def test_balanced(rlgate):
    result = rlgate.assert_no_regression("before.jsonl", "balanced.jsonl", n_resamples=1000)
    assert result.passed and result.n_resamples == 1000

def test_plain_function_raises_an_assertion_error():
    from pytest_rlgate import RegressionError, assert_no_regression
    with pytest.raises(AssertionError):
        assert_no_regression("before.jsonl", "collapse.jsonl")
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    before, collapse = seed_tables(NO_ID_COLLAPSE)
    _, balanced = seed_tables(NO_ID_BALANCED)
    write_rows(pytester.path / "before.jsonl", before)
    write_rows(pytester.path / "collapse.jsonl", collapse)
    write_rows(pytester.path / "balanced.jsonl", balanced)
    pytester.makepyfile(test_gates=TESTS)
    return pytester


def test_failure_reads_as_a_table_and_the_summary_lists_every_gate(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--rlgate-resamples", "2000", "--rlgate-bootstrap-seed", "4")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["E *2,000 scenario sign flips*seed 4, margin 0.10*"])
    result.stdout.fnmatch_lines([
        "*RegressionError: 1 of 12 comparisons regressed: pass@1 in no_id",
        "E *paired t of per-scenario deltas; 12 comparisons held together by min-p over 2,000 scenario sign flips*",
        "E *metric*group*units×k*before*after*delta*% CI*MDE*verdict*",
        "E *pass@1*no_id*15×4*0.950*0.750*-0.200*REGRESSED*",
        "E *rule: fail if pass@1, marker:well_formed, marker:argument_grounding regressed*",
        "E *Remedy: *",
    ])
    result.stdout.fnmatch_lines([
        "*= rlgate: gates =*",
        "gate*metric*group*units×k*delta*CI*verdict*",
        "test_gates.py::test_collapse*pass@1*no_id*15×4*-0.200*REGRESSED*",
        "*rlgate: 2 gates, 1 failed; 1 regressed*",
    ])
    # the section sits before the short summary, like pytest's own sections
    text = result.stdout.str()
    assert text.index("rlgate: gates") < text.index("short test summary info")
    # the traceback hides the fixture's internals
    assert "hooks/gate.py" not in text


def _has_seed_option(pytester: pytest.Pytester) -> bool:
    return "--rlgate-seed" in pytester.runpytest("--help").stdout.str()


def test_verbosity_controls_the_summary(project: pytest.Pytester) -> None:
    quiet = project.runpytest("-q", "-k", "balanced", "--rlgate-resamples", "500")
    assert "rlgate: gates" not in quiet.stdout.str()
    quiet.stdout.fnmatch_lines(["rlgate: 1 gate, 0 failed; *"])
    normal = project.runpytest("-k", "balanced", "--rlgate-resamples", "500").stdout.str()
    assert "pass@1" in normal and "overall" not in normal.split("rlgate: gates")[1]  # borderline rows only
    verbose = project.runpytest("-v", "-k", "balanced", "--rlgate-resamples", "500").stdout.str()
    section = verbose.split("rlgate: gates")[1]
    assert section.count("test_gates.py::test_balanced") == 12  # every comparison: pass@1 and two guards x 4


def test_report_and_junit_properties(project: pytest.Pytester) -> None:
    result = project.runpytest("--rlgate-report", "out/gates.json", "--junitxml", "junit.xml",
                               "--rlgate-resamples", "500")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*generated rlgate report: out/gates.json*"])
    report = json.loads((project.path / "out" / "gates.json").read_text())
    assert report["passed"] is False and report["format_version"] == 1
    assert [g["nodeid"] for g in report["gates"]] == ["test_gates.py::test_collapse", "test_gates.py::test_balanced"]
    assert [g["passed"] for g in report["gates"]] == [False, True]
    assert {"rule", "comparisons", "failures", "method"} <= set(report["gates"][0])
    assert not list((project.path / "out").glob(".*.tmp"))
    tree = ET.parse(project.path / "junit.xml")
    props = {case.get("name"): [p.get("name") for p in case.iter("property")] for case in tree.iter("testcase")}
    assert props["test_collapse"][0] == "rlgate_gate" and props["test_balanced"][0] == "rlgate_gate"
    assert "rlgate:pass@1:no_id" in props["test_collapse"]  # each category's verdict, for CI dashboards
    verdicts = {p.get("name"): p.get("value") for case in tree.iter("testcase") if case.get("name") == "test_collapse"
                for p in case.iter("property")}
    assert verdicts["rlgate:pass@1:no_id"].startswith("REGRESSED -")  # upper case: it failed the gate
    value = next(p.get("value") for p in tree.iter("property"))
    assert json.loads(value)["passed"] is False


def test_settings_come_from_ini_and_options(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nrlgate_method = t\nrlgate_margin = 0.2\nrlgate_confidence = 0.9\n"
                    "rlgate_family_level = none\n")
    result = project.runpytest("-k", "collapse", "--rlgate-report", "r.json")
    result.stdout.fnmatch_lines(["E *paired t of per-scenario deltas: 90% CI, each comparison on its own; seed *, "
                                 "margin 0.20*"])
    gate = json.loads((project.path / "r.json").read_text())["gates"][0]
    assert (gate["method"], gate["margin"], gate["confidence_level"]) == ("t", 0.2, 0.9)
    # the command line wins over the ini file
    cli = project.runpytest("-k", "collapse", "--rlgate-method", "percentile")
    cli.stdout.fnmatch_lines(["E *percentile bootstrap of per-scenario deltas: 90% CI*"])


def test_the_bootstrap_seed_has_its_own_option(project: pytest.Pytester) -> None:
    result = project.runpytest("-k", "collapse", "-p", "no:cacheprovider", "--rlgate-resamples", "1000",
                               "--rlgate-bootstrap-seed", "4")
    result.stdout.fnmatch_lines(["E *1,000 scenario sign flips*seed 4, margin 0.10*"])
    assert "deprecated" not in result.stdout.str()
    project.makeini("[pytest]\nrlgate_bootstrap_seed = 7\n")
    ini = project.runpytest("-k", "collapse", "-p", "no:cacheprovider", "--rlgate-resamples", "1000")
    ini.stdout.fnmatch_lines(["E *1,000 scenario sign flips*seed 7, margin 0.10*"])
    assert "deprecated" not in ini.stdout.str()


def test_the_prompt_seed_alone_still_seeds_the_bootstrap_with_a_deprecation_note(project: pytest.Pytester) -> None:
    if not _has_seed_option(project):
        pytest.skip("--rlgate-seed belongs to the prompts feature")
    result = project.runpytest("-k", "collapse", "-p", "no:cacheprovider", "--rlgate-resamples", "1000",
                               "--rlgate-seed", "4")
    result.stdout.fnmatch_lines(["E *1,000 scenario sign flips*seed 4, margin 0.10*",
                                 "*RlgateWarning: --rlgate-seed / rlgate_seed as the gate's bootstrap seed is "
                                 "deprecated: pass --rlgate-bootstrap-seed (ini rlgate_bootstrap_seed)*"])
    assert result.stdout.str().count("is deprecated") == 1
    # given both, the bootstrap seed wins and nothing is deprecated
    both = project.runpytest("-k", "collapse", "-p", "no:cacheprovider", "--rlgate-resamples", "1000",
                             "--rlgate-seed", "4", "--rlgate-bootstrap-seed", "9")
    both.stdout.fnmatch_lines(["E *1,000 scenario sign flips*seed 9, margin 0.10*"])
    assert "deprecated" not in both.stdout.str()
    # neither: the bootstrap is seeded 0 as before, without a note
    neither = project.runpytest("-k", "collapse", "-p", "no:cacheprovider", "--rlgate-resamples", "1000")
    neither.stdout.fnmatch_lines(["E *1,000 scenario sign flips*seed 0, margin 0.10*"])
    assert "deprecated" not in neither.stdout.str()


@pytest.mark.parametrize(
    ("option", "message"),
    [("--rlgate-method=bca", "--rlgate-method 'bca': choose one of"),
     ("--rlgate-confidence=1.2", "--rlgate-confidence / rlgate_confidence = 1.2: out of range"),
     ("--rlgate-resamples=5", "--rlgate-resamples / rlgate_resamples = 5: out of range; expected an integer "
                              "in [100, 1000000]"),
     ("--rlgate-resamples=1000000000000", "expected an integer in [100, 1000000]"),
     ("--rlgate-report=.", "--rlgate-report / rlgate_report '.': "),
     ("--rlgate-bootstrap-seed=-1", "--rlgate-bootstrap-seed / rlgate_bootstrap_seed = -1: out of range")],
)
def test_bad_settings_are_usage_errors_not_internal_errors(project: pytest.Pytester, option: str, message: str) -> None:
    result = project.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert message in result.stderr.str()


def test_a_data_error_fails_the_test_not_the_session(project: pytest.Pytester) -> None:
    (project.path / "broken.jsonl").write_text('{"prompt": "x"}\n')
    project.makepyfile(
        test_broken="def test_broken(rlgate):\n    rlgate.assert_no_regression('broken.jsonl', 'before.jsonl')\n")
    result = project.runpytest("test_broken.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*DataError: broken.jsonl:1: missing fields*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_xdist_workers_report_to_the_controller(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = project.runpytest_subprocess("-n", "2", "-p", "xdist", "--rlgate-report", "x.json",
                                          "--rlgate-resamples", "500")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*rlgate: 2 gates, 1 failed; 1 regressed*"])
    report = json.loads((project.path / "x.json").read_text())
    assert sorted(g["nodeid"] for g in report["gates"]) == ["test_gates.py::test_balanced",
                                                           "test_gates.py::test_collapse"]


CALC_TESTS = """
import pytest
from pytest_rlgate import DataError

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

def test_session_env(rlgate):
    result = rlgate.assert_no_regression("calc_before.jsonl", "calc_after.jsonl", n_resamples=500)
    assert (result.sides.env, result.sides.guards) == ("calc", ("concise",))
    assert result.sides.categories == ("arithmetic", "unanswerable", "word_problem")

@pytest.mark.rlgate(env="calcenv:CalcEnv")
def test_marked(rlgate):
    result = rlgate.assert_no_regression("calc_before.jsonl", "calc_after.jsonl", n_resamples=500)
    assert (result.sides.env, result.sides.guards) == ("calc", ("concise",))

def test_explicit_options_win(rlgate):
    result = rlgate.compare("calc_before.jsonl", "calc_after.jsonl", n_resamples=500, guards=(), categories=())
    assert result.passed and result.sides.guards == ()

@pytest.mark.rlgate(env="no_such_module:Env")
def test_bad_marker_env(rlgate):
    pass
"""


@pytest.fixture
def calc_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(calcenv=Path(_calc_env.__file__).read_text(encoding="utf-8"))
    pytester.syspathinsert()
    items = calc_items(per_category=4)
    for name, right in (("calc_before", [True, False, False, False]), ("calc_after", [True, True, True, False])):
        rows = grade_replies(items, [[calc_reply(item, ok) for ok in right] for item in items], env=CalcEnv)
        write_rows(pytester.path / f"{name}.jsonl", rows)
    pytester.makepyfile(test_calc=CALC_TESTS)
    return pytester


def test_the_session_environment_sets_guards_and_categories(calc_project: pytest.Pytester) -> None:
    result = calc_project.runpytest("--rlgate-env=calcenv:CalcEnv", "-k", "not bad_marker")
    result.assert_outcomes(passed=3)


def test_a_marker_environment_overrides_the_sessions(calc_project: pytest.Pytester) -> None:
    result = calc_project.runpytest("-k", "marked or bad_marker")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.rlgate(env=...): environment 'no_such_module:Env': no module*"])
    # without the marker the session's (default) environment guards a marker calc rows never had
    unmarked = calc_project.runpytest("-k", "session_env")
    unmarked.assert_outcomes(failed=1)
    unmarked.stdout.fnmatch_lines(["*marker 'well_formed' is missing but guarded*"])
