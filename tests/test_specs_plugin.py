"""Reward tables as pytest items: collection, ids, -k, failure text, bad tables, and the
environment that reads a row's case (the table's ``env:``, else ``--rlgate-env``) (pytester)."""

from __future__ import annotations

import sys
from pathlib import Path

import _calc_env
import hypothesis  # noqa: F401 - see below
import pytest

# Hypothesis's pytest plugin imports hypothesis at the end of every in-process run, and
# pytester drops modules a run imported: without this import every run pays seconds for it.

GOOD = """\
reward: pytest_rlgate.envs.refund:score
rows:
  - id: no_id-asks
    prompt: I need help with a refund
    reply: What is the order id?
    expected: 1.0
  - id: politely-asks
    prompt: My delivery is late.
    reply: Could you share the reference?
    expected: 1.0
  - id: with_id-lookup
    prompt: please check ORD-4017 for me
    reply: '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-4017"}}</tool_call>'
    expected: 1.0
"""

MISMATCH = """\
reward: pytest_rlgate.envs.refund:score
rows:
  - id: ok
    prompt: How tall is Kilimanjaro?
    reply: Tall.
    expected: 1.0

  - id: no_id-wrong
    prompt: I need help with a refund
    reply: Refunded.
    expected: 1.0
    note: the reply neither asks nor calls

  - id: within-tolerance
    prompt: I need help with a refund
    reply: Refunded.
    expected: 0.5
    tolerance: 0.1
"""


def test_each_row_is_an_item_with_a_readable_stable_id(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"reward_specs/refund": GOOD})
    pytester.makefile(".jsonl", **{"reward_specs/more": (
        '{"reward": "pytest_rlgate.envs.refund:score"}\n'
        '{"id": "off_topic-short", "prompt": "How tall is Kilimanjaro?", "reply": "Tall.", "expected": 1}\n')})
    result = pytester.runpytest("-v")
    result.stdout.fnmatch_lines([
        "reward_specs/more.jsonl::off_topic-short PASSED*",
        "reward_specs/refund.yaml::no_id-asks PASSED*",
        "reward_specs/refund.yaml::politely-asks PASSED*",
        "reward_specs/refund.yaml::with_id-lookup PASSED*",
    ])
    assert result.ret == pytest.ExitCode.OK


def test_dash_k_selects_a_category_even_when_the_id_does_not_name_it(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"reward_specs/refund": GOOD})
    result = pytester.runpytest("-k", "no_id", "-v")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*::no_id-asks PASSED*", "*::politely-asks PASSED*"])


def test_a_mismatch_shows_case_reply_expected_actual_and_location(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"reward_specs/refund": MISMATCH})
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*_ reward row no_id-wrong [[]no_id[]] _*",
        "reward_specs/refund.yaml:8: reward mismatch for row 'no_id-wrong': pytest_rlgate.envs.refund:score paid "
        "0.4, the table expects 1.0",
        "  category:  no_id",
        "  prompt:    'I need help with a refund'",
        '  case:      {"category": "no_id", "in_domain": true, "order_id": null}',
        "  reply:     'Refunded.'",
        "  expected:  1.0 (tolerance 1e-06)",
        "  actual:    0.4",
        "  note:      the reply neither asks nor calls",
        "FAILED reward_specs/refund.yaml::no_id-wrong - *",
    ])
    assert "Traceback" not in result.stdout.str()


def test_reportinfo_points_at_the_row(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"reward_specs/refund": MISMATCH})
    items, _ = pytester.inline_genitems()
    assert [item.location for item in items] == [
        ("reward_specs/refund.yaml", 2, "reward row ok [off_topic]"),
        ("reward_specs/refund.yaml", 7, "reward row no_id-wrong [no_id]"),
        ("reward_specs/refund.yaml", 13, "reward row within-tolerance [no_id]"),
    ]
    assert items[1].user_properties == [("rlgate.category", "no_id")]


