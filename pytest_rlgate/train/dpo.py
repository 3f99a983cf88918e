"""DPO rounds with TRL's ``DPOTrainer`` and a PEFT LoRA adapter, into the same run folder as GRPO.

A round: sample 8 replies per train prompt from the current policy (the shared seeded
sampler), build pairs (``pairs.py``: raw-score margin, per-prompt cap, length-matched
rejects, optionally capped constructed negatives from the environment), sample the base
holdout runs, train a LoRA adapter whose reference is the same weights with the adapter
off, sample the after run, gate by category guarding the environment's markers, publish
``runs/<name>/`` atomically.

Round two (``--from-run RUN``) is the same call: ``pipeline.prepare`` merges the earlier
run's adapter (and its own lineage) into the weights, so the fresh pairs are sampled from
the merged policy and the merged policy *is* the reference. Each round samples its own
pairs because pairs go stale: the replies a round-one policy prefers are not the ones the
round-two policy produces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..environment.contract import Env
from ..errors import RlgateWarning, UsageError
from ..policy.sampling import sample
from ..records import PromptItem
from .adapters import LineageStep, check_targets, lora_config
from .config import resolved
from .dpo_config import LOSS_TYPE, MIN_PAIRS, DPOKnobs
from .grpo import _on_cpu
from .pairs import Pair, PairSet, build_pairs, write_pairs
from .pipeline import MetricsRecorder, metrics_recorder, prepare, step_progress, train_and_gate, write_base_runs
from .run import RunFolder, RunWriter

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer

    from ..policy.handles import Model, Tokenizer
    from .monitor import HackMonitor, SampleFn

__all__ = ["build_dpo_trainer", "dpo_config", "dpo_dataset", "sample_pairs", "train_dpo"]

#: The round's preference pairs, written into the run folder next to the GRPO-shaped files.
PAIRS = "pairs.jsonl"
#: DPO's own training-log keys kept per step in metrics.jsonl (TRL's names, which the report reads).
METRIC_KEYS: tuple[str, ...] = (
    "loss", "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
    "logps/rejected", "entropy", "grad_norm", "learning_rate", "num_tokens",
)




# --- pairs from the current policy -------------------------------------------------------
def sample_pairs(model: Model, tokenizer: Tokenizer, items: Sequence[PromptItem], knobs: DPOKnobs, *,
                 progress: bool | None = None) -> PairSet:
    """Sample ``pair_samples`` replies per train prompt at the trainer seed and pair them.

    The shared sampler seeds each reply from (seed, rollout, prompt), so the pairs do not
    depend on batch shape, and ``--balance`` copies of a prompt get the same replies (their
    pairs repeat: the copies weight that prompt, as they weight it in GRPO).
    """
    env = knobs.environment
    replies = sample(model, tokenizer, list(items), sampling=knobs.sampling(k=knobs.pair_samples), env=env,
                     progress=progress, desc="sampling DPO pairs")
    built = build_pairs(items, replies, seed=knobs.sample_seed, min_margin=knobs.min_margin,
                        max_per_prompt=knobs.max_pairs_per_prompt, constructed=knobs.constructed_negatives,
                        constructed_cap=knobs.constructed_cap, env=env)
    built.stats["sample_seed"] = knobs.sample_seed
    built.stats["pair_samples"] = knobs.pair_samples
    return built


def check_enough_pairs(pair_set: PairSet, knobs: DPOKnobs) -> None:
    """Fewer than :data:`MIN_PAIRS` pairs is a usage error that says what to change."""
    found = len(pair_set.pairs)
    if found >= MIN_PAIRS:
        return
    stats = pair_set.stats
    offered = knobs.environment.has_rejected_reply and not knobs.constructed_negatives
    hint = ", or add --constructed-negatives" if offered else ""
    raise UsageError(
        f"DPO found {found} preference pair(s) (need at least {MIN_PAIRS}): {stats.get('sampled_pairs', 0)} "
        f"sampled from {stats.get('prompts_with_pairs', 0)} of {stats.get('prompts', 0)} train prompts x "
        f"{knobs.pair_samples} replies had a raw-score gap >= {knobs.min_margin}. The policy's replies barely "
        f"differ; raise --pair-samples, lower --min-margin, use a larger --size or --prompts-file, raise "
        f"--temperature{hint}"
    )


# --- TRL ----------------------------------------------------------------------------------
def dpo_dataset(pairs: Sequence[Pair], env: Env) -> Dataset:
    """Conversational DPO rows: the prompt as *env* renders it for the sampler, one assistant turn each side."""
    from datasets import Dataset

    return Dataset.from_list([
        {"prompt": env.messages_for(p.prompt),
         "chosen": [{"role": "assistant", "content": p.chosen}],
         "rejected": [{"role": "assistant", "content": p.rejected}]}
        for p in pairs
    ])


def dpo_config(knobs: DPOKnobs, output_dir: str, *,
               report_to: str | list[str] = "none", cpu: bool | None = None) -> DPOConfig:
    """``DPOConfig`` for resolved *knobs* (CPU: ``use_cpu``, no bf16, no checkpointing - G2-G4)."""
    from trl import DPOConfig

    device: dict[str, bool] = {}
    if _on_cpu() if cpu is None else cpu:
        device = {"use_cpu": True, "bf16": False, "activation_checkpointing": False, "dataloader_pin_memory": False}
    return DPOConfig(
        output_dir=output_dir,
        max_steps=knobs.steps,
        per_device_train_batch_size=knobs.pairs_per_device,
        gradient_accumulation_steps=knobs.gradient_accumulation,
        learning_rate=knobs.learning_rate,
        beta=knobs.beta,
        loss_type=list(knobs.loss_type or LOSS_TYPE),
        max_length=knobs.max_length,
        seed=knobs.sample_seed,
        data_seed=knobs.sample_seed,
        logging_steps=1,
        **knobs.saving(),
        report_to=report_to,
        disable_tqdm=True,  # rlgate's own named step bar instead (pipeline.step_progress)
        **device,
    )


def build_dpo_trainer(model: Model, tokenizer: Tokenizer, pairs: Sequence[Pair], knobs: DPOKnobs, *, output_dir: str,
                      callbacks: Sequence[TrainerCallback] = (), progress: bool | None = None,
                      report_to: str | list[str] = "none") -> DPOTrainer:
    """A ``DPOTrainer`` training a fresh LoRA on *model*; the reference is *model* with it off.

    ``peft_config`` (not a pre-wrapped ``PeftModel``) is what makes TRL use the
    adapter-disabled weights as the reference, with no second copy of the model.
    """
    from trl import DPOTrainer

    check_targets(model, knobs.lora_targets)
    trainer = DPOTrainer(
        model=model,
        args=dpo_config(knobs, output_dir, report_to=report_to),
        train_dataset=dpo_dataset(pairs, knobs.environment),
        processing_class=tokenizer,
        peft_config=lora_config(knobs.lora_rank, knobs.lora_alpha, knobs.lora_targets),
        callbacks=list(callbacks),
    )
    _check_truncation(trainer, len(pairs), knobs)
    return step_progress(trainer, "DPO steps", progress)


def _check_truncation(trainer: DPOTrainer, n_pairs: int, knobs: DPOKnobs) -> None:
    """TRL silently drops pairs whose prompt alone fills ``max_length``; say so, or stop."""
    import warnings

    kept = len(trainer.train_dataset)
    if kept == n_pairs:
        return
    longest = max((len(r["prompt_ids"]) for r in trainer.train_dataset), default=0)
    what = (f"--max-length {knobs.max_length}: {n_pairs - kept} of {n_pairs} pairs have a prompt of at least "
            f"{knobs.max_length} tokens and were dropped by TRL")
    if kept < MIN_PAIRS:
        raise UsageError(f"{what}, leaving {kept} (need at least {MIN_PAIRS}); raise --max-length above the "
                         "prompt length plus --max-completion-length")
    warnings.warn(f"{what} (longest kept prompt: {longest} tokens); raise --max-length to train on them",
                  RlgateWarning, stacklevel=3)


def dpo_metrics_recorder() -> MetricsRecorder:
    """A TrainerCallback keeping one metrics row per logged DPO step (TRL's key names, which the report plots)."""
    return metrics_recorder({key: key for key in METRIC_KEYS}, when="rewards/margins")


# --- the run ------------------------------------------------------------------------------
def _sha256(path: Path) -> str | None:
    weights = path / "adapter_model.safetensors"
    return hashlib.sha256(weights.read_bytes()).hexdigest() if weights.is_file() else None


def _lineage_record(lineage: Sequence[LineageStep]) -> dict[str, object]:
    """Round number and what the reference was: the base, or the base with earlier adapters merged."""
    return {
        "round": len(lineage) + 1,
        "reference": ("base model, adapter off" if not lineage else
                      "merged policy (base + " + " + ".join(str(s["run"]) for s in lineage) + "), adapter off"),
        "merged_adapters": [{"run": s["run"], "method": s.get("method"), "path": s.get("path"),
                             "adapter_sha256": _sha256(Path(str(s["adapter"])))} for s in lineage],
    }


def train_dpo(knobs: DPOKnobs | None = None, *, progress: bool | None = None, report_to: str | list[str] = "none",
              overwrite: bool = False, monitor_sample_fn: SampleFn | None = None, **overrides: Any) -> RunFolder:
    """Run one DPO round end to end and return the published ``RunFolder``.

    Keyword arguments are knobs (``steps=20, constructed_negatives=True, from_run="runs/x"``)
    on top of *knobs*. Raises :class:`UsageError` before any training when the policy
    yields fewer than :data:`MIN_PAIRS` pairs.
    """
    import torch

    knobs = (knobs or DPOKnobs()).with_overrides(**overrides)
    with RunWriter(knobs.runs_dir, resolved(knobs.run_name, "run_name"), overwrite=overwrite) as run:
        prep = prepare(knobs)
        knobs = cast(DPOKnobs, prep.knobs)  # prepare() resolves the knobs it is given
        with torch.no_grad():
            pair_set = sample_pairs(prep.model, prep.tokenizer, prep.prompts.train, knobs, progress=progress)
        write_pairs(run.path / PAIRS, pair_set.pairs)
        check_enough_pairs(pair_set, knobs)
        before = write_base_runs(run, prep, progress=progress)

        def build(output_dir: str, callbacks: list[TrainerCallback], _monitor: HackMonitor) -> DPOTrainer:
            return build_dpo_trainer(prep.model, prep.tokenizer, pair_set.pairs, knobs, output_dir=output_dir,
                                     callbacks=callbacks, progress=progress, report_to=report_to)

        def training(steps_done: int) -> dict[str, object]:
            per_device = resolved(knobs.pairs_per_device, "pairs_per_device")
            return {"pairs_per_step": per_device * knobs.gradient_accumulation,
                    "gradient_accumulation_steps": knobs.gradient_accumulation,
                    "epochs": round(steps_done * knobs.pairs_per_step / max(len(pair_set.pairs), 1), 3),
                    "trl_loss_type": list(knobs.loss_type or LOSS_TYPE)}

        return train_and_gate(run, prep, before, build=build, recorder=dpo_metrics_recorder(),
                              monitor_sample_fn=monitor_sample_fn, progress=progress, training=training,
                              extra={"pairs": pair_set.stats, "dpo": _lineage_record(prep.lineage)})
