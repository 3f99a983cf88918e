"""``rlgate watch`` / ``watch_checkpoints`` on checkpoint folders, ``rlgate select`` and the report's strip;
the slow test watches the checkpoints of a real TRL run."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

import pytest_rlgate as rg
from pytest_rlgate.cli import main
from pytest_rlgate.data.rows import load_rows, write_rows
from pytest_rlgate.errors import UsageError
from pytest_rlgate.report import write_report
from pytest_rlgate.report.plots import VERDICT_COLOURS
from pytest_rlgate.report.strip import MARKS, STOP_FRAME, SYMBOLS, read_watch, strip_figure, strip_text
from pytest_rlgate.watch import folder as watch
from pytest_rlgate.watch.folder import SETTLE, checkpoints, watch_checkpoints
from pytest_rlgate.watch.looks import SequentialGate
from pytest_rlgate.watch.select import confirm_pick

SIZES = {"a": 6, "b": 10, "c": 16}


def _rows(rng: np.random.Generator, rates: np.ndarray, run: str) -> list[dict]:
    units = [(c, f"{c}{i}") for c, n in SIZES.items() for i in range(n)]
    return [{"prompt": f"{s}/{p}", "scenario_id": s, "category": c, "rollout_index": j, "reply": "r",
             "score": float(ok), "reward": ok, "markers": {}, "eval_run": run}
            for (c, s), rate in zip(units, rates) for p in range(2) for j in range(4)
            for ok in [int(rng.random() < rate)]]


def _watch_folder(folder: Path) -> None:
    """A watch folder as GateCallback writes it: rows per look and looks.json; step 40 collapses."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n = sum(SIZES.values())
    p = rng.beta(2, 2, size=n)
    before = _rows(rng, p, "step-0")
    write_rows(folder / "step-000000.jsonl", before)
    gate = SequentialGate(planned=4, options={"show_flips": 0})
    for step, rates in ((10, np.minimum(1, p + 0.1)), (20, np.minimum(1, p + 0.2)), (30, p), (40, p * 0.1)):
        rows = _rows(rng, rates, f"step-{step}")
        write_rows(folder / f"step-{step:06d}.jsonl", rows)
        gate.look(before, rows, step=step)
    stopped = next(look.step for look in gate.looks if look.regressed)
    (folder / "looks.json").write_text(json.dumps({"looks": [look.to_dict() for look in gate.looks],
                                                   "stopped_at": {"step": stopped}}), encoding="utf-8")


def test_checkpoints_are_found_by_step_once_written(tmp_path: Path) -> None:
    for step in (10, 2, 30):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}", encoding="utf-8")
        (folder / "adapter_model.safetensors").write_bytes(b"x")
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text("{}", encoding="utf-8")
    (tmp_path / "checkpoint-x").mkdir()
    (tmp_path / "checkpoint-40").mkdir()  # no weights yet
    old = time.time() - SETTLE - 5
    for f in (tmp_path / "checkpoint-30").iterdir():
        os.utime(f, (old, old))  # no trainer_state.json, but settled
    assert [s for s, _p in checkpoints(tmp_path)] == [2, 30]
    assert [s for s, _p in checkpoints(tmp_path, ready_only=False)] == [2, 10, 30, 40]


