"""Values that are almost right are refused, and each message points at the thing to fix.

Numbers at the edge of a flag's range, a prompt file with NaN or a repeated prompt, a run's
recorded knobs of the wrong type, one after file passed as two training seeds, a guarded
marker some replies lack; and the messages: ``baseline save --out <file>/x``, a folder as
``--rlgate-baseline``, a baseline fixture's error printed once, the probe table's hacks not
tried, what ``--keep`` dropped when the rest cannot be split.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _calc_env import CalcEnv, calc_items
from test_recipe_gate import side

from pytest_rlgate import DataError, UsageError, grade_replies, load_env, probe_reward, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import read_prompts


@pytest.fixture
def pair(tmp_path: Path) -> tuple[str, str]:
    return str(write_rows(tmp_path / "before.jsonl", side(30, 2))), str(write_rows(tmp_path / "after.jsonl",
                                                                                    side(30, 2)))


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exit 2
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize(("flag", "value"), [
    ("--confidence", "1e-320"), ("--confidence", "5e-324"), ("--confidence", "0.3"), ("--confidence", "1"),
    ("--confidence", "nan"), ("--confidence", "1e400"), ("--confidence", "9" * 5000), ("--resamples", "1e400"),
    ("--resamples", "10" + "0" * 400), ("--margin", "1e-320"), ("--margin", "-0.1"), ("--bootstrap-seed", "-1"),
    ("--bootstrap-seed", str(2**32)),
])
def test_numbers_at_the_edge_of_a_flag_are_refused_in_one_line(pair: tuple[str, str], flag: str, value: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit(["gate", *pair, flag, value], capsys)
    assert code == 2 and err.count("\n") == 1 and flag in err and len(err) < 400, err


def test_the_same_after_file_twice_is_not_two_training_seeds(pair: tuple[str, str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    before, after = pair
    code, err = _exit(["gate", before, after, str(Path(after).parent / "." / Path(after).name)], capsys)
    assert code == 2 and "after side 2" in err and "is after side 1 again" in err, err


@pytest.mark.parametrize(("line", "says"), [
    ('{"prompt": "What is 2 + 3?", "case": {"answer": NaN}, "category": "arithmetic"}',
     "field 'case.answer': NaN is not a number"),
    ('{"prompt": "What is 2 + 3?", "case": {"answer": ' + "9" * 400 + '}, "category": "arithmetic"}',
     "field 'case.answer': a 400-digit integer"),
    ('{"prompt": "What is 2 + 3?", "case": {"answer": 1e999}, "category": "arithmetic"}', "overflows a double"),
    ('{"prompt": "What is 1 + 3?", "case": {"answer": 4}, "category": "arithmetic"}', "repeats the prompt of line 1"),
])
def test_a_prompt_file_with_nan_or_a_repeated_prompt_is_refused(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "What is 1 + 3?", "case": {"answer": 4}, "category": "arithmetic"}\n' + line + "\n",
                    encoding="utf-8")
    with pytest.raises(DataError, match=r":2: 1 bad line\(s\): line 2: ") as info:
        read_prompts(path, env=CalcEnv)
    assert says in str(info.value)


def _run_folder(tmp_path: Path, knobs: dict[str, Any]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"knobs": {"method": "grpo", **knobs}}), encoding="utf-8")
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n', encoding="utf-8")
    return run


@pytest.mark.parametrize(("knobs", "says"), [
    ({"steps": "many"}, "knob 'steps' is str 'many', expected int"),
    ({"steps": 10**30}, "knob 'steps': out of range"),
    ({"temperature": True}, "knob 'temperature' is bool"),
    ({"lora_targets": "q_proj"}, "knob 'lora_targets' is str"),
    ({"env": 7}, "knob 'env' is int"),
    ({"run_name": ["a"]}, "knob 'run_name' is list"),
])
def test_rlgate_report_refuses_recorded_knobs_of_the_wrong_type(tmp_path: Path, knobs: dict[str, Any], says: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit(["report", str(_run_folder(tmp_path, knobs)), "--text"], capsys)
    assert code == 2 and says in err and "config.json" in err and err.count("\n") == 1, err


def test_a_nested_run_file_is_a_data_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_folder(tmp_path, {})
    (run / "config.json").write_text('{"knobs": ' + "[" * 5000 + "]" * 5000 + "}", encoding="utf-8")
    code, err = _exit(["report", str(run), "--text"], capsys)
    assert code == 2 and "nested deeper than 64 levels" in err, err


class _SometimesMarked(CalcEnv):
    name = "sometimes"

    def markers(self, reply: str, case: dict[str, Any]) -> dict[str, float]:
        return {"concise": 1.0} if "short" in reply else {}


def test_a_guarded_marker_some_replies_lack_is_refused_naming_it_and_the_reply() -> None:
    items = calc_items(1)
    with pytest.raises(UsageError, match=r"markers\(\) returned no 'concise' for the reply 'a long one'"):
        grade_replies(items, [["short", "a long one"]] * len(items), env=_SometimesMarked)


def test_the_gate_refuses_rows_where_a_guarded_marker_is_on_some_rows_only(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    rows = side(30, 2)
    rows[3] = {**rows[3], "markers": {}}
    before = write_rows(tmp_path / "b.jsonl", side(30, 2))
    after = write_rows(tmp_path / "a.jsonl", rows)
    guard = next(iter(rows[0]["markers"]), None)
    if guard is None:
        pytest.skip("these rows carry no marker")
    code, err = _exit(["gate", str(before), str(after), "--guard", guard], capsys)
    assert code == 2 and f"marker {guard!r} is missing but guarded" in err and "a.jsonl:" in err, err


def test_baseline_save_checks_its_out_path_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    code, err = _exit(["baseline", "save", str(tmp_path / "no-run"), "--out", str(tmp_path / "file" / "x")], capsys)
    assert code == 2 and "--out" in err and "is a file, not a folder" in err, err


def test_a_folder_as_the_baseline_is_called_a_folder(pytester: pytest.Pytester) -> None:
    (pytester.path / "baselines").mkdir()
    pytester.makepyfile(test_x="def test_uses(rlgate_baseline_rows):\n    pass\n")
    result = pytester.runpytest("--rlgate-baseline", "baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rlgate-baseline baselines: is a directory; name the baseline file inside it*"])


def test_a_bad_baseline_fails_its_fixture_with_the_message_once(pytester: pytest.Pytester) -> None:
    (pytester.path / "base.jsonl").write_text("not json\n", encoding="utf-8")
    pytester.makepyfile(test_x="def test_uses(rlgate_baseline_rows):\n    pass\n")
    result = pytester.runpytest("--rlgate-baseline", "base.jsonl")
    result.assert_outcomes(errors=1)
    text = result.stdout.str()
    # once in the report; the short summary repeats it (cut to the terminal's width, except under CI)
    report = text.split("short test summary info")[0]
    assert report.count("base.jsonl:1: not valid JSON") == 1, text
    assert "During handling of the above exception" not in text


def test_the_probe_table_lists_the_categories_it_could_not_try() -> None:
    result = probe_reward(CalcEnv, items=calc_items(1), seed=0, max_examples=3, database=None)
    assert result.untried == ("unanswerable",)  # nothing built from its case says "cannot tell"
    for table in (result.table(), result.summary()):
        assert any(line.split()[:2] == ["every", "class"] and "unanswerable" in line and "not tried" in line
                   for line in table.splitlines()), table


def test_keep_says_what_it_dropped_when_the_rest_cannot_be_split(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    written = tmp_path / "written.jsonl"
    texts = ["Can I return the jacket I bought? The order was last week.",
             "My blender arrived broken, I would like a refund for that order please.",
             "The headphones I ordered never came, can you refund the order?",
             "I was charged twice for my order of running shoes, please fix it."]
    lines = [{"prompt": text, "scenario_id": f"no_id/{i}", "category": "no_id"} for i, text in enumerate(texts)]
    lines += [{"prompt": "refund?", "scenario_id": "with_id/short", "category": "with_id"}]
    written.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, err = _exit(["prompts", "--keep", str(written), "--out-dir", str(tmp_path / "out")], capsys)
    assert code == 2 and "the holdout would have no" in err, err
    assert "after the keep filter: keep filter: kept 4 of 5; dropped 1 too_short" in err, err
    assert load_env("refund").name == "refund"
