"""``rlgate watch`` / ``watch_checkpoints`` on checkpoint folders, ``rlgate select`` and the report's strip;
the slow test watches the checkpoints of a real TRL run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.data.rows import write_rows
from pytest_rlgate.errors import UsageError
from pytest_rlgate.report import write_report
from pytest_rlgate.report.strip import read_watch, strip_text
from pytest_rlgate.watch.folder import SETTLE, checkpoints, watch_checkpoints
from pytest_rlgate.watch.looks import SequentialGate

SIZES = {"a": 6, "b": 10, "c": 16}


def _rows(rng: np.random.Generator, rates: np.ndarray, run: str) -> list[dict]:
    units = [(c, f"{c}{i}") for c, n in SIZES.items() for i in range(n)]
    return [{"prompt": f"{s}/{p}", "scenario_id": s, "category": c, "rollout_index": j, "reply": "r",
             "score": float(ok), "reward": ok, "markers": {}, "eval_run": run}
            for (c, s), rate in zip(units, rates) for p in range(2) for j in range(4)
            for ok in [int(rng.random() < rate)]]


def _watch_folder(folder: Path) -> None:
    """A watch folder as GateCallback writes it: rows per look and looks.json; step 40 collapses."""
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
    result = watch_checkpoints(empty, items, env="refund", baseline=baseline, out=tmp_path / "w")
    assert result.looks == () and result.passed
    with pytest.raises(UsageError, match=r"other settings \(k\)"):
        watch_checkpoints(empty, items, env="refund", baseline=baseline, out=tmp_path / "w", k=8)


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

    import pytest_rlgate as rg

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