def test_a_watch_needs_a_step_0_and_keeps_its_settings(tmp_path: Path) -> None:
    items = [{"prompt": "refund ORD-1234", "category": "with_id", "scenario_id": "s1"}]
    (tmp_path / "checkpoint-1").mkdir()
    (tmp_path / "checkpoint-1" / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "checkpoint-1" / "model.safetensors").write_bytes(b"x")
    with pytest.raises(UsageError, match="full-weight checkpoints name no base"):
        watch_checkpoints(tmp_path, items, env="refund")
    with pytest.raises(UsageError, match="no such folder"):
        watch_checkpoints(tmp_path / "nope", items, env="refund", base_model="m")
    baseline = tmp_path / "base.jsonl"
    write_rows(baseline, [{"prompt": "refund ORD-1234", "category": "with_id", "scenario_id": "s1",
                           "rollout_index": 0, "reply": "r", "score": 1.0, "reward": 1, "markers": {}}])
    empty = tmp_path / "empty"
    empty.mkdir()
    waited = watch_checkpoints(empty, items, env="refund", baseline=baseline, out=tmp_path / "w", idle=0.05,
                               poll=0.01)
    assert waited.looks == () and not waited.passed  # nothing gated is nothing to ship
    with pytest.raises(UsageError, match=r"other settings \(k\)"):
        watch_checkpoints(empty, items, env="refund", baseline=baseline, out=tmp_path / "w", k=8, idle=0.05,
                          poll=0.01)


def test_rlgate_select_picks_before_the_collapse_and_the_report_shows_the_strip(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _watch_folder(tmp_path)
    assert main(["select", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    looks, selection, _record = read_watch(tmp_path)
    assert selection is not None and selection.best in (10, 20) and selection.stopped_at == 40
    assert f"best by pass@1/overall: step {selection.best}" in out
    assert strip_text(looks, selection) in out
    strip = strip_text(looks, selection).splitlines()
    c_row = next(line for line in strip if line.startswith("pass@1/c "))
    assert c_row.rstrip().endswith("X")  # the collapse regressed c at step 40
    assert "!" in strip[-2] and "^" in strip[-2]
    assert main(["select", str(tmp_path), "--select", "reward/overall"]) == 2
    page = write_report(tmp_path)
    assert (tmp_path / "report-strip.png").stat().st_size > 1000
    assert "Selection" in page.read_text(encoding="utf-8")


@pytest.mark.slow
def test_rlgate_watch_gates_the_checkpoints_of_a_real_trl_run(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("trl")
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer


    env = rg.load_env("refund")
    model, tokenizer = rg.load_policy("rlgate/tiny-refund", device="cpu")
    split = rg.stratified_split(rg.build_prompts(0, "small", env=env), 0.3, env=env)
    train = Dataset.from_list([{"prompt": env.messages_for(item["prompt"]), "case": item["case"],
                                "category": item["category"]} for item in split.train])
    job = tmp_path / "trl"
    GRPOTrainer(
        model=model, reward_funcs=rg.env_reward(env),
        args=GRPOConfig(output_dir=str(job), max_steps=3, per_device_train_batch_size=4, num_generations=2,
                        max_completion_length=16, learning_rate=2e-3, use_cpu=True, bf16=False, logging_steps=1,
                        save_strategy="steps", save_steps=1, report_to="none", disable_tqdm=True),
        train_dataset=train, processing_class=tokenizer,
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    ).train()
    assert [s for s, _p in checkpoints(job)] == [1, 2, 3]

    command = ["watch", str(job), "--env", "refund", "--size", "small", "--holdout", "0.3", "--k", "2",
               "--max-new-tokens", "16", "--looks", "3", "--no-progress"]
    code = main(command)
    first = capsys.readouterr().out
    watched = job / "rlgate-watch"
    looks, selection, _record = read_watch(watched)
    assert [look.step for look in looks] == [1, 2, 3][:len(looks)]
    assert code == (1 if any(look.regressed for look in looks) else 0 if selection.shipped else 1)
    assert "overall:" in first and "look 1 (checkpoint-1" in first
    assert (watched / "step-000000.jsonl").is_file() and (watched / "step-000001.jsonl").is_file()
    if selection is not None and selection.best is not None:
        assert selection.confirmation is not None and selection.confirmation.base == "fresh"
        assert (watched / f"confirm-step-{selection.best:06d}.jsonl").is_file()
    stamps = {p.name: p.stat().st_mtime_ns for p in watched.glob("step-*.jsonl")}
    assert main(command) == code  # a restart replays the stored rows, samples nothing again
    again = capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in watched.glob("step-*.jsonl")} == stamps
    assert [line for line in again.splitlines() if line.startswith("look ")] == \
        [line for line in first.splitlines() if line.startswith("look ")]


# -- a watch beside its job, on checkpoints whose rows a fake sampler writes --------------------------------

def _lora_checkpoint(job: Path, step: int, base: str = "rlgate/tiny-refund") -> None:
    """A LoRA checkpoint folder as the Trainer writes it: adapter config naming its base, weights, trainer state."""
    folder = job / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}), encoding="utf-8")
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    (folder / "trainer_state.json").write_text("{}", encoding="utf-8")


