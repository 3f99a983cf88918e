"""The reader registry: built-in formats, detection, an entry-point format, per-side options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _harness import LM_EVAL

import pytest_rlgate.data.readers as readers
from pytest_rlgate import DataError, UsageError, compare, detect_format, read_rows, reader_names, write_rows
from pytest_rlgate.data.readers import BUILTIN, ReadOptions, RowSource, as_side, load_reader
from pytest_rlgate.data.readers.source import source_header


def _rows(category: str, passes: list[int]) -> list[dict]:
    return [{"prompt": f"{category} {i}", "category": category, "rollout_index": 0, "reply": "r",
             "score": float(p), "reward": p, "markers": {}} for i, p in enumerate(passes)]


def test_every_built_in_format_is_registered_in_code() -> None:
    assert list(BUILTIN) == ["rlgate", "lm-eval", "inspect", "promptfoo", "verifiers", "nemo"]
    assert reader_names()[: len(BUILTIN)] == list(BUILTIN)
    for name in BUILTIN:
        assert load_reader(name).name == name
    with pytest.raises(UsageError, match="--format 'csv': no such format; choose one of rlgate, lm-eval"):
        load_reader("csv")


def test_rlgate_row_files_are_one_format_and_stay_paths_for_the_gate(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "rows.jsonl.gz", _rows("a", [1, 0, 1]))
    assert detect_format(path) == "rlgate"
    source = read_rows(path)
    assert source.format == "rlgate" and len(list(source)) == 3 and list(source) == list(read_rows(path))
    assert as_side(str(path)) == str(path) and as_side(source) == path
    assert list(read_rows(_rows("a", [1]))) == _rows("a", [1])  # rows in memory: validated, as before
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    assert detect_format(unknown) == "rlgate"  # so the row reader names what is wrong at its line
    with pytest.raises(DataError, match="not valid JSON"):
        list(read_rows(unknown))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="is a directory, expected a JSONL row file or an eval harness's output"):
        detect_format(tmp_path / "empty")


class _CsvReader:
    """A third-party format: ``unit,category,pass`` lines."""

    name = "csv-scores"

    def sniff(self, path: Path, head: bytes) -> bool:
        return path.suffix == ".csv"

    def open(self, path: Path, options: ReadOptions) -> RowSource:
        def produce(_source: RowSource):
            for line in path.read_text().splitlines()[1:]:
                unit, category, passed = line.split(",")
                yield {"prompt": unit, "scenario_id": unit, "category": category, "rollout_index": 0, "reply": "",
                       "score": float(passed), "reward": int(passed), "markers": {}}

        header = source_header("csv-scores", version="1", tasks={"scores": None}, options=options, path=path)
        return RowSource(self.name, path, header, produce, options)


def test_a_package_adds_a_format_through_the_entry_point_group(tmp_path: Path, monkeypatch) -> None:
    import sys
    import types

    module = types.ModuleType("rg_csv_plugin")
    module.READER = _CsvReader()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rg_csv_plugin", module)
    monkeypatch.setattr(readers, "_plugins", lambda: {"csv-scores": "rg_csv_plugin:READER"})
    readers.load_reader.cache_clear()
    try:
        assert reader_names()[-1] == "csv-scores"
        for name, passes in (("before", "1111111"), ("after", "1111000")):
            (tmp_path / f"{name}.csv").write_text("unit,category,pass\n" + "".join(
                f"u{i},c{i % 1},{p}\n" for i, p in enumerate(passes)))
        assert detect_format(tmp_path / "before.csv") == "csv-scores"
        result = compare(str(tmp_path / "before.csv"), str(tmp_path / "after.csv"), n_resamples=500)
        assert result.comparisons[0].delta == pytest.approx(-3 / 7)
    finally:
        readers.load_reader.cache_clear()


def test_path_options_pick_a_side_and_unknown_ones_are_refused(tmp_path: Path) -> None:
    base = LM_EVAL / "base"
    source = read_rows(f"{base}#filter=none&category=doc.category")
    assert source.options.filter == "none" and source.label == f"{base}#filter=none&category=doc.category"
    with pytest.raises(UsageError, match="unknown option\\(s\\) after '#': colour"):
        read_rows(f"{base}#colour=red")
    with pytest.raises(UsageError, match="after '#' expected key=value"):
        read_rows(f"{base}#filter")
    with pytest.raises(UsageError, match="pass_threshold=True: expected a finite number"):
        ReadOptions(pass_threshold=True)


def test_a_missing_category_key_names_what_was_there(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"samples_rg_refund_2.*\.jsonl:1: no category at 'doc.subject' \(keys there: "
                                        r"category, choices, label, prompt, scenario_id, target\)"):
        list(read_rows(LM_EVAL / "base", filter="none", category="doc.subject"))


def test_sides_from_different_harnesses_are_refused_naming_both(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "rows.jsonl", _rows("rg_refund", [1] * 40))
    with pytest.raises(DataError, match=r"rows.jsonl is foreign rows \(no header\) but .*candidate is the lm-eval "
                                        r"0\.4\.13 log of rg_refund v2\.0, rg_refund_choice v1\.0: the sides come from "
                                        "different harnesses"):
        compare(str(rows), read_rows(LM_EVAL / "candidate", filter="none"))


def test_the_header_records_the_task_and_the_options(tmp_path: Path) -> None:
    header = read_rows(LM_EVAL / "base", filter="none").header
    assert header["env"] == "lm-eval:rg_refund+rg_refund_choice"
    assert header["env_fingerprint"].startswith("sha256:")
    assert header["env_fingerprint"] != read_rows(LM_EVAL / "base", filter="first-line").header["env_fingerprint"]
    json.dumps(header)  # a row file's header: plain JSON


def test_two_sides_with_one_label_pair_each_by_its_own_units() -> None:
    """Two sides may share a label (one file read twice): each side drops and reports its own units."""
    from pytest_rlgate.data.rows import RowReader
    from pytest_rlgate.gate.sides import Side, pair_units

    def side(prompts: list[str]) -> Side:
        rows = [{**row, "prompt": prompt} for row, prompt in zip(_rows("a", [1] * len(prompts)), prompts)]
        return Side(RowReader(rows, name="results.json"), ())

    before, after = side(["u1", "u2", "u3", "u4"]), side(["u1", "u2", "u3", "u5"])
    with pytest.raises(DataError) as info:
        pair_units(before, after, ["a"], shared_units_only=False)
    assert "1 unit(s) of results.json missing from results.json: 'u4' (a)" in str(info.value)
    assert "1 unit(s) of results.json missing from results.json: 'u5' (a)" in str(info.value)
    note = pair_units(before, after, ["a"], shared_units_only=True)
    assert note is not None and before.dropped == after.dropped == 1
    assert set(before.units["a"]) == set(after.units["a"]) == {"u1", "u2", "u3"}


def test_rows_a_reader_made_are_checked_in_place_and_others_are_copied() -> None:
    """A reader's rows are its own (made afresh each pass): the gate normalises them in place; a caller's stay."""
    from pytest_rlgate.data.rows import RowReader

    mine = [{**row, "reward": 1.0} for row in _rows("a", [1, 1])]
    with RowReader(mine) as reader:
        assert [row["reward"] for row, _line, _state in reader] == [1, 1]
    assert [type(row["reward"]) for row in mine] == [float, float]  # the caller's rows are untouched

    class Fresh(list):
        fresh_rows = True

    theirs = Fresh({**row, "reward": 1.0} for row in _rows("a", [1, 1]))
    with RowReader(theirs) as reader:
        read = [row for row, _line, _state in reader]
    assert all(a is b for a, b in zip(read, theirs)) and [type(row["reward"]) for row in theirs] == [int, int]
    bad = Fresh([{**_rows("a", [1])[0], "score": float("nan")}])
    with pytest.raises(DataError, match="score"), RowReader(bad, name="<fresh>") as reader:
        list(reader)
