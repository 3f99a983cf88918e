"""Reward tables as data: loading, validation and every SpecError (no pytest collection here)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _calc_env import SumsEnv

from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.envs import refund
from pytest_rlgate.errors import SpecError
from pytest_rlgate.rewards.tables import RewardValueError, load_reward_table

ROOT = Path(__file__).resolve().parents[1]
HEADER = "reward: pytest_rlgate.envs.refund:score\nrows:\n"
ROW = "  - {prompt: p, reply: r, expected: 1}\n"
#: the session's environment, as the plugin passes it (the default one)
SESSION = load_env(None)


def table(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a module into tmp_path and make it importable for this test only."""

    def write(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
        monkeypatch.delitem(sys.modules, name, raising=False)  # undone after the test: no stale module

    monkeypatch.syspath_prepend(str(tmp_path))
    return write


def spec_error(path: Path, **kwargs: object) -> SpecError:
    with pytest.raises(SpecError) as exc:
        load_reward_table(path, **kwargs)  # type: ignore[arg-type]
    return exc.value


# --------------------------------------------------------------------------- good tables


def test_yaml_rows_with_lines_case_and_category(tmp_path: Path) -> None:
    path = table(tmp_path, HEADER + """\
      - id: no_id-asks
        prompt: I need help with a refund
        reply: What is the order id?
        expected: 1
        note: asks

      - prompt: please check ORD-4017 for me
        reply: Done.
        expected: 0.0
        tolerance: 0.01
    """)
    first, second = load_reward_table(path, default_env=SESSION)
    assert (first.id, first.line, first.category, first.expected, first.note) == ("no_id-asks", 3, "no_id", 1.0, "asks")
    assert first.case == refund.case_for("I need help with a refund")
    assert first.reward is refund.score and first.evaluate() == 1.0
    assert (second.id, second.line, second.tolerance, second.category) == ("row-9", 9, 0.01, "with_id")
    assert second.location == f"{path}:9"


def test_jsonl_with_header_line_and_explicit_case(tmp_path: Path) -> None:
    path = table(tmp_path, """\
        {"reward": "pytest_rlgate.envs.refund:score", "tolerance": 0.5}

        {"id": "a", "case": {"order_id": null, "in_domain": true, "category": "no_id"}, "reply": "x", "expected": 0.4}
        {"id": "b", "prompt": "How tall is Kilimanjaro?", "reply": "Tall.", "expected": 1, "category": "mine"}
    """, "t.jsonl")
    a, b = load_reward_table(path)
    assert (a.line, a.category, a.tolerance, a.prompt) == (3, "no_id", 0.5, None)
    assert a.evaluate() == 0.4
    assert (b.line, b.category) == (4, "mine")


def test_top_level_list_uses_the_default_reward(tmp_path: Path) -> None:
    path = table(tmp_path, "- {prompt: hi, reply: hello, expected: 1}\n")
    [row] = load_reward_table(path, default_reward="pytest_rlgate.envs.refund:score")
    assert row.reward_path == "pytest_rlgate.envs.refund:score" and row.evaluate() == 1.0


def test_steps_are_passed_to_a_reward_that_takes_them(tmp_path: Path) -> None:
    path = table(tmp_path, HEADER + """\
      - prompt: please check ORD-4017 for me
        reply: Looking.
        steps: [{tool: lookup_order, arguments: {order_id: ORD-4017}}]
        expected: 1.0
      - prompt: please check ORD-4017 for me
        reply: Looking.
        steps: []
        expected: 0.0
    """)
    called, empty = load_reward_table(path)
    assert called.pass_steps and called.evaluate() == 1.0
    assert empty.steps == [] and empty.evaluate() == 0.0


def test_a_plain_two_argument_reward_and_a_prompt_keyword(tmp_path: Path, importable: Any) -> None:
    importable(
        "myrewards",
        "def exact(reply, case):\n    return float(reply == case)\n"
        "def with_prompt(reply, case, prompt=None):\n    return float(prompt in reply)\n"
        "def text_out(reply, case):\n    return 'high'\n"
        "def scores(reply, case):\n    return {'a': 0.5}\n"
        "NOT_CALLABLE = 3\n",
    )
    path = table(tmp_path, """\
        reward: myrewards:exact
        rows:
          - {id: same, prompt: '84', reply: '84', expected: 1}
          - {id: kw, reward: 'myrewards:with_prompt', prompt: abc, reply: xxabcxx, expected: 1}
          - {id: text, reward: 'myrewards:text_out', prompt: a, reply: b, expected: 1}
          - {id: field, reward: 'myrewards:scores', field: a, prompt: a, reply: b, expected: 0.5}
          - {id: nofield, reward: 'myrewards:scores', field: b, prompt: a, reply: b, expected: 0.5}
    """)
    same, kw, text, field, nofield = load_reward_table(path)
    assert same.case == "84" and same.category is None and same.evaluate() == 1.0  # no case_for: the prompt
    assert kw.pass_prompt and kw.evaluate() == 1.0
    with pytest.raises(RewardValueError, match="returned 'high'; a reward must return a number"):
        text.evaluate()
    assert field.evaluate() == 0.5
    with pytest.raises(RewardValueError, match="has no field 'b'"):
        nofield.evaluate()


def test_case_for_from_the_header(tmp_path: Path, importable: Any) -> None:
    importable(
        "env2",
        "def case_for(prompt):\n    return {'category': 'long' if len(prompt) > 3 else 'short'}\n"
        "def score(reply, case):\n    return 1.0\n"
        "def broken(prompt):\n    raise RuntimeError('boom')\n",
    )
    row_text = "  - {prompt: abcdef, reply: x, expected: 1}\n"
    path = table(tmp_path, "reward: env2:score\ncase_for: env2:case_for\nrows:\n" + row_text)
    [row] = load_reward_table(path)
    assert row.category == "long"
    bad = table(tmp_path, "reward: env2:score\ncase_for: env2:broken\nrows:\n" + row_text, "bad.yaml")
    assert "case_for('abcdef') raised RuntimeError: boom" in str(spec_error(bad))


def test_the_case_comes_from_the_tables_env_else_the_sessions(tmp_path: Path, importable: Any) -> None:
    importable("exact", "def exact(reply, case):\n    return float(reply == str(case['answer']))\n")
    rows = "rows:\n  - {prompt: 'What is 2 + 3?', reply: '5', expected: 1}\n"
    own = table(tmp_path, "env: _calc_env:SumsEnv\n" + rows, "own.yaml")
    [row] = load_reward_table(own, default_env=SESSION, default_reward="exact:exact")
    assert (row.case, row.category) == ({"answer": 5, "category": "arithmetic"}, "arithmetic")
    assert row.reward_path == "environment sums's score" and row.evaluate() == 1.0  # no reward: the env's score
    session = table(tmp_path, "reward: exact:exact\n" + rows, "session.yaml")
    [row] = load_reward_table(session, default_env=load_env(SumsEnv))
    assert row.case == {"answer": 5, "category": "arithmetic"} and row.evaluate() == 1.0
    [row] = load_reward_table(session)  # no environment at all: the prompt text is the case
    assert row.case == "What is 2 + 3?"


@pytest.mark.parametrize(("spec", "needle"), [("no_such_module_xyz:Env", "env: environment 'no_such_module_xyz:Env':"),
                                              ("[1]", "'env' must be an environment spec string")])
def test_a_bad_env_is_a_spec_error_naming_the_line(tmp_path: Path, spec: str, needle: str) -> None:
    path = table(tmp_path, f"tolerance: 0.1\nenv: {spec}\nrows:\n" + ROW)
    error = spec_error(path)
    assert str(error).startswith(f"{path}:1: ") and needle in str(error)


def test_display_path_names_the_file_in_messages(tmp_path: Path) -> None:
    path = table(tmp_path, "")
    assert str(spec_error(path, display_path="reward_specs/t.yaml")).startswith("reward_specs/t.yaml:1: ")


def test_the_shipped_refund_table_loads_and_passes() -> None:
    rows = load_reward_table(ROOT / "reward_specs" / "refund.yaml", default_env=SESSION)
    assert len(rows) >= 30
    assert {row.category for row in rows} == {"with_id", "no_id", "off_topic"}
    assert sum(row.id.startswith("hack-") for row in rows) >= 4
    for row in rows:
        assert abs(row.evaluate() - row.expected) <= row.tolerance, row.id
        assert row.id.startswith((row.category or "", "hack-"))


# --------------------------------------------------------------------------- bad tables: one test per mistake


@pytest.mark.parametrize(
    ("name", "text", "line", "needle"),
    [
        ("syntax.yaml", HEADER + "  - id: a\n    reply: [unclosed\n", 5, "YAML syntax error"),
        ("tabs.yaml", HEADER + "  - id: a\n\treply: x\n", 4, "YAML syntax error"),
        ("syntax.jsonl", '{"reward": "pytest_rlgate.envs.refund:score"}\n{"id": "a",\n', 2, "not valid JSON"),
        ("empty.yaml", "", 1, "the table is empty"),
        ("comments.yaml", "# nothing here\n", 1, "the table is empty"),
        ("norows.yaml", "reward: pytest_rlgate.envs.refund:score\nrows: []\n", 1, "has no rows"),
        ("empty.jsonl", "\n", 1, "has no rows"),
        ("headeronly.jsonl", '{"reward": "pytest_rlgate.envs.refund:score"}\n', 1, "has no rows"),
        ("rowsmissing.yaml", "reward: pytest_rlgate.envs.refund:score\n", 1, "no 'rows:' list"),
        ("scalar.yaml", "just text\n", 1, "expected a mapping"),
        ("missing-expected.yaml", HEADER + "  - id: a\n    prompt: p\n    reply: r\n", 3,
         "row is missing 'expected'; add `expected: ...`"),
        ("missing-reply.yaml", HEADER + "  - {id: a, prompt: p, expected: 1}\n", 3, "row is missing 'reply'"),
        ("missing-prompt.yaml", HEADER + "  - {id: a, reply: r, expected: 1}\n", 3, "needs a 'prompt'"),
        ("typo.yaml", HEADER + "  - id: a\n    prompt: p\n    reply: r\n    expectd: 1\n", 6,
         "unknown field 'expectd'"),
        ("header-typo.yaml", "reward: pytest_rlgate.envs.refund:score\nreward_fn: x\nrows: []\n", 1,
         "unknown top-level field(s) 'reward_fn'"),
        ("text-expected.yaml", HEADER + "  - id: a\n    prompt: p\n    reply: r\n    expected: one\n", 6,
         "'expected' must be a number, got 'one'"),
        ("quoted-expected.yaml", HEADER + "  - {id: a, prompt: p, reply: r, expected: '1.0'}\n", 3,
         "'expected' must be a number, got '1.0'"),
        ("bool-expected.yaml", HEADER + "  - {id: a, prompt: p, reply: r, expected: true}\n", 3, "must be a number"),
        ("nan-expected.yaml", HEADER + "  - {id: a, prompt: p, reply: r, expected: .nan}\n", 3, "must be a number"),
        ("negative-tolerance.yaml", HEADER + "  - {id: a, prompt: p, reply: r, expected: 1, tolerance: -1}\n", 3,
         "'tolerance' must be at least 0"),
        ("number-reply.yaml", HEADER + "  - {id: a, prompt: p, reply: 42, expected: 1}\n", 3,
         "'reply' must be a string"),
        ("bad-steps.yaml", HEADER + "  - {id: a, prompt: p, reply: r, steps: lookup, expected: 1}\n", 3,
         "'steps' must be a list of mappings"),
        ("bad-case.yaml", HEADER + "  - {id: a, case: [1], reply: r, expected: 1}\n", 3, "'case' must be a mapping"),
        ("row-not-mapping.yaml", HEADER + "  - just a string\n", 3, "a row must be a mapping"),
        ("dup-id.yaml", HEADER + "  - {id: a, prompt: p, reply: r, expected: 1}\n  - {id: a, prompt: q, reply: s, "
         "expected: 1}\n",
         4, "duplicate id 'a' (first used on line 3)"),
        ("dup-key.yaml", HEADER + "  - id: a\n    prompt: p\n    reply: r\n    reply: s\n    expected: 1\n", 6,
         "field 'reply' appears twice"),
        ("bad-id.yaml", HEADER + "  - {id: 'has space', prompt: p, reply: r, expected: 1}\n", 3,
         "id 'has space' must be letters"),
        ("no-reward.yaml", "rows:\n  - {id: a, prompt: p, reply: r, expected: 1}\n", 2, "no reward function"),
        ("unknown-module.yaml", "reward: no_such_module_xyz:score\nrows:\n  - {prompt: p, reply: r, expected: 1}\n", 1,
         "cannot import module 'no_such_module_xyz'"),
        ("unknown-attr.yaml", "reward: pytest_rlgate.envs.refund:scroe\nrows:\n" + ROW, 1,
         "has no attribute 'scroe'; callables there: "),
        ("not-callable.yaml", "reward: pytest_rlgate.envs.refund:SYSTEM\nrows:\n" + ROW,
         1, "is a str, not a function"),
        ("no-colon.yaml", "reward: pytest_rlgate.envs.refund.score\nrows:\n  - {prompt: p, reply: r, expected: 1}\n", 1,
         "must be 'module:attr'"),
        ("row-reward.yaml", HEADER + "  - {id: a, reward: 'x:y:z', prompt: p, reply: r, expected: 1}\n", 3,
         "must be 'module:attr'"),
        ("steps-unsupported.yaml", "reward: pytest_rlgate.envs.refund:case_for\nrows:\n"
         "  - {id: a, prompt: p, reply: r, steps: [], expected: 1}\n", 3, "takes no 'steps' parameter"),
    ],
)
def test_bad_table_names_file_line_and_fix(tmp_path: Path, name: str, text: str, line: int, needle: str) -> None:
    path = table(tmp_path, text, name)
    error = spec_error(path)
    assert error.path == str(path)
    assert error.line == line, str(error)
    assert needle in str(error)
    assert str(error).startswith(f"{path}:{line}: ")


def test_a_module_that_fails_to_import_is_a_spec_error(tmp_path: Path, importable: Any) -> None:
    importable("explodes", "raise ValueError('bad config')\n")
    path = table(tmp_path, "reward: explodes:score\nrows:\n  - {prompt: p, reply: r, expected: 1}\n")
    assert "importing 'explodes' raised ValueError: bad config" in str(spec_error(path))


def test_not_utf8_and_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes(b"reward: \xff\n")
    assert "not UTF-8" in str(spec_error(path))
    other = table(tmp_path, "x", "t.csv")
    assert "unknown table format '.csv'" in str(spec_error(other))


def test_yaml_scientific_notation_is_a_number(tmp_path: Path) -> None:
    path = table(tmp_path, HEADER + "  - {id: a, prompt: p, reply: r, expected: 4e-1, tolerance: 1e-3}\n")
    [row] = load_reward_table(path)
    assert (row.expected, row.tolerance) == (0.4, 0.001)


def test_a_jsonl_header_may_omit_the_reward(tmp_path: Path) -> None:
    path = table(tmp_path, '{"tolerance": 0.5}\n{"prompt": "p", "reply": "r", "expected": 1}\n', "t.jsonl")
    [row] = load_reward_table(path, default_reward="pytest_rlgate.envs.refund:score")
    assert (row.tolerance, row.line, row.id) == (0.5, 2, "row-2")
