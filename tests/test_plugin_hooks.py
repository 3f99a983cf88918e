"""The plugin's extension points in real pytest runs: the ``pytest_rlgate_*`` hooks a conftest.py
implements, each comparison as a pytest subtest, and the seeds where ``-q`` does not hide them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from _harness import LM_EVAL
from test_gate import NO_ID_BALANCED, NO_ID_COLLAPSE, seed_tables

from pytest_rlgate import load_env, write_rows
from pytest_rlgate.data import Rows, row_header
from pytest_rlgate.plugin import hookspec

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

TESTS = """
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

def test_collapse(rlgate):
    rlgate.assert_no_regression("before.jsonl", "collapse.jsonl")

def test_balanced(rlgate):
    rlgate.assert_no_regression("before.jsonl", "balanced.jsonl")
"""

FAST = ("-p", "no:cacheprovider", "--rlgate-resamples", "500")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """The seed's tables as row files rlgate sampled: headers naming seed 17 and one prompt set."""
    env = load_env("refund")
    before, collapse = seed_tables(NO_ID_COLLAPSE)
    _, balanced = seed_tables(NO_ID_BALANCED)
    for name, rows in (("before", before), ("collapse", collapse), ("balanced", balanced)):
        header = row_header(env, prompts_fingerprint="sha256:" + "ab" * 32, policy=name, sampling={"seed": 17})
        write_rows(pytester.path / f"{name}.jsonl", Rows(rows, header=header))
    pytester.makepyfile(test_gates=TESTS)
    return pytester


def test_every_hook_is_declared_with_a_docstring_that_says_when_and_what_it_returns() -> None:
    names = sorted(n for n in vars(hookspec) if n.startswith("pytest_rlgate_"))
    assert names == ["pytest_rlgate_gate_options", "pytest_rlgate_gate_result", "pytest_rlgate_rows",
                     "pytest_rlgate_update_json"]
    for name in names:
        doc = getattr(hookspec, name).__doc__
        assert "Called " in doc and ":return:" in doc, name


def test_gate_options_adjusts_the_tests_of_its_folder_only(project: pytest.Pytester) -> None:
    project.mkpydir("strict")
    (project.path / "strict" / "conftest.py").write_text(
        "def pytest_rlgate_gate_options(config, item, options):\n"
        "    return options.replace(margin=0.3, show_flips=0)\n", encoding="utf-8")
    (project.path / "strict" / "test_strict.py").write_text(
        "def test_strict(rlgate):\n"
        "    rlgate.assert_no_regression('before.jsonl', 'collapse.jsonl')\n", encoding="utf-8")
    result = project.runpytest(*FAST)
    result.assert_outcomes(passed=1, failed=2)
    strict, top = _section(result, "test_strict"), _section(result, "test_collapse")
    assert "margin 0.30" in strict and "margin 0.30" not in top and "margin 0.10" in top
    assert "flips in" in top and "flips in" not in strict  # show_flips=0 in the folder with the conftest only


def _section(result: pytest.RunResult, test: str) -> str:
    """The failure section of *test* in pytest's output."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and f" {test} " in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("_", "=")))
    return "\n".join(lines[start:end])


def test_gate_options_must_return_options(project: pytest.Pytester) -> None:
    project.makeconftest("def pytest_rlgate_gate_options(config, item, options):\n    return {'margin': 0.3}\n")
    result = project.runpytest(*FAST, "-k", "balanced")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*pytest_rlgate_gate_options hook returned dict; return options.replace(...) or None"])


def test_rows_adds_a_marker_the_gate_then_guards(project: pytest.Pytester) -> None:
    """A project's own check of each reply (here: half the off_topic replies leak after training) becomes a guard."""
    project.makeconftest("""
def pytest_rlgate_rows(side, rows, item):
    assert rows.header["sampling"]["seed"] == 17  # a Rows with its file's header
    for row in rows:
        leaked = side == "after" and row["category"] == "off_topic" and row["rollout_index"] < 2
        row["markers"]["no_leak"] = 0.0 if leaked else 1.0
    item.user_properties.append(("seen", f"{side}:{len(rows)}"))
""")
    project.makepyfile(test_guard="""
def test_guarded(rlgate, request):
    result = rlgate.compare("before.jsonl", "balanced.jsonl", guards=("no_leak",))
    assert [v for k, v in request.node.user_properties if k == "seen"] == ["before:652", "after:652"]
    assert result.comparison("marker:no_leak", "off_topic").verdict == "regressed"
""")
    project.runpytest(*FAST, "test_guard.py").assert_outcomes(passed=1)


