"""The one JSONL line reader: line ends, gzip, bounds on numbers and nesting, exact verdicts from both parsers."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from pytest_rlgate import DataError
from pytest_rlgate.data import jsonl
from pytest_rlgate.data.jsonl import iter_json_lines, loads_bounded
from pytest_rlgate.options import MAX_DEPTH


@pytest.fixture(params=["stdlib", "orjson"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once per fast parser: both must give the exact parser's verdict."""
    if request.param == "orjson":
        pytest.importorskip("orjson")
    else:
        monkeypatch.setattr(jsonl, "_FAST", jsonl._stdlib_fast)
    return request.param


def _file(tmp_path: Path, data: bytes, name: str = "f.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_lines_end_at_newline_only(tmp_path: Path, parser: str) -> None:
    texts = ["a\u2028b", "c\u2029d", "e\x85f", "g\x0ch", "tab\there"]
    data = "".join(json.dumps({"t": t}, ensure_ascii=False) + "\r\n" for t in texts).encode()
    got = list(iter_json_lines(_file(tmp_path, b"\n  \n" + data + b"\n")))
    assert got == [(n, {"t": t}) for n, t in enumerate(texts, start=3)]


def test_gzip_is_read_by_its_bytes_and_a_bom_is_skipped(tmp_path: Path, parser: str) -> None:
    path = _file(tmp_path, gzip.compress(b'\xef\xbb\xbf{"a": 1}\n{"a": 2}'), "renamed.jsonl")
    assert list(iter_json_lines(path)) == [(1, {"a": 1}), (2, {"a": 2})]


@pytest.mark.parametrize(("line", "says"), [
    ('{"score": ' + "9" * 400 + "}", "field 'score': a 400-digit integer is beyond a double's range"),
    ('{"m": {"x": -' + "9" * 5000 + "}}", "field 'm.x': a 5000-digit integer"),
    ('{"score": 1e400}', "field 'score': 1e400 overflows a double"),
    ('{"a": [1, NaN]}', "field 'a[1]': NaN is not a number JSON allows"),
    ('{"a": -Infinity}', "field 'a': -Infinity is not a number"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
    ('{"case": ' + "[" * 900 + "]" * 900 + "}", f"field 'case[0][0]': nested deeper than {MAX_DEPTH}"),
    ("[" * 100_000, f"nested deeper than {MAX_DEPTH} levels"),
    ('{"a": 1} {"b": 2}', "not valid JSON: Extra data"),
    ("\xff", "not UTF-8 text at byte 0"),
])
def test_each_refusal_names_the_file_line_and_field(tmp_path: Path, parser: str, line: str, says: str) -> None:
    data = line.encode("latin-1") if line == "\xff" else line.encode()
    path = _file(tmp_path, b'{"fine": 0.30000000000000004}\n' + data + b"\n")
    with pytest.raises(DataError) as info:
        list(iter_json_lines(path))
    assert info.value.line == 2 and info.value.path == str(path)
    assert says in str(info.value) and len(str(info.value)) < 400


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30, 10**308, 1.5e308, 1e-400, -0.0,
                                   0.1 + 0.2, 123456789012345678901234567890.5])
def test_numbers_a_double_holds_are_read(tmp_path: Path, parser: str, value: float) -> None:
    path = _file(tmp_path, json.dumps({"case": {"x": value}}).encode())
    [(_, got)] = list(iter_json_lines(path))
    assert float(got["case"]["x"]) == float(value)


def test_the_last_line_cut_short_is_called_truncated(tmp_path: Path, parser: str) -> None:
    with pytest.raises(DataError, match=r":2: truncated line \(the file ends mid-prompts\)"):
        list(iter_json_lines(_file(tmp_path, b'{"a": 1}\n{"a": '), what="prompts file"))


def test_on_error_reports_every_bad_line_and_reads_on(tmp_path: Path, parser: str) -> None:
    seen: list[DataError] = []
    path = _file(tmp_path, b'{"a": 1}\nnope\n{"a": NaN}\n{"a": 4}\n')
    assert list(iter_json_lines(path, on_error=seen.append)) == [(1, {"a": 1}), (4, {"a": 4})]
    assert [e.line for e in seen] == [2, 3]


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: p / "missing.jsonl", "no such row file (run it first)"),
    (lambda p: p, "is a directory, expected a JSONL row file"),
    (lambda p: _file(p, b"\x1f\x8b\x08\x00garbage"), "damaged or truncated gzip file"),
])
def test_files_that_cannot_be_read_name_themselves(tmp_path: Path, make, says: str) -> None:
    with pytest.raises(DataError, match=re.escape(says)):
        list(iter_json_lines(make(tmp_path), fix="run it first"))


def test_loads_bounded_is_the_exact_verdict() -> None:
    assert loads_bounded('{"a": [1, 2.5, "x\u2028"]}', "<here>") == {"a": [1, 2.5, "x\u2028"]}
    with pytest.raises(DataError, match=r"^<here>:7: field 'a': NaN"):
        loads_bounded(b'{"a": NaN}', "<here>", 7)
