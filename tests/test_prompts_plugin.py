"""Prompt options, fixtures and header line (pytester), and the ``rlgate prompts`` command,
for the default environment and for a user's own (``_calc_env``)."""

from __future__ import annotations

from pathlib import Path

import _calc_env
import hypothesis  # noqa: F401 - keeps pytester runs fast (see tests/test_specs_plugin.py)
import pytest
from _calc_env import calc_items, write_calc_prompts

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import (
    balance,
    build_prompts,
    count_by_category,
    fingerprint,
    read_prompts,
    stratified_split,
    write_prompts,
)
from pytest_rlgate.environment.contract import load_env

#: the header's name of the default environment: its name and short fingerprint
ENV = f"env=refund ({load_env(None).fingerprint[:15]})"

USES_FIXTURES = """
import json, os

def test_dump(rlgate_prompts, rlgate_split):
    assert rlgate_split.train + rlgate_split.holdout  # both sides present
    with open(os.environ["RLGATE_DUMP"], "w") as f:
        json.dump({"prompts": rlgate_prompts, "train": rlgate_split.train, "holdout": rlgate_split.holdout}, f)
"""


def _dump(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, list[dict[str, object]]]]:
    import json

    target = pytester.path / "dump.json"
    pytester.makepyfile(test_uses=USES_FIXTURES)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLGATE_DUMP", str(target))
        result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    return result, json.loads(target.read_text(encoding="utf-8"))


def test_header_names_seed_size_counts_and_fingerprint(pytester: pytest.Pytester) -> None:
    result, dumped = _dump(pytester)
    short = fingerprint(build_prompts(0))[:23]
    result.stdout.fnmatch_lines([
        f"rlgate: {ENV} --rlgate-seed=0 --rlgate-size=default prompts=197 (46 no_id, 32 off_topic, 119 with_id) "
        f"fingerprint={short}"
    ])
    assert dumped["prompts"] == build_prompts(0)
    split = stratified_split(build_prompts(0))
    assert (dumped["train"], dumped["holdout"]) == (split.train, split.holdout)


def test_options_choose_seed_size_holdout_and_balance(pytester: pytest.Pytester) -> None:
    result, dumped = _dump(pytester, "--rlgate-seed=3", "--rlgate-size=small", "--rlgate-holdout=0.3",
                           "--rlgate-balance=0.25")
    items = build_prompts(3, "small")
    result.stdout.fnmatch_lines([
        f"rlgate: {ENV} --rlgate-seed=3 --rlgate-size=small --rlgate-holdout=0.3 --rlgate-balance=0.25 prompts=40 "
        f"(7 no_id, 6 off_topic, 27 with_id) fingerprint={fingerprint(items)[:23]}"
    ])
    split = stratified_split(items, 0.3)
    assert dumped["holdout"] == split.holdout  # never balanced
    assert dumped["train"] == balance(split.train, 0.25)
    assert count_by_category(dumped["train"])["no_id"] > count_by_category(split.train)["no_id"]


def test_ini_settings_are_the_defaults_and_the_command_line_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrlgate_seed = 5\nrlgate_size = small\n")
    result, dumped = _dump(pytester, "--rlgate-seed=6")
    result.stdout.fnmatch_lines([f"rlgate: {ENV} --rlgate-seed=6 --rlgate-size=small prompts=40 *"])
    assert dumped["prompts"] == build_prompts(6, "small")


def test_a_prompts_file_replaces_the_template_set(pytester: pytest.Pytester) -> None:
    items = build_prompts(2, "small")
    write_prompts(pytester.path / "frozen" / "prompts.jsonl", items)
    pytester.makeini("[pytest]\nrlgate_prompts_file = frozen/prompts.jsonl\n")
    result, dumped = _dump(pytester)
    result.stdout.fnmatch_lines([f"rlgate: {ENV} --rlgate-prompts-file=*frozen/prompts.jsonl prompts=40 (7 no_id, 6 "
                                 f"off_topic, 27 with_id) fingerprint={fingerprint(items)[:23]}"])
    assert dumped["prompts"] == items


