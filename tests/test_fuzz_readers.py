"""Fuzz the three file readers (issue 11): whatever the bytes, only the project's own errors.

The spec reader (reward tables, YAML and JSONL), the row reader and the prompt reader get
random bytes, random JSON lines, near-valid objects built from their own field names, and
YAML assembled from the tokens that break parsers (anchors, aliases, merge keys, tags, BOMs,
deep brackets). Each may accept a file or refuse it with an :class:`RlgateError` (one line,
naming the file); any other exception - ``RecursionError``, ``TypeError``, ``OverflowError``
- is a bug this test reports with the input that caused it.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from pytest_rlgate.data.jsonl import loads_bounded
from pytest_rlgate.data.prompts import read_prompts
from pytest_rlgate.data.rows import REQUIRED_FIELDS, read_rows, validate_row
from pytest_rlgate.errors import RlgateError
from pytest_rlgate.options import CONFIDENCE, HOLDOUT_FRACTION, RESAMPLES, SEED, SHARE
from pytest_rlgate.rewards.tables import load_reward_table

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REWARD = "pytest_rlgate.envs.refund:score"

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300, max_value=10**400)
           | st.floats() | st.text(max_size=20) | st.sampled_from([REWARD, "builtins:eval", "no_id", "x:y:z"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=25)


def near_valid(fields: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects keyed by a reader's own field names (and a stray one), with random values."""
    return st.dictionaries(st.sampled_from((*fields, "zz", "1")), json_values, max_size=len(fields) + 1)


SPEC_FIELDS = ("reward", "case_for", "env", "tolerance", "field", "id", "prompt", "case", "reply", "steps",
               "expected", "category", "note")
ROW_FIELDS = (*REQUIRED_FIELDS, "scenario_id", "eval_run", "rlgate_rows")
PROMPT_FIELDS = ("prompt", "case", "category", "scenario_id")

YAML_TOKENS = ["&a ", "*a", "&b [*a, *a, *a]", "<<: *a", "!!python/object:os.system ", "!foo ", "!!binary ",
               "- ", ": ", "? ", "{", "}", "[", "]", ",", "\n", "  ", "\t", "rows", "reward", REWARD, "expected",
               "reply", "prompt", "tolerance", ".inf", ".nan", "1e5", "9" * 400, "'", '"', "#", "\ufeff", "%YAML 1.1",
               "---", "...", "|", ">", "\x00", "\u2028"]
yaml_texts = (st.lists(st.sampled_from(YAML_TOKENS), max_size=60).map("".join)
              | st.builds(lambda data: yaml.safe_dump(data, allow_unicode=True), json_values)
              | st.builds(lambda rows: yaml.safe_dump({"reward": REWARD, "rows": rows}, allow_unicode=True),
                          st.lists(near_valid(SPEC_FIELDS), max_size=3)))


def json_lines(fields: tuple[str, ...], *, deepest: int = 3000) -> st.SearchStrategy[bytes]:
    """JSONL files: random values, near-valid objects, bracket towers up to *deepest* levels, text."""
    line = (json_values.map(lambda v: json.dumps(v, allow_nan=True)) | near_valid(fields).map(json.dumps)
            | st.integers(1, deepest).map(lambda n: "[" * n + "]" * n) | st.text(max_size=40))
    return st.lists(line, max_size=5).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass"))


