"""One look frame for every callback that watches a training run from inside it.

:class:`~pytest_rlgate.watch.callback.GateCallback` (the sequential gate) and
:class:`~pytest_rlgate.train.monitor.HackMonitor` (the reward-hack alarms) do the same thing
at a look: every ``every`` steps, on the main process, sample the live policy on held-out
prompts without disturbing training, judge what came back, and make every rank follow the
main process's decision to stop. :class:`LookFrame` is that frame, written once; a callback
says what a look judges (:meth:`LookFrame.look`).

**One sample per look.** Reply ``j`` of a prompt is seeded by ``(seed, j, the chat)``
(:func:`~pytest_rlgate.policy.generate.reply_seed`), so the replies two callbacks draw from the
same weights with the same settings are the same replies. :meth:`LookFrame.replies` keeps what
the policy replied at the current step, per model, and serves every callback from it: a run
watched by both callbacks (the monitor's prompts are a subset of the gate's holdout) samples
each prompt once per look, not once per callback.
"""

from __future__ import annotations

import contextlib
import random
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from transformers import TrainerCallback

from .._io import ranks
from ..environment.contract import Env
from ..policy.generate import SampleOptions, prompt_text
from ..policy.sampling import sample
from ..records import PromptItem

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from ..policy.handles import Model, Tokenizer

__all__ = ["LookFrame", "quietly"]

#: what one prompt's replies are kept under: the environment, the settings that decide the draws, the prompt
_Key = tuple[str, tuple[tuple[str, object], ...], str]
#: per model: the step whose replies are kept, and the replies
_SHARED: weakref.WeakKeyDictionary[object, tuple[int, dict[_Key, list[str]]]] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def quietly(model: Model) -> Iterator[None]:
    """Sample inside: eval mode, no gradients, and every random stream (Python's, numpy's,
    torch's) as it was, so watching a run never changes what it learns."""
    import numpy as np
    import torch

    py_state, np_state = random.getstate(), np.random.get_state()
    was_training = model.training
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            model.eval()
            yield
    finally:
        model.train(was_training)
        random.setstate(py_state)
        np.random.set_state(np_state)


class LookFrame(TrainerCallback):
    """A callback that looks at the live policy every *every* steps (0: never) on the main
    process and stops training, on every rank, when a look says so (:attr:`stopped_at`)."""

    every: int
    stopped_at: dict[str, object] | None
    #: how a look samples the holdout
    sampling: SampleOptions

    @property
    def k(self) -> int:
        return self.sampling.k

    @property
    def seed(self) -> int:
        return self.sampling.seed

    def due(self, step: int) -> bool:
        """Whether *step* is a look."""
        return self.every > 0 and step % self.every == 0

    def look(self, model: Model | None, step: int, args: TrainingArguments, state: TrainerState,
             control: TrainerControl) -> None:
        """What a look judges (on the main process only); sets :attr:`stopped_at` to stop the run."""
        raise NotImplementedError

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    model: Model | None = None, **kw: object) -> None:
        step = state.global_step
        if not self.due(step):
            return
        if ranks.is_main_process():  # one process watches; the others follow its verdict
            self.look(model, step, args, state, control)
        if ranks.group_size() > 1:
            self.stopped_at = ranks.broadcast(self.stopped_at)
        if self.stopped_at is not None:
            control.should_training_stop = True

    @staticmethod
    def replies(model: Model, tokenizer: Tokenizer | None, items: Sequence[PromptItem], sampling: SampleOptions, *,
                env: Env, step: int, shared: bool = True) -> list[list[str]]:
        """The live policy's replies to *items* at *step*, sampled quietly; with *shared*, from what
        another frame already drew at this step with the same settings, sampling only the rest."""
        if not shared:
            with quietly(model):
                return sample(model, tokenizer, list(items), sampling=sampling, env=env, progress=False)
        kept_step, kept = _SHARED.get(model, (None, {}))
        if kept_step != step:
            kept = {}
            _SHARED[model] = (step, kept)
        setting = (env.fingerprint, tuple(sorted(sampling.drawn().items())))
        keys = [(*setting, prompt_text(item)) for item in items]
        missing = {key: item for key, item in zip(keys, items) if key not in kept}
        if missing:
            with quietly(model):
                drawn = sample(model, tokenizer, list(missing.values()), sampling=sampling, env=env, progress=False)
            kept.update(zip(missing, drawn))
        return [kept[key] for key in keys]
