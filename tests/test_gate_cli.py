"""``rlgate gate``: exit codes, the table, --json, every bad input as exit 2; provenance, regrade, baseline save."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _calc_env import CalcEnv, calc_items, calc_reply
from report_fixtures import REFUND_ENV, make_run
from test_gate import NO_ID_BALANCED, NO_ID_COLLAPSE, seed_tables, table_rows
from test_rows import BAD_FILES, CalcV2, lines_file

from pytest_rlgate import grade_replies, load_env, load_rows, read_rows, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data import read_header, row_header


@pytest.fixture
def files(tmp_path: Path):
    def make(no_id_after: list[int]) -> tuple[str, str]:
        before, after = seed_tables(no_id_after)
        return (str(write_rows(tmp_path / "before.jsonl", before)), str(write_rows(tmp_path / "after.jsonl", after)))

    return make


def test_a_regression_exits_1_and_prints_the_table(files, tmp_path: Path, capsys) -> None:
    before, after = files(NO_ID_COLLAPSE)
    out_json = tmp_path / "out" / "gate.json"
    assert main(["gate", before, after, "--env", "refund", "--json", str(out_json), "--bootstrap-seed", "3",
                 "--resamples", "2000"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("gate FAILED (1 failure): 12 comparisons: 1 regressed")
    assert "2,000 scenario sign flips" in out.splitlines()[1] and "seed 3" in out.splitlines()[1]
    assert any("no_id" in line and "REGRESSED" in line for line in out.splitlines())
    assert "rule: fail if pass@1, marker:well_formed, marker:argument_grounding regressed" in out
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
    argv = ["gate", before, after, "--method", "expanded", "--family-level", "0.1", "--guard", "tool_call",
            "--guard", "well_formed"]
    assert main(argv) in (0, 1)
    out = capsys.readouterr().out
    assert "marker:tool_call" in out and "held together at a 10% run-level false-fail" in out
    assert "expanded-percentile bootstrap" in out


def test_guards_can_be_switched_off(files, capsys) -> None:
    before, after = files(NO_ID_BALANCED)
    assert main(["gate", before, after, "--guard", ""]) == 0
    assert "marker:" not in capsys.readouterr().out


def test_declared_category_missing_fails(files, capsys) -> None:
    before, after = files(NO_ID_BALANCED)
    assert main(["gate", before, after, "--category", "refunds_abroad"]) == 1
    assert "declared category 'refunds_abroad' is missing from both sides" in capsys.readouterr().out


def _calc_files(tmp_path: Path, drop: str | None = None) -> tuple[str, str]:
    """A user's rows (no well_formed marker anywhere), before and after, optionally without a category."""
    items = [item for item in calc_items(per_category=4) if item["category"] != drop]
    sides = []
    for name, right in (("before", [True, False, False, False]), ("after", [True, True, True, False])):
        rows = grade_replies(items, [[calc_reply(item, ok) for ok in right] for item in items], env=CalcEnv)
        sides.append(str(write_rows(tmp_path / f"{name}.jsonl", rows)))
    return sides[0], sides[1]


