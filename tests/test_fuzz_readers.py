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
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from pytest_rlgate.data.prompts import read_prompts
from pytest_rlgate.data.rows import REQUIRED_FIELDS, read_rows
from pytest_rlgate.errors import RlgateError
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
