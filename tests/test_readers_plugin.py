"""pytest gates eval-harness logs: a committed baseline log and a candidate's log, no model loaded."""

from __future__ import annotations

import shutil

import pytest
from _harness import HARNESS_DATA, LM_EVAL

TEST = """
def test_candidate(rlgate, rlgate_before_rows, rlgate_after_rows):
    assert rlgate_before_rows.header["source"]["harness"] == "lm-eval"
    rlgate.assert_no_regression(rlgate_before_rows, rlgate_after_rows, n_resamples=500)


def test_paths_in_a_test(rlgate):
    rlgate.assert_no_regression({base!r}, {base!r}, n_resamples=500)
"""


def test_baseline_and_candidate_logs_gate_in_pytest(pytester: pytest.Pytester) -> None:
    base, candidate = LM_EVAL / "base", LM_EVAL / "candidate"
    pytester.makepyfile(test_logs=TEST.format(base=str(base)))
    result = pytester.runpytest(f"--rlgate-baseline={base}", f"--rlgate-candidate={candidate}",
                                "--rlgate-read=filter=none", "--rlgate-category-key=doc.category", "-p",
                                "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*RegressionError: 2 of 4 comparisons regressed: pass@1 in with_id, pass@1 in "
                                 "overall*"])
    assert "regressed in no_id" not in result.stdout.str()


def test_a_bad_read_option_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_logs=TEST.format(base=str(LM_EVAL / "base")))
    result = pytester.runpytest(f"--rlgate-baseline={LM_EVAL / 'base'}", f"--rlgate-candidate={LM_EVAL / 'candidate'}",
                                "-p", "no:cacheprovider", "-k", "candidate")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*baseline=*base (found)*"])
    result.stdout.fnmatch_lines(["*--rlgate-baseline: *task 'rg_refund' was scored under 2 filters (first-line, "
                                 "none); choose one with --filter NAME*"])
    assert "Traceback" not in result.stdout.str()
    bad = pytester.runpytest("--rlgate-format=csv")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--rlgate-format 'csv': choose one of rlgate, eee, inspect, lm-eval*"])
    unknown = pytester.runpytest("--rlgate-read=colour=red")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*--rlgate-read colour: no reader declares it (known: filter, findings, provider)*"])


def test_the_old_filter_flag_still_reads_with_a_deprecation_warning(pytester: pytest.Pytester) -> None:
    base, candidate = LM_EVAL / "base", LM_EVAL / "candidate"
    pytester.makepyfile(test_logs=TEST.format(base=str(base)))
    result = pytester.runpytest(f"--rlgate-baseline={base}", f"--rlgate-candidate={candidate}", "--rlgate-filter=none",
                                "--rlgate-category-key=doc.category", "-p", "no:cacheprovider", "-k", "candidate",
                                "-W", "always::DeprecationWarning")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RegressionError: 2 of 4 comparisons regressed*"])


CANDIDATE_TEST = """
def test_candidate(rlgate, rlgate_before_rows, rlgate_after_rows):
    rlgate.assert_no_regression(rlgate_before_rows, rlgate_after_rows, n_resamples=500)
"""


def test_a_path_option_is_read_from_the_folder_pytest_was_started_in(pytester: pytest.Pytester, monkeypatch) -> None:
    """From a subfolder, ``--rlgate-baseline ../eee/base`` (a separate argument, which pytest also takes for a
    path and so puts the rootdir above the subfolder) names the folder the shell completed, and a path that
    does not exist gets the fix that applies to its name."""
    for side in ("base", "candidate"):
        shutil.copytree(HARNESS_DATA / "eee" / side, pytester.path / "eee" / side)
    sub = pytester.mkdir("pt")
    (sub / "test_candidate.py").write_text(CANDIDATE_TEST, encoding="utf-8")
    monkeypatch.chdir(sub)
    read = ("--rlgate-candidate", "../eee/candidate", "--rlgate-score-key", "contains,acc", "-p", "no:cacheprovider")
    result = pytester.runpytest("test_candidate.py", "--rlgate-baseline", "../eee/base", *read)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*baseline=../eee/base (found)*", "*RegressionError: *regressed*rg_refund*"])
    folder = pytester.runpytest("test_candidate.py", "--rlgate-baseline", "../eee/nowhere", *read)
    folder.assert_outcomes(errors=1)
    folder.stdout.fnmatch_lines([f"*--rlgate-baseline ../eee/nowhere: no such file or folder {pytester.path}/eee/"
                                 f"nowhere (a relative path is read from the folder pytest was started from, {sub}); "
                                 "point it at a row file or an eval harness's output*"])
    assert "--rlgate-update-baseline" not in folder.stdout.str()  # a folder is not created by updating
    row_file = pytester.runpytest("test_candidate.py", "--rlgate-baseline", "../eee/base.jsonl.gz", *read)
    row_file.assert_outcomes(errors=1)
    row_file.stdout.fnmatch_lines(["*--rlgate-baseline ../eee/base.jsonl.gz: no such file or folder *; create it "
                                   "with --rlgate-update-baseline, or `rlgate baseline save RUN_DIR --out "
                                   "../eee/base.jsonl.gz` from a finished run*"])
