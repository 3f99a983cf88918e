"""Graded rows: schema, streaming reader (stdlib and orjson), atomic writer, headers, .gz, grading, regrading."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from _calc_env import CalcEnv, calc_items, calc_reply

from pytest_rlgate import DataError, UsageError, grade_replies, load_env, load_rows, read_rows, write_rows
from pytest_rlgate.data import jsonl, read_header, regrade_rows, row_header, validate_row
from pytest_rlgate.data.rows import iter_rows
from pytest_rlgate.envs import refund


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
    ([json.dumps(row()).replace('"score": 1.0', '"score": NaN')], r":1: field 'score': NaN is not a number"),
    ([json.dumps(row()).replace('"score": 1.0', '"score": Infinity')], r":1: field 'score': Infinity is not a"),
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
    with pytest.raises(DataError, match=r"<rows>:2: 'score' must be finite and at most 2\*\*53 in size: inf is not"):
        list(read_rows([row(), row(rollout_index=1, score=float("inf"))]))
    with pytest.raises(DataError, match=r"<rows>:1: marker 'm' must be a finite number at most 2\*\*53 in size, "
                                        "got number nan"):
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


def test_grade_replies_with_a_users_environment() -> None:
    items = calc_items(per_category=2)
    replies = [[calc_reply(item, True), calc_reply(item, False)] for item in items]
    rows = grade_replies(items, replies, env=CalcEnv)
    assert [r["reward"] for r in rows] == [1, 0] * len(items)
    assert [r["category"] for r in rows[::2]] == [item["category"] for item in items]
    assert all(r["markers"] == {"concise": 1.0} for r in rows)  # markers(reply, case): exactly two arguments
    assert grade_replies(items, replies, env="_calc_env:CalcEnv") == rows


def test_grade_replies_needs_a_case_and_a_declared_category() -> None:
    with pytest.raises(DataError, match=r"^<items>\[1\]: no 'case', and environment calc reads none from the prompt"):
        grade_replies([calc_items(1)[0], {"prompt": "What is 1 + 1?", "category": "arithmetic"}], [["2"], ["2"]],
                      env=CalcEnv)
    with pytest.raises(DataError, match=r"^<items>\[0\]: category 'geometry' is not one of environment calc's "):
        grade_replies([{"prompt": "p", "case": {"answer": 4}, "category": "geometry"}], [["4"]], env=CalcEnv)
    with pytest.raises(DataError, match=r"^<items>\[0\]: no 'category' \(and its case names none\)"):
        grade_replies([{"prompt": "p", "case": {"answer": 4}}], [["4"]], env=CalcEnv)


def test_grade_replies_bad_calls() -> None:
    with pytest.raises(UsageError, match="1 items but 2 reply lists"):
        grade_replies([{"prompt": "p"}], [["a"], ["b"]])
    with pytest.raises(UsageError, match="is a string"):
        grade_replies([{"prompt": "p"}], ["abc"])
    with pytest.raises(UsageError, match="would overwrite"):
        grade_replies([{"prompt": "p"}], [["a"]], reward=1)
    with pytest.raises(UsageError, match="'name' must be a short identifier"):
        grade_replies([{"prompt": "p"}], [["a"]], env=object())


# -- provenance headers, .jsonl.gz, the fast parser, regrade (issue 12) --------------------


class CalcV2(CalcEnv):
    """The calc reward after a change: a wordy reply no longer passes."""

    version = "2"

    def score(self, reply: str, case: dict[str, Any]) -> float:
        return super().score(reply, case) if len(reply) <= 12 else 0.0


def calc_rows(right: tuple[bool, ...] = (True, False), per_category: int = 2) -> list[dict[str, Any]]:
    items = calc_items(per_category=per_category)
    return grade_replies(items, [[calc_reply(item, ok) for ok in right] for item in items], env=CalcEnv)


def calc_header(**changes: Any) -> dict[str, Any]:
    return {**row_header(load_env(CalcEnv), prompts_fingerprint="sha256:holdout", policy="base", temperature=0.8,
                         top_p=0.95, seed=17, k=2), **changes}


@pytest.fixture(params=["stdlib", "orjson"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every reader test once with each line parser: orjson (when installed) must agree exactly."""
    if request.param == "orjson":
        pytest.importorskip("orjson")
    else:
        monkeypatch.setattr(jsonl, "_FAST", jsonl._stdlib_fast)
    return request.param


