"""``GateCallback``: the gate inside a user's own trainer, checkpoint by checkpoint.

Added to any ``transformers`` trainer (TRL's ``GRPOTrainer``, ``DPOTrainer``,
``SFTTrainer``, a plain ``Trainer``), it samples the holdout at step 0 and every ``every``
steps on the main process, writes each checkpoint's graded rows (``step-000000.jsonl``,
...) into *out_dir*, and tests each against the step-0 rows per category with the error
budget spent across the looks (:class:`~pytest_rlgate.gate.looks.SequentialGate`), so a
run that changed nothing is stopped at most *alpha* of the time however often it is
watched. With ``stop_on_regression`` a regression ends training (on every rank: the main
process's verdict is broadcast). ``looks.json`` keeps every look.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import TrainerCallback

from .._io import ranks
from .._io.atomic import atomic_write
from ..data.records import PromptItem
from ..data.rows import Rows, write_rows
from ..environment.contract import EnvSpec, load_env
from ..errors import UsageError
from ..gate.looks import ALPHA, Look, SequentialGate
from ..policy.handles import GenerationOptions
from ..policy.sampling import DEFAULT_MAX_NEW_TOKENS, SAMPLE_SEED, SAMPLE_TEMPERATURE, SAMPLE_TOP_P, sample_rows

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from ..policy.handles import Model, Tokenizer

__all__ = ["GateCallback"]


class GateCallback(TrainerCallback):
    """Sample the holdout every *every* steps, write the rows, gate them against step 0, maybe stop.

    *holdout* is a list of prompt items (``prompt``, ``case``, ``category``, ``scenario_id``),
    *env* the environment that grades them. *planned_looks* is the number of checkpoints
    the budget is split over (default: ``max_steps // every`` when the trainer knows its
    length, else the anytime schedule). *tokenizer* defaults to the trainer's
    ``processing_class``.
    """

    def __init__(
        self,
        holdout: Sequence[PromptItem],
        *,
        env: EnvSpec = None,
        tokenizer: Tokenizer | None = None,
        every: int = 50,
        out_dir: str | Path = "rlgate-checkpoints",
        k: int = 4,
        seed: int = SAMPLE_SEED,
        temperature: float = SAMPLE_TEMPERATURE,
        top_p: float = SAMPLE_TOP_P,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        alpha: float = ALPHA,
        planned_looks: int | None = None,
        stop_on_regression: bool = False,
        guards: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(every, int) or every < 1:
            raise UsageError(f"every={every!r}: steps between looks, an integer >= 1")
        if not holdout:
            raise UsageError("holdout is empty; pass the prompt items to watch (e.g. a split's holdout)")
        self.holdout = [PromptItem(**item) for item in holdout]
        self.env = load_env(env)
        self.tokenizer = tokenizer
        self.every, self.k, self.seed = every, k, seed
        self.out_dir = Path(out_dir)
        self.settings: GenerationOptions = {"temperature": temperature, "top_p": top_p,
                                            "max_new_tokens": max_new_tokens}
        self.alpha, self.planned, self.guards = alpha, planned_looks, guards
        self.stop_on_regression = stop_on_regression
        self.sequential: SequentialGate | None = None
        self.step0: Rows | None = None
        self.stopped_at: dict[str, object] | None = None

    @property
    def looks(self) -> list[Look]:
        return [] if self.sequential is None else self.sequential.looks

    # --- TrainerCallback hooks ----------------------------------------------------------
    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       model: Model | None = None, **kw: object) -> None:
        planned = self.planned
        if planned is None and getattr(state, "max_steps", 0) > 0:
            planned = max(1, state.max_steps // self.every)
        self.sequential = SequentialGate(alpha=self.alpha, planned=planned, env=self.env, guards=self.guards)
        self.tokenizer = self.tokenizer or kw.get("processing_class") or kw.get("tokenizer")
        if ranks.is_main_process():
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self.step0 = self._sample(model, 0)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    model: Model | None = None, **kw: object) -> None:
        step = state.global_step
        if step % self.every or self.sequential is None:
            return
        if self.sequential.planned is not None and step // self.every > self.sequential.planned:
            return  # the budget is spent; the last planned look was the last (every rank counts alike)
        if ranks.is_main_process():
            assert self.step0 is not None
            look = self.sequential.look(self.step0, self._sample(model, step), step=step)
            self._write()
            if look.regressed and self.stop_on_regression and self.stopped_at is None:
                self.stopped_at = {"step": step, "look": look.look, "regressed": look.regressed}
        if ranks.group_size() > 1:
            self.stopped_at = ranks.broadcast(self.stopped_at)
        if self.stopped_at is not None:
            control.should_training_stop = True

    # --- sampling and files -------------------------------------------------------------
    def _sample(self, model: Model | None, step: int) -> Rows:
        import numpy as np
        import torch

        if model is None or self.tokenizer is None:
            raise UsageError("GateCallback needs the trainer's model and tokenizer (pass tokenizer=...)")
        py_state, np_state = random.getstate(), np.random.get_state()
        was_training = model.training
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():  # watching never changes training
                model.eval()
                rows = sample_rows(model, self.tokenizer, self.holdout, k=self.k, seed=self.seed, env=self.env,
                                   eval_run=f"step-{step}", progress=False, shard=False, **self.settings)
        finally:
            model.train(was_training)
            random.setstate(py_state)
            np.random.set_state(np_state)
        write_rows(self.out_dir / f"step-{step:06d}.jsonl", rows)
        return rows

    def _write(self) -> None:
        atomic_write(self.out_dir / "looks.json", json.dumps(self.summary(), indent=2, sort_keys=True,
                                                              default=str) + "\n")

    def summary(self) -> dict[str, object]:
        """Settings, every look (its level, tests and house gate) and where it stopped."""
        return {
            "settings": {"every": self.every, "k": self.k, "seed": self.seed, "alpha": self.alpha,
                         "planned_looks": None if self.sequential is None else self.sequential.planned,
                         "env": self.env.describe(), "prompts": len(self.holdout),
                         "stop_on_regression": self.stop_on_regression, **self.settings},
            "looks": [look.to_dict() for look in self.looks],
            "stopped_at": self.stopped_at,
        }