def test_a_bad_prompts_file_fails_the_tests_that_use_it_not_the_session(pytester: pytest.Pytester) -> None:
    (pytester.path / "bad.jsonl").write_text('{"prompt": "fine refund"}\nnot json\n', encoding="utf-8")
    pytester.makepyfile(test_x="def test_uses(rlgate_prompts): pass\ndef test_other(): pass\n")
    result = pytester.runpytest("--rlgate-prompts-file", "bad.jsonl")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["rlgate: env=refund * --rlgate-prompts-file=*bad.jsonl (no prompt set: *bad.jsonl:2: "
                                 "1 bad line(s)*",
                                 "*rlgate: *bad.jsonl:2: 1 bad line(s): line 2: not valid JSON*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_a_split_that_misses_a_category_is_an_error_of_the_tests_using_it(pytester: pytest.Pytester) -> None:
    (pytester.path / "p.jsonl").write_text('{"prompt": "refund please"}\n{"prompt": "check ORD-1234"}\n'
                                           '{"prompt": "check ORD-1235"}\n', encoding="utf-8")
    pytester.makepyfile(test_x="def test_uses(rlgate_split): pass\n")
    result = pytester.runpytest("--rlgate-prompts-file", "p.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the holdout would have no no_id, off_topic prompts*"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rlgate-size=huge"], "*--rlgate-size / rlgate_size 'huge': environment refund writes sizes small, "
                                 "default, large*"),
        (["--rlgate-holdout=1.5"], "*expected a number between 0 and 1 (exclusive), got '1.5'*"),
        (["--rlgate-balance=x"], "*expected a share in [[]0, 1), e.g. 0.25, got 'x'*"),
        (["--rlgate-seed=abc"], "*--rlgate-seed: invalid int value: 'abc'*"),
    ],
)
def test_bad_option_values_are_usage_errors(pytester: pytest.Pytester, args: list[str], needle: str) -> None:
    result = pytester.runpytest(*args)
    result.stderr.fnmatch_lines([needle])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrlgate_size = huge\n")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["*rlgate_size 'huge': environment refund writes sizes small, default, large*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# --------------------------------------------------------------------------- rlgate prompts