@pytest.mark.parametrize(("lines", "message"), BAD_FILES)
def test_both_parsers_name_the_same_bad_line(tmp_path: Path, parser: str, lines: list[str], message: str) -> None:
    path = lines_file(tmp_path, *lines, newline="truncated" not in message)
    with pytest.raises(DataError, match=message):
        list(read_rows(path))


@pytest.mark.parametrize(("line", "message"), [
    (json.dumps(row()) + " trailing", r":1: not valid JSON: Extra data"),
    (json.dumps(row()) + "}", r":1: not valid JSON: Extra data"),
    ("\ufeff" + json.dumps(row()), None),  # a byte-order mark is an editor's habit
    (json.dumps(row(rollout_index=10**30)), None),  # beyond 64 bits: orjson refuses, the stdlib reads it
    ("  " + json.dumps(row()) + "  ", None),  # surrounding whitespace is JSON
])
def test_fast_parsers_accept_exactly_what_json_loads_accepts(tmp_path: Path, parser: str, line: str,
                                                             message: str | None) -> None:
    path = lines_file(tmp_path, line)
    if message is None:
        assert list(read_rows(path)) == [json.loads(line.lstrip("\ufeff"))]
    else:
        with pytest.raises(DataError, match=message):
            list(read_rows(path))


def test_a_header_is_written_first_read_back_and_never_a_row(tmp_path: Path, parser: str) -> None:
    rows = calc_rows()
    path = write_rows(tmp_path / "rows.jsonl", rows, header=calc_header())
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first == calc_header() and first["rlgate_rows"] == 1
    assert read_header(path) == calc_header()
    assert list(read_rows(path)) == rows  # the header is not a row
    loaded = load_rows(path)
    assert loaded == rows and loaded.header == calc_header()
    again = write_rows(tmp_path / "again.jsonl", loaded)  # Rows carry their header through write_rows
    assert again.read_bytes() == path.read_bytes()


def test_foreign_files_have_no_header(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "foreign.jsonl", calc_rows())
    assert read_header(path) is None and load_rows(path).header is None
    blank_first = lines_file(tmp_path, "", json.dumps(calc_header()), json.dumps(row()), name="blank.jsonl")
    assert read_header(blank_first) == calc_header() and len(list(read_rows(blank_first))) == 1


@pytest.mark.parametrize(("header", "message"), [
    (calc_header(rlgate_rows=2), r":1: row-file header: 'rlgate_rows' is 2; this pytest-rlgate reads version 1"),
    (calc_header(env_fingerprint=""), r":1: row-file header: 'env_fingerprint' must be a non-empty string"),
    (calc_header(sampling={"k": "four"}), r":1: row-file header: 'sampling.k' must be an integer or null"),
    (calc_header(policy=3), r":1: row-file header: 'policy' must be a string or null"),
])
def test_a_bad_header_is_one_line_naming_the_field(tmp_path: Path, header: dict[str, Any], message: str) -> None:
    path = lines_file(tmp_path, json.dumps(header), json.dumps(row()))
    for read in (read_header, lambda p: list(read_rows(p))):
        with pytest.raises(DataError, match=message):
            read(path)
    with pytest.raises(DataError, match=r"^<header to write>: row-file header"):
        write_rows(tmp_path / "out.jsonl", [row()], header=header)


def test_a_header_past_the_first_line_is_named(tmp_path: Path) -> None:
    path = lines_file(tmp_path, json.dumps(row()), json.dumps(calc_header()))
    with pytest.raises(DataError, match=r":2: a row-file header \('rlgate_rows'\) is allowed on the first line "
                                        r"only \(were two row files concatenated\?"):
        list(read_rows(path))