def only_own_errors(read: Callable[[Path], Any], suffix: str, data: bytes) -> None:
    """Write *data* to a file and read it: any exception but an ``RlgateError`` fails, with the input."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzz{suffix}"
        path.write_bytes(data)
        try:
            read(path)
        except RlgateError as exc:
            assert "\n" not in str(exc).strip(), f"multi-line message for {data[:200]!r}"
        except Exception as exc:  # exactly what this test is after
            raise AssertionError(f"{type(exc).__name__}: {str(exc)[:200]} for input {data[:300]!r}") from exc


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@FUZZ
@given(st.binary(max_size=512) | yaml_texts.map(_encode))
def test_the_spec_reader_on_yaml(data: bytes) -> None:
    only_own_errors(load_reward_table, ".yaml", data)


@FUZZ
@given(st.binary(max_size=512) | json_lines(SPEC_FIELDS))
def test_the_spec_reader_on_jsonl(data: bytes) -> None:
    only_own_errors(load_reward_table, ".jsonl", data)


#: Nesting the row and prompt readers are fuzzed up to; a far deeper line has its own test.
PARSABLE_DEPTH = 500


@FUZZ
@given(st.binary(max_size=512) | json_lines(ROW_FIELDS, deepest=PARSABLE_DEPTH))
def test_the_row_reader(data: bytes) -> None:
    only_own_errors(lambda path: list(read_rows(path)), ".jsonl", data)


@FUZZ
@given(st.binary(max_size=512) | json_lines(PROMPT_FIELDS, deepest=PARSABLE_DEPTH))
def test_the_prompt_reader(data: bytes) -> None:
    only_own_errors(read_prompts, ".jsonl", data)


@pytest.mark.parametrize("read", [lambda path: list(read_rows(path)), read_prompts], ids=["rows", "prompts"])
def test_a_deeply_nested_json_line_is_a_data_error(read: Callable[[Path], Any]) -> None:
    only_own_errors(read, ".jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n")


def test_the_strategies_reach_past_the_parsers() -> None:
    """The near-valid objects do get read as rows: a table of them loads (the fuzz is not all syntax errors)."""
    text = yaml.safe_dump({"reward": REWARD, "rows": [{"prompt": "p", "reply": "r", "expected": 1}]})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.yaml"
        path.write_text(text)
        [row] = load_reward_table(path)
    assert row.expected == 1.0 and not math.isnan(row.tolerance)


# ---------------------------------------------------------------------------------------
# Edge numbers and separators: every JSONL format, one reader, the same bounds

#: Number literals at and past every edge a reader meets: a double's range, 2**53 and 2**63,
#: subnormals, Python's 4300-digit conversion limit, and what JSON does not allow at all.
EDGE_NUMBERS = ["0", "-0", "-0.0", "0.30000000000000004", "1e-320", "5e-324", "1e-400", "1.7976931348623157e308",
                "1.8e308", "1e400", "-1e400", str(2**53), str(2**53 + 1), str(2**63), str(2**64), str(-(2**63) - 1),
                "9" * 308, "9" * 309, "9" * 400, "-" + "9" * 400, "9" * 5000, "1." + "1" * 400, "NaN", "Infinity",
                "-Infinity", "1E5", "12e-7"]
edge_numbers = st.sampled_from(EDGE_NUMBERS) | st.integers(0, 450).map(lambda n: "1" + "0" * n) \
    | st.floats(allow_nan=False, allow_infinity=False).map(repr)
#: Characters ``str.splitlines`` would cut a line at, and other whitespace, put inside strings.
SEPARATORS = ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\r", "\t", "\u00a0", "\ufeff"]
texts_with_separators = st.lists(st.sampled_from(SEPARATORS) | st.text(alphabet="ab ", max_size=3), min_size=1,
                                 max_size=6).map("".join).filter(lambda t: t.strip())


def _row_line(prompt: str, index: int, score: str, marker: str) -> str:
    return ('{"prompt": ' + json.dumps(prompt, ensure_ascii=False) + ', "category": "c", "rollout_index": '
            + str(index) + ', "reply": "r", "score": ' + score + ', "reward": 1, "markers": {"m": ' + marker + "}}")


def _in_bounds(literal: str) -> bool:
    """Whether a number literal is one a double holds (the exact reader's rule, written independently)."""
    if literal in ("NaN", "Infinity", "-Infinity"):
        return False
    digits = literal.lstrip("-")
    if digits.isdigit():  # the largest double is 2**1024 - 2**971; from 2**1024 - 2**970 up, it rounds to inf
        return len(digits) <= 309 and int(digits) < 2**1024 - 2**970
    return math.isfinite(float(literal))


def _within_2_53(literal: str) -> bool:
    return _in_bounds(literal) and abs(Decimal(literal)) <= 2**53


@FUZZ
@given(st.lists(st.tuples(texts_with_separators, edge_numbers, edge_numbers), min_size=1, max_size=4),
       st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_row_files_bound_every_number_and_never_split_a_line(lines: list[tuple[str, str, str]], end: str,
                                                             blank: bool) -> None:
    data = (end if blank else "").join(
        _row_line(f"p{i} {text}", 0, score, marker) + end for i, (text, score, marker) in enumerate(lines))
    exact = True  # the exact parser's verdict, line by line, against which the fast path is held
    try:
        for line in data.split("\n"):
            if line.strip():
                validate_row(loads_bounded(line, "<line>", 1))
    except RlgateError:
        exact = False
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.jsonl"
        path.write_bytes(data.encode("utf-8"))
        try:
            rows = list(read_rows(path))
        except RlgateError as exc:
            assert not exact, f"the fast path refused what the exact parser accepts: {exc}"
            text = str(exc)
            assert "\n" not in text and len(text) < 500 and f"{path}:" in text, text
            assert not all(_within_2_53(s) and _within_2_53(m) for _, s, m in lines), f"refused a valid file: {text}"
            return
    assert exact, "the fast path accepted what the exact parser refuses"
    assert [row["prompt"] for row in rows] == [f"p{i} {text}" for i, (text, _, _) in enumerate(lines)]
    for row in rows:
        assert math.isfinite(float(row["score"])) and abs(row["score"]) <= 2**53
        assert math.isfinite(float(row["markers"]["m"])) and abs(row["markers"]["m"]) <= 2**53


@FUZZ
@given(st.lists(st.tuples(texts_with_separators, edge_numbers), min_size=1, max_size=4))
def test_prompt_files_and_reward_tables_read_the_same_lines_with_the_same_bounds(lines: list[tuple[str, str]]) -> None:
    prompt_lines = ['{"prompt": ' + json.dumps(f"p{i} {text}", ensure_ascii=False) + ', "case": {"x": ' + number
                    + '}, "category": "no_id"}' for i, (text, number) in enumerate(lines)]
    table_lines = ['{"reward": "' + REWARD + '"}'] + [
        '{"prompt": ' + json.dumps(f"p{i} {text}", ensure_ascii=False) + ', "reply": "r", "expected": ' + number + "}"
        for i, (text, number) in enumerate(lines)]
    valid = all(_in_bounds(number) for _, number in lines)
    with tempfile.TemporaryDirectory() as folder:
        prompts, table = Path(folder) / "p.jsonl", Path(folder) / "t.jsonl"
        prompts.write_bytes(("\n".join(prompt_lines) + "\n").encode())
        table.write_bytes(("\n".join(table_lines) + "\n").encode())
        try:
            items = read_prompts(prompts)
        except RlgateError as exc:
            assert not valid and "\n" not in str(exc), str(exc)
        else:
            assert valid and [item["prompt"] for item in items] == [f"p{i} {t}" for i, (t, _) in enumerate(lines)]
        try:
            rows = load_reward_table(table)
        except RlgateError as exc:  # a valid number may still be refused by the table (expected outside [0, 1]...)
            assert "\n" not in str(exc) and f"{table}:" in str(exc), str(exc)
            assert valid or "field 'expected'" in str(exc) or "'expected'" in str(exc), str(exc)
        else:
            assert valid and len(rows) == len(lines)


@FUZZ
@given(edge_numbers | st.text(max_size=12))
def test_every_numeric_flag_accepts_its_range_or_refuses_in_one_line(text: str) -> None:
    import argparse


    for number in (CONFIDENCE, HOLDOUT_FRACTION, RESAMPLES, SEED, SHARE):
        try:
            value = number(text)
        except argparse.ArgumentTypeError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 300
        else:
            assert number.problem(value) is None and math.isfinite(value)
            assert value == 0 or abs(value) >= 2.2250738585072014e-308  # no subnormal gets through