def test_rows_changes_a_side_and_sees_each_seed_of_a_recipe(project: pytest.Pytester) -> None:
    project.makeconftest("""
def pytest_rlgate_rows(side, rows, seed, item):
    item.user_properties.append(("seen", (side, seed)))
    if side == "after" and seed in (None, 18):  # undo the collapse: after is before's no_id rows
        before = [r for r in rows if r["category"] != "no_id"]
        rows[:] = before + [r for r in __import__("pytest_rlgate").load_rows("before.jsonl")
                            if r["category"] == "no_id"]
""")
    project.makepyfile(test_sides="""
def test_single(rlgate):
    rlgate.assert_no_regression("before.jsonl", "collapse.jsonl")

def test_recipe(rlgate, request):
    rlgate.compare("before.jsonl", {17: "balanced.jsonl", 18: "collapse.jsonl"})
    seen = [v for k, v in request.node.user_properties if k == "seen"]
    assert seen == [("before", None), ("after", 17), ("after", 18)]
""")
    project.runpytest(*FAST, "test_sides.py").assert_outcomes(passed=2)  # the collapse was taken out


def test_rows_reads_a_harness_log_through_its_reader(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
def pytest_rlgate_rows(side, rows, item):
    item.user_properties.append(("seen", (side, rows.header["source"]["harness"], len(rows) > 0)))
""")
    pytester.makepyfile(test_logs=f"""
def test_logs(rlgate, request):
    result = rlgate.compare({str(LM_EVAL / 'base')!r}, {str(LM_EVAL / 'candidate')!r}, n_resamples=500)
    seen = [v for k, v in request.node.user_properties if k == "seen"]
    assert seen == [("before", "lm-eval", True), ("after", "lm-eval", True)], seen
    assert not result.passed  # the candidate's regression in with_id is still found
""")
    result = pytester.runpytest("--rlgate-read=filter=none", "--rlgate-category-key=doc.category", *FAST)
    result.assert_outcomes(passed=1)


def test_gate_result_sees_every_gate_and_update_json_the_report(project: pytest.Pytester) -> None:
    project.makeconftest("""
import json

def pytest_rlgate_gate_result(config, item, result):
    verdict = result.comparison("pass@1", "no_id").verdict
    with open("results.jsonl", "a") as out:
        out.write(json.dumps([item.name, result.passed, verdict]) + "\\n")

def pytest_rlgate_update_json(config, output_json):
    output_json["build"] = "ci-42"
    output_json["gates"][0]["note"] = "checked"
""")
    result = project.runpytest(*FAST, "--rlgate-report", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    seen = [json.loads(line) for line in (project.path / "results.jsonl").read_text().splitlines()]
    assert seen[0] == ["test_collapse", False, "regressed"] and seen[1][:2] == ["test_balanced", True], seen
    report = json.loads((project.path / "report.json").read_text())
    assert report["build"] == "ci-42" and report["gates"][0]["note"] == "checked"


def test_a_conftest_marked_optional_loads_without_the_plugin(project: pytest.Pytester) -> None:
    project.makeconftest("import pytest\n\n@pytest.hookimpl(optionalhook=True)\n"
                         "def pytest_rlgate_gate_result(config, item, result):\n    pass\n")
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    project.runpytest("-p", "no:rlgate", "-p", "no:cacheprovider", "test_plain.py").assert_outcomes(passed=1)


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """Each test's own outcome (not its subtests') from the short summary (``-rA``)."""
    out = {}
    for line in result.stdout.lines:
        for word in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(word + " "):
                out[line.split()[1]] = word
    return out


def test_each_comparison_is_a_subtest_when_the_test_asks_and_the_outcome_is_the_gates(
        project: pytest.Pytester) -> None:
    pytest.importorskip("_pytest.subtests")
    project.makepyfile(test_sub="""
def test_sub_collapse(rlgate, subtests):
    rlgate.assert_no_regression("before.jsonl", "collapse.jsonl")

def test_sub_balanced(rlgate, subtests):
    rlgate.assert_no_regression("before.jsonl", "balanced.jsonl")
