"""GateCallback's figures in the trainer's own logs: a real Trainer, its TensorBoard callback, a real
SummaryWriter, and the event file read back; its first log line says what each category can see."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import pytest_rlgate as rg
from pytest_rlgate.watch.callback import units_by_group
from pytest_rlgate.watch.select import Candidate, Selection


def _trainer(tmp_path: Path, gate: rg.GateCallback, steps: int = 2):  # type: ignore[no-untyped-def]
    import torch
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    model, tokenizer = rg.load_policy("rlgate/tiny-refund", device="cpu")
    model.train()
    texts = ["refund ORD-1234 please", "where is my order", "what is the weather"] * 4
    encoded = tokenizer(texts, padding="max_length", max_length=12, truncation=True)
    data = Dataset.from_dict({"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"],
                              "labels": encoded["input_ids"]})
    torch.manual_seed(0)
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=steps, per_device_train_batch_size=4,
                             learning_rate=1e-3, use_cpu=True, logging_steps=1, save_strategy="no",
                             report_to=["tensorboard"], disable_tqdm=True)
    return Trainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, callbacks=[gate])


@pytest.mark.slow
def test_each_look_reaches_tensorboard_beside_the_loss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    env = rg.load_env("refund")
    split = rg.stratified_split(rg.build_prompts(0, "small", env=env), 0.3, env=env)
    gate = rg.GateCallback(split.holdout, env=env, every=1, k=2, max_new_tokens=12, out_dir=tmp_path / "looks")
    with caplog.at_level(logging.INFO, logger="pytest_rlgate.watch"):
        _trainer(tmp_path, gate).train()
    first = caplog.records[0].getMessage()
    assert first.startswith("rlgate GateCallback: family level 0.05 over 2 planned looks")
    for group, n in units_by_group(split.holdout).items():
        assert f"{group}: {n} scenario" in first

    (events,) = (tmp_path / "trainer").rglob("events.out.tfevents.*")
    board = EventAccumulator(str(events.parent))
    board.Reload()
    tags = set(board.Tags()["scalars"])
    assert "train/loss" in tags  # the trainer's own log is untouched
    look = gate.looks[-1]
    for c in look.gate.comparisons:  # transformers' TensorBoard callback files them under train/
        key = f"train/rlgate/{c.group}/{c.metric.removeprefix('marker:')}"
        assert {f"{key}/{f}" for f in ("delta", "verdict", "p", "stop")} <= tags, key
        written = {e.step: e.value for e in board.Scalars(f"{key}/delta")}
        assert sorted(written) == [1, 2]
        assert written[2] == pytest.approx(c.delta, abs=1e-6)  # float32 on disk
    assert [e.step for e in board.Scalars("train/rlgate/stop")] == [1, 2]
    assert [e.step for e in board.Scalars("train/loss")] == [1, 2]


@pytest.mark.slow
def test_the_pick_of_a_lora_run_is_re_sampled_with_its_own_adapter_and_training_resumes_unchanged(
        tmp_path: Path) -> None:
    """A pick that is not the last look: its kept adapter goes in for the confirmation, is saved to ship,
    and the live weights are put back."""
    from types import SimpleNamespace

    import torch
    from peft import LoraConfig, get_peft_model
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import load_file

    env = rg.load_env("refund")
    base, tokenizer = rg.load_policy("rlgate/tiny-refund", device="cpu")
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    items = rg.stratified_split(rg.build_prompts(0, "small", env=env), 0.3, env=env).holdout[:6]
    gate = rg.GateCallback(items, env=env, tokenizer=tokenizer, every=1, k=1, max_new_tokens=8,
                           out_dir=tmp_path, select=True)
    state, control = SimpleNamespace(max_steps=2, global_step=0, log_history=[]), SimpleNamespace()
    gate.on_train_begin(None, state, control, model=model)
    kept = []
    for step in (1, 2):
        with torch.no_grad():
            for name, weight in model.named_parameters():
                if "lora_B" in name:
                    weight.normal_(0, 0.5)
        state.global_step = step
        gate.on_step_end(None, state, control, model=model)
        kept.append({k: v.clone() for k, v in get_peft_model_state_dict(model).items()})
    final = {k: v.clone() for k, v in get_peft_model_state_dict(model).items()}
    candidates = tuple(Candidate(step=s, look=s, passed=True, score=0.0, verdicts={}) for s in (1, 2))
    picked = gate._confirm(model, Selection("pass@1/overall", 0.025, candidates, best=1, tied=(1,)), None)
    assert picked.confirmation is not None and picked.confirmation.step == 1
    assert (tmp_path / "confirm-step-000001.jsonl").is_file() and (tmp_path / "confirm-step-000000.jsonl").is_file()
    now = get_peft_model_state_dict(model)
    assert all(torch.equal(now[k], final[k]) for k in final)  # training goes on with its own weights
    shipped = load_file(str(tmp_path / "pick-adapter" / "adapter_model.safetensors"))
    assert all(torch.equal(shipped[k], kept[0][k]) for k in kept[0])  # the pick's adapter, ready to ship
    assert not all(torch.equal(kept[0][k], kept[1][k]) for k in kept[0])
