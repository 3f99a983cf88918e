"""``GateCallback``: the gate inside a user's own trainer, checkpoint by checkpoint.

Added to any ``transformers`` trainer (TRL's ``GRPOTrainer``, ``DPOTrainer``,
``SFTTrainer``, a plain ``Trainer``), it samples the holdout at step 0 and every ``every``
steps on the main process, writes each checkpoint's graded rows (``step-000000.jsonl``,
...) into *out_dir*, and tests each against the step-0 rows per category with the error
budget spent across the looks (:class:`~pytest_rlgate.watch.looks.SequentialGate`), so a
run that did not regress is stopped at most *family_level* of the time (the gate's 5 % by
default) however often it is
watched. With ``stop_on_regression`` a regression ends training (on every rank: the main
process's verdict is broadcast). ``looks.json`` keeps every look.

Its first log line says, per category, from which look it can stop the run at all (a
category of a few scenarios cannot reach a small level). Each look's figures (per group
and metric: delta, interval, verdict, p, stop) go to the trainer's own logs, so W&B,
TensorBoard or trackio show them beside the loss. With ``select`` the run ends by choosing
the checkpoint to ship (:mod:`~pytest_rlgate.watch.select`), confirmed on a fresh sample:
``selection.json``, and the picked LoRA adapter in ``pick-adapter/``.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers.trainer_callback import CallbackHandler

from .._io import ranks
from .._io.atomic import atomic_write
from ..data.rows import Rows, write_rows
from ..environment.contract import EnvSpec, load_env
from ..errors import UsageError
from ..gate.options import FAMILY_LEVEL, old_spelling
from ..policy.sampling import SampleOptions, graded_rows, sample_rows
from ..policy.served import ServedModel, adapter_name
from ..records import PromptItem
from .frame import LookFrame, quietly
from .looks import Look, Reach, SequentialGate, units_by_group
from .select import (
    CONFIRM_SEED_OFFSET,
    CRITERION,
    SELECTION,
    Selection,
    confirm_pick,
    parse_criterion,
    select_checkpoint,
)

if TYPE_CHECKING:
    from transformers import Trainer, TrainerControl, TrainerState, TrainingArguments
    from typing_extensions import Unpack

    from ..policy.generate import SampleKeywords
    from ..policy.handles import Model, Tokenizer

__all__ = ["PICK_ADAPTER", "GateCallback"]

logger = logging.getLogger("pytest_rlgate.watch")

#: Where the picked LoRA adapter is saved, ready to ship.
PICK_ADAPTER = "pick-adapter"


def _is_peft(model: object) -> bool:
    """A PEFT model (TRL wraps the policy in one when given a ``peft_config``): its adapter can be kept."""
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


class GateCallback(LookFrame):
    """Sample the holdout every *every* steps, write the rows, gate them against step 0, maybe stop, then select.

    *holdout* is a list of prompt items (``prompt``, ``case``, ``category``, ``scenario_id``),
    *env* the environment that grades them. *planned_looks* is the number of checkpoints
    the budget is split over (default: ``max_steps // every`` when the trainer knows its
    length, else the open-ended schedule). *tokenizer* defaults to the trainer's
    ``processing_class``. *release_policy* is a release policy file for each look's house gate (and so
    for which checkpoints may be picked). *select* (``True`` or ``"metric/group"``, e.g.
    ``"pass@1/with_id"``) picks the checkpoint to ship when training ends. *trainer* (or
    :meth:`attach`) logs each look's figures through ``trainer.log``; without it they go to
    the trainer's own reporting callbacks all the same. Each look samples as *sampling* (a
    :class:`~pytest_rlgate.policy.generate.SampleOptions`) with its fields as keywords on top
    (``k``, ``seed``, ``max_new_tokens``, ...), like :func:`~pytest_rlgate.policy.sampling.sample_rows`;
    beside a :class:`~pytest_rlgate.train.monitor.HackMonitor` with the same sampling, a step both
    look at is sampled once (:class:`~pytest_rlgate.watch.frame.LookFrame`).

    *served* (a :class:`~pytest_rlgate.policy.served.ServedModel` naming the base on a server the
    trainer already runs, e.g. vLLM with ``--enable-lora``) samples there instead of in the
    training process: step 0 is the served base, and each look saves the LoRA adapter to
    ``<out_dir>/adapters/step-N``, loads it into the server, samples it by name and unloads it
    (the server reads that folder, so it must see *out_dir*).
    """

    def __init__(
        self,
        holdout: Sequence[PromptItem],
        *,
        env: EnvSpec = None,
        tokenizer: Tokenizer | None = None,
        every: int = 50,
        out_dir: str | Path = "rlgate-checkpoints",
        family_level: float = FAMILY_LEVEL,
        planned_looks: int | None = None,
        stop_on_regression: bool = False,
        guards: Sequence[str] | None = None,
        release_policy: str | Path | None = None,
        select: bool | str | None = None,
        trainer: Trainer | None = None,
        sampling: SampleOptions | None = None,
        alpha: float | None = None,
        policy: str | Path | None = None,
        served: ServedModel | None = None,
        **keywords: Unpack[SampleKeywords],
    ) -> None:
        if alpha is not None:
            family_level = old_spelling("alpha", alpha, "family_level")
        if policy is not None:
            release_policy = old_spelling("policy", policy, "release_policy")
        if not isinstance(every, int) or every < 1:
            raise UsageError(f"every={every!r}: steps between looks, an integer >= 1")
        if not holdout:
            raise UsageError("holdout is empty; pass the prompt items to watch (e.g. a split's holdout)")
        self.criterion = CRITERION if select is True else (str(select) if select else None)
        if self.criterion is not None:
            parse_criterion(self.criterion)
        SequentialGate(family_level, planned=planned_looks)  # the same checks, at the door
        self.holdout = [PromptItem(**item) for item in holdout]
        self.sampling = SampleOptions.of(sampling, **keywords)
        self.env = load_env(env)
        self.tokenizer = tokenizer
        self.every = every
        self.out_dir = Path(out_dir)
        self.family_level, self.planned, self.guards = family_level, planned_looks, guards
        self.release_policy = release_policy
        self.stop_on_regression = stop_on_regression
        self.trainer = trainer
        self.served = served
        self.sequential: SequentialGate | None = None
        self.step0: Rows | None = None
        self.stopped_at: dict[str, object] | None = None
        self.reach: list[Reach] = []
        self.selection: Selection | None = None
        self._rows: dict[int, Rows] = {}
        self._confirm_base: Rows | None = None
        self._adapters: dict[int, dict[str, Any]] = {}
        self._handler: CallbackHandler | None = None

    def attach(self, trainer: Trainer) -> GateCallback:
        """Add this callback to *trainer* and log each look through ``trainer.log`` (TRL's callback idiom)."""
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    @property
    def looks(self) -> list[Look]:
        return [] if self.sequential is None else self.sequential.looks

    # --- TrainerCallback hooks ----------------------------------------------------------
    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       model: Model | None = None, **kw: object) -> None:
        caller = sys._getframe(1).f_locals.get("self")  # CallbackHandler.call_event: the reporters' handler
        self._handler = caller if isinstance(caller, CallbackHandler) else None
        planned = self.planned
        if planned is None and getattr(state, "max_steps", 0) > 0:
            planned = max(1, state.max_steps // self.every)
        options = {"release_policy": self.release_policy} if self.release_policy is not None else {}
        self.sequential = SequentialGate(self.family_level, planned=planned, env=self.env, guards=self.guards,
                                         options=options)
        self.tokenizer = self.tokenizer or kw.get("processing_class") or kw.get("tokenizer")
        self.reach = self.sequential.reach(units_by_group(self.holdout))
        if ranks.is_main_process():
            self._say_reach()
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self.step0 = self._sample(model, 0)
            if self.criterion is not None:
                self._confirm_base = self._sample(model, 0, seed=self.seed + CONFIRM_SEED_OFFSET)

    def due(self, step: int) -> bool:
        if step % self.every or self.sequential is None:
            return False
        # once the budget is spent, the last planned look was the last (every rank counts alike)
        return self.sequential.planned is None or step // self.every <= self.sequential.planned

    def look(self, model: Model | None, step: int, args: TrainingArguments, state: TrainerState,
             control: TrainerControl) -> None:
        assert self.step0 is not None and self.sequential is not None
        rows = self._sample(model, step)
        self._rows[step] = rows
        look = self.sequential.look(self.step0, rows, step=step)
        if self.criterion is not None:
            self._keep_adapter(model, step)
        self._write()
        self._log(args, state, control, look)
        if look.regressed and self.stop_on_regression and self.stopped_at is None:
            self.stopped_at = {"step": step, "look": look.look, "regressed": look.regressed}

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     model: Model | None = None, **kw: object) -> None:
        if self.criterion is None or not ranks.is_main_process() or self.sequential is None:
            return
        stopped = None if self.stopped_at is None else int(self.stopped_at["step"])  # type: ignore[call-overload]
        selection = select_checkpoint(self.looks, self._rows, criterion=self.criterion, family_level=self.family_level,
                                      stopped_at=stopped)
        if selection.best is not None:
            selection = self._confirm(model, selection, args)
        self.selection = selection
        atomic_write(self.out_dir / SELECTION, json.dumps(selection.to_dict(), indent=2, sort_keys=True) + "\n")
        self._write()
        logger.warning("rlgate GateCallback selection: %s", selection.summary().replace("\n", "; "))

    # --- the trainer's logs -------------------------------------------------------------
    def _say_reach(self) -> None:
        assert self.sequential is not None
        blind = [r for r in self.reach if r.first != 1 or r.last is not None and r.last < (self.sequential.planned
                                                                                            or 0)]
        line = (f"rlgate GateCallback: {self.sequential.spending.describe()}, a look every {self.every} steps | "
                + " | ".join(r.message for r in self.reach))
        (logger.warning if blind else logger.info)(line)

    def _log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, look: Look) -> None:
        """The look's figures into the trainer's logs: through ``trainer.log``, else its reporting callbacks."""
        figures = look.figures()
        if self.trainer is not None:
            self.trainer.log(dict(figures))
        elif self._handler is not None:  # call_event, not on_log: that would cancel the trainer's own log
            state.log_history.append({**figures, "step": state.global_step})
            self._handler.call_event("on_log", args, state, control, logs=dict(figures))

    # --- sampling, confirmation and files ------------------------------------------------
    def _sample(self, model: Model | None, step: int, *, seed: int | None = None) -> Rows:
        """The holdout's graded rows at this look: the look frame's replies (shared with a monitor's
        at the same step), or, at a confirmation seed, drawn afresh; an episode environment's rows
        keep their transcripts, so they are sampled as rows. With *served*, drawn on the server."""
        seed = self.seed if seed is None else seed
        sampling, run = replace(self.sampling, seed=seed), f"step-{step}"
        if self.served is not None:
            rows = self._sample_served(model, step, sampling, run)
        elif model is None or self.tokenizer is None:
            raise UsageError("GateCallback needs the trainer's model and tokenizer (pass tokenizer=...)")
        elif self.env.is_episodic:
            with quietly(model):
                rows = sample_rows(model, self.tokenizer, self.holdout, sampling=sampling, env=self.env, eval_run=run,
                                   progress=False, shard=False)
        else:
            replies = self.replies(model, self.tokenizer, self.holdout, sampling, env=self.env, step=step,
                                   shared=seed == self.seed)
            rows = graded_rows(self.holdout, replies, sampling, env=self.env, eval_run=run)
        name = f"step-{step:06d}.jsonl" if seed == self.seed else f"confirm-step-{step:06d}.jsonl"
        write_rows(self.out_dir / name, rows)
        return rows

    def _sample_served(self, model: Model | None, step: int, sampling: SampleOptions, run: str) -> Rows:
        """Step 0 as the served base; a later look as the model's LoRA adapter loaded into the server."""
        assert self.served is not None

        def draw(policy: ServedModel) -> Rows:
            return sample_rows(policy, None, self.holdout, sampling=sampling, env=self.env, eval_run=run,
                               progress=False, shard=False)

        if step == 0:
            return draw(self.served)
        if not _is_peft(model):
            raise UsageError("GateCallback(served=...) loads each look's LoRA adapter into the server: train a PEFT "
                             "model (a peft_config), or drop served= to sample in the training process")
        assert model is not None
        folder = self.out_dir / "adapters" / f"step-{step:06d}"
        model.save_pretrained(str(folder))
        with self.served.loaded(adapter_name(folder), folder) as adapter:
            return draw(adapter)

    def _keep_adapter(self, model: Model | None, step: int) -> None:
        """A LoRA model's adapter weights at this look (CPU copies): what the confirmation re-samples."""
        if not _is_peft(model):
            return
        from peft.utils import get_peft_model_state_dict

        self._adapters[step] = {k: v.detach().to("cpu", copy=True) for k, v in get_peft_model_state_dict(model).items()}

    def _confirm(self, model: Model | None, selection: Selection, args: TrainingArguments) -> Selection:
        """Re-sample the pick at the confirmation seed and gate it against step 0 re-sampled at that seed."""
        assert selection.best is not None and self._confirm_base is not None
        pick, last = selection.best, max(self._rows)
        seed = self.seed + CONFIRM_SEED_OFFSET
        if model is None or (pick != last and pick not in self._adapters):
            note = (f"the pick (step {pick}) was not confirmed: its weights were not kept (a LoRA adapter is kept at "
                    "every look; full weights only at the last); run `rlgate select` on its saved checkpoint")
            return replace(selection, notes=(*selection.notes, note))
        if pick == last:
            rows = self._sample(model, pick, seed=seed)
            self._save_pick(model)
        else:
            from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict

            final = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
            set_peft_model_state_dict(model, self._adapters[pick])
            try:
                rows = self._sample(model, pick, seed=seed)
                self._save_pick(model)
            finally:
                set_peft_model_state_dict(model, final)
        options = {"release_policy": self.release_policy} if self.release_policy is not None else {}
        guards = tuple(self.sequential.guards or ()) if self.sequential is not None else ()
        return confirm_pick(selection, self._confirm_base, rows, seed=seed, base="fresh", env=self.env,
                            guards=guards, **options)

    def _save_pick(self, model: Model) -> None:
        if _is_peft(model):
            model.save_pretrained(str(self.out_dir / PICK_ADAPTER))

    def _write(self) -> None:
        atomic_write(self.out_dir / "looks.json", json.dumps(self.summary(), indent=2, sort_keys=True,
                                                              default=str) + "\n")

    def summary(self) -> dict[str, object]:
        """Settings, what each category can see, every look (its level, tests and house gate), where it stopped."""
        return {
            "settings": {"every": self.every, **self.sampling.drawn(), "family_level": self.family_level,
                         "planned_looks": None if self.sequential is None else self.sequential.planned,
                         "sequential": None if self.sequential is None else self.sequential.settings(),
                         "env": self.env.describe(), "prompts": len(self.holdout),
                         "stop_on_regression": self.stop_on_regression,
                         "release_policy": None if self.release_policy is None else str(self.release_policy),
                         "select": self.criterion},
            "reach": [r.to_dict() for r in self.reach],
            "looks": [look.to_dict() for look in self.looks],
            "stopped_at": self.stopped_at,
            "selection": None if self.selection is None else self.selection.to_dict(),
        }
