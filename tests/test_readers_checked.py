"""A harness reader's rows stream through the row reader like a file's: checked in place, key states and repeats alike.

Every reader hands the gate plain rows (one way, no checked pass of its own); these tests
hold the lm-eval reader's rows to the row reader's verdict on them and the gate's result
to the one it gives on the same rows written as an rlgate row file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from _harness import LM_EVAL

from pytest_rlgate import DataError, compare, read_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data.rows import CHANGED, NEW, SAME, RowReader, validate_row
from pytest_rlgate.gate.sides import Side, open_side

BASE, CANDIDATE = LM_EVAL / "base", LM_EVAL / "candidate"


@pytest.mark.parametrize("options", [{"filter": "none", "category": "doc.category"}, {"filter": "first-line"}])
def test_the_readers_rows_are_valid_as_made_and_the_gate_reads_them_through_the_row_reader(options) -> None:
    for folder in (BASE, CANDIDATE):
        rows = list(read_rows(folder, **options))
        assert rows == [validate_row(row) for row in rows]
        assert isinstance(open_side(read_rows(folder, **options), "before"), RowReader)


def test_with_a_unit_key_the_rows_of_a_unit_and_prompt_count_up_as_the_row_reader_counts(tmp_path: Path) -> None:
    folder = _copy(tmp_path, lambda lines: [lines[0], lines[0], lines[2], lines[4], lines[2]])
    samples = str(next(folder.glob("samples_rg_refund_2*.jsonl")))
    with RowReader(read_rows(Path(samples), filter="none", unit="doc.scenario_id"), name="x") as reader:
        read = [(row["rollout_index"], state) for row, _line, state in reader]
    assert read == [(0, NEW), (1, SAME), (0, NEW), (0, NEW), (1, CHANGED)]


def test_a_unit_and_prompt_in_two_tasks_repeats_a_rollout() -> None:
    with pytest.raises(DataError, match="duplicate row: scenario 'with_id/double_charge/business/board-game'"):
        list(RowReader(read_rows(BASE, filter="none", unit="doc.scenario_id"), name="x"))


def test_the_gate_reads_the_reader_and_agrees_with_the_converted_rows(tmp_path: Path) -> None:
    for side, folder in (("before", BASE), ("after", CANDIDATE)):
        assert main(["convert", str(folder), "--filter", "none", "--category-key", "doc.category",
                     "--out", str(tmp_path / f"{side}.jsonl")]) == 0
    direct = compare(read_rows(BASE, filter="none", category="doc.category"),
                     read_rows(CANDIDATE, filter="none", category="doc.category"),
                     n_resamples=2000, bootstrap_seed=3, allow_env_change=True)
    converted = compare(tmp_path / "before.jsonl", tmp_path / "after.jsonl", n_resamples=2000, bootstrap_seed=3,
                        allow_env_change=True)
    assert direct.comparisons == converted.comparisons
    assert any(c.flips for c in direct.comparisons)


def _copy(tmp_path: Path, edit) -> Path:
    """A copy of the base run whose rg_refund samples file has *edit*(records) applied (a str is a line)."""
    folder = tmp_path / "run"
    shutil.copytree(BASE, folder)
    samples = next(folder.glob("samples_rg_refund_2*.jsonl"))
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    samples.write_text("".join((rec if isinstance(rec, str) else json.dumps(rec)) + "\n" for rec in edit(lines)))
    return folder


def test_a_document_twice_is_refused_at_its_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path, lambda lines: [*lines, lines[0]])
    with pytest.raises(DataError, match=r"samples_rg_refund_.*\.jsonl:\d+: duplicate row: scenario 'rg_refund/0'"):
        compare(read_rows(folder, filter="none"), read_rows(folder, filter="none"))


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_a_kept_value_nested_too_deep_is_refused_and_an_unread_one_is_not(tmp_path: Path) -> None:
    def deep_target(lines: list[dict]) -> list[dict]:
        return [{**rec, "target": _nested(100)} if i == 2 else rec for i, rec in enumerate(lines)]

    folder = _copy(tmp_path, deep_target)
    with pytest.raises(DataError, match=r"\.jsonl:3: field 'target': nested deeper than 64 levels"):
        list(read_rows(folder, filter="none"))

    def deep_doc(lines: list[dict]) -> list[dict]:
        return [{**rec, "doc": {**rec["doc"], "extra": _nested(100)}} for rec in lines]

    unread = _copy(tmp_path / "unread", deep_doc)
    assert len(list(read_rows(unread, filter="none"))) == len(list(read_rows(BASE, filter="none")))
    def tower(lines: list[dict]) -> list[object]:  # past orjson's own bound of 1,024 levels
        return ['{"tower": ' + "[" * 2000 + "]" * 2000 + ", " + json.dumps(lines[0])[1:], *lines[1:]]

    with pytest.raises(DataError, match=r"\.jsonl:1: nested deeper than 64 levels"):
        list(read_rows(_copy(tmp_path / "tower", tower), filter="none"))


def _rows(unit: str, run: int | None, rewards: list[int], category: str = "a") -> list[dict]:
    extra = {} if run is None else {"eval_run": run}
    return [{"prompt": f"{unit} asks in {category}", "scenario_id": unit, "category": category, "rollout_index": i,
             "reply": f"{unit} r{i} {reward}", "score": float(reward), "reward": reward, "markers": {"m": 0.5 * i},
             **extra} for i, reward in enumerate(rewards)]


def test_a_sides_units_and_runs_are_its_rows_summed() -> None:
    rows = [*_rows("u1", 0, [1, 0]), *_rows("u1", 1, [1, 1]), *_rows("u2", 0, [0, 0]), *_rows("u2", 1, [1, 0]),
            *_rows("u3", None, [1]), *_rows("u3", None, [0], category="b")]
    side = Side(RowReader(rows, name="rows"), ["m"])
    assert side.units["a"]["u1"] == [4, 2, 3, 1.0] and side.units["a"]["u2"] == [4, 2, 1, 1.0]
    assert side.units["a"]["u3"] == [1, 1, 1, 0.0] and side.units["b"]["u3"] == [1, 1, 0, 0.0]
    assert side.runs["a"] == {0: [4, 2, 1, 1.0], 1: [4, 2, 3, 1.0], None: [1, 1, 1, 0.0]}
    both = side.unit_sums(["a", "b"])  # u3 is in both categories: its sums add
    assert both["u3"] == [2, 2, 1, 0.0] and set(both) == {"u1", "u2", "u3"}
    np.testing.assert_array_equal(side.unit_sums(["a"]).rows(["u2", "u1"]), [[4, 2, 1, 1.0], [4, 2, 3, 1.0]])
    side.drop_units({"a": {"u2"}})
    assert set(side.units["a"]) == {"u1", "u3"} and side.dropped == 1
    assert side.runs["a"] == {0: [2, 1, 1, 0.5], 1: [2, 1, 2, 0.5], None: [1, 1, 1, 0.0]}
