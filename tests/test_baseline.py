"""Stored baselines through pytest: --rlgate-baseline, its ini twin from a subfolder, --rlgate-update-baseline.

The suites run in pytester with ``rlgate_after_rows`` replaced by a candidate's stored rows
(the tiny-policy training path has its own tests) and with an adapter factory that fails
the test if anything asks it for a model: the before side of a stored-baseline gate must
never need one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gate import NO_ID_BALANCED, NO_ID_COLLAPSE, seed_tables

from pytest_rlgate import load_env, load_rows, write_rows
from pytest_rlgate.data import row_header

BASELINE = "baselines/release.jsonl.gz"

CONFTEST = '''
import os, pytest
from pytest_rlgate import load_rows

@pytest.fixture
def rlgate_after_rows():
    return load_rows(os.environ["RLGATE_TEST_CANDIDATE"])

class _Factory:
    def rows(self, adapter, side):
        assert side == "before"
        return load_rows(os.environ["RLGATE_TEST_BASE"])

@pytest.fixture(scope="session")
def rlgate_adapter_factory():
    if "RLGATE_TEST_BASE" not in os.environ:
        raise AssertionError("no model may be loaded for a stored baseline")
    return _Factory()

@pytest.fixture
def rlgate_adapter():
    if "RLGATE_TEST_BASE" not in os.environ:
        raise AssertionError("no adapter may be made for a stored baseline")
    return "adapter"
'''

GATED = '''
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

def test_candidate(rlgate, rlgate_before_rows, rlgate_after_rows):
    assert rlgate_before_rows.header["policy"] == "release"
    rlgate.assert_no_regression(rlgate_before_rows, rlgate_after_rows)
'''

REFUND = row_header(load_env("refund"), prompts_fingerprint="sha256:holdout", temperature=0.8, top_p=0.95, seed=17,
                    k=4)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project with a stored release baseline, a passing and a regressing candidate."""
    before, collapse = seed_tables(NO_ID_COLLAPSE)
    _, balanced = seed_tables(NO_ID_BALANCED)
    write_rows(pytester.path / BASELINE, before, header={**REFUND, "policy": "release"})
    write_rows(pytester.path / "candidates" / "good.jsonl", balanced, header={**REFUND, "policy": "good"})
    write_rows(pytester.path / "candidates" / "bad.jsonl", collapse, header={**REFUND, "policy": "bad"})
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_gated=GATED)
    candidate(pytester, monkeypatch, "good")
    return pytester


def candidate(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    path = pytester.path / "candidates" / f"{name}.jsonl"
    monkeypatch.setenv("RLGATE_TEST_CANDIDATE", str(path))
    return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rlgate-resamples", "1000", *args)


def test_before_rows_come_from_the_stored_baseline_without_a_model(project: pytest.Pytester) -> None:
    result = run(project, "--rlgate-baseline", BASELINE)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"rlgate: baseline={BASELINE} (found)"])
    assert "rlgate: baseline" not in run(project).stdout.str()  # no header line without a baseline


def test_the_ini_setting_resolves_against_the_rootdir_from_a_subfolder(project: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeini(f"[pytest]\nrlgate_baseline = {BASELINE}\n")
    sub = project.mkdir("suite")
    (project.path / "test_gated.py").rename(sub / "test_gated.py")
    monkeypatch.chdir(sub)
    result = run(project)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"rlgate: baseline={BASELINE} (found)"])


def test_row_paths_in_a_gate_resolve_against_the_rootdir(project: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeini("[pytest]\n")
    sub = project.mkdir("suite")
    (sub / "test_paths.py").write_text(
        "def test_paths(rlgate):\n"
        f"    rlgate.assert_no_regression({BASELINE!r}, 'candidates/good.jsonl', n_resamples=1000)\n",
        encoding="utf-8")
    monkeypatch.chdir(sub)
    result = project.runpytest_inprocess("-p", "no:cacheprovider", "-W", "ignore::pytest_rlgate.RlgateWarning",
                                         "test_paths.py")
    result.assert_outcomes(passed=1)


def test_a_missing_baseline_fails_with_the_fix(project: pytest.Pytester) -> None:
    result = run(project, "--rlgate-baseline", "baselines/none.jsonl")
    result.assert_outcomes(errors=1)  # at setup, like any fixture that cannot provide its value
    result.stdout.fnmatch_lines(["rlgate: baseline=baselines/none.jsonl (missing)",
                                 "*rlgate: --rlgate-baseline baselines/none.jsonl: no such file or folder *; create it "
                                 "with --rlgate-update-baseline, or `rlgate baseline save RUN_DIR --out "
                                 "baselines/none.jsonl` from a finished run*"])


def test_a_baseline_graded_by_another_reward_is_refused(project: pytest.Pytester) -> None:
    stale = load_rows(project.path / BASELINE)
    write_rows(project.path / BASELINE, stale, header={**stale.header, "env_fingerprint": "sha256:0ld"})
    result = run(project, "--rlgate-baseline", BASELINE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*was graded by refund sha256:0ld but <after rows> was graded by refund sha256:*"
                                 "the reward changed between the sides*rlgate regrade*"])


def test_update_replaces_the_baseline_with_a_passing_candidate(project: pytest.Pytester) -> None:
    result = run(project, "--rlgate-baseline", BASELINE, "--rlgate-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        f"rlgate: baseline={BASELINE} (found) --rlgate-update-baseline (a passing candidate replaces it)",
        "*= rlgate: baseline =*",
        f"baseline {BASELINE} updated with 652 rows of test_gated.py::test_candidate (env refund sha256:*)",
    ])
    stored = load_rows(project.path / BASELINE)
    good = load_rows(project.path / "candidates" / "good.jsonl")
    assert stored == good and stored.header == good.header
    # the next gate reads the new baseline (its header says policy "good", so the test now fails on that)
    run(project, "--rlgate-baseline", BASELINE).assert_outcomes(failed=1)


def test_a_failed_gate_leaves_the_baseline_untouched_and_says_so(project: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    candidate(project, monkeypatch, "bad")
    before = (project.path / BASELINE).read_bytes()
    result = run(project, "--rlgate-baseline", BASELINE, "--rlgate-update-baseline")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"baseline {BASELINE} left untouched: test_gated.py::test_candidate: the test "
                                 "failed and 1 of its 1 gate(s) failed"])
    assert (project.path / BASELINE).read_bytes() == before


def test_a_failed_gate_in_a_passing_test_still_refuses_the_update(project: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    candidate(project, monkeypatch, "bad")
    project.makepyfile(test_gated='''
def test_candidate(rlgate, rlgate_before_rows, rlgate_after_rows):
    assert not rlgate.compare(rlgate_before_rows, rlgate_after_rows).passed
''')
    before = (project.path / BASELINE).read_bytes()
    result = run(project, "--rlgate-baseline", BASELINE, "--rlgate-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"baseline {BASELINE} left untouched: *: 1 of its 1 gate(s) failed"])
    assert (project.path / BASELINE).read_bytes() == before


def test_update_without_a_baseline_path_is_a_usage_error(project: pytest.Pytester) -> None:
    result = run(project, "--rlgate-update-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rlgate-update-baseline needs --rlgate-baseline PATH*"])


def test_update_creates_a_missing_baseline_from_a_gate_against_the_sampled_base(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    base = project.path / "base.jsonl"
    (project.path / BASELINE).rename(base)
    monkeypatch.setenv("RLGATE_TEST_BASE", str(base))  # the factory "samples" the base this once
    result = run(project, "--rlgate-baseline", BASELINE, "--rlgate-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"rlgate: baseline={BASELINE} (missing) --rlgate-update-baseline*",
                                 f"baseline {BASELINE} updated with 652 rows of *"])
    assert load_rows(project.path / BASELINE).header["policy"] == "good"
