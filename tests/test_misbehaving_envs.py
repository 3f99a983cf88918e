"""Misbehaving environments: whatever a user's environment does, it is the user's error, said as one.

A Hypothesis strategy builds environments whose members each may work or misbehave (raise
any exception or ``SystemExit``, return text, None, NaN, a bool, a list, a number outside
[0, 1], markers that are not numbers or miss a guarded one); then the library grades,
re-grades and builds prompts with them. Each call either works or raises a
:class:`~pytest_rlgate.UsageError` naming the environment and the member that broke: never a
bare exception, never a silently coerced value. Environments that break on import (as a
bare module name, as ``module:attr``, from the ini file) are refused the same way by the CLI
(exit 2, one line) and by pytest (a usage error, no INTERNALERROR).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pytest_rlgate import RlgateError, UsageError, grade_replies, load_env
from pytest_rlgate.data import regrade_rows
from pytest_rlgate.data.prompts import build_prompts

MISBEHAVE = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ERRORS = (ValueError("bad value\nsecond line"), KeyError("answer"), ZeroDivisionError("division by zero"),
          RecursionError("maximum recursion depth exceeded"), SystemExit(0), SystemExit(3), AttributeError("x"),
          RuntimeError(""), TypeError("unhashable type: 'dict'"))
#: what a member returns (or raises) when it misbehaves, and whether the library must refuse it
SCORES: list[tuple[Any, bool]] = [(0.5, False), (1, False), (np.float32(0.25), False), (np.float64(1.0), False),
                                  ("0.5", True), (None, True), (math.nan, True), (math.inf, True), (2.0, True),
                                  (-0.5, True), (True, True), ([0.5], True), (10**400, True)]
MARKERS: list[tuple[Any, bool]] = [({"m": 1.0}, False), ({"m": np.int64(1)}, False), ({"m": "high"}, True),
                                   ({"m": math.nan}, True), ({"m": None}, True), ([("m", 1.0)], True), ({}, True),
                                   (None, True), ({"m": 1.0, "x": 10**400}, True)]

behaviours = st.one_of(st.tuples(st.just("return"), st.integers(0, len(SCORES) - 1)),
                       st.tuples(st.just("raise"), st.integers(0, len(ERRORS) - 1)))
marker_behaviours = st.one_of(st.tuples(st.just("return"), st.integers(0, len(MARKERS) - 1)),
                              st.tuples(st.just("raise"), st.integers(0, len(ERRORS) - 1)))


def _member(kind: str, index: int, values: list[tuple[Any, bool]]) -> tuple[Any, bool]:
    """A member function doing what (kind, index) says, and whether a call must be refused."""
    if kind == "raise":
        error = ERRORS[index]

        def raising(*args: Any, **kwargs: Any) -> Any:
            raise error

        return raising, True
    value, bad = values[index]
    return (lambda *args, **kwargs: value), bad


@st.composite
def environments(draw: st.DrawFn) -> tuple[Any, bool, bool, bool]:
    """An environment object, and whether scoring, marking and construction must be refused."""
    score, bad_score = _member(*draw(behaviours), SCORES)
    markers, bad_markers = _member(*draw(marker_behaviours), MARKERS)
    init_raises = draw(st.booleans()) and draw(st.booleans())
    error = ERRORS[draw(st.integers(0, len(ERRORS) - 1))]

    class Misbehaving:
        name = "misbehaving"
        categories = ("a", "b")
        guards = ("m",)

        def __init__(self) -> None:
            if init_raises:
                raise error

    Misbehaving.score = staticmethod(score)  # type: ignore[attr-defined]
    Misbehaving.markers = staticmethod(markers)  # type: ignore[attr-defined]
    return Misbehaving, bad_score, bad_markers, init_raises


ITEMS = [{"prompt": f"question {i}", "case": {"answer": i}, "category": "ab"[i % 2], "scenario_id": f"s{i}"}
         for i in range(4)]


def _only_usage_errors(call: Any, *, must_fail: bool, names: tuple[str, ...]) -> Any:
    try:
        result = call()
    except UsageError as exc:
        text = str(exc)
        assert "\n" not in text and len(text) < 600, text
        assert any(name in text for name in names), text
        return exc
    assert not must_fail, "a misbehaving member was accepted"
    return result


@MISBEHAVE
@given(environments())
def test_a_misbehaving_environment_is_a_usage_error_naming_the_member(drawn: tuple[Any, bool, bool, bool]) -> None:
    cls, bad_score, bad_markers, init_raises = drawn
    env = _only_usage_errors(lambda: load_env(cls), must_fail=init_raises, names=("Misbehaving()",))
    if isinstance(env, UsageError):
        assert "environment 'misbehaving': Misbehaving() raised" in str(env)
        return
    rows = _only_usage_errors(lambda: grade_replies(ITEMS, [["r1", "r2"]] * len(ITEMS), env=env),
                              must_fail=bad_score or bad_markers, names=("score()", "markers()"))
    if isinstance(rows, UsageError):
        assert str(rows).startswith("environment misbehaving: ")
        return
    assert all(0 <= row["score"] <= 1 and type(row["score"]) is float for row in rows)
    assert all(set(row["markers"]) >= {"m"} and math.isfinite(row["markers"]["m"]) for row in rows)
    assert len(regrade_rows(rows, env=env)) == len(rows)


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("member", ["case_for", "passes", "build_prompts", "messages_for", "features"])
def test_every_optional_member_that_raises_is_named(member: str, error: BaseException) -> None:
    def raising(*args: Any, **kwargs: Any) -> Any:
        raise error

    env = load_env(type("Raising", (), {"name": "raising", "categories": ("a",), "score": staticmethod(
        lambda reply, case: 1.0), member: staticmethod(raising)}))
    calls = {"case_for": lambda: env.case_for("p"), "passes": lambda: env.passes(0.5),
             "build_prompts": lambda: build_prompts(0, "default", env=env),
             "messages_for": lambda: env.messages_for("p"), "features": lambda: env.features("r")}
    with pytest.raises(UsageError, match=rf"^environment raising: {member}\(\) raised {type(error).__name__}"):
        calls[member]()


MODULES = {
    "raises_on_import": "raise RuntimeError('boom on import')\n",
    "exits_on_import": "import sys\nsys.exit(0)\n",
    "exits_3_on_import": "raise SystemExit(3)\n",
    "broken_dependency": "import rlgate_no_such_dependency\n",
    "bad_init": "class Env:\n    name = 'x'\n    categories = ['a']\n    def __init__(self):\n"
                "        raise ValueError('no config')\n    def score(self, r, c):\n        return 1.0\n",
    "string_score": "name = 'str_score'\ncategories = ['a', 'b']\ndef score(reply, case):\n    return '0.5'\n"
                    "def build_prompts(seed, size):\n    return [{'prompt': f'p{i}', 'case': {},"
                    " 'category': 'ab'[i % 2], 'scenario_id': f's{i}'} for i in range(8)]\n",
}
SPECS = [("raises_on_import", "importing raises_on_import raised RuntimeError: boom on import"),
         ("exits_on_import", "importing exits_on_import raised SystemExit: 0"),
         ("exits_on_import:thing", "importing exits_on_import raised SystemExit: 0"),
         ("exits_3_on_import", "importing exits_3_on_import raised SystemExit: 3"),
         ("broken_dependency", "No module named 'rlgate_no_such_dependency'"),
         ("bad_init:Env", "Env() raised ValueError: no config"),
         ("bad_init:Env[1]", "Env() takes other arguments")]


@pytest.fixture
def user_modules(tmp_path: Path) -> Path:
    for name, source in MODULES.items():
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    return tmp_path


def _rlgate(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{folder}:{':'.join(sys.path)}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=folder, timeout=120)


@pytest.mark.parametrize(("spec", "says"), SPECS)
def test_the_cli_refuses_an_environment_that_breaks_on_import(user_modules: Path, spec: str, says: str) -> None:
    proc = _rlgate(user_modules, "prompts", "--env", spec, "--out-dir", str(user_modules / "out"))
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and says in proc.stderr, proc.stderr
    assert not (user_modules / "out").exists()


def test_a_string_score_is_refused_not_coerced(user_modules: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(user_modules))
    env = load_env("string_score")
    with pytest.raises(UsageError, match=r"score\(\) returned '0.5' \(str\); it must return a number"):
        grade_replies(build_prompts(0, "default", env=env)[:1], [["reply"]], env=env)


def test_eval_blames_the_env_flag_not_the_run(user_modules: Path) -> None:
    proc = _rlgate(user_modules, "eval", "--run", str(user_modules / "no-run"), "--env", "raises_on_import")
    assert proc.returncode == 2
    assert proc.stderr.startswith("rlgate eval: error: --env 'raises_on_import': "), proc.stderr
    assert "trained with" not in proc.stderr


@pytest.mark.parametrize(("where", "spec"), [("ini", "raises_on_import"), ("ini", "exits_on_import"),
                                             ("ini", "exits_on_import:x"), ("ini", "bad_init:Env"),
                                             ("flag", "exits_on_import"), ("flag", "bad_init:Env")])
def test_pytest_refuses_a_broken_environment_as_a_usage_error(pytester: pytest.Pytester, spec: str,
                                                              where: str) -> None:
    for name, source in MODULES.items():
        pytester.makepyfile(**{name: source})
    pytester.makepyfile(test_x="def test_env(rlgate_env):\n    pass\n")
    args = ["-p", "no:cacheprovider"]
    if where == "ini":
        pytester.makeini(f"[pytest]\nrlgate_env = {spec}\npythonpath = .\n")
    else:
        pytester.makeini("[pytest]\npythonpath = .\n")
        args += ["--rlgate-env", spec]
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert f"environment {spec!r}" in text or "environment 'bad_init:Env'" in text


def test_rlgate_errors_of_a_factory_pass_through_unchanged() -> None:
    def factory() -> Any:
        raise UsageError("task 'nope' is not one of reasoning-gym's")

    with pytest.raises(RlgateError, match="^task 'nope' is not one"):
        load_env(type("F", (), {"__new__": lambda cls: factory()}))
