"""One look frame: GateCallback and HackMonitor watching the same run sample each prompt once per look."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import TrainerControl  # noqa: E402

import pytest_rlgate.policy.sampling as sampling  # noqa: E402
from pytest_rlgate.data.prompts import build_prompts, stratified_split  # noqa: E402
from pytest_rlgate.policy.load import load_policy  # noqa: E402
from pytest_rlgate.train.monitor import HackMonitor  # noqa: E402
from pytest_rlgate.watch.callback import GateCallback  # noqa: E402

torch.set_num_threads(1)
HOLDOUT = stratified_split(build_prompts(0, "small"), 0.2).holdout[:6]
SETTINGS = {"k": 2, "max_new_tokens": 6}


def _watch(callbacks: list, model: object, steps: int) -> None:
    """The hooks a trainer calls, in its order, without training anything."""
    control, state = TrainerControl(), SimpleNamespace(global_step=0, max_steps=steps)
    for callback in callbacks:
        callback.on_train_begin(None, state, control, model=model)
    for step in range(1, steps + 1):
        state.global_step = step
        for callback in callbacks:
            callback.on_step_end(None, state, control, model=model)


def _replies_drawn(make: callable, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list]:
    """How many replies the policy generated while *make()*'s callbacks watched two steps."""
    model, tok = load_policy("rlgate/tiny-refund", device="cpu")
    drawn = []
    real = sampling.generate_batch

    def counted(model, tokenizer, rendered, seeds, options):
        drawn.append(len(rendered))
        return real(model, tokenizer, rendered, seeds, options)

    monkeypatch.setattr(sampling, "generate_batch", counted)
    callbacks = make(tok)
    _watch(callbacks, model, 2)
    return sum(drawn), callbacks


def test_both_callbacks_sample_each_prompt_once_per_look(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def gate(tok, where="alone"):
        return GateCallback(HOLDOUT, env="refund", tokenizer=tok, every=1, out_dir=tmp_path / where, **SETTINGS)

    def monitor(tok):
        return HackMonitor(HOLDOUT, tok, env="refund", every=1, scan_fn=None, **SETTINGS)

    alone, _ = _replies_drawn(lambda tok: [gate(tok)], monkeypatch)
    watched = len(HOLDOUT) * SETTINGS["k"] * 3  # step 0 and two looks
    assert alone == watched
    monitored, _ = _replies_drawn(lambda tok: [monitor(tok)], monkeypatch)
    assert monitored == watched
    both, (m, g) = _replies_drawn(lambda tok: [monitor(tok), gate(tok, "both")], monkeypatch)
    assert both == watched, "a run watched by both callbacks samples half as often as two lone ones"
    assert len(g.looks) == 2 and [h["step"] for h in m.history] == [0, 1, 2]
    rows = {(r["prompt"], r["rollout_index"]): r["reply"] for r in g._rows[2]}
    assert rows and all(isinstance(reply, str) for reply in rows.values())
