"""``rlgate grade``: replies sampled anywhere, graded by the environment into rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, write_prompts
from pytest_rlgate.data.replies import grade_file
from pytest_rlgate.data.rows import grade_replies, load_rows, read_header
from pytest_rlgate.environment.contract import load_env

ITEMS = build_prompts(0, "default")[:3]
CALL = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "%s"}}</tool_call>'


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_replies_are_graded_as_sampled_replies_are(tmp_path: Path) -> None:
    replies = [["Could you share your order id?", CALL % "ORD-4017"], ["Sorry, I cannot help with that."],
               ["Hello"]]
    expected = grade_replies(ITEMS, replies, env="refund")
    lines = [{"prompt": ITEMS[0]["prompt"], "category": ITEMS[0]["category"], "case": ITEMS[0]["case"],
              "scenario_id": ITEMS[0]["scenario_id"], "replies": replies[0]},
             {"prompt": ITEMS[1]["prompt"], "scenario_id": ITEMS[1]["scenario_id"], "reply": replies[1][0]},
             {"scenario_id": ITEMS[2]["scenario_id"], "reply": replies[2][0]}]  # prompt from the env's set
    rows = grade_file(_write(tmp_path / "replies.jsonl", lines), "refund")
    keys = ("prompt", "category", "rollout_index", "reply", "score", "reward", "markers", "scenario_id")
    assert [{k: r[k] for k in keys} for r in rows] == [{k: r[k] for k in keys} for r in expected]
    assert rows.header["env_fingerprint"] == load_env("refund").fingerprint


def test_one_reply_a_line_makes_rollouts_in_line_order(tmp_path: Path) -> None:
    item = ITEMS[0]
    lines = [{"prompt": item["prompt"], "reply": text, "eval_run": run}
             for run in ("a", "b") for text in ("one", "two", "three")]
    rows = grade_file(_write(tmp_path / "r.jsonl", lines), "refund")
    assert [(r["eval_run"], r["rollout_index"]) for r in rows] == [(run, i) for run in "ab" for i in range(3)]


def test_the_command_writes_rows_the_gate_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, ITEMS)
    src = _write(tmp_path / "replies.jsonl", [{"scenario_id": i["scenario_id"], "replies": ["a", "b"]} for i in ITEMS])
    out = tmp_path / "rows.jsonl.gz"
    assert main(["grade", str(src), "--env", "refund", "--prompts-file", str(prompts), "--out", str(out)]) == 0
    assert "graded 6 replies" in capsys.readouterr().out
    assert len(load_rows(out)) == 6 and read_header(out)["env"] == "refund"
    assert main(["gate", str(out), str(out)]) == 0


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ({"prompt": "Refund ORD-4017"}, "needs 'reply'"),
    ({"prompt": "Refund ORD-4017", "reply": 3}, "'reply' must be a string"),
    ({"prompt": "Refund ORD-4017", "replies": ["a", 1]}, "needs 'reply'"),
    ({"reply": "x"}, "needs 'prompt'"),
    ({"scenario_id": "no-such-scenario", "reply": "x"}, "is in no prompt"),
    ({"prompt": "Refund ORD-4017", "reply": "x", "category": "nope"}, "nope"),
    ({"prompt": "Refund ORD-4017", "reply": "x", "case": [1]}, "'case' must be an object"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      line: object, message: str) -> None:
    good = {"prompt": ITEMS[0]["prompt"], "reply": "fine"}
    src = _write(tmp_path / "replies.jsonl", [good, "", line])
    assert main(["grade", str(src), "--env", "refund", "--out", str(tmp_path / "rows.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{src}:3:" in err and message in err
    assert not (tmp_path / "rows.jsonl").exists()


def test_an_empty_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _write(tmp_path / "replies.jsonl", [""])
    assert main(["grade", str(src), "--out", str(tmp_path / "rows.jsonl")]) == 2
    assert "no replies" in capsys.readouterr().err
