"""Reward tables no editor would write (issue 11): each is one bounded ``spec-error``, never more.

Deep nesting, alias bombs, duplicate keys, keys that are not text, merge keys, unsafe tags,
BOMs, enormous numbers, non-finite tolerances, modules that ``sys.exit`` on import and
builtins that evaluate text: the reader turns every one into a ``SpecError`` naming the
file and line in one line of at most ``MAX_SPEC_MESSAGE`` characters, fast, and the plugin
turns it into one error item while the other tables still run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import hypothesis  # noqa: F401 - imported once; pytester runs would re-import it otherwise
import pytest

from pytest_rlgate.errors import MAX_SPEC_MESSAGE, SpecError
from pytest_rlgate.rewards.tables import MAX_DEPTH, load_reward_table

HEAD = "reward: pytest_rlgate.envs.refund:score\n"
ROW = "  - {prompt: p, reply: r, expected: 1}\n"
JSON_HEAD = json.dumps({"reward": "pytest_rlgate.envs.refund:score"}) + "\n"
#: nine aliases per level, six levels: 9**6 leaves once expanded
BOMB = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9 if i else ["x"] * 9) + "]\n" for i in range(6))

#: name -> (table text, line the error names, what the message says)
HOSTILE: dict[str, tuple[str, int | None, str]] = {
    "deep.yaml": (HEAD + "rows:\n  - " + "[" * 5000 + "]" * 5000 + "\n", 3, f"nested deeper than {MAX_DEPTH}"),
    "deep-mapping.yaml": (HEAD + "rows:\n  - {prompt: p, reply: r, expected: 1, case: " + "{a: " * 200 + "1"
                          + "}" * 201 + "\n", 3, f"nested deeper than {MAX_DEPTH}"),
    "bomb.yaml": (BOMB + HEAD + "rows:\n" + ROW, 6, "YAML aliases expand to more than"),
    "bomb-row.yaml": (BOMB + HEAD + "rows:\n  - *l5\n", 6, "YAML aliases expand to more than"),
    "recursive.yaml": (HEAD + "rows:\n  - &r {prompt: p, reply: r, expected: 1, case: *r}\n", 3, "recursive"),
    "two-rows.yaml": (HEAD + "rows:\n" + ROW + "rows:\n" + ROW, 4, "field 'rows' appears twice"),
    "mixed-keys.yaml": (HEAD + "1: one\nrows:\n" + ROW, 1, "field name 1 is not text (int)"),
    "mixed-row-keys.yaml": (HEAD + "rows:\n  - {prompt: p, reply: r, expected: 1, 2: x, zz: 1}\n", 3,
                            "field name 2 is not text"),
    "merge.yaml": (HEAD + "rows:\n  - &a {prompt: p, reply: r, expected: 1}\n  - <<: *a\n    id: b\n", 4,
                   "YAML merge key '<<' is not supported"),
    "python-tag.yaml": (HEAD + "rows:\n  - !!python/object:os.system {prompt: p}\n", 3,
                        "unsupported YAML tag 'tag:yaml.org,2002:python/object:os.system'"),
    "custom-tag.yaml": (HEAD + "rows:\n  - {prompt: !shell p, reply: r, expected: 1}\n", 3,
                        "unsupported YAML tag '!shell'"),
    "control-char.yaml": (HEAD + "rows:\n  - {prompt: p, reply: \"r\x00\", expected: 1}\n", None,
                          "unacceptable character"),
    "huge-number.yaml": (HEAD + "rows:\n  - {prompt: p, reply: r, expected: " + "9" * 400 + "}\n", 3,
                         "'expected' must be a finite number"),
    "huge-number.jsonl": (JSON_HEAD + '{"prompt": "p", "reply": "r", "expected": ' + "9" * 400 + "}\n", 2,
                          "field 'expected': a 400-digit integer is beyond a double's range"),
    "too-many-digits.jsonl": (JSON_HEAD + '{"prompt": "p", "reply": "r", "expected": ' + "9" * 5000 + "}\n", 2,
                              "field 'expected': a 5000-digit integer"),
    "deep.jsonl": (JSON_HEAD + '{"prompt": "p", "reply": "r", "expected": 1, "case": ' + "[" * 100_000
                   + "]" * 100_000 + "}\n", 2, f"nested deeper than {MAX_DEPTH}"),
    "deep-but-parsable.jsonl": (JSON_HEAD + '{"prompt": "p", "reply": "r", "expected": 1, "case": ' + "[" * 500
                                + "]" * 500 + "}\n", 2, f"nested deeper than {MAX_DEPTH}"),
    "tolerance-inf.yaml": (HEAD + "tolerance: .inf\nrows:\n" + ROW, 1, "'tolerance' must be a finite number"),
    "row-tolerance-inf.yaml": (HEAD + "rows:\n  - {prompt: p, reply: r, expected: 1, tolerance: .inf}\n", 3,
                               "'tolerance' must be a finite number"),
    "tolerance-nan.yaml": (HEAD + "tolerance: .nan\nrows:\n" + ROW, 1, "'tolerance' must be a number"),
    "tolerance-negative.yaml": (HEAD + "tolerance: -0.5\nrows:\n" + ROW, 1, "'tolerance' must be at least 0"),
    "tolerance-inf.jsonl": ('{"reward": "pytest_rlgate.envs.refund:score", "tolerance": Infinity}\n'
                            + '{"prompt": "p", "reply": "r", "expected": 1}\n', 1,
                            "field 'tolerance': Infinity is not a number"),
    "expected-inf.yaml": (HEAD + "rows:\n  - {prompt: p, reply: r, expected: -.inf}\n", 3,
                          "'expected' must be a finite number"),
    "eval-case-for.yaml": (HEAD + "case_for: builtins:eval\nrows:\n" + ROW, 1,
                           "case_for 'builtins:eval' evaluates or opens what it is given"),
    "exec-reward.yaml": ("reward: builtins:exec\nrows:\n" + ROW, 1, "evaluates or opens"),
    "import-reward.yaml": ("reward: builtins:__import__\nrows:\n" + ROW, 1, "evaluates or opens"),
    "importlib-reward.yaml": ("reward: importlib:import_module\nrows:\n" + ROW, 1, "evaluates or opens"),
    "exits-on-import.yaml": ("reward: rlgate_exits_on_import:score\nrows:\n" + ROW, 1,
                             "importing 'rlgate_exits_on_import' raised SystemExit: 3"),
    "floods-on-import.yaml": ("reward: rlgate_floods_on_import:score\nrows:\n" + ROW, 1,
                              "importing 'rlgate_floods_on_import' raised RuntimeError: xxxx"),
    "huge-id.yaml": (HEAD + "rows:\n  - {id: " + "x" * 100_000 + ", prompt: p, reply: r, expected: 1}\n", 3,
                     "(100002 characters) must be letters"),
    "huge-row.yaml": (HEAD + "rows:\n  - [" + ", ".join(["word"] * 50_000) + "]\n", 3,
                      "a row must be a mapping"),
}

#: Modules the hostile tables import; each misbehaves on import.
MODULES = {"rlgate_exits_on_import": "raise SystemExit(3)\n",
           "rlgate_floods_on_import": "raise RuntimeError('x' * 1_000_000)\n"}


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "mods"
    folder.mkdir()
    for name, source in MODULES.items():
        (folder / f"{name}.py").write_text(source)
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_table_is_one_bounded_spec_error(tmp_path: Path, modules: Path, name: str) -> None:
    text, line, says = HOSTILE[name]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    started = time.process_time()  # this process's CPU: a bound on the work, whatever else the machine runs
    with pytest.raises(SpecError) as info:
        load_reward_table(path)
    assert time.process_time() - started < 5
    error = info.value
    assert error.path == str(path) and error.line == line, str(error)
    assert says in str(error)
    assert "\n" not in str(error) and len(error.reason) <= MAX_SPEC_MESSAGE


def test_a_merge_key_is_named_as_such_not_as_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(HEAD + "rows:\n  - &a {prompt: p, reply: r, expected: 1}\n  - <<: *a\n    reply: s\n")
    with pytest.raises(SpecError) as info:
        load_reward_table(path)
    assert "merge key" in str(info.value) and "appears twice" not in str(info.value)


def test_an_unsafe_tag_is_not_blamed_on_indentation(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(HEAD + "rows:\n  - !!python/object/apply:os.system [echo hi]\n")
    with pytest.raises(SpecError) as info:
        load_reward_table(path)
    assert "unsupported YAML tag" in str(info.value) and "indentation" not in str(info.value)


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl"])
def test_a_byte_order_mark_is_read_through(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"bom{suffix}"
    body = HEAD + "rows:\n" + ROW if suffix == ".yaml" else JSON_HEAD + '{"prompt": "p", "reply": "r", "expected": 1}\n'
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    [row] = load_reward_table(path)
    assert (row.reply, row.expected) == ("r", 1.0)


def test_aliases_in_reasonable_numbers_still_work(tmp_path: Path) -> None:
    path = tmp_path / "shared.yaml"
    first = "  - {id: first, case: &c {category: no_id, order_id: null}, reply: 'What is the order id?', expected: 1}\n"
    rows = "".join(f"  - {{id: r{i}, case: *c, reply: 'What is the order id?', expected: 1}}\n" for i in range(300))
    path.write_text(HEAD + "rows:\n" + first + rows)
    loaded = load_reward_table(path)
    assert len(loaded) == 301 and all(row.case == loaded[0].case for row in loaded)


def test_a_directory_is_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(SpecError, match="cannot be read"):
        load_reward_table(tmp_path / "dir.yaml")


def test_the_plugin_keeps_every_hostile_table_to_one_error_item(pytester: pytest.Pytester) -> None:
    for name, source in MODULES.items():
        pytester.makepyfile(**{name: source})
    pytester.makeini("[pytest]\npythonpath = .\n")
    specs = pytester.mkdir("reward_specs")
    for name, (text, _, _) in HOSTILE.items():
        (specs / name).write_text(text, encoding="utf-8")
    (specs / "good.yaml").write_text(HEAD + "rows:\n  - {id: asks, prompt: I need help with a refund, "
                                            "reply: 'What is the order id?', expected: 1.0}\n")
    started = time.perf_counter()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rE", timeout=300)
    assert time.perf_counter() - started < 120
    result.assert_outcomes(passed=1, errors=len(HOSTILE))
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert "Interrupted" not in out and "error during collection" not in out
    for name in HOSTILE:
        line = next(li for li in result.outlines if li.startswith(f"ERROR reward_specs/{name}::spec-error"))
        assert len(line) < 2 * MAX_SPEC_MESSAGE
