"""DPO's knobs, declared once (default, help, range, flag) beside GRPO's in :mod:`.config`.

Knobs left at ``None`` resolve for the base model as GRPO's do: CPU-sized on a tiny policy,
the reference run's values on a hub model.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..options import Number, knob
from .config import RunKnobs, _fail, csv, trl_choices
from .pairs import CONSTRUCTED_CAP, MAX_PAIRS_PER_PROMPT, MIN_MARGIN

__all__ = ["DPOKnobs", "dpo_loss_types"]

#: The ``--help`` sections of DPO's own knobs.
DPO, PAIRS = "DPO", "pairs"

#: Optimizer steps: the reference run's 60.
STEPS = 60
#: Pairs per optimizer step: the reference run's 2 per device x 4 accumulation.
PAIRS_PER_STEP = 8
#: A hub model on one GPU fits 2 pairs per forward at 896 tokens; accumulation makes up the 8.
PAIRS_PER_DEVICE = 2
#: The tiny policy fits all 8 pairs in one forward on a CPU: no accumulation overhead.
TINY_PAIRS_PER_DEVICE = 8
#: DPO's KL strength: TRL's and the reference run's 0.1.
BETA = 0.1
#: The standard (sigmoid) DPO loss, the reference run's; any losses the installed TRL accepts can be named.
LOSS_TYPE: tuple[str, ...] = ("sigmoid",)
#: The tiny policy adds TRL's ``sft`` term on the chosen reply (RPO): with plain sigmoid DPO its
#: chosen log-probs sink with the rejected ones and the call format breaks (measured, 60 steps
#: at 3e-4: with_id 0.09 -> 0.00, well_formed 1.00 -> 0.67; with the sft term 0.09 -> 0.21, 0.83).
TINY_LOSS_TYPE: tuple[str, ...] = ("sigmoid", "sft")
#: Learning rate for a hub-sized model with LoRA (the reference run).
LEARNING_RATE = 5e-6
#: The tiny policy, measured over 60 steps of 8 pairs: 1e-4 barely moves it, 5e-4 and 2e-3
#: wipe out its tool calls and break the call format (well_formed regresses).
TINY_LEARNING_RATE = 3e-4
#: Replies sampled per train prompt for pairing: 8 gives most prompts some contrast.
PAIR_SAMPLES = 8
#: Prompt + reply tokens for a hub model (the reference run's 896).
MAX_LENGTH = 896
#: The tiny policy's prompt is ~40 tokens and its longest reply budget 48.
TINY_MAX_LENGTH = 128
#: Fewer pairs than one optimizer step's batch cannot train anything meaningful.
MIN_PAIRS = 8

#: Used when TRL's help text cannot be read: the values TRL 1.16 documents.
_FALLBACK_LOSS_TYPES = ("sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard",
                        "aot", "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm")


def dpo_loss_types() -> tuple[str, ...]:
    """The ``loss_type`` values the installed TRL's ``DPOConfig`` documents."""
    return trl_choices("DPOConfig", "loss_type", "Possible values are", _FALLBACK_LOSS_TYPES)


