"""A diverged run still reports: NaN and infinities in training logs are written as JSON, read
back as gaps, and an older metrics.jsonl with bare ``NaN`` reports too."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="reports need the report extra: pip install 'pytest-rlgate[report]'")
from PIL import Image
from report_fixtures import make_run

from pytest_rlgate.data.jsonl import loads_bounded
from pytest_rlgate.errors import DataError
from pytest_rlgate.report import report_text, write_report
from pytest_rlgate.report.data import load_report_data
from pytest_rlgate.report.plots import GAP_COLOUR, gapped_series
from pytest_rlgate.train.pipeline import metrics_recorder
from pytest_rlgate.train.run import NONFINITE, RunWriter, read_metrics, write_json

DIVERGED = (11, 12, 13, 14)


def _diverge(run: Path, *, old_writer: bool) -> None:
    """Make steps 11-14 of the run's metrics NaN (loss, reward) and step 13's KL infinite, written
    as an older rlgate wrote them (json.dumps defaults: bare NaN) or as the run writer does now."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    for record in records:
        if record["step"] in DIVERGED:
            record.update(loss=math.nan, reward=math.nan)
        if record["step"] == 13:
            record["kl"] = math.inf
    if old_writer:
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        (run / "metrics.jsonl").unlink()
        writer = RunWriter(run.parent, "scratch")
        writer.jsonl("metrics.jsonl", records)
        (writer.path / "metrics.jsonl").replace(run / "metrics.jsonl")
        writer.discard()


def test_the_run_writer_writes_nan_as_null_and_names_it(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, "run")
    path = writer.jsonl("metrics.jsonl", [{"step": 1, "loss": math.nan, "grad_norm": math.inf, "reward": 0.5},
                                          {"step": 2, "loss": 0.3, "kl": -math.inf}])
    lines = path.read_text(encoding="utf-8").splitlines()
    first, second = (loads_bounded(line, str(path), n) for n, line in enumerate(lines, 1))  # strict JSON
    assert first == {"step": 1, "loss": None, "grad_norm": None, "reward": 0.5,
                     NONFINITE: {"loss": "NaN", "grad_norm": "Infinity"}}
    assert second == {"step": 2, "loss": 0.3, "kl": None, NONFINITE: {"kl": "-Infinity"}}
    write_json(tmp_path / "monitor.json", {"history": [{"step": 0, "kl": math.nan}], "alarms": []})
    monitor = loads_bounded((tmp_path / "monitor.json").read_text(encoding="utf-8"), "monitor.json")
    assert monitor == {"history": [{"step": 0, "kl": None}], "alarms": [], NONFINITE: {"history[0].kl": "NaN"}}
    writer.discard()


def test_the_training_recorder_keeps_a_nan_loss_as_a_gap(tmp_path: Path) -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    recorder = metrics_recorder({"loss": "loss", "grad_norm": "grad_norm"}, when="loss")
    state = TrainerState()
    for step, loss in ((1, 0.5), (2, math.nan)):
        state.global_step = step
        recorder.on_log(TrainingArguments(str(tmp_path / "trl"), report_to="none"), state, TrainerControl(),
                        logs={"loss": loss, "grad_norm": math.inf if step == 2 else 1.0})
    writer = RunWriter(tmp_path, "run")
    path = writer.jsonl("metrics.jsonl", recorder.rows)
    assert [(r["step"], r["loss"], r.get(NONFINITE)) for r in read_metrics(path)] == [
        (1, 0.5, None), (2, None, {"loss": "NaN", "grad_norm": "Infinity"})]
    writer.discard()


@pytest.mark.parametrize("old_writer", [True, False], ids=["older-file-with-bare-NaN", "written-now"])
def test_a_diverged_run_reports_with_gaps(tmp_path: Path, old_writer: bool) -> None:
    run = make_run(tmp_path)
    _diverge(run, old_writer=old_writer)
    data = load_report_data(run)
    by_step = {m["step"]: m for m in data.metrics}
    assert by_step[12]["loss"] is None and by_step[13]["kl"] is None and by_step[15]["loss"] == 0.01
    note = ("metrics.jsonl logged values that are not numbers (a diverged run?): loss NaN at steps 11, 12, 13, 14; "
            "reward NaN at steps 11, 12, 13, 14; kl Infinity at step 13. The curves show gaps there.")
    assert note in data.notes
    text = report_text(run)
    assert f"note: {note}" in text and "40 logged steps" in text
    page = write_report(run).read_text(encoding="utf-8")
    assert "loss NaN at steps 11, 12, 13, 14" in page

    key, steps, values, gaps = gapped_series(data.metrics, ("reward",))
    assert key == "reward" and len(steps) == 40 and gaps == [11.0, 12.0, 13.0, 14.0]
    assert [math.isnan(v) for v in values[9:15]] == [False, True, True, True, True, False]
    # the gap marks are drawn: the curves carry the gap colour, a run without gaps does not
    with Image.open(run / "report-curves.png") as image:
        pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    assert (np.abs(pixels.astype(int) - _rgb(GAP_COLOUR)).sum(axis=1) < 40).sum() > 20


def test_a_run_whose_every_value_diverged_still_draws(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    lines = [{"step": s, "reward": math.nan, "kl": math.nan, "completion_length": 30.0} for s in range(1, 6)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    write_report(run)
    assert "reward NaN at steps 1, 2, 3, 4, 5" in report_text(run)
    assert gapped_series(load_report_data(run).metrics, ("kl",))[3] == [1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize(("line", "message"), [
    ('{"step": NaN, "loss": 0.1}\n', "'step' must be a number"),  # a step is never a gap
    ('{"step": 1, "loss": 1e400}\n', "overflows a double"),  # not what an older writer wrote: refused
    ('{"step": 1, "loss": NaN', "truncated line"),
    ('{"step": 1, "loss": nan}\n', "not valid JSON"),
])
def test_what_is_still_refused(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "loss": 0.2}\n' + line, encoding="utf-8")
    with pytest.raises(DataError, match=message) as info:
        list(read_metrics(path))
    assert info.value.line == 2


def _rgb(colour: str) -> Any:
    return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
