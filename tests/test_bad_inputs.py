"""Bad inputs to the CLI and the training API (issue 11): exit codes CI can trust, refused early.

1 means "the gate failed" and nothing else; a usage or data problem is 2 with one line
naming the flag or path; an uncaught exception is 3 with one line naming the log file that
holds the traceback; Ctrl-C is 130. Numeric flags and output paths are refused by argparse
(``pytest_rlgate.options``) before anything loads, and the knobs' API refuses the same
values, NaN included. Names that are code (``--reward``, vLLM's ``trust_remote_code``) are
refused or off unless asked for explicitly.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_rlgate import cli
from pytest_rlgate.cli import report as report_command
from pytest_rlgate.errors import DataError, RlgateWarning, UsageError
from pytest_rlgate.options import Number, output_dir, output_file, path_problem
from pytest_rlgate.policy.sampling import VllmSampler
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.dpo import DPOKnobs


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """A file, a folder, and a path that cannot be created (it goes through a file)."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    return {"file": tmp_path / "afile", "dir": tmp_path / "adir", "under_file": tmp_path / "afile" / "sub"}


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI expecting argparse to refuse *argv*; the one line it printed."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    return err[0]


# --------------------------------------------------------------------------- exit codes


def test_an_internal_error_exits_3_naming_a_log_with_the_traceback(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(tmp_path / "cache"))

    def broken(args: object) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(report_command, "run", broken)
    assert cli.main(["report", str(tmp_path)]) == cli.EXIT_INTERNAL == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("rlgate report: internal error (ZeroDivisionError: a bug); the traceback is in ")
    log = Path(err[0].split("the traceback is in ", 1)[1].split(";", 1)[0])
    assert log.parent == tmp_path / "cache" / "logs"
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "ZeroDivisionError: a bug" in text


@pytest.mark.parametrize(
    ("raised", "code", "says"),
    [
        (UsageError("--flag 3: too big"), 2, "rlgate report: error: --flag 3: too big"),
        (DataError("corrupt", path="runs/x/gate.json"), 2, "rlgate report: error: runs/x/gate.json: corrupt"),
        (PermissionError(13, "Permission denied", "/ro/report.html"), 2,
         "rlgate report: error: /ro/report.html: Permission denied"),
        (KeyboardInterrupt(), 130, "rlgate report: interrupted"),
        (OSError("no file involved"), 3, "rlgate report: internal error (OSError: no file involved)"),
    ],
)
def test_each_kind_of_failure_has_its_own_exit_code(monkeypatch, tmp_path, capsys, raised, code, says) -> None:
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(tmp_path))

    def fails(args: object) -> int:
        raise raised

    monkeypatch.setattr(report_command, "run", fails)
    assert cli.main(["report", str(tmp_path)]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(says)


def test_the_docs_exit_code_table_lists_every_code_the_cli_has() -> None:
    gate_md = (Path(__file__).resolve().parents[1] / "docs" / "gate.md").read_text(encoding="utf-8")
    table = gate_md.split("**Exit codes.**", 1)[1].split("\n\n", 2)[1]
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, flags=re.MULTILINE)}
    assert documented == {0} | {value for name, value in vars(cli).items() if name.startswith("EXIT_")}


def test_a_real_process_exits_2_without_a_traceback(places) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", "train", "grpo", "--beta", "nan"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "argument --beta: nan is not a finite number" in done.stderr


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["train", "grpo", "--beta", "nan"], "--beta"),
        (["train", "grpo", "--epsilon-high", "nan"], "--epsilon-high"),
        (["train", "grpo", "--kl-budget", "nan"], "--kl-budget"),
        (["train", "grpo", "--kl-budget", "-0.5"], "--kl-budget"),
        (["train", "grpo", "--learning-rate", "inf"], "--learning-rate"),
        (["train", "grpo", "--temperature", "-inf"], "--temperature"),
        (["train", "grpo", "--steps", str(10**12)], "--steps"),
        (["train", "grpo", "--steps", "9" * 5000], "--steps"),
        (["train", "grpo", "--max-new-tokens", str(10**9)], "--max-new-tokens"),
        (["train", "grpo", "--lora-rank", str(10**6)], "--lora-rank"),
        (["train", "grpo", "--lora-rank", "0"], "--lora-rank"),
        (["train", "grpo", "--num-generations", str(10**9)], "--num-generations"),
        (["train", "grpo", "--k", "2.5"], "--k"),
        (["train", "dpo", "--beta", "nan"], "--beta"),
        (["train", "dpo", "--beta", "0"], "--beta"),
        (["train", "dpo", "--min-margin", "nan"], "--min-margin"),
        (["train", "dpo", "--constructed-cap", "inf"], "--constructed-cap"),
        (["train", "dpo", "--max-length", str(10**9)], "--max-length"),
        (["demo", "--steps", "0"], "--steps"),
    ],
)
def test_bad_numbers_are_refused_while_parsing(argv, flag, capsys) -> None:
    line = _refused(argv, capsys)
    assert f"argument {flag}: " in line and "expected " in line