@dataclass(frozen=True)
class DPOKnobs(RunKnobs):
    """DPO's knobs; ``None`` means "resolve for the base model" (tiny policy: CPU-sized)."""

    steps: int = knob(STEPS, "optimizer steps (%(default)s)", group=DPO,
                      bound=Number(1, 1_000_000, "60", integer=True))
    pairs_per_step: int = knob(PAIRS_PER_STEP, "pairs per step (%(default)s)", group=DPO,
                               bound=Number(1, 65536, "8", integer=True))
    pairs_per_device: int | None = knob(
        None, f"pairs per forward, the rest is accumulation (default {PAIRS_PER_DEVICE}; {TINY_PAIRS_PER_DEVICE} "
        "on the tiny policy)", group=DPO, metavar="PAIRS",
        bound=Number(1, 65536, "2 (it must divide --pairs-per-step)", integer=True))
    learning_rate: float | None = knob(None, f"default {LEARNING_RATE:g}; {TINY_LEARNING_RATE:g} on the tiny policy",
                                       group=DPO, bound=Number(0, 1, "5e-6", low_open=True))
    beta: float = knob(BETA, "DPO beta, KL strength (%(default)s)", group=DPO,
                       bound=Number(0, 100, "0.1 (DPO's beta must be positive)", low_open=True))
    loss_type: tuple[str, ...] | None = knob(
        None, lambda: f"comma-separated TRL DPO losses (default {','.join(LOSS_TYPE)}; {','.join(TINY_LOSS_TYPE)} "
        "on the tiny policy): " + ", ".join(dpo_loss_types()), group=DPO, parse=csv, metavar="TYPES")
    max_length: int | None = knob(None, f"prompt + reply tokens (default {MAX_LENGTH}; {TINY_MAX_LENGTH} on the "
                                  "tiny policy)", group=DPO, metavar="TOKENS",
                                  bound=Number(8, 131072, "896 (prompt + reply tokens)", integer=True))
    pair_samples: int = knob(PAIR_SAMPLES, "replies sampled per train prompt for pairing (%(default)s)", group=PAIRS,
                             bound=Number(2, 1024, "8 (pairing needs at least 2 replies per prompt)", integer=True))
    min_margin: float = knob(MIN_MARGIN, "smallest raw-score gap chosen - rejected (%(default)s)", group=PAIRS,
                             bound=Number(0, 1_000_000, "0.5 (a raw-score gap)", low_open=True))
    max_pairs_per_prompt: int = knob(MAX_PAIRS_PER_PROMPT, "(%(default)s)", group=PAIRS,
                                     bound=Number(1, 10_000, "2", integer=True))
    constructed_negatives: bool = knob(False, "add (own passing reply, the environment's rejected_reply) pairs on "
                                       "the prompts it builds one for", group=PAIRS)
    constructed_cap: float = knob(
        CONSTRUCTED_CAP, "constructed pairs at most this share of the sampled pairs (%(default)s)", group=PAIRS,
        metavar="SHARE", bound=Number(0, 1_000_000, "0.3 (a share of the sampled pairs; large means uncapped)"))

    method: str = field(default="dpo", init=False)

    def _resolved_values(self, tiny: bool) -> dict[str, Any]:
        return {
            **super()._resolved_values(tiny),
            "learning_rate": TINY_LEARNING_RATE if tiny else LEARNING_RATE,
            "loss_type": TINY_LOSS_TYPE if tiny else LOSS_TYPE,
            "pairs_per_device": _largest_divisor(self.pairs_per_step,
                                                 TINY_PAIRS_PER_DEVICE if tiny else PAIRS_PER_DEVICE),
            "max_length": TINY_MAX_LENGTH if tiny else MAX_LENGTH,
        }

    def resolve(self) -> DPOKnobs:
        loss = self.loss_type
        if loss is not None:
            loss = tuple(s.strip() for s in loss.split(",") if s.strip()) if isinstance(loss, str) else tuple(loss)
        return super(DPOKnobs, dataclasses.replace(self, loss_type=loss)).resolve()

    def default_run_name(self) -> str:
        tags = "-cn" if self.constructed_negatives else ""
        tags += f"-r{len(_lineage_hint(self.from_run)) + 2}" if self.from_run else ""
        return f"{self.environment.name}-dpo{tags}-s{self.prompt_seed}"

    @property
    def gradient_accumulation(self) -> int:
        return max(1, self.pairs_per_step // (self.pairs_per_device or self.pairs_per_step))

    def validate(self) -> None:
        super().validate()
        env = self.environment
        if env.is_episodic:
            raise UsageError(f"--method dpo: environment {env.name} is multi-turn (it has tools), and DPO pairs "
                             "one-turn replies: a preferred and a rejected episode differ in tool results the "
                             "policy never wrote, which DPO's loss would train on. Train it with --method grpo, "
                             "which runs TRL's tool loop")
        if self.pairs_per_device is not None and self.pairs_per_step % self.pairs_per_device:
            _fail("pairs-per-device", self.pairs_per_device,
                  f"it must divide --pairs-per-step {self.pairs_per_step} (the rest is gradient accumulation)")
        accepted = dpo_loss_types()
        unknown = [t for t in self.loss_type or () if t not in accepted]
        if unknown or not self.loss_type:
            _fail("loss-type", ",".join(self.loss_type or ()), f"the installed TRL's DPO accepts {', '.join(accepted)}")


def _largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of *n* not above *at_most*: pairs per forward that tile a step exactly."""
    return next((d for d in range(min(n, at_most), 0, -1) if n % d == 0), 1)


def _lineage_hint(run: str | None) -> list[object]:
    """The lineage of *run* for naming only; an unreadable run is reported later by ``prepare``."""
    try:
        return list(json.loads((Path(str(run)) / "config.json").read_text(encoding="utf-8")).get("lineage", []))
    except (OSError, ValueError, AttributeError):
        return []
