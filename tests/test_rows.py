"""Graded rows: schema, streaming reader, atomic writer, grading with the refund env."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_rlgate import DataError, UsageError, grade_replies, read_rows, validate_row, write_rows
from pytest_rlgate.envs import refund
from pytest_rlgate.rows import iter_rows


def row(**changes: Any) -> dict[str, Any]:
    base = {"prompt": "I want a refund", "scenario_id": "s1", "category": "no_id", "rollout_index": 0,
            "reply": "Which order id?", "score": 1.0, "reward": 1, "markers": {"well_formed": 1.0}}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()


def lines_file(tmp_path: Path, *lines: str, name: str = "rows.jsonl", newline: bool = True) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + ("\n" if newline else ""), encoding="utf-8")
    return path


#: (file text lines, expected "line: message" fragment) — every bad input the reader names
BAD_FILES: list[tuple[list[str], str]] = [
    ([json.dumps(row()), '{"prompt": "x", "scen'], r":2: truncated line \(the file ends mid-row\)"),
    (["not json at all", json.dumps(row())], r":1: not valid JSON"),
    (["[1, 2, 3]"], r":1: expected a JSON object per line, got array"),
    ([json.dumps(row(score="high"))], r":1: 'score' must be a number, got string 'high'"),
    ([json.dumps(row()).replace('"score": 1.0', '"score": NaN')], r":1: not valid JSON: NaN is not valid JSON"),
    ([json.dumps(row()).replace('"score": 1.0', '"score": Infinity')], r":1: not valid JSON: Infinity"),
    ([json.dumps(row(reward=0.5))], r":1: 'reward' must be 0 or 1 \(1 = the reply passes\), got number 0.5"),
    ([json.dumps(row(reward=True))], r":1: 'reward' must be 0 or 1 .*got boolean True"),
    ([json.dumps(row(reward=_DROP, markers=_DROP))], r":1: missing fields 'reward', 'markers'"),
    ([json.dumps(row(reply=_DROP))], r":1: missing field 'reply'"),
    ([json.dumps(row(rollout_index=-1))], r":1: 'rollout_index' must be a non-negative integer"),
    ([json.dumps(row(rollout_index="0"))], r":1: 'rollout_index' must be a non-negative integer, got string"),
    ([json.dumps(row(category=""))], r":1: 'category' must be a non-empty string"),
    ([json.dumps(row(prompt=3))], r":1: 'prompt' must be a non-empty string, got number 3"),
    ([json.dumps(row(markers={"well_formed": "yes"}))], r":1: marker 'well_formed' must be a finite number"),
    ([json.dumps(row(markers=[1]))], r":1: 'markers' must be an object"),
    ([json.dumps(row(scenario_id=7))], r":1: 'scenario_id' must be a non-empty string or null"),
    ([json.dumps(row(eval_run=1.5))], r":1: 'eval_run' must be an integer or a string"),
    ([json.dumps(row(sample_seed="x"))], r":1: 'sample_seed' must be an integer"),
    ([json.dumps(row(reply=None))], r":1: 'reply' must be a string, got null"),
    ([json.dumps(row(final_text="b", reply="a"))], r":1: 'reply' and 'final_text' disagree"),
    ([json.dumps(row()), "", json.dumps(row())], r":3: duplicate row: scenario 's1', prompt 'I want a refund', "
                                                 r"rollout_index 0 appears twice"),
    ([], r"empty row file"),
    (["", "   "], r"empty row file"),
]


@pytest.mark.parametrize(("lines", "message"), BAD_FILES)
def test_bad_files_name_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = lines_file(tmp_path, *lines, newline="truncated" not in message)
    with pytest.raises(DataError, match=message) as info:
        list(read_rows(path))
    assert str(info.value).startswith(str(path))


def test_missing_file_and_directory_and_bad_encoding(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such row file"):
        list(read_rows(tmp_path / "absent.jsonl"))
    with pytest.raises(DataError, match="is a directory"):
        list(read_rows(tmp_path))
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(json.dumps(row()).encode() + b"\n" + b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"latin1.jsonl:2: not UTF-8"):
        list(read_rows(bad))


def test_duplicates_key_on_prompt_and_eval_run_not_scenario_alone(tmp_path: Path) -> None:
    # several paraphrases of one scenario share rollout indices: not duplicates
    rows = [row(prompt=f"paraphrase {i}", rollout_index=j) for i in range(3) for j in range(4)]
    # base re-runs repeat a rollout index under another eval_run: not duplicates
    rows += [row(prompt="rerun", rollout_index=0, eval_run=run) for run in (17, 18, 19)]
    rows += [row(prompt="far", rollout_index=1000), row(prompt="far", rollout_index=3)]
    assert len(list(read_rows(rows))) == len(rows)
    with pytest.raises(DataError, match=r"<rows>:3: duplicate row: scenario 's1', prompt 'rerun', rollout_index 0, "
                                        r"eval_run 17"):
        list(read_rows([row(prompt="rerun", eval_run=17), row(prompt="other"), row(prompt="rerun", eval_run=17)]))
    with pytest.raises(DataError, match="rollout_index 1000"):
        list(read_rows([row(rollout_index=1000), row(rollout_index=1000)]))


def test_reader_streams(tmp_path: Path) -> None:
    path = lines_file(tmp_path, json.dumps(row()), json.dumps(row(rollout_index=1)), "garbage")
    stream = read_rows(path)
    assert next(stream)["rollout_index"] == 0  # the good rows come before the bad line is read
    assert next(stream)["rollout_index"] == 1
    with pytest.raises(DataError, match=":3:"):
        next(stream)


def test_in_memory_rows_are_validated_too() -> None:
    with pytest.raises(DataError, match=r"<rows>:2: 'score' must be finite, got inf"):
        list(read_rows([row(), row(rollout_index=1, score=float("inf"))]))
    with pytest.raises(DataError, match=r"<rows>:1: marker 'm' must be a finite number, got number nan"):
        list(read_rows([row(markers={"m": float("nan")})]))


def test_final_text_is_an_alias_of_reply() -> None:
    got = validate_row(row(reply=_DROP, final_text="Which order?"))
    assert got["reply"] == "Which order?" and "final_text" not in got
    assert validate_row(row(final_text="Which order id?"))["reply"] == "Which order id?"
    assert validate_row(row(reward=1.0))["reward"] == 1 and isinstance(validate_row(row(reward=0.0))["reward"], int)


def test_write_then_read_round_trips_and_is_atomic(tmp_path: Path) -> None:
    rows = [row(rollout_index=i, reply=f"réponse {i}", policy="tiny", sample_seed=17, eval_run=1) for i in range(4)]
    path = write_rows(tmp_path / "sub" / "rows.jsonl", rows)
    assert list(read_rows(path)) == rows
    before = path.read_bytes()
    with pytest.raises(DataError, match=r"<rows to write>:2: 'reward' must be 0 or 1"):
        write_rows(path, [row(), row(rollout_index=1, reward=2)])
    assert path.read_bytes() == before  # the bad write replaced nothing
    assert [p.name for p in path.parent.iterdir()] == ["rows.jsonl"]  # and left no temp file


def test_in_memory_rows_need_rows() -> None:
    with pytest.raises(DataError, match="no rows"):
        list(read_rows([]))
    with pytest.raises(UsageError, match="single dict"):
        list(iter_rows(row()))


def test_grade_replies_with_the_refund_env() -> None:
    items = [
        {"prompt": "Please refund order ORD-4017", "case": refund.case_for("Please refund order ORD-4017"),
         "category": "with_id", "scenario_id": "refund-4017"},
        {"prompt": "I want a refund for my order", "scenario_id": "no-id-1"},
    ]
    replies = [
        ['<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-4017"}}</tool_call>',
         '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-9999"}}</tool_call>'],
        ["Could you give me your order id?", '<tool_call>{"name": "lookup_order", "arguments": {}}</tool_call>'],
    ]
    rows = grade_replies(items, replies, policy="tiny", sample_seed=17, eval_run=0)
    assert len(rows) == 4
    assert [r["reward"] for r in rows] == [1, 0, 1, 0]
    assert [r["rollout_index"] for r in rows] == [0, 1, 0, 1]
    assert rows[2]["category"] == "no_id"  # read from the prompt by the env's case_for
    for r, reply in zip(rows, [*replies[0], *replies[1]]):
        assert r["score"] == refund.score(reply, refund.case_for(r["prompt"]))
        assert r["markers"] == refund.markers(reply, refund.case_for(r["prompt"]), prompt=r["prompt"])
        assert (r["policy"], r["sample_seed"], r["eval_run"]) == ("tiny", 17, 0)
        assert validate_row(r) == r
    assert rows[1]["markers"]["argument_grounding"] == 0.0


def test_grade_replies_with_a_custom_env_and_bad_calls() -> None:
    class Upper:
        @staticmethod
        def score(reply: str, case: Any) -> float:
            return 1.0 if reply.isupper() else 0.25

        @staticmethod
        def passes(value: float) -> bool:
            return value >= 1.0

    rows = grade_replies([{"prompt": "p", "category": "c"}], [["YES", "no"]], env=Upper())
    assert [(r["score"], r["reward"], r["markers"]) for r in rows] == [(1.0, 1, {}), (0.25, 0, {})]
    with pytest.raises(UsageError, match="1 items but 2 reply lists"):
        grade_replies([{"prompt": "p"}], [["a"], ["b"]])
    with pytest.raises(UsageError, match="is a string"):
        grade_replies([{"prompt": "p"}], ["abc"])
    with pytest.raises(UsageError, match="would overwrite"):
        grade_replies([{"prompt": "p"}], [["a"]], reward=1)
    with pytest.raises(UsageError, match="env has no score"):
        grade_replies([{"prompt": "p"}], [["a"]], env=object())