@pytest.mark.parametrize(
    ("knobs", "flag"),
    [
        (lambda: GRPOKnobs(beta=math.nan), "--beta"),
        (lambda: GRPOKnobs(epsilon_high=math.nan), "--epsilon-high"),
        (lambda: GRPOKnobs(kl_budget=math.nan), "--kl-budget"),
        (lambda: GRPOKnobs(learning_rate=math.inf), "--learning-rate"),
        (lambda: GRPOKnobs(max_new_tokens=10**9), "--max-new-tokens"),
        (lambda: GRPOKnobs(lora_rank=10**6), "--lora-rank"),
        (lambda: GRPOKnobs(steps=True), "--steps"),
        (lambda: DPOKnobs(beta=math.nan), "--beta"),
        (lambda: DPOKnobs(min_margin=math.nan), "--min-margin"),
        (lambda: DPOKnobs(pairs_per_step=math.nan), "--pairs-per-step"),
    ],
)
def test_the_api_refuses_what_the_cli_refuses(knobs, flag) -> None:
    with pytest.raises(UsageError) as info:
        knobs().resolve()
    assert str(info.value).startswith(f"{flag} ") and "\n" not in str(info.value)


def test_a_number_range_is_finite_explicit_and_typed() -> None:
    steps = Number(1, 100, "40", integer=True)
    share = Number(0, 1, "0.2", low_open=True)
    assert steps("7") == 7 and share("1") == 1.0 and share.problem(0.5) is None
    for bad in (math.nan, math.inf, -math.inf, 0.0, 1.5, True, "0.5", None):
        assert share.problem(bad) is not None, bad
    assert steps.problem(2.0) is not None  # an integer knob takes an int
    assert steps.describe() == "an integer in [1, 100], e.g. 40"
    assert share.describe() == "a number in (0, 1], e.g. 0.2"
    with pytest.raises(ValueError, match="not a finite number"):
        share.check(math.nan)


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("argv", "kind", "says"),
    [
        (["eval", "--run", "r", "--out", "{dir}"], "dir", "is a folder; name a file inside it"),
        (["eval", "--run", "r", "--out", "{under_file}"], "under_file", "is a file, not a folder"),
        (["report", "r", "--out", "{dir}"], "dir", "is a folder; name a file inside it"),
        (["report", "r", "--out", "{under_file}"], "under_file", "cannot be created"),
        (["policy", "build", "--out", "{file}"], "file", "is a file, not a folder"),
        (["demo", "--runs-dir", "{file}"], "file", "is a file, not a folder"),
        (["demo", "--runs-dir", "{under_file}"], "under_file", "cannot be created"),
    ],
)
def test_output_paths_are_checked_before_any_work(argv, kind, says, places, capsys) -> None:
    line = _refused([a.format(**places) for a in argv], capsys)
    assert str(places[kind]) in line and says in line


def test_runs_dir_is_checked_by_the_knobs(places, capsys) -> None:
    assert cli.main(["train", "grpo", "--runs-dir", str(places["file"])]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rlgate train: error: --runs-dir {str(places['file'])!r}: is a file, not a folder; name a folder " \
                  "(it is created if missing)"


def test_path_problem_names_each_way_a_path_cannot_be_written(places, tmp_path) -> None:
    assert path_problem(tmp_path / "new" / "deeper" / "x.json", directory=False) is None
    assert path_problem(places["dir"], directory=True) is None
    assert "is a folder" in path_problem(places["dir"], directory=False)
    assert "is a file" in path_problem(places["file"], directory=True)
    assert f"{places['file']} is a file" in path_problem(places["under_file"] / "x", directory=False)
    assert output_file(str(tmp_path / "x.json")) == tmp_path / "x.json"
    assert output_dir(str(places["dir"])) == places["dir"]
    if os.geteuid() != 0:  # root may write anywhere
        places["dir"].chmod(0o500)
        try:
            assert "not writable" in path_problem(places["dir"] / "x.json", directory=False)
        finally:
            places["dir"].chmod(0o700)


# --------------------------------------------------------------------------- trust


def test_a_training_reward_that_evaluates_text_is_refused(capsys) -> None:
    assert cli.main(["train", "grpo", "--reward", "builtins:eval"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rlgate train: error: --reward 'builtins:eval': it evaluates or opens what it is given; name a "
                   "score(reply, case) function, e.g. mypkg.rewards:score")


def test_a_training_reward_module_that_exits_on_import_is_a_usage_error(tmp_path, monkeypatch) -> None:
    (tmp_path / "rlgate_exiting_reward.py").write_text("raise SystemExit(4)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UsageError, match="importing rlgate_exiting_reward raised SystemExit: 4"):
        GRPOKnobs(reward="rlgate_exiting_reward:score").resolve()


def test_vllm_runs_no_remote_code_unless_asked_for_explicitly(monkeypatch) -> None:
    engines: list[dict[str, Any]] = []
    fake = types.ModuleType("vllm")
    fake.LLM = lambda **kwargs: engines.append(kwargs)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    VllmSampler("some/model", gpu_memory_utilization=0.5)
    assert engines[-1] == {"model": "some/model", "trust_remote_code": False, "gpu_memory_utilization": 0.5}
    with pytest.warns(RlgateWarning, match="trust_remote_code=True: vLLM runs Python code from some/model"):
        VllmSampler("some/model", trust_remote_code=True)
    assert engines[-1]["trust_remote_code"] is True
    with pytest.raises(UsageError, match="trust_remote_code='yes': pass True or False"):
        VllmSampler("some/model", trust_remote_code="yes")  # type: ignore[arg-type]
