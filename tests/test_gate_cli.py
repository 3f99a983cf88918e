"""``rlgate gate``: exit codes, the printed table, --json, and every bad input as exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_gate import NO_ID_BALANCED, NO_ID_COLLAPSE, seed_tables, table_rows
from test_rows import BAD_FILES, lines_file

from pytest_rlgate import write_rows
from pytest_rlgate.cli import main


@pytest.fixture
def files(tmp_path: Path):
    def make(no_id_after: list[int]) -> tuple[str, str]:
        before, after = seed_tables(no_id_after)
        return (str(write_rows(tmp_path / "before.jsonl", before)), str(write_rows(tmp_path / "after.jsonl", after)))

    return make


def test_a_regression_exits_1_and_prints_the_table(files, tmp_path: Path, capsys) -> None:
    before, after = files(NO_ID_COLLAPSE)
    out_json = tmp_path / "out" / "gate.json"
    assert main(["gate", before, after, "--json", str(out_json), "--seed", "3", "--resamples", "2000"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("gate FAILED (1 failure): 8 comparisons: 1 regressed")
    assert "2000 resamples, seed 3" in out.splitlines()[1]
    assert any("no_id" in line and "REGRESSED" in line for line in out.splitlines())
    assert "rule: fail if pass@1, marker:well_formed regressed" in out
    assert "FAIL: pass@1 regressed in no_id" in out
    assert "warning: guard 'well_formed' is constant" in out
    data = json.loads(out_json.read_text())
    assert data["passed"] is False and data["seed"] == 3 and data["n_resamples"] == 2000
    no_id = next(c for c in data["comparisons"] if c["group"] == "no_id" and c["metric"] == "pass@1")
    assert no_id["verdict"] == "regressed" and no_id["n_units"] == 15


def test_a_pass_exits_0(files, capsys) -> None:
    before, after = files(NO_ID_BALANCED)
    assert main(["gate", before, after]) == 0
    assert capsys.readouterr().out.startswith("gate PASSED")


def test_stricter_options_flip_a_pass(files, capsys) -> None:
    before, after = files(NO_ID_BALANCED)
    assert main(["gate", before, after, "--max-drop", "0.05"]) == 1
    assert main(["gate", before, after, "--fail-on-inconclusive"]) == 1
    assert main(["gate", before, after, "--method", "t", "--holm", "--guard", "tool_call", "--guard", "well_formed"]) in (0, 1)
    out = capsys.readouterr().out
    assert "marker:tool_call" in out and "Holm-adjusted" in out and "paired t" in out


def test_guards_can_be_switched_off(files, capsys) -> None:
    before, after = files(NO_ID_BALANCED)
    assert main(["gate", before, after, "--guard", ""]) == 0
    assert "marker:" not in capsys.readouterr().out


def test_declared_category_missing_fails(files, capsys) -> None:
    before, after = files(NO_ID_BALANCED)
    assert main(["gate", before, after, "--category", "refunds_abroad"]) == 1
    assert "declared category 'refunds_abroad' is missing from both sides" in capsys.readouterr().out


@pytest.mark.parametrize(("lines", "message"), BAD_FILES)
def test_every_bad_file_is_exit_2_with_one_line(tmp_path: Path, capsys, lines: list[str], message: str) -> None:
    bad = lines_file(tmp_path, *lines, name="bad.jsonl", newline="truncated" not in message)
    good = write_rows(tmp_path / "good.jsonl", table_rows("no_id", [0, 1, 2]))
    assert main(["gate", str(bad), str(good)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rlgate gate: error: {bad}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--confidence", "1.5"], "argument --confidence: expected a value in [0, 1)"),
        (["--confidence", "0"], "expected a level in (0, 1)"),
        (["--resamples", "10"], "use at least 100 resamples"),
        (["--resamples", "many"], "expected an integer"),
        (["--method", "bca"], "argument --method: invalid choice"),
        (["--margin", "x"], "expected a number"),
        (["--by", "policy"], "argument --by: invalid choice"),
    ],
)
def test_bad_options_exit_2(files, capsys, args: list[str], message: str) -> None:
    before, after = files(NO_ID_BALANCED)
    with pytest.raises(SystemExit) as info:
        main(["gate", before, after, *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_missing_file_and_unpaired_rows_exit_2(tmp_path: Path, capsys) -> None:
    good = str(write_rows(tmp_path / "good.jsonl", table_rows("no_id", [0] * 8)))
    assert main(["gate", str(tmp_path / "nope.jsonl"), good]) == 2
    assert "before row file" in capsys.readouterr().err
    short = str(write_rows(tmp_path / "short.jsonl", table_rows("no_id", [0] * 3)))
    assert main(["gate", good, short]) == 2
    err = capsys.readouterr().err
    assert "do not pair: 5 unit(s) of" in err and "'no_id-3' (no_id)" in err


def test_the_installed_command_never_prints_a_traceback(tmp_path: Path) -> None:
    bad = lines_file(tmp_path, '{"prompt": "x"', name="bad.jsonl", newline=False)
    proc = subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", "gate", str(bad), str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"rlgate gate: error: {bad}:1: truncated line (the file ends mid-row): " \
                                  "Expecting ',' delimiter: line 1 column 15 (char 14)"


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [("bench_stats.py", ["--units", "40", "--repeat", "1"], "speed-up"),
     ("bench_gate_cli.py", ["--rows", "2000"], "rlgate gate: exit 1")],
)
def test_benchmark_scripts_run(tmp_path: Path, script: str, args: list[str], expect: str) -> None:
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / script
    extra = ["--dir", str(tmp_path)] if script == "bench_gate_cli.py" else []
    proc = subprocess.run([sys.executable, str(bench), *args, *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout
