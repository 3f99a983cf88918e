"""Messages a person can act on: no abbreviated flags, the nearest flag, command or environment
name suggested, one prefix per command, each warning once, alarms and hints that name what they
are about, and a line every 30 s when nothing else is printed."""

from __future__ import annotations

import io
import sys
import warnings
from pathlib import Path

import pytest
from test_demo import _summary
from test_gate import table_rows

from pytest_rlgate._io.progress import heartbeat
from pytest_rlgate.cli import main
from pytest_rlgate.demo.story import render_story
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.errors import RlgateWarning, UsageError
from pytest_rlgate.gate import compare
from pytest_rlgate.gate.text import plan_hint
from pytest_rlgate.report.data import alarm_message, alarm_name
from pytest_rlgate.train.pipeline import gate_runs

ROOT = Path(__file__).resolve().parents[1]


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


def test_an_abbreviated_flag_is_refused_with_the_flag_it_abbreviates(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse took `--marg 0.2` for `--margin 0.2`, silently."""
    err = _error(["gate", "a.jsonl", "b.jsonl", "--marg", "0.2"], capsys)
    assert err == "rlgate gate: error: unrecognized arguments: --marg 0.2 (did you mean --margin?)"


@pytest.mark.parametrize(("argv", "said"), [
    (["gate", "a", "b", "--gaurd", "well_formed"], "rlgate gate: error: unrecognized arguments: --gaurd well_formed "
                                                   "(did you mean --guard?)"),
    (["demo", "--quik"], "rlgate demo: error: unrecognized arguments: --quik (did you mean --quick?)"),
    (["train", "grpo", "--stepz", "3"], "rlgate train grpo: error: unrecognized arguments: --stepz 3 "
                                        "(did you mean --steps?)"),
    (["gat", "a", "b"], "(did you mean gate?)"),
])
def test_an_unknown_flag_or_command_names_the_nearest_one_under_the_commands_prefix(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(argv, capsys)
    assert err.endswith(said) and (err == said or argv[0] == "gat")


def test_a_misspelt_environment_name_gets_the_nearest_registered_one() -> None:
    with pytest.raises(UsageError, match=r"not a registered name .*; did you mean 'refund'\?$"):
        load_env("refnud")
    with pytest.raises(UsageError, match=r"no module 'quickmath' .*'path/to/quickmath.py:QuickMath'"):
        load_env("quickmath:QuickMath")


def test_an_example_environment_is_named_by_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--env quickmath:QuickMath` needed PYTHONPATH=examples/quickmath; a path needs nothing."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    env = load_env("examples/quickmath/quickmath.py:QuickMath")
    assert env.name == "quickmath" and env.categories == ("arithmetic", "unanswerable", "word_problem")
    with pytest.raises(UsageError, match=r"no file 'examples/nope.py'"):
        load_env("examples/nope.py:Nope")


def test_the_quickmath_command_of_the_readme_runs_without_pythonpath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["prompts", "--env", "examples/quickmath/quickmath.py:QuickMath", "--prompts-file",
                 "examples/quickmath/prompts.jsonl", "--out-dir", str(tmp_path / "qm")]) == 0
    assert "environment: quickmath" in capsys.readouterr().out


def test_a_runs_gate_warns_nothing_it_also_prints() -> None:
    """A constant guard was warned while the run gated and printed again in its report: twice."""

    rows = [row for c in ("no_id", "with_id", "off_topic") for row in table_rows(c, [0, 1, 0, 2])]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = gate_runs([rows], rows, load_env("refund"))
    assert not [w for w in caught if issubclass(w.category, RlgateWarning)]
    assert any("is constant" in w for w in result.warnings)


def test_alarms_name_what_fired_them_and_where() -> None:
    alarm = {"kind": "feature", "step": 10, "top_feature": "lookup_order", "category": "no_id"}
    assert alarm_name(alarm) == "feature lookup_order@10 (no_id)"
    assert alarm_message(alarm) == "the reward pays most for lookup_order, which is not endorsed (in no_id)"
    assert alarm_name({"kind": "length", "step": 20}) == "length@20"


def test_an_inconclusive_hint_names_the_noise_floor_when_the_noise_floor_decided() -> None:
    """A gain the base runs' spread took back was hinted as "too few scenarios"."""
    from dataclasses import replace


    rows = [row for c in ("no_id", "with_id") for row in table_rows(c, [0, 1, 2, 1, 0, 3])]
    result = compare(rows, rows, guards=())
    gain = replace(result.comparison("pass@1", "with_id"), verdict="inconclusive", low=0.02, high=0.2,
                   flags=("within noise",))
    wide = replace(result.comparison("pass@1", "no_id"), verdict="inconclusive", low=-0.3, high=0.2)
    noisy = replace(result, comparisons=(gain,)).to_dict()
    assert plan_hint(noisy) == ("inconclusive in with_id: a gain no larger than the base runs differ from each other "
                                "(the noise floor), so it is not claimed as a move; more scenarios do not change that")
    both = plan_hint(replace(result, comparisons=(gain, wide)).to_dict())
    assert both.splitlines()[1].startswith("inconclusive in no_id: too few scenarios to tell a drop of 0.10")


def test_the_demo_names_every_failure_or_how_many_more() -> None:
    """The demo's text quoted 3 of the hackable run's 4 failures, and said nothing of the fourth."""
    failures = [f"pass@1 regressed in g{i}" for i in range(5)]
    summary = _summary("GRPO hacked", [("no_id", 0.9, 0.1, -0.9, -0.6, "regressed")], [], passed=False,
                       failures=failures)
    text = " ".join(render_story({}, [summary]))
    assert "g0; pass@1 regressed in g1; pass@1 regressed in g2; and 2 more" in text
    three = _summary("GRPO hacked", [("no_id", 0.9, 0.1, -0.9, -0.6, "regressed")], [], passed=False,
                     failures=failures[:3])
    assert "more" not in " ".join(render_story({}, [three]))


def test_a_piped_command_says_it_is_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped, the demo printed nothing for 6.5 minutes while it trained: a CI log looked hung."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    import time

    with heartbeat("rlgate demo", lambda: "1 run done", None, every=0.05):
        time.sleep(0.3)
    beats = stream.getvalue().splitlines()
    assert len(beats) >= 2 and beats[0].startswith("rlgate demo: 0m00s, 1 run done")
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    with heartbeat("rlgate demo", lambda: "x", False, every=0.05):  # --no-progress: quiet
        time.sleep(0.2)
    assert quiet.getvalue() == ""