def test_gz_round_trips_reproducibly_and_is_recognised_by_its_bytes(tmp_path: Path, parser: str) -> None:
    rows = calc_rows()
    packed = write_rows(tmp_path / "rows.jsonl.gz", rows, header=calc_header())
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed.read_bytes()) == write_rows(tmp_path / "plain.jsonl", rows,
                                                              header=calc_header()).read_bytes()
    assert load_rows(packed) == rows and read_header(packed) == calc_header()
    assert write_rows(tmp_path / "again.jsonl.gz", rows, header=calc_header()).read_bytes() == packed.read_bytes()
    renamed = tmp_path / "renamed.jsonl"  # a gzip file under a plain name still reads
    renamed.write_bytes(packed.read_bytes())
    assert list(read_rows(renamed)) == rows


def test_a_damaged_gz_file_is_one_line(tmp_path: Path) -> None:
    packed = write_rows(tmp_path / "rows.jsonl.gz", calc_rows(per_category=20))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed.read_bytes()[: len(packed.read_bytes()) // 2])
    with pytest.raises(DataError, match=r"cut.jsonl.gz: damaged or truncated gzip file"):
        list(read_rows(cut))
    bad = lines_file(tmp_path, json.dumps(row()), json.dumps({"prompt": "x"}), name="bad.jsonl")
    with pytest.raises(DataError, match=r"bad.jsonl.gz:2: missing fields"):
        list(read_rows(write_lines_gz(bad)))


def write_lines_gz(path: Path) -> Path:
    target = path.with_name(path.name + ".gz")
    target.write_bytes(gzip.compress(path.read_bytes()))
    return target


def test_graded_rows_keep_their_case_and_a_regrade_round_trips(tmp_path: Path) -> None:
    rows = calc_rows(right=(True, False), per_category=3)
    assert all(r["case"] == {"answer": r["case"]["answer"]} for r in rows)
    path = write_rows(tmp_path / "v1.jsonl.gz", [{**r, "eval_run": "before-0"} for r in rows],
                      header=calc_header())
    regraded = regrade_rows(path, CalcV2)
    assert [(r["prompt"], r["reply"], r["rollout_index"], r["eval_run"]) for r in regraded] == \
           [(r["prompt"], r["reply"], r["rollout_index"], "before-0") for r in rows]
    wordy = [r for r in regraded if len(r["reply"]) > 12]
    assert wordy and all(r["score"] == 0.0 and r["reward"] == 0 for r in wordy)
    assert regraded.header == {**calc_header(), "env_fingerprint": load_env(CalcV2).fingerprint}
    assert regrade_rows(write_rows(tmp_path / "v2.jsonl", regraded), CalcV2) == regraded  # idempotent
    assert regrade_rows(path, CalcEnv) == [{**r, "eval_run": "before-0"} for r in rows]  # and reversible


def test_regrade_reads_a_case_from_the_prompt_or_names_the_row_without_one(tmp_path: Path) -> None:
    from _calc_env import SumsEnv

    rows = [{k: v for k, v in r.items() if k != "case"} for r in calc_rows(per_category=2)
            if r["category"] == "arithmetic"]
    foreign = write_rows(tmp_path / "foreign.jsonl", [{**r, "policy": "base", "sample_seed": 17} for r in rows])
    regraded = regrade_rows(foreign, SumsEnv)  # case_for reads "What is 1 + 3?" as 4
    assert [r["reward"] for r in regraded] == [r["reward"] for r in rows]
    assert regraded.header is not None and regraded.header["env"] == "sums" and regraded.header["policy"] == "base"
    assert regraded.header["sampling"]["seed"] == 17 and regraded.header["prompts_fingerprint"] is None
    with pytest.raises(DataError, match=r"foreign.jsonl:1: the row keeps no 'case', and environment calc reads none "
                                        r"from the prompt \(it has no case_for\)"):
        regrade_rows(foreign, CalcEnv)
    with pytest.raises(DataError, match=r"foreign.jsonl:1: category 'arithmetic' is not one of environment refund"):
        regrade_rows(foreign, "refund")
