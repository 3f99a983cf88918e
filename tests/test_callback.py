"""GateCallback and HackMonitor in a user's own TRL trainer: docs/training.md's example, executed, then
docs/watch.md's commands on what it wrote."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.gate.sequential import Spending

DOC = Path(__file__).resolve().parent.parent / "docs" / "training.md"
WATCH_DOC = DOC.with_name("watch.md")


def _example() -> str:
    section = DOC.read_text(encoding="utf-8").split("## Your own trainer", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def _commands(heading: str) -> list[list[str]]:
    """The ``rlgate`` command lines of the first bare code block under *heading* (comments dropped)."""
    section = WATCH_DOC.read_text(encoding="utf-8").split(heading, 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.DOTALL).group(1)
    return [shlex.split(line.partition("#")[0])[1:] for line in block.splitlines() if line.startswith("rlgate ")]


@pytest.mark.slow
def test_the_docs_example_runs_against_a_bare_trl_trainer(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The GateCallback example, then every command of the watched run's page, as written, in one folder:
    each writes where the next one reads."""
    pytest.importorskip("trl")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_example(), str(DOC), "exec"), namespace)
    gate, trainer, monitor = namespace["gate"], namespace["trainer"], namespace["monitor"]
    out = tmp_path / "runs-watch"
    steps = trainer.state.global_step
    assert steps == 2 or gate.stopped_at is not None
    assert [look.step for look in gate.looks] == list(range(1, steps + 1))
    spent = Spending(planned=2).spent(steps)  # 2 planned looks share the family level (the gate's 5 %)
    assert sum(look.alpha for look in gate.looks) == pytest.approx(spent)
    assert sorted(p.name for p in out.glob("step-*.jsonl")) == [f"step-{s:06d}.jsonl" for s in range(steps + 1)]
    looks = json.loads((out / "looks.json").read_text())
    assert [look["step"] for look in looks["looks"]] == list(range(1, steps + 1))
    tests = looks["looks"][0]["tests"]
    assert {t["metric"] for t in tests} == {"pass@1", "well_formed", "argument_grounding"}
    assert "overall" in {t["group"] for t in tests} and looks["looks"][0]["gate"]["comparisons"]
    assert [h["step"] for h in monitor.summary()["history"]] == list(range(steps + 1))
    printed = capsys.readouterr().out
    assert "alarms:" in printed and sum(line.startswith("step ") for line in printed.splitlines()) == steps
    selection = json.loads((out / "selection.json").read_text())
    assert selection["criterion"] == "pass@1/overall"
    assert "best by pass@1/overall" in printed or "no checkpoint passed" in printed
    assert sorted(p.name for p in (tmp_path / "trl-output").glob("checkpoint-*")) == [
        f"checkpoint-{s}" for s in range(1, steps + 1)]
    commands = (_commands("## Choosing the checkpoint to ship")
                + _commands("## Checkpoints you did not train: `rlgate watch`"))
    assert [c[0] for c in commands] == ["select", "select", "report", "report", "watch", "watch", "watch", "select"]
    for argv in commands:
        code = main(argv)
        shown = capsys.readouterr()
        assert code in (0, 1), f"rlgate {shlex.join(argv)} -> {code}: {shown.err}"  # never a usage or data error
    assert (out / "report.html").is_file() and (tmp_path / "watch-bl" / "selection.json").is_file()
    assert (tmp_path / "trl-output" / "rlgate-watch" / "looks.json").is_file()


def test_a_regression_stops_training_when_asked(tmp_path: Path) -> None:
    """A callback whose look regresses ends the trainer's loop through its control object."""
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from pytest_rlgate.watch.callback import GateCallback
    from pytest_rlgate.watch.looks import Look, Test

    gate = GateCallback([{"prompt": "p", "case": {}, "category": "with_id"}], env="refund", every=2,
                        out_dir=tmp_path, stop_on_regression=True)
    regressed = Look(look=1, step=2, alpha=0.01,
                     tests=(Test("pass@1", "with_id", "checkpoint", (2,), 30, -0.4, 1e-5, 1e-9, 1e-3, True),))
    gate.sequential = SimpleNamespace(planned=5, looks=[], look=lambda *a, **k: regressed, settings=dict, guards=())
    gate.step0 = []
    gate._sample = lambda model, step: []
    control = SimpleNamespace(should_training_stop=False)
    gate.on_step_end(None, SimpleNamespace(global_step=1), control)
    assert not control.should_training_stop  # not a look step
    gate.on_step_end(None, SimpleNamespace(global_step=2), control)
    assert control.should_training_stop and gate.stopped_at == {"step": 2, "look": 1, "regressed": ["pass@1/with_id"]}