@pytest.fixture
def fake_sampler(monkeypatch: pytest.MonkeyPatch) -> dict[int, dict[str, float]]:
    """Checkpoint step -> {category: the share of its base pass rate it keeps} (absent: unchanged); no model
    is loaded. Each scenario of the environment's holdout passes at a fixed base rate; the rows land where the
    watch's sampler writes them, so the folder is what a real watch leaves."""

    kept: dict[int, dict[str, float]] = {}

    def rows(self, out: Path, model_id: str, adapter: Path | None, *, seed: int, label: str):
        step = 0 if adapter is None else int(adapter.name.rpartition("-")[2])
        if not out.exists():
            rng = np.random.default_rng([step, seed])
            made = []
            for n, item in enumerate(self.items):
                base = np.random.default_rng([n, 7]).uniform(0.5, 0.95)
                rate = base * kept.get(step, {}).get(item["category"], 1.0)
                made += [{"prompt": item["prompt"], "scenario_id": item["scenario_id"], "category": item["category"],
                          "rollout_index": j, "reply": "r", "score": float(ok), "reward": ok,
                          "markers": {guard: 1.0 for guard in self.env.guards}}
                         for j in range(self.sampling.k) for ok in [int(rng.random() < rate)]]
            write_rows(out, made)
        return load_rows(out)

    monkeypatch.setattr(watch._Sampler, "rows", rows)
    return kept


