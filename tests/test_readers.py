"""The reader registry: built-in formats, detection, an entry-point format, per-side options."""

from __future__ import annotations

import json
import os
import pkgutil
import re
import sys
from pathlib import Path

import pytest
import tomllib
from _harness import HARNESS_DATA, LM_EVAL

import pytest_rlgate.data.readers as readers
from pytest_rlgate import DataError, UsageError, compare, read_rows, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data import detect_format, reader_names
from pytest_rlgate.data.readers import (
    BUILTIN,
    Opened,
    ReaderOption,
    ReadOptions,
    as_side,
    declared_options,
    load_reader,
)
from pytest_rlgate.data.readers.source import source_header
from pytest_rlgate.data.rows import RowReader
from pytest_rlgate.gate.sides import Side, pair_units

ROOT = Path(__file__).resolve().parent.parent
#: the modules of the readers package that are shared parts, not formats
HELPERS = {"findings", "hashes", "lines", "pairing", "source"}


def _rows(category: str, passes: list[int]) -> list[dict]:
    return [{"prompt": f"{category} {i}", "category": category, "rollout_index": 0, "reply": "r",
             "score": float(p), "reward": p, "markers": {}} for i, p in enumerate(passes)]


def test_every_module_with_a_reader_is_a_format_found_by_looking() -> None:
    modules = {m.name for m in pkgutil.iter_modules(readers.__path__)}
    formats = {target.split(":")[0].rsplit(".", 1)[1] for target in BUILTIN.values()}
    assert formats == modules - HELPERS and not formats & HELPERS
    assert list(BUILTIN)[0] == "rlgate" and reader_names()[: len(BUILTIN)] == list(BUILTIN)
    others = list(BUILTIN.values())[1:]
    assert others == sorted(others)  # rlgate's own rows first, then the others by module
    for name in BUILTIN:
        reader = load_reader(name)
        assert reader.name == name and reader.summary and all(isinstance(o, ReaderOption) for o in reader.options)
    with pytest.raises(UsageError, match="--format 'csv': no such format; choose one of rlgate, eee"):
        load_reader("csv")