def test_cli_writes_three_files_and_prints_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["prompts", "--prompt-seed", "0", "--balance", "0.25", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    items = build_prompts(0)
    split = stratified_split(items)
    train = balance(split.train, 0.25)
    assert read_prompts(out / "prompts.jsonl") == items
    assert read_prompts(out / "train.jsonl", repeats=True) == train
    assert read_prompts(out / "holdout.jsonl") == split.holdout
    lines = printed.splitlines()
    assert lines[0] == f"rlgate prompts --prompt-seed 0 --size default --split stratified --balance 0.25 -> {out}"
    assert lines[1] == (f"environment: refund v{load_env(None).version} {load_env(None).fingerprint}; held out: "
                        "no_id 0.65, off_topic 0.75, with_id 0.2")
    assert lines[2].startswith("decontamination: dropped 0 of 119 train prompts (its word 8-grams cover >= 0.8")
    assert lines[3].split() == ["file", "prompts", "no_id", "off_topic", "with_id", "scenarios", "fingerprint"]
    assert lines[5].split() == ["prompts.jsonl", "197", "46", "32", "119", "197", fingerprint(items)]
    assert lines[6].split() == ["train.jsonl", "191", "48", "48", "95", "119", fingerprint(train)]
    assert lines[7].split() == ["holdout.jsonl", "78", "30", "24", "24", "78", fingerprint(split.holdout)]


def test_cli_is_byte_identical_across_runs_and_splits_a_prompts_file(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompts", "--size", "small", "--out-dir", str(tmp_path / "a")]) == 0
    assert main(["prompts", "--size", "small", "--out-dir", str(tmp_path / "b")]) == 0
    for name in ("prompts.jsonl", "train.jsonl", "holdout.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert main(["prompts", "--prompts-file", str(tmp_path / "a" / "prompts.jsonl"), "--split", "plain",
                 "--out-dir", str(tmp_path / "c")]) == 0
    assert (tmp_path / "c" / "prompts.jsonl").read_bytes() == (tmp_path / "a" / "prompts.jsonl").read_bytes()
    assert "--split plain" in capsys.readouterr().out


def test_cli_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n", encoding="utf-8")
    assert main(["prompts", "--prompts-file", str(bad), "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlgate prompts: error: {bad}:1: 1 bad line(s)") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit) as exc:
        main(["prompts", "--holdout", "0", "--out-dir", str(tmp_path)])
    assert exc.value.code == 2


def test_cli_plain_split_never_relabels_a_users_lines(tmp_path: Path) -> None:
    mine = tmp_path / "mine.jsonl"
    lines = [{"prompt": f"please check ORD-40{i:02d}", "category": "off_topic", "case": {"order_id": None},
              "scenario_id": f"s{i}"} for i in range(12)]
    write_prompts(mine, lines)
    assert main(["prompts", "--prompts-file", str(mine), "--split", "plain", "--out-dir", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "prompts.jsonl").read_bytes() == mine.read_bytes()
    both = read_prompts(tmp_path / "o" / "train.jsonl") + read_prompts(tmp_path / "o" / "holdout.jsonl")
    assert sorted(both, key=lambda i: i["scenario_id"]) == sorted(lines, key=lambda i: i["scenario_id"])


# --------------------------------------------------------------------------- a user's own environment

CALC = "_calc_env:CalcEnv"


def test_cli_splits_a_users_file_by_the_users_categories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_calc_prompts(tmp_path / "calc.jsonl")
    out = tmp_path / "out"
    assert main(["prompts", "--env", CALC, "--prompts-file", str(path), "--out-dir", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"rlgate prompts --env {CALC} --prompts-file {path} --split stratified -> {out}"
    assert lines[1] == f"environment: calc v0 {load_env(CALC).fingerprint}; held out: 0.2"
    assert lines[2].startswith("decontamination: dropped 0 of 9 train prompts")
    assert lines[3].split() == ["file", "prompts", "arithmetic", "unanswerable", "word_problem", "scenarios",
                                "fingerprint"]
    assert lines[5].split()[:6] == ["prompts.jsonl", "15", "5", "5", "5", "15"]
    assert lines[7].split()[:6] == ["holdout.jsonl", "6", "2", "2", "2", "6"]
    assert read_prompts(out / "prompts.jsonl", env=CALC) == calc_items()
    holdout = read_prompts(out / "holdout.jsonl", env=CALC)
    assert all(item in calc_items() for item in holdout)  # cases and categories as the user wrote them


def test_cli_an_environment_without_a_writer_needs_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompts", "--env", CALC, "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlgate prompts: error: environment calc writes no prompts of its own: pass a prompts file")
    assert err.count("\n") == 1 and not (tmp_path / "o").exists()


def _calc_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(calcenv=Path(_calc_env.__file__).read_text(encoding="utf-8"))
    pytester.syspathinsert()
    write_calc_prompts(pytester.path / "calc.jsonl")


def test_fixtures_and_header_follow_the_session_environment(pytester: pytest.Pytester) -> None:
    _calc_project(pytester)
    result, dumped = _dump(pytester, "--rlgate-env=calcenv:CalcEnv", "--rlgate-prompts-file=calc.jsonl")
    env = load_env("calcenv:CalcEnv")
    result.stdout.fnmatch_lines([
        f"rlgate: env=calc ({env.fingerprint[:15]}) --rlgate-env=calcenv:CalcEnv --rlgate-prompts-file=*calc.jsonl "
        f"prompts=15 (5 arithmetic, 5 unanswerable, 5 word_problem) fingerprint={fingerprint(calc_items())[:23]}"
    ])
    assert dumped["prompts"] == calc_items()
    assert count_by_category(dumped["holdout"]) == {"arithmetic": 2, "unanswerable": 2, "word_problem": 2}


def test_an_environment_without_a_writer_fails_only_the_tests_that_need_prompts(pytester: pytest.Pytester) -> None:
    _calc_project(pytester)
    pytester.makepyfile(test_x="def test_uses(rlgate_prompts): pass\ndef test_other(): pass\n")
    result = pytester.runpytest("--rlgate-env=calcenv:CalcEnv")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "rlgate: env=calc * --rlgate-env=calcenv:CalcEnv --rlgate-seed=0 --rlgate-size=default (no prompt set: "
        "environment calc writes no prompts of its own*",
        "*rlgate: environment calc writes no prompts of its own: pass a prompts file*",
    ])
