"""GRPO with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter, into a run folder.

``grpo_config`` maps every knob onto ``GRPOConfig`` (CPU: ``use_cpu``, no bf16, no
activation checkpointing - gotchas G2-G4; a GPU keeps TRL's own defaults);
``build_trainer`` is the trainer a benchmark can time against bare TRL; ``train_grpo`` is
the whole run: prompts, base runs, training with ``HackMonitor``, the after run, the gate,
and ``runs/<name>/`` published atomically. The environment (the ``env`` knob) renders the
chats and scores the completions; nothing here knows a task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from .._io import ranks
from ..environment.contract import Env
from ..errors import UsageError
from ..records import PromptItem
from .adapters import check_targets, lora_config
from .config import GRPOKnobs, resolved
from .pipeline import MetricsRecorder, metrics_recorder, prepare, step_progress, train_and_gate, write_base_runs
from .reward import RewardFn, env_reward
from .run import RunFolder, RunWriter
from .tools import completion_budget, tool_trainer_options

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ..policy.handles import Model, Tokenizer
    from .monitor import HackMonitor, SampleFn

__all__ = ["build_trainer", "grpo_config", "per_device_batch", "grpo_dataset", "grpo_metrics_recorder", "train_grpo"]

#: TRL log keys kept per step in metrics.jsonl, under the names docs/training.md uses.
METRIC_KEYS: dict[str, str] = {
    "reward": "reward", "reward_std": "reward_std", "kl": "kl", "loss": "loss",
    "completion_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio",
    "clip_ratio_low": "clip_ratio/low_mean", "clip_ratio_high": "clip_ratio/high_mean",
    "clip_ratio_region": "clip_ratio/region_mean", "entropy": "entropy", "grad_norm": "grad_norm",
    "learning_rate": "learning_rate", "frac_reward_zero_std": "frac_reward_zero_std", "step_time": "step_time",
}


def _on_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def grpo_config(knobs: GRPOKnobs, output_dir: str, *, report_to: str | list[str] = "none",
                cpu: bool | None = None) -> GRPOConfig:
    """``GRPOConfig`` for resolved *knobs*; TRL's ``report_to`` passes through."""
    from trl import GRPOConfig

    device: dict[str, bool] = {}
    if _on_cpu() if cpu is None else cpu:
        device = {"use_cpu": True, "bf16": False, "activation_checkpointing": False,
                  "dataloader_pin_memory": False}
    return GRPOConfig(
        output_dir=output_dir,
        max_steps=knobs.steps,
        num_generations=knobs.num_generations,
        per_device_train_batch_size=per_device_batch(resolved(knobs.batch_size, "batch_size")),
        gradient_accumulation_steps=1,
        learning_rate=knobs.learning_rate,
        beta=knobs.beta,
        loss_type=knobs.loss_type,
        epsilon_high=knobs.epsilon_high or None,
        scale_rewards="none" if knobs.no_scale_rewards else "group",
        mask_truncated_completions=knobs.mask_truncated,
        max_completion_length=knobs.max_new_tokens,  # TRL's name for the rollouts' budget
        temperature=knobs.temperature,
        top_p=knobs.top_p,
        seed=knobs.sample_seed,
        logging_steps=1,
        **knobs.saving(),
        report_to=report_to,
        disable_tqdm=True,  # rlgate's own named step bar instead (pipeline.step_progress)
        **device,
    )


def per_device_batch(completions: int) -> int:
    """Completions per process and step: a job of N processes trains the one-process recipe (the same
    completions per optimizer step), each process generating its share."""
    world = ranks.world_size()
    if completions % world:
        raise UsageError(f"--batch-size {completions}: {world} processes cannot share {completions} completions a "
                         f"step evenly; pass a multiple of {world} (and of --num-generations)")
    return completions // world


def grpo_dataset(items: Sequence[PromptItem], env: Env) -> Dataset:
    """A ``datasets.Dataset`` of the chats *env* renders (as the sampler does), with the case,
    category and scenario as columns the reward and the monitor receive."""
    from datasets import Dataset

    return Dataset.from_list([
        {"prompt": env.messages_for(item["prompt"]), "case": dict(item["case"]), "category": item["category"],
         "scenario_id": str(item.get("scenario_id", ""))}
        for item in items
    ])


def grpo_metrics_recorder() -> MetricsRecorder:
    """A TrainerCallback keeping one metrics row per logged GRPO step (TRL's logs, renamed)."""
    return metrics_recorder(METRIC_KEYS, when="reward")


def build_trainer(model: Model, tokenizer: Tokenizer, train_items: Sequence[PromptItem], knobs: GRPOKnobs, *,
                  output_dir: str, callbacks: Sequence[TrainerCallback] = (), reward: RewardFn | None = None,
                  progress: bool | None = None, report_to: str | list[str] = "none") -> GRPOTrainer:
    """A ``GRPOTrainer`` with the LoRA adapter for resolved *knobs* (the trainer's model wraps *model*).

    *reward* defaults to the knobs' environment reward (``--reward``) over the case column.
    """
    from trl import GRPOTrainer

    check_targets(model, knobs.lora_targets)
    if len(train_items) < 1:
        raise UsageError("--holdout/--size: the train split is empty; use a larger prompt set or a smaller holdout")
    env = knobs.environment
    args = grpo_config(knobs, output_dir, report_to=report_to)
    episodes: dict[str, object] = {}
    if env.is_episodic:  # TRL runs the tool loop: train/tools.py holds its experimental API
        episodes = tool_trainer_options(env, tokenizer)
        args.max_tool_calling_iterations = env.max_turns - 1
        args.max_completion_length = completion_budget(env, int(args.max_completion_length))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward if reward is not None else env_reward(env, knobs.reward),
        args=args,
        train_dataset=grpo_dataset(train_items, env),
        processing_class=tokenizer,
        peft_config=lora_config(knobs.lora_rank, knobs.lora_alpha, knobs.lora_targets),
        callbacks=list(callbacks),
        **episodes,
    )
    return step_progress(trainer, "GRPO steps", progress)


def train_grpo(knobs: GRPOKnobs | None = None, *, progress: bool | None = None, report_to: str | list[str] = "none",
               overwrite: bool = False, monitor_sample_fn: SampleFn | None = None, **overrides: Any) -> RunFolder:
    """Run GRPO end to end and return the published ``RunFolder``.

    Keyword arguments are knobs (``steps=10, balance=0.25, ...``) on top of *knobs*.
    *monitor_sample_fn* replaces HackMonitor's sampler (a test plants a drift with it).
    """
    knobs = (knobs or GRPOKnobs()).with_overrides(**overrides)
    with RunWriter(knobs.runs_dir, resolved(knobs.run_name, "run_name"), overwrite=overwrite) as run:
        prep = prepare(knobs)
        knobs = cast(GRPOKnobs, prep.knobs)  # prepare() resolves the knobs it is given
        before = write_base_runs(run, prep, progress=progress)

        def build(output_dir: str, callbacks: list[TrainerCallback], monitor: HackMonitor) -> GRPOTrainer:
            return build_trainer(prep.model, prep.tokenizer, prep.prompts.train, knobs, output_dir=output_dir,
                                 callbacks=callbacks, reward=monitor.wrap(env_reward(prep.env, knobs.reward)),
                                 progress=progress, report_to=report_to)

        return train_and_gate(run, prep, before, build=build, recorder=grpo_metrics_recorder(),
                              monitor_sample_fn=monitor_sample_fn, progress=progress,
                              training=lambda _steps: {"trl_loss_type": knobs.loss_type, "scale_rewards":
                                                       "none" if knobs.no_scale_rewards else "group"})