def test_a_reward_that_raises_or_returns_text_fails_only_its_row(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(plugin_rewards="def boom(reply, case):\n    raise KeyError('oops')\n"
                                  "def word(reply, case):\n    return 'one'\n")
    pytester.makeini("[pytest]\npythonpath = .\n")
    pytester.makefile(".yaml", **{"reward_specs/t": (
        "reward: plugin_rewards:boom\nrows:\n  - {id: a, prompt: p, reply: r, expected: 1}\n"
        "  - {id: b, reward: 'plugin_rewards:word', prompt: p, reply: r, expected: 1}\n")})
    pytester.makefile(".yaml", **{"reward_specs/good": GOOD})
    result = pytester.runpytest("reward_specs")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(["*KeyError: 'oops'*",
                                 "reward_specs/t.yaml:4: row 'b': plugin_rewards:word returned 'one'; a reward "
                                 "must return a number"])
    assert "INTERNALERROR" not in result.stdout.str()


HEAD = "reward: pytest_rlgate.envs.refund:score\nrows:\n"
BAD_TABLES = {
    "syntax": ("reward: [unclosed\n", "syntax.yaml:2: YAML syntax error*"),
    "missing-field": ("reward: pytest_rlgate.envs.refund:score\nrows:\n  - {id: a, prompt: p, reply: r}\n",
                      "missing-field.yaml:3: row is missing 'expected'; add `expected: ...` to it"),
    "unknown-reward": ("reward: nowhere_xyz:score\nrows:\n  - {id: a, prompt: p, reply: r, expected: 1}\n",
                       "unknown-reward.yaml:1: reward 'nowhere_xyz:score': cannot import module 'nowhere_xyz'*"),
    "not-callable": ("reward: pytest_rlgate.envs.refund:CATEGORIES\nrows:\n  - {prompt: p, reply: r, expected: 1}\n",
                     "not-callable.yaml:1: reward 'pytest_rlgate.envs.refund:CATEGORIES' is a tuple, not a function*"),
    "non-numeric": (HEAD + "  - {id: a, prompt: p, reply: r, expected: high}\n",
                    "non-numeric.yaml:3: 'expected' must be a number, got 'high'*"),
    "duplicate-id": ("reward: pytest_rlgate.envs.refund:score\nrows:\n  - {id: a, prompt: p, reply: r, expected: 1}\n"
                     "  - {id: a, prompt: q, reply: r, expected: 1}\n",
                     "duplicate-id.yaml:4: duplicate id 'a' (first used on line 3)*"),
    "empty": ("", "empty.yaml:1: the table is empty*"),
}


def test_each_bad_table_errors_alone_and_other_tables_still_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"reward_specs/good": GOOD})
    for name, (text, _) in BAD_TABLES.items():
        (pytester.path / "reward_specs" / f"{name}.yaml").write_text(text, encoding="utf-8")
    result = pytester.runpytest()
    result.assert_outcomes(passed=3, errors=len(BAD_TABLES))
    for name, (_, message) in BAD_TABLES.items():
        result.stdout.fnmatch_lines([f"bad reward table: reward_specs/{message}"])
        result.stdout.fnmatch_lines([f"ERROR reward_specs/{name}.yaml::spec-error - *"])
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_only_tables_under_reward_specs_or_spec_paths_are_collected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"config/settings": "a: 1\n", "tables/refund": GOOD,
                                  "nested/reward_specs/deep/refund": GOOD})
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["nested/reward_specs/deep/refund.yaml::no_id-asks", "*3 tests collected*"])
    pytester.makeini("[pytest]\nrlgate_spec_paths = tables\n")
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*6 tests collected*"])
    assert "config/settings.yaml" not in result.stdout.str()


def test_the_ini_reward_function_serves_tables_that_name_none(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrlgate_reward_function = pytest_rlgate.envs.refund:score\n")
    pytester.makefile(".yaml", **{"reward_specs/t": "- {id: a, prompt: 'How tall is Kilimanjaro?', reply: Tall., "
                                                     "expected: 1}\n"})
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_shipped_tables_pass(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> None:
    shipped = request.config.rootpath / "reward_specs"
    for path in shipped.iterdir():
        if path.suffix in (".yaml", ".jsonl"):
            pytester.makefile(path.suffix, **{f"reward_specs/{path.stem}": path.read_text(encoding="utf-8")})
    result = pytester.runpytest("-v")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 40 and set(outcomes) <= {"passed"}
    assert sum("refund.yaml::hack-" in line and "PASSED" in line for line in result.outlines) == 5


SUMS = """\
reward: rewards:exact
rows:
  - {id: right, prompt: 'What is 2 + 3?', reply: 'It is 5.', expected: 1}
  - {id: wrong, prompt: 'What is 2 + 3?', reply: 'It is 6.', expected: 1}
"""


def _sums_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(calcenv=Path(_calc_env.__file__).read_text(encoding="utf-8"),
                        rewards="def exact(reply, case):\n    return float(str(case['answer']) in reply)\n")
    pytester.syspathinsert()
    pytester.makefile(".yaml", **{"reward_specs/sums": SUMS})


def test_the_session_environment_reads_the_case_of_a_row_without_one(pytester: pytest.Pytester) -> None:
    _sums_project(pytester)
    result = pytester.runpytest("--rlgate-env=calcenv:SumsEnv")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*reward_specs/sums.yaml:4: reward mismatch for row 'wrong'*",
                                 "*case:      {\"answer\": 5, \"category\": \"arithmetic\"}*"])


def test_the_tables_own_env_beats_the_sessions(pytester: pytest.Pytester) -> None:
    _sums_project(pytester)
    pytester.makefile(".yaml", **{"reward_specs/sums": "env: calcenv:SumsEnv\n" + SUMS.split("\n", 1)[1]})
    result = pytester.runpytest("-v")  # the session's environment is the default one; the table names its own
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*reward mismatch for row 'wrong': environment sums's score paid 0.0*"])


def test_a_session_inside_a_session_does_not_warn_that_rlgate_was_not_rewritten(pytester: pytest.Pytester) -> None:
    """`pip install -e .` leaves pytest_rlgate.egg-info in the checkout; once the checkout is on sys.path
    (pytest puts a rootdir conftest's folder there) a pytest session started inside the run (pytester)
    finds that second copy of the package's metadata, marks pytest_rlgate for assertion rewriting, and
    warned "Module already imported so cannot be rewritten", which failed test_the_shipped_tables_pass
    under the console script. Here the checkout is a folder with that metadata and a conftest."""
    info = pytester.path / "pytest_rlgate.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: pytest-rlgate-copy\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nrlgate = pytest_rlgate.plugin\n")
    (info / "SOURCES.txt").write_text("pytest_rlgate/__init__.py\npytest_rlgate/plugin/__init__.py\n")
    pytester.makeconftest("")
    pytester.makepyfile(test_inner="""
        pytest_plugins = ["pytester"]

        def test_inner(pytester):
            pytester.makepyfile(test_x="def test_x():\\n    pass\\n")
            pytester.runpytest().assert_outcomes(passed=1, warnings=0)
    """)
    script = Path(sys.executable).with_name("pytest")
    command = [str(script)] if script.is_file() else [sys.executable, "-c", "import sys, pytest; "
                                                                            "sys.exit(pytest.main())"]
    result = pytester.run(*command, "-p", "no:cacheprovider", "test_inner.py")
    result.assert_outcomes(passed=1)
