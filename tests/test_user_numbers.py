"""Every number a user's code returns is checked at the door, once: a reward, score or marker
that is not a finite float (``10**400``, NaN, an infinity, text) is one line naming the row,
the member and the value, never a bare ``OverflowError``, and never a row with NaN in it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_rlgate import UsageError, grade_replies, load_env
from pytest_rlgate.cli import main
from pytest_rlgate.data import regrade_rows
from pytest_rlgate.data.episodes import grade_episode
from pytest_rlgate.data.rows import write_rows
from pytest_rlgate.rewards.tables import RewardValueError, load_reward_table

BAD = [(10**400, "1000000000000000000000000000000000000000... (401 characters)"), (math.nan, "nan"),
       (math.inf, "inf"), (-math.inf, "-inf"), (np.float64("nan"), "np.float64(nan)")]
ITEMS = [{"prompt": f"question {i}", "case": {"answer": i}, "category": "a", "scenario_id": f"s{i}"}
         for i in range(3)]


def _env(score: Any = 1.0, marker: Any = 1.0, *, after: int = 0) -> Any:
    """An environment whose score (or marker) misbehaves from the reply ``r{after}`` on."""

    class Numbers:
        name = "numbers"
        categories = ("a",)
        guards = ("m",)

        def score(self, reply: str, case: dict[str, Any]) -> Any:
            return score if reply >= f"r{after}" else 1.0

        def markers(self, reply: str, case: dict[str, Any]) -> Any:
            return {"m": marker if reply >= f"r{after}" else 1.0}

    return Numbers()


@pytest.mark.parametrize(("value", "shown"), BAD, ids=["10**400", "nan", "inf", "-inf", "np.nan"])
def test_a_reward_table_row_names_the_row_the_reward_and_the_value(tmp_path: Path, value: Any, shown: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "odd_rewards.py"
    module.write_text("VALUE = None\ndef pay(reply, case):\n    return VALUE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    table = tmp_path / "t.yaml"
    table.write_text("reward: odd_rewards:pay\nrows:\n  - {id: big, case: {x: 1}, reply: r, expected: 1}\n")
    import odd_rewards

    monkeypatch.setattr(odd_rewards, "VALUE", value)
    (row,) = load_reward_table(table)
    with pytest.raises(RewardValueError) as info:
        row.evaluate()
    assert str(info.value) == (f"odd_rewards:pay returned {shown}; a reward must return a finite number (no NaN, no "
                               "infinity, nothing beyond ±1.8e308)")
    monkeypatch.setattr(odd_rewards, "VALUE", np.int64(1))  # numpy's numbers are numbers
    assert row.evaluate() == 1.0


def test_a_table_graded_by_an_environment_fails_its_row_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(huge_env="class Huge:\n    name = 'huge'\n    categories = ('a',)\n"
                                 "    def score(self, reply, case):\n        return 10**400\n")
    pytester.makeini("[pytest]\npythonpath = .\n")
    pytester.makefile(".yaml", **{"reward_specs/e": "env: huge_env:Huge\nrows:\n"
                                                    "  - {id: e, case: {x: 1}, reply: r, expected: 1}\n"})
    result = pytester.runpytest("reward_specs")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["reward_specs/e.yaml:3: row 'e': environment huge: score() returned "
                                 "1000000000*...; it must return a finite number"])
    assert "Traceback" not in result.stdout.str() and "OverflowError" not in result.stdout.str()


@pytest.mark.parametrize("member", ["score", "marker"])
@pytest.mark.parametrize(("value", "shown"), BAD[:3], ids=["10**400", "nan", "inf"])
def test_graded_rows_name_the_row_the_member_and_the_value(member: str, value: Any, shown: str) -> None:
    env = load_env(_env(**{member: value}, after=1))
    with pytest.raises(UsageError) as info:
        grade_replies(ITEMS, [["r0", "r1"]] * 3, env=env)
    said = "score()" if member == "score" else "markers()['m']"
    text = str(info.value)
    assert text.startswith(f"environment numbers: {said} returned {shown[:20]}")
    assert text.endswith("(grading rollout 1 of scenario 's0', prompt 'question 0')"), text
    assert "\n" not in text


def test_regrading_names_the_file_and_line(tmp_path: Path) -> None:
    rows = grade_replies(ITEMS, [["r0", "r1"]] * 3, env=load_env(_env()))
    path = write_rows(tmp_path / "rows.jsonl", rows)
    with pytest.raises(UsageError, match=r"rows.jsonl:2: environment numbers: score\(\) returned 10000") as info:
        regrade_rows(path, env=load_env(_env(score=10**400, after=1)))
    assert info.value.line == 2  # rollout 1 of the first prompt


def test_rlgate_grade_refuses_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nan_env.py").write_text("import math\nclass NanScore:\n    name = 'nanscore'\n"
                                         "    categories = ('a',)\n    def score(self, reply, case):\n"
                                         "        return math.nan\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps({"prompt": "p", "case": {}, "category": "a", "reply": "r"}) + "\n")
    code = main(["grade", str(replies), "--env", "nan_env:NanScore", "--out", str(tmp_path / "rows.jsonl")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "score() returned nan; it must return a finite number (grading rollout 0 of prompt 'p')" in err
    assert not (tmp_path / "rows.jsonl").exists()


def test_an_episode_reward_beyond_a_double_is_named() -> None:
    class Desk:
        def reset(self, **case: Any) -> None:
            pass

        def look(self, key: str) -> str:
            """Look a key up.

            Args:
                key: the key.
            """
            return key

        def get_reward(self) -> int:
            return 10**400

    class Agent:
        name = "agent"
        categories = ("a",)
        environment_factory = Desk

    with pytest.raises(UsageError, match=r"environment agent: get_reward\(\) returned 10000.*must return a finite"):
        grade_episode(Agent(), {}, "I am done.")