""")
    result = project.runpytest(*FAST, "-rA", "-v", "test_sub.py")
    assert _outcomes(result) == {"test_sub.py::test_sub_collapse": "FAILED", "test_sub.py::test_sub_balanced": "PASSED"}
    result.stdout.fnmatch_lines(["*SUBFAILED*[[]pass@1 in no_id[]]*test_sub_collapse*"])
    out = result.stdout.str()
    assert out.count("SUBFAILED") == 2  # the progress line and the short summary, for the one failing comparison
    assert "SUBPASSED[pass@1 in with_id]" in out and "SUBPASSED[marker:well_formed in overall]" in out
    assert "pass@1 regressed in no_id" in out
    assert "RegressionError: 1 of 12 comparisons regressed" in out  # the test fails as it did
    plain = project.runpytest(*FAST, "-rA", "-v", "test_gates.py")
    assert "SUB" not in plain.stdout.str()  # without the fixture: one result a test, as before
    assert _outcomes(plain) == {"test_gates.py::test_collapse": "FAILED", "test_gates.py::test_balanced": "PASSED"}


def test_the_session_option_reports_subtests_for_every_gate_and_keeps_outcomes(project: pytest.Pytester) -> None:
    pytest.importorskip("_pytest.subtests")
    project.makeini("[pytest]\nrlgate_subtests = true\n")
    result = project.runpytest(*FAST, "-rA")
    assert _outcomes(result) == {"test_gates.py::test_collapse": "FAILED", "test_gates.py::test_balanced": "PASSED"}
    result.stdout.fnmatch_lines(["SUBFAILED[[]pass@1 in no_id[]] test_gates.py::test_collapse - Failed: pass@1 regr*"])
    stopped = project.runpytest(*FAST, "-x", "-k", "collapse")  # -x stops at the first failing subtest
    stopped.stdout.fnmatch_lines(["*RegressionError: 1 of 12 comparisons regressed*"])
    assert _outcomes(project.runpytest(*FAST, "-rA", "-x")).get("test_gates.py::test_collapse") == "FAILED"


def test_without_subtests_in_pytest_the_gate_stays_one_result(project: pytest.Pytester) -> None:
    project.makepyfile(test_sub="def test_sub(rlgate):\n"
                                "    rlgate.assert_no_regression('before.jsonl', 'collapse.jsonl')\n")
    result = project.runpytest(*FAST, "-p", "no:subtests", "--rlgate-subtests", "-rA", "test_sub.py")
    assert _outcomes(result) == {"test_sub.py::test_sub": "FAILED"}
    assert "SUBFAILED" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*--rlgate-subtests / rlgate_subtests: this pytest has no subtests*"])


def test_seeds_reach_junit_the_report_and_a_quiet_log(project: pytest.Pytester) -> None:
    result = project.runpytest("-q", *FAST, "--rlgate-bootstrap-seed", "4", "--junitxml", "junit.xml",
                               "--rlgate-report", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["rlgate: seeds: bootstrap seed 4; sample seed before 17, after 17; "
                                 "prompts fingerprint sha256:abababababababab", "rlgate: 2 gates, 1 failed; *"])
    seeds = {"bootstrap_seed": 4, "sample_seed": {"before": 17, "after": 17},
             "prompts_fingerprint": "sha256:" + "ab" * 32}
    report = json.loads((project.path / "report.json").read_text())
    assert [g["seeds"] for g in report["gates"]] == [seeds, seeds]
    assert f"fingerprint={report['prompts']['prompts_fingerprint'][:23]}" in result.stdout.str()  # the header's set
    case = next(c for c in ET.parse(project.path / "junit.xml").iter("testcase") if c.get("name") == "test_collapse")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["rlgate:bootstrap_seed"] == "4" and props["rlgate:sample_seed"] == "before 17, after 17"
    assert props["rlgate:prompts_fingerprint"] == "sha256:" + "ab" * 32


def test_a_test_on_the_sessions_prompts_records_their_seed(project: pytest.Pytester) -> None:
    project.makepyfile(test_session_prompts="""
def test_prompts(rlgate, rlgate_prompts):
    assert rlgate_prompts
    rlgate.compare("before.jsonl", "balanced.jsonl")
""")
    result = project.runpytest("-q", *FAST, "--rlgate-seed", "3", "--rlgate-bootstrap-seed", "0", "--rlgate-report",
                               "report.json", "test_session_prompts.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["rlgate: seeds: bootstrap seed 0; prompt seed 3; sample seed before 17, after 17*"])
    report = json.loads((project.path / "report.json").read_text())
    assert report["gates"][0]["seeds"]["prompt_seed"] == 3
    assert report["prompts"]["prompt_seed"] == 3 and report["prompts"]["env"] == "refund"
    assert report["prompts"]["prompts_fingerprint"].startswith("sha256:")


def test_subtests_do_not_update_a_baseline_before_their_test_ends(project: pytest.Pytester) -> None:
    """A subtest's report is made while its test runs: the baseline waits for the test's own."""
    pytest.importorskip("_pytest.subtests")
    project.makepyfile(test_update="""
def test_candidate(rlgate, rlgate_before_rows, rlgate_after_rows):
    rlgate.assert_no_regression(rlgate_before_rows, rlgate_after_rows)
""")
    (project.path / "baseline.jsonl").write_bytes((project.path / "before.jsonl").read_bytes())
    result = project.runpytest(*FAST, "--rlgate-subtests", "--rlgate-baseline", "baseline.jsonl",
                               "--rlgate-candidate", "balanced.jsonl", "--rlgate-update-baseline", "test_update.py")
    result.assert_outcomes(passed=1)
    section = result.stdout.str().split(" rlgate: baseline =")[1]
    assert section.count("baseline baseline.jsonl") == 1 and "updated with 652 rows" in section, section
    assert (project.path / "baseline.jsonl").read_bytes() != (project.path / "before.jsonl").read_bytes()