def test_a_watch_pointed_at_a_folder_without_checkpoints_is_refused(tmp_path: Path, fake_sampler,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The wrong folder (a run's parent, a typo) holds no checkpoint-N: one line naming what is there, exit 2,
    before step 0 is sampled; with --idle and still nothing, the watch gated nothing and exits 1, never 0."""
    wrong = tmp_path / "runs"
    (wrong / "trl-output").mkdir(parents=True)
    argv = ["watch", str(wrong), "--env", "refund", "--base-model", "rlgate/tiny-refund", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{wrong} holds no checkpoint-N folder (it holds trl-output/)" in err and "--idle SECONDS" in err
    assert not (wrong / "rlgate-watch").exists()
    assert main([*argv, "--idle", "0.2", "--poll", "0.05"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: no checkpoint was gated, so there is nothing to ship" in out
    assert f"no checkpoint was gated: {wrong} had no checkpoint-N folder within 0.2 s (--idle)" in out
    assert main(["select", str(wrong / "rlgate-watch")]) == 1  # the same answer from the files


def test_a_watch_started_before_its_job_waits_for_the_folder_step_0_and_the_first_checkpoint(
        tmp_path: Path, fake_sampler) -> None:
    """Started beside its job with --idle, before the job wrote anything: the watch waits for the folder, then for
    the first checkpoint to name its base (step 0), then gates it. The job acts on each wait the watch announces,
    so the order is fixed, not raced."""

    job = tmp_path / "live-output"
    said: list[str] = []

    def say(line: str) -> None:  # the job does its next thing while the watch waits for it
        said.append(line)
        if line.startswith("waiting") and line.endswith("to appear"):
            job.mkdir()
        elif line.startswith("waiting") and "first checkpoint" in line:
            _lora_checkpoint(job, 1)

    holdout = rg.stratified_split(rg.build_prompts(0, "default", env="refund"), 0.2, env="refund").holdout
    result = watch_checkpoints(job, holdout, env="refund", planned_looks=1, idle=30, poll=0.01, select=None,
                               budget_of_base=True, say=say)
    assert said[0] == f"waiting up to 30 s for {job} to appear"
    assert said[1] == ("waiting up to 30 s for the first checkpoint to name its base model (step 0; or pass "
                       "--base-model)")
    assert "step 0: rlgate/tiny-refund sampled at seed 17" in said and said[-1].startswith("look 1 (checkpoint-1")
    assert [look.step for look in result.looks] == [1] and result.passed
    settings = json.loads((job / "rlgate-watch" / "watch.json").read_text())
    assert settings["base_model"] == "rlgate/tiny-refund" and settings["max_new_tokens"] == 48  # the tiny default


@pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")  # the fake rows' guards are constant
def test_the_log_the_strip_the_selection_and_the_report_agree_on_every_checkpoint(
        tmp_path: Path, fake_sampler, capsys: pytest.CaptureFixture[str]) -> None:
    """Checkpoint 10 drops category c enough for the house gate (its verdict, the strip's X, a failed gate that
    selection.json does not pick) but not for the sequential test at that look (no stop); checkpoint 20
    collapses and stops the run. Each face says the same of each checkpoint."""
    job = tmp_path / "job"
    fake_sampler[10] = {"with_id": 0.6}
    fake_sampler[20] = {"with_id": 0.0}
    for step in (5, 10, 20):
        _lora_checkpoint(job, step)
    assert main(["watch", str(job), "--env", "refund", "--looks", "6", "--no-progress"]) == 1
    log = [line for line in capsys.readouterr().out.splitlines() if line.startswith("look ")]
    looks, selection, _record = read_watch(job / "rlgate-watch")
    assert selection is not None and [look.step for look in looks] == [5, 10, 20]
    assert looks[1].gate is not None and not looks[1].gate.passed and not looks[1].regressed  # the case at issue
    strip = strip_text(looks, selection).splitlines()
    columns = {name: line[len(name):].split() for line in strip[1:-2] for name in [line.split()[0]]}
    page = write_report(job / "rlgate-watch").read_text(encoding="utf-8")
    for look, line in zip(looks, log):
        assert look.gate is not None
        assert line == look.line(f"checkpoint-{look.step}")
        regressed = [f"{c.metric.removeprefix('marker:')}/{c.group}" for c in look.gate.comparisons
                     if c.verdict == "regressed"]
        column = [name for name, cells in columns.items() if cells[looks.index(look)] == "X"]
        assert sorted(column) == sorted(regressed)  # the strip's X is the gate's regressed
        assert all(f"{name} regressed" in line for name in regressed)  # and the log names each one
        assert ("gate passed" in line) == look.gate.passed
        candidate = next(c for c in selection.candidates if c.step == look.step)
        assert candidate.passed == (look.gate.passed and not look.regressed)
        assert {k for k, v in candidate.verdicts.items() if v == "regressed"} == set(regressed)
        assert f"<td class=\"l\">{look.judgement()}</td>" in page.replace("&#x27;", "'")
        end = [m.end() - 1 for m in re.finditer(r"\S+", strip[0])][looks.index(look)]
        mark = strip[-2].ljust(end + 1)[end]
        assert ("STOP" in line) == bool(look.regressed) == (mark == "!")  # the strip's stop mark
    assert "the sequential test does not stop the run" in log[1] and "pass@1/with_id regressed" in log[1]


def test_report_text_reads_a_watch_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _watch_folder(tmp_path)
    assert main(["select", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path), "--text"]) == 0
    out = capsys.readouterr().out
    looks, selection, _record = read_watch(tmp_path)
    assert strip_text(looks, selection) in out and selection is not None and selection.summary() in out
    assert "the sequential test stopped the run at step 40" in out


def test_select_by_another_criterion_keeps_the_callbacks_confirmation(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A GateCallback folder's pick was confirmed in the training process (--confirm cannot re-sample it): a
    choice by another criterion keeps that confirmation, and choosing the same pick again finds it."""

    _watch_folder(tmp_path)
    assert main(["select", str(tmp_path)]) == 0
    looks, selection, _record = read_watch(tmp_path)
    assert selection is not None and selection.best is not None
    pick = load_rows(tmp_path / f"step-{selection.best:06d}.jsonl")
    confirmed = confirm_pick(selection, load_rows(tmp_path / "step-000000.jsonl"), pick, seed=1017)
    (tmp_path / "selection.json").write_text(json.dumps(confirmed.to_dict()), encoding="utf-8")
    assert main(["select", str(tmp_path), "--select", "pass@1/a"]) in (0, 1)
    _looks, other, _record = read_watch(tmp_path)
    assert other is not None and [c.step for c in other.confirmed] == [selection.best]
    assert main(["select", str(tmp_path)]) == 0
    capsys.readouterr()
    _looks, again, _record = read_watch(tmp_path)
    assert again is not None and again.confirmation is not None
    assert again.confirmation.to_dict() == confirmed.confirmation.to_dict()  # type: ignore[union-attr]


def test_the_index_lists_watched_runs_and_names_what_it_left_out(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from report_fixtures import make_run

    make_run(tmp_path, "grpo-run")
    _watch_folder(tmp_path / "cbrun" / "looks")  # a GateCallback out_dir inside its script's folder
    _watch_folder(tmp_path / "watched")
    (tmp_path / "notes").mkdir()
    assert main(["report", str(tmp_path), "--index"]) == 0
    out = capsys.readouterr().out
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    for name in ("grpo-run", "cbrun/looks", "watched"):
        assert f">{name}</a>" in page
    assert "left out notes: no config.json (a run), recipe.json (a recipe) or looks.json (a watched run)" in out
    assert "notes: no config.json" in page


def test_the_strip_picture_is_legible_at_its_own_size(tmp_path: Path) -> None:
    """At the size the report shows it: the title whole inside the picture, no label over the title or over
    another label, flat and insufficient told apart at a glance, and the stop frame plainly there."""
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_rgb


    _watch_folder(tmp_path)
    assert main(["select", str(tmp_path)]) == 0
    looks, selection, _record = read_watch(tmp_path)
    fig = strip_figure(looks, selection)
    assert fig is not None
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    whole = fig.bbox
    (ax,) = [a for a in fig.axes if a.get_title()]
    axes = [ax, *ax.child_axes]  # the marks' row of labels is a secondary axis above the columns
    title = ax.title.get_window_extent(renderer)
    assert whole.x0 <= title.x0 and title.x1 <= whole.x1 and title.y1 <= whole.y1, "the title is clipped"
    labels = [t.get_window_extent(renderer) for a in axes for t in a.get_xticklabels() if t.get_text().strip()]
    marks = [t for a in axes for t in a.get_xticklabels() if t.get_text() in ("!", "^", "*")]
    assert {t.get_text() for t in marks} >= {"!", "^"}  # the stop and the pick, as in the terminal
    for i, box in enumerate(labels):
        assert not box.overlaps(title), "a label covers the title"
        assert not any(box.overlaps(other) for other in labels[i + 1:]), "two labels overlap"
    flat, few = (np.array(to_rgb(VERDICT_COLOURS[v])) for v in ("flat", "insufficient"))
    assert np.abs(flat - few).max() > 0.35, "flat and insufficient look alike"
    frame = [p for p in ax.patches if p.get_edgecolor()[:3] == to_rgb(STOP_FRAME)]
    assert frame and all(p.get_linewidth() >= 3 for p in frame), "no plain stop frame"


def test_the_docs_strip_legend_is_whole() -> None:

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "watch.md").read_text(encoding="utf-8").split())
    for verdict, symbol in SYMBOLS.items():
        assert f"`{symbol}` {verdict}" in text, f"docs/watch.md's strip legend has no `{symbol}` {verdict}"
    for mark in MARKS:
        assert f"`{mark}` " in text, f"docs/watch.md's strip legend has no `{mark}`"