def test_without_env_nothing_is_guarded(tmp_path: Path, capsys) -> None:
    before, after = _calc_files(tmp_path)
    assert main(["gate", before, after]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gate PASSED") and "marker:" not in out
    assert "rule: fail if pass@1 regressed" in out


def test_env_names_the_guards_and_the_declared_categories(tmp_path: Path, capsys) -> None:
    before, after = _calc_files(tmp_path)
    assert main(["gate", before, after, "--env", "_calc_env:CalcEnv"]) == 0
    out = capsys.readouterr().out
    assert "rule: fail if pass@1, marker:concise regressed" in out
    before, after = _calc_files(tmp_path, drop="word_problem")
    assert main(["gate", before, after, "--env", "_calc_env:CalcEnv"]) == 1
    assert "declared category 'word_problem' is missing from both sides" in capsys.readouterr().out
    assert main(["gate", before, after, "--env", "_calc_env:CalcEnv", "--category", "arithmetic"]) == 0


def test_a_bad_env_is_exit_2_with_one_line(tmp_path: Path, capsys) -> None:
    before, after = _calc_files(tmp_path)
    assert main(["gate", before, after, "--env", "no_such_module:Env"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlgate gate: error: environment 'no_such_module:Env': no module") and err.count("\n") == 1


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
        (["--confidence", "1.5"], "argument --confidence: out of range; expected a number in [0.5, 0.999]"),
        (["--confidence", "0"], "expected a number in [0.5, 0.999], e.g. 0.95"),
        (["--resamples", "10"], "expected an integer in [100, 1000000]"),
        (["--resamples", "1000000000000"], "expected an integer in [100, 1000000]"),
        (["--resamples", "many"], "expected an integer"),
        (["--bootstrap-seed", "-1"], "argument --bootstrap-seed: out of range"),
        (["--margin", "nan"], "nan is not a finite number"),
        (["--json", "."], "argument --json:"),
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
                                  "Expecting ',' delimiter (column 15); each line is one JSON value"


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [("bench_stats.py", ["--units", "40", "--repeat", "1"], "speed-up"),
     ("bench_gate_cli.py", ["--rows", "2000", "--repeat", "1"], "rlgate gate: exit 1")],
)
def test_benchmark_scripts_run(tmp_path: Path, script: str, args: list[str], expect: str) -> None:
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / script
    extra = ["--dir", str(tmp_path)] if script == "bench_gate_cli.py" else []
    proc = subprocess.run([sys.executable, str(bench), *args, *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout


# -- provenance, k per side, a changed holdout, regrade and baseline save (issue 12) ------


def _headed(tmp_path: Path, name: str, env: type, right: tuple[bool, ...] = (True, False), *,
            prompts: str = "sha256:holdout", drop: int = 0, suffix: str = ".jsonl.gz") -> str:
    """Calc rows graded by *env*, written with their header; *drop* leaves out the last units."""
    items = calc_items(per_category=4)
    items = items[: len(items) - drop]
    rows = grade_replies(items, [[calc_reply(item, ok) for ok in right] for item in items], env=env)
    header = row_header(load_env(env), prompts_fingerprint=prompts, policy=name, k=len(right))
    return str(write_rows(tmp_path / f"{name}{suffix}", rows, header=header))


def test_sides_graded_by_different_env_versions_exit_2_naming_both_and_the_fix(tmp_path: Path, capsys) -> None:
    before = _headed(tmp_path, "before", CalcEnv)
    after = _headed(tmp_path, "after", CalcV2, (True, True))
    v1, v2 = load_env(CalcEnv).fingerprint, load_env(CalcV2).fingerprint
    assert main(["gate", before, after]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"rlgate gate: error: {before} was graded by calc {v1[:19]}… but {after} was graded by "
                          f"calc {v2[:19]}…: the reward changed between the sides")
    assert "`rlgate regrade ROWS --env SPEC --out PATH`" in err and "--allow-env-change" in err


def test_allow_env_change_compares_anyway_and_says_so(tmp_path: Path, capsys) -> None:
    before = _headed(tmp_path, "before", CalcEnv)
    after = _headed(tmp_path, "after", CalcV2, (True, True))
    out_json = tmp_path / "gate.json"
    # the stricter reward fails every "I cannot tell" reply: a "regression" made by grading, not by the policy
    # (four scenarios a category: each comparison on its own, as a family of them could not reach its level)
    assert main(["gate", before, after, "--allow-env-change", "--family-level", "none", "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    assert "warning: environment changed: " in out and "(compared anyway: --allow-env-change)" in out
    data = json.loads(out_json.read_text())
    assert data["options"]["allow_env_change"] is True
    assert any(w.startswith("environment changed: ") for w in data["warnings"])
    assert data["sides"]["headers"]["after"]["env_fingerprint"] == load_env(CalcV2).fingerprint


def test_regrade_makes_a_stale_baseline_comparable(tmp_path: Path, capsys) -> None:
    before = _headed(tmp_path, "before", CalcEnv, (True, True))
    after = _headed(tmp_path, "after", CalcV2, (True, True))
    regraded = str(tmp_path / "before-v2.jsonl.gz")
    assert main(["regrade", before, "--env", "test_rows:CalcV2", "--out", regraded]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"re-scored 24 rows of {before}: graded by calc {load_env(CalcEnv).fingerprint[:15]}, "
                          f"now by calc {load_env(CalcV2).fingerprint[:15]}; pass@1 1.000 -> 0.667; wrote {regraded}")
    assert read_header(regraded)["env_fingerprint"] == load_env(CalcV2).fingerprint
    assert main(["gate", regraded, after]) == 0  # same reward on both sides now: no refusal, and flat
    assert main(["regrade", before, "--env", "_calc_env:CalcEnv", "--out", regraded]) == 0
    assert main(["regrade", str(tmp_path / "nope.jsonl"), "--env", "_calc_env:CalcEnv", "--out", regraded]) == 2
    assert "nope.jsonl: no such row file" in capsys.readouterr().err


def test_different_prompt_sets_exit_2_unless_shared_units_only(tmp_path: Path, capsys) -> None:
    before = _headed(tmp_path, "before", CalcEnv)
    after = _headed(tmp_path, "after", CalcEnv, (True, True), prompts="sha256:another", drop=2)
    assert main(["gate", before, after]) == 2
    err = capsys.readouterr().err
    assert "sampled prompt set sha256:holdout but" in err and "sampled prompt set sha256:another" in err
    assert "the holdout changed between the sides" in err and "--shared-units-only" in err
    assert main(["gate", before, after, "--shared-units-only"]) == 0
    out = capsys.readouterr().out
    assert "warning: prompt set changed: " in out
    assert f"warning: --shared-units-only: dropped 2 unit(s) of {before} and 0 of {after} that the other side lacks" \
        in out


def test_a_changed_holdout_is_an_error_unless_shared_units_only(tmp_path: Path, capsys) -> None:
    before = _headed(tmp_path, "before", CalcEnv, suffix=".jsonl")
    after = _headed(tmp_path, "after", CalcEnv, (True, True), drop=2, suffix=".jsonl")
    assert main(["gate", before, after]) == 2
    err = capsys.readouterr().err
    assert "do not pair: 2 unit(s) of" in err and "or pass --shared-units-only to gate the units both share" in err
    out_json = tmp_path / "gate.json"
    assert main(["gate", before, after, "--shared-units-only", "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text())
    assert data["sides"]["dropped_units"] == {"before": 2, "after": 0}
    overall = next(c for c in data["comparisons"] if c["group"] == "overall")
    assert overall["n_units"] == 10


def test_the_table_shows_each_sides_k_when_they_differ(tmp_path: Path, capsys) -> None:
    before = _headed(tmp_path, "before", CalcEnv, (True, False))
    after = _headed(tmp_path, "after", CalcEnv, (True, True, True, False), prompts="sha256:holdout")
    out_json = tmp_path / "gate.json"
    assert main(["gate", before, after, "--json", str(out_json)]) in (0, 1)
    out = capsys.readouterr().out
    assert "12×2→4" in out and "4×2→4" in out
    overall = json.loads(out_json.read_text())["comparisons"][0]
    assert (overall["k_before"], overall["k_after"], overall["k"]) == (2, 4, 3)
    same = _headed(tmp_path, "same", CalcEnv, (True, True))
    assert main(["gate", before, same]) in (0, 1)
    assert "12×2 " in capsys.readouterr().out


def test_the_headers_environment_is_guarded_without_env(tmp_path: Path, capsys) -> None:
    before, after = seed_tables(NO_ID_BALANCED)
    header = row_header(load_env("refund"))
    paths = [str(write_rows(tmp_path / f"{name}.jsonl.gz", rows, header=header))
             for name, rows in (("before", before), ("after", after))]
    assert main(["gate", *paths]) == 0
    assert "rule: fail if pass@1, marker:well_formed, marker:argument_grounding regressed" in capsys.readouterr().out
    calc = _headed(tmp_path, "calc", CalcEnv)  # calc is not a registered name: nothing is guarded
    assert main(["gate", calc, calc]) == 0
    assert "rule: fail if pass@1 regressed" in capsys.readouterr().out


def _finished_run(tmp_path: Path) -> Path:
    run = make_run(tmp_path, passed=True)
    (run / "adapter").mkdir()
    (run / "COMPLETE").write_text("complete\n", encoding="utf-8")
    return run


def test_baseline_save_writes_a_runs_rows_with_a_header(tmp_path: Path, capsys) -> None:
    run = _finished_run(tmp_path)
    out = tmp_path / "baselines" / "release.jsonl.gz"
    assert main(["baseline", "save", str(run), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote 208 rows (after-rows of {run}; env refund sha256:5b2f5ab")
    saved = load_rows(out)
    assert saved == list(read_rows(run / "holdout_after.jsonl"))
    assert saved.header == {**row_header(REFUND_ENV), "policy": None}  # a run from before headers: config.json's
    assert main(["baseline", "save", str(run), "--out", str(out), "--base-run", "2"]) == 0
    assert {r["eval_run"] for r in load_rows(out)} == {"before-2"}
    assert main(["gate", str(out), str(run / "holdout_after.jsonl")]) in (0, 1)
    assert main(["baseline", "save", str(run), "--out", str(out), "--base-run", "3"]) == 2
    err = capsys.readouterr().err
    assert "--base-run 3: run refund-grpo has base runs 0 to 2 (holdout_before.jsonl, " in err
