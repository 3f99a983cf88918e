"""``--base-run``: the gate a run printed, reproduced from its files by the command it prints.

A run gates its holdout against all three base runs pooled (each scenario's before mean over
12 replies, and the runs' spread as the noise floor); ``rlgate gate holdout_before.jsonl
holdout_after.jsonl`` alone read one base run and printed other numbers and other verdicts.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from report_fixtures import make_run

from pytest_rlgate.cli import main
from pytest_rlgate.gate import compare
from pytest_rlgate.gate.options import GateOptions
from pytest_rlgate.report.markdown import reproduce_command
from pytest_rlgate.train.run import ADAPTER, COMPLETE, RunFolder


def _run(root: Path) -> RunFolder:
    """A finished run folder in the shapes `rlgate train` writes (three base runs), without the training."""
    folder = make_run(root, "grpo")
    (folder / ADAPTER).mkdir()
    (folder / COMPLETE).write_text("", encoding="utf-8")
    return RunFolder.open(folder)


def _verdicts(record: dict) -> list[tuple]:
    return [(c["metric"], c["group"], c["n_units"], round(c["before"], 6), round(c["delta"], 6),
             None if c["low"] is None else round(c["low"], 6), c["verdict"], tuple(c["flags"]))
            for c in record["comparisons"]]


def test_the_printed_command_reproduces_the_runs_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "runs")
    result = run.gate_result()
    command = reproduce_command(result)
    assert "--base-run" in command and str(run.path / "holdout_before_seed18.jsonl") in command
    argv = shlex.split(command)[1:] + ["--json", str(tmp_path / "again.json")]
    code = main(argv)
    capsys.readouterr()
    again = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    assert code == (0 if run.gate["passed"] else 1)
    assert _verdicts(again) == _verdicts(run.gate)
    alone = compare(run.before_files[0], run.after_file, guards=result.options.guards)
    assert _verdicts(alone.to_dict()) != _verdicts(run.gate)  # one base run: other numbers, the defect this fixes


def test_a_base_run_must_be_another_run_of_the_same_holdout(tmp_path: Path) -> None:
    run = _run(tmp_path / "runs")
    first, second = run.before_files[:2]
    with pytest.raises(Exception, match=r"--base-run .*holdout_before.jsonl'?: eval run .* is already on the before"):
        compare(first, run.after_file, base_runs=[first])
    with pytest.raises(Exception, match=r"--base-run 'nope.jsonl': no such row file; pass another base run"):
        compare(first, run.after_file, base_runs=["nope.jsonl"])
    assert compare(first, run.after_file, base_runs=[second]).options.base_runs == (str(second),)


def test_base_runs_are_a_gate_option_on_every_door() -> None:
    spec = GateOptions.field("base_runs")
    assert spec.metadata["flag"] == "--base-run"
    assert GateOptions(base_runs=[Path("a.jsonl")]).to_argv() == ["--base-run", "a.jsonl"]
    with pytest.raises(Exception, match="base_runs must be a list of paths"):
        GateOptions(base_runs="a.jsonl")


def test_the_plugin_takes_base_runs(pytester: pytest.Pytester, tmp_path: Path) -> None:
    run = _run(tmp_path / "runs")
    pytester.makepyfile(test_plugin_base_runs=f"""
        def test_gate(rlgate):
            result = rlgate.compare({str(run.before_files[0])!r}, {str(run.after_file)!r}, guards=("well_formed",))
            assert result.options.base_runs == ({str(run.before_files[1])!r}, {str(run.before_files[2])!r})
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rlgate-base-run", str(run.before_files[1]),
                                "--rlgate-base-run", str(run.before_files[2]))
    result.assert_outcomes(passed=1)