def test_the_package_declares_no_built_in_format_as_an_entry_point() -> None:
    """The built-ins are found in the package; the entry-point group is for other packages' formats."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project.get("entry-points", {}).get(readers.ENTRY_POINT_GROUP, {})
    assert not set(declared) & set(BUILTIN), declared


def _docs_table() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "harnesses.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z][a-z-]*)` \| [^|]+ \| ([^|]*) \|$", text, flags=re.M)
    return [(name, own.strip()) for name, own in rows]


def test_the_docs_table_of_formats_is_the_registry() -> None:
    table = _docs_table()
    assert [name for name, _ in table] == reader_names()[: len(BUILTIN)]
    for name, own in table:
        options = load_reader(name).options
        shown = ", ".join(f"`{o.flag or o.name}`" for o in options) or "none"
        assert own == shown, (name, own, shown)
    text = (ROOT / "docs" / "harnesses.md").read_text(encoding="utf-8")
    for name in BUILTIN:
        if name != "rlgate":
            assert f"<!-- format: {name} -->" in text, f"docs/harnesses.md has no section for {name}"


def _under(folder: Path, depth: int = 2) -> list[Path]:
    """*folder* and what lies in it, *depth* levels down."""
    out = [folder]
    if depth and folder.is_dir():
        for entry in sorted(folder.iterdir()):
            out += _under(entry, depth - 1)
    return out


def _sample_paths(tmp_path: Path) -> dict[str, list[Path]]:
    """Paths each built-in format must claim: what a format's tool wrote under tests/data/harness/<module>/
    (found by looking, as the formats are), and small files from the schemas of the tools not run here."""
    found = {name: _under(HARNESS_DATA / target.split(":")[0].rsplit(".", 1)[1]) for name, target in BUILTIN.items()}
    found = {name: paths for name, paths in found.items() if paths[0].is_dir()}
    found["rlgate"] = [write_rows(tmp_path / "rows.jsonl", _rows("a", [1, 0]))]
    found["inspect"] = [*(HARNESS_DATA / "scout").glob("*/*.eval"), *(HARNESS_DATA / "scout").glob("base")]
    (tmp_path / "pf").mkdir()
    promptfoo = tmp_path / "pf" / "results.json"
    promptfoo.write_text(json.dumps({"evalId": "e", "results": {"version": 3, "results": [
        {"promptIdx": 0, "testIdx": 0, "provider": {"id": "p"}, "score": 1.0, "success": True}]}}))
    found["promptfoo"] = [promptfoo]
    (tmp_path / "vf").mkdir()
    verifiers = tmp_path / "vf" / "results.jsonl"
    verifiers.write_text(json.dumps({"example_id": 0, "prompt": [], "completion": [], "reward": 1.0}) + "\n")
    found["verifiers"] = [verifiers.parent, verifiers]
    bundle = tmp_path / "nemo" / "bench"
    bundle.mkdir(parents=True)
    (bundle / "eval-1.json").write_text(json.dumps({"benchmark": {"name": "bench"}}))
    (bundle / "results.jsonl").write_text(json.dumps({"problem_idx": 0, "reward": 1.0}) + "\n")
    found["nemo"] = [bundle.parent, bundle, bundle / "eval-1.json"]
    return found


def test_each_format_claims_its_own_files_and_no_other_does(tmp_path: Path) -> None:
    """Detection order is a convenience, not a rule: no two built-in readers claim one path."""
    for name, paths in _sample_paths(tmp_path).items():
        for path in paths:
            head = readers._head(path)
            claimed = [other for other in BUILTIN if load_reader(other).sniff(path, head)]
            assert claimed == [name], (path, claimed)


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
    """A third-party format: ``unit,category,pass`` lines, with an option of its own."""

    name = "csv-scores"
    summary = "unit,category,pass lines"
    options = (ReaderOption("column", "csv-scores: the pass column", flag="--column"),)

    def sniff(self, path: Path, head: bytes) -> bool:
        return path.suffix == ".csv"

    def open(self, path: Path, options: ReadOptions) -> Opened:
        column = int(options.text("column") or 2)

        def rows(_pass):
            for line in path.read_text().splitlines()[1:]:
                unit, category, *passes = line.split(",")
                passed = [unit, category, *passes][column]
                yield {"prompt": unit, "scenario_id": unit, "category": category, "rollout_index": 0, "reply": "",
                       "score": float(passed), "reward": int(passed), "markers": {}}

        header = source_header("csv-scores", version="1", tasks={"scores": None}, options=options, path=path)
        return Opened(header, rows)


def test_a_package_adds_a_format_and_its_option_through_the_entry_point_group(tmp_path: Path, monkeypatch,
                                                                                capsys) -> None:
    import types


    module = types.ModuleType("rg_csv_plugin")
    module.READER = _CsvReader()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rg_csv_plugin", module)
    monkeypatch.setattr(readers, "_plugins", lambda: {"csv-scores": "rg_csv_plugin:READER"})
    readers.load_reader.cache_clear()
    try:
        assert reader_names()[-1] == "csv-scores" and declared_options()["column"][1] == ["csv-scores"]
        for name, passes in (("before", "1111111"), ("after", "1111000")):
            (tmp_path / f"{name}.csv").write_text("unit,category,pass,other\n" + "".join(
                f"u{i},c{i % 1},{p},1\n" for i, p in enumerate(passes)))
        assert detect_format(tmp_path / "before.csv") == "csv-scores"
        result = compare(str(tmp_path / "before.csv"), str(tmp_path / "after.csv"), n_resamples=500)
        assert result.comparisons[0].delta == pytest.approx(-3 / 7)
        other = compare(read_rows(tmp_path / "before.csv", column="3"), read_rows(tmp_path / "after.csv", column="3"),
                        n_resamples=500)
        assert other.comparisons[0].delta == 0
        for extra, delta in ((["--column", "3"], 0.0), ([], -3 / 7)):  # the CLI's flags: the readers' declarations
            main(["gate", str(tmp_path / "before.csv"), str(tmp_path / "after.csv"), "--resamples", "500",
                  "--json", str(tmp_path / "out.json"), *extra])
            assert json.loads((tmp_path / "out.json").read_text())["comparisons"][0]["delta"] == pytest.approx(delta)
        with pytest.raises(SystemExit):
            main(["convert", "--help"])
        assert "--column COLUMN" in capsys.readouterr().out.replace("VALUE", "COLUMN")
    finally:
        readers.load_reader.cache_clear()


def test_path_options_pick_a_side_and_unknown_ones_are_refused(tmp_path: Path) -> None:
    base = LM_EVAL / "base"
    source = read_rows(f"{base}#filter=none&category=doc.category")
    assert source.options.text("filter") == "none" and source.label == f"{base}#filter=none&category=doc.category"
    assert source.header["source"]["options"]["filter"] == "none"  # the reader's own option shapes its rows
    with pytest.raises(UsageError, match="after '#': unknown read option\\(s\\) colour \\(known: .*filter"):
        read_rows(f"{base}#colour=red")
    with pytest.raises(UsageError, match="provider is an option of the promptfoo reader, and this path reads as "
                                         "lm-eval"):
        read_rows(f"{base}#filter=none&provider=x")
    with pytest.raises(UsageError, match="read_rows: unknown read option\\(s\\) colour"):
        read_rows(base, colour="red")
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


BAD_LOGS = """
import pytest_rlgate as rg

def test_rows():
    list(rg.read_rows("broken.jsonl"))

def test_iterated_by_hand():
    rows = rg.read_rows("broken.jsonl")
    next(rows)

def test_harness_log():
    list(rg.read_rows("broken_samples.jsonl"))

def test_gate():
    rg.compare(rg.read_rows("broken_samples.jsonl"), rg.read_rows("broken_samples.jsonl"))

def test_bad_option():
    rg.read_rows("broken.jsonl#colour=red")
"""


def test_a_bad_log_read_in_a_users_test_shows_no_library_frame(pytester: pytest.Pytester) -> None:
    (pytester.path / "broken.jsonl").write_text('{"prompt": "x", "category": "no_id"}\n', encoding="utf-8")
    record = {"schema_version": "0.3.0", "evaluation_id": "e", "model_id": "o/m", "evaluation_name": "t",
              "sample_id": "1", "interaction_type": "single_turn", "input": {"raw": "q", "reference": ["a"]},
              "output": {"raw": ["a"]}, "answer_attribution": [], "evaluation": {"score": "high", "is_correct": True}}
    (pytester.path / "broken_samples.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    pytester.makepyfile(test_bad=BAD_LOGS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=5)
    out = result.stdout.str()
    errors = [line for line in out.splitlines() if line.startswith("E ")]
    assert sum("pytest_rlgate.DataError: broken.jsonl:1: " in line for line in errors) == 2, errors
    assert sum("broken_samples.jsonl:1: metric 't (evaluation.score)' is 'high'" in line for line in errors) == 2
    assert any("unknown read option(s) colour" in line for line in errors), errors
    assert "pytest_rlgate/" not in out and "pytest_rlgate" + os.sep not in out, out  # no frame of the library
