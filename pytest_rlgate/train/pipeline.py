"""The steps every training method shares, around its own trainer.

prompts -> split -> decontaminate -> balance (``prompts.prepare_split``); base policy (merged
with ``--from-run`` adapters; round two keeps the train tasks it finds neither solved nor
unsolved, ``difficulty``) -> base
holdout runs at seeds 17, 18, 19 -> [the method trains] -> the after run at seed 17 ->
the gate by category guarding the environment's markers with the base runs' noise floor
-> ``config.json`` with every knob, the environment (name, version, fingerprint),
versions, fingerprints, seeds and lineage. The environment (the ``env`` knob) writes or
reads the prompts, renders the chats and grades the rows. GRPO and DPO plug their trainers
into the same calls, so both leave the same run folder.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from .._io import ranks
from .._io.progress import trainer_progress
from ..data.prompts import fingerprint, write_prompts
from ..data.rows import Rows
from ..environment.contract import Env
from ..errors import RlgateWarning, UsageError
from ..gate.adapter import compare_adapter
from ..gate.result import GateResult
from ..policy.generate import K
from ..policy.identity import base_identity
from ..policy.sampling import sample_rows
from ..records import PromptItem, Row
from .adapters import LineageStep, load_base, merge_adapter, run_lineage
from .cached import cached_rows, env_identity
from .config import RunKnobs, resolved
from .difficulty import select_next_round
from .inputs import PromptSets, load_prompts, versions
from .run import AFTER, CONFIG, GATE, METRICS, MONITOR, WATCH_FOLDER, RunFolder, RunWriter, before_name

if TYPE_CHECKING:
    from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

    from ..policy.handles import Model, Tokenizer
    from ..policy.kinds import Policy
    from ..watch.callback import GateCallback
    from .monitor import HackMonitor, SampleFn

_Trainer = TypeVar("_Trainer", bound="Trainer")

__all__ = ["HOLDOUT_PROMPTS", "Prepared", "PromptSets", "config_record", "gate_runs", "holdout_rows", "load_prompts",
           "metrics_recorder", "prepare", "step_progress", "train_and_gate", "versions", "write_base_runs"]

#: The holdout prompts a run sampled, so `rlgate eval` re-samples exactly them.
HOLDOUT_PROMPTS = "holdout_prompts.jsonl"


class MetricsRecorder(Protocol):
    """The callback :func:`metrics_recorder` builds: one ``metrics.jsonl`` row per logged step."""

    rows: list[dict[str, float]]


#: *build(output_dir, callbacks, monitor)*: a method's TRL trainer with rlgate's callbacks
BuildTrainer = Callable[[str, "list[TrainerCallback]", "HackMonitor"], "Trainer"]


@dataclass
class Prepared:
    """What a method needs to train: the policy, the prompts, and where they came from."""

    knobs: RunKnobs
    model: Model
    tokenizer: Tokenizer
    prompts: PromptSets
    lineage: list[LineageStep] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    @property
    def env(self) -> Env:
        return self.knobs.environment


def policy_label(lineage: Sequence[LineageStep]) -> str:
    """How rows name the policy a run starts from: ``base``, or the merged round before it."""
    return "base" if not lineage else f"{lineage[-1]['run']}(merged)"


def prepare(knobs: RunKnobs) -> Prepared:
    """Resolve the base (merging ``--from-run`` lineage), load it, build the prompt sets."""
    lineage: list[LineageStep] = []
    base = resolved(knobs.base_model, "base_model")
    if knobs.from_run:
        base, lineage = run_lineage(knobs.from_run)
        if knobs.base_model != base and "base_model" not in knobs.auto:
            raise UsageError(f"--base-model {knobs.base_model!r}: --from-run {knobs.from_run!r} was trained on "
                             f"{base!r}; drop --base-model or pass that one")
        knobs = dataclasses.replace(knobs, base_model=base)
    model, tokenizer = load_base(base)
    for step in lineage:
        model = merge_adapter(model, step["adapter"], flag="--from-run")
    prompts = load_prompts(knobs)
    if knobs.difficulty is not None:
        selection = select_next_round(model, tokenizer, prompts.split.tasks, knobs, policy=policy_label(lineage))
        prompts = dataclasses.replace(prompts, split=prompts.split.with_tasks(selection.kept), selection=selection)
    return Prepared(knobs=knobs, model=model, tokenizer=tokenizer, prompts=prompts, lineage=lineage)


def holdout_rows(
    model: Policy, tokenizer: Tokenizer | None, holdout: Sequence[PromptItem], knobs: RunKnobs, *, seed: int,
    policy: str, eval_run: str, progress: bool | None = None, desc: str = "sampling holdout",
) -> Rows:
    """Sample the holdout as the knobs say (:meth:`RunKnobs.sampling`) at *seed* and grade it with the
    environment into rows; the progress bar is named *desc*."""
    return sample_rows(model, tokenizer, list(holdout), sampling=knobs.sampling(seed=seed), policy=policy,
                       eval_run=eval_run, env=knobs.environment, progress=progress, desc=desc)


def base_seeds(knobs: RunKnobs) -> list[int]:
    """17, 18, 19 for the defaults: one seed per base run."""
    return [knobs.sample_seed + i for i in range(knobs.base_runs)]


def write_base_runs(run: RunWriter, prep: Prepared, *, progress: bool | None = None) -> list[Rows]:
    """Sample the base policy's holdout at every base seed into the run folder (and the holdout prompts)."""
    write_prompts(run.path / HOLDOUT_PROMPTS, prep.prompts.holdout)
    label = policy_label(prep.lineage)
    before: list[Rows] = []
    seeds = base_seeds(prep.knobs)
    for i, seed in enumerate(seeds):
        def sample(seed: int = seed, i: int = i) -> Rows:
            return holdout_rows(prep.model, prep.tokenizer, prep.prompts.holdout, prep.knobs, seed=seed,
                                policy=label, eval_run=f"before-{i}", progress=progress,
                                desc=f"sampling holdout (base run {i + 1}/{len(seeds)})")

        before.append(_cached_base_run(prep, seed, label, i, sample))
        run.rows(before_name(i, seed), before[-1])
    return before


def _cached_base_run(prep: Prepared, seed: int, label: str, index: int,
                     sample: Callable[[], Rows]) -> Rows:
    """A base run's rows, sampled once per (base, holdout, sampling knobs, seed) and cached.

    Every run on the same base and holdout samples the same base rows; caching them lets the
    demo, the fixtures and repeated ``rlgate train`` calls sample the noise floor once. A
    ``--from-run`` base (merged adapters) is sampled fresh.
    """
    if prep.lineage:
        return sample()
    parts = {"kind": "base-run", "base": base_identity(resolved(prep.knobs.base_model, "base_model")),
             "env": env_identity(prep.env), "holdout": fingerprint(prep.prompts.holdout), "seed": seed, "label": label,
             "index": index,
             "sampling": prep.knobs.sampling(seed=seed).drawn(), "versions": versions()}
    rows, _hit = cached_rows(parts, sample)
    return rows


def gate_runs(before_runs: Sequence[Sequence[Row]], after: Sequence[Row], env: Env) -> GateResult:
    """The gate by category, guarding the markers and declaring the categories of *env*, the
    environment that graded the rows.

    Every base run goes on the before side (their ``eval_run`` labels differ), so the gate
    estimates the run-to-run noise floor from them and pairs each scenario's mean. What the gate
    would warn (a constant guard) is in the result's ``warnings``, which gate.json keeps and every
    face of a run prints once (``rlgate train``, the demo, report.html), so it is not warned too.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RlgateWarning)
        return compare_adapter([row for rows in before_runs for row in rows], list(after), by="category", env=env)


def config_record(prep: Prepared, *, extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """``config.json``: every knob, which were auto-chosen, versions, prompts, seeds, lineage."""
    import torch

    knobs = prep.knobs
    return {
        "method": knobs.method,
        "env": prep.env.describe(),
        "knobs": knobs.to_dict(),
        "auto_defaults": list(knobs.auto),
        "base_model": knobs.base_model,
        "lineage": prep.lineage,
        "prompts": prep.prompts.record(),
        "decontamination": prep.prompts.split.decontamination.to_dict(),
        **({"next_round": prep.prompts.selection.to_dict()} if prep.prompts.selection else {}),
        "seeds": {"prompts": knobs.prompt_seed, "trainer": knobs.sample_seed, "base_runs": base_seeds(knobs),
                  "after": knobs.sample_seed},
        "versions": versions(),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "world_size": ranks.world_size(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(prep.started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    }


def step_progress(trainer: _Trainer, desc: str, progress: bool | None) -> _Trainer:
    """Give *trainer* rlgate's step bar named *desc* (:func:`~pytest_rlgate._io.progress.trainer_progress`).

    The trainers run with ``disable_tqdm=True``, so transformers adds its PrinterCallback,
    which prints every log dict to stdout; it goes too: metrics.jsonl has the logs.
    """
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(trainer_progress(desc, progress))
    return trainer


def train_and_gate(
    run: RunWriter,
    prep: Prepared,
    before: Sequence[Sequence[Row]],
    *,
    build: BuildTrainer,
    recorder: MetricsRecorder,
    monitor_sample_fn: SampleFn | None = None,
    progress: bool | None = None,
    training: Callable[[int], Mapping[str, object]] | None = None,
    extra: Mapping[str, object] | None = None,
) -> RunFolder:
    """Train under a HackMonitor, sample the holdout after, gate, finish and publish *run*.

    *build(output_dir, callbacks, monitor)* returns the method's TRL trainer; *recorder*
    is its metrics callback (``.rows``); *training(steps_done)* adds method-specific
    entries to ``config.json``'s ``training`` block, *extra* top-level ones.
    """
    import tempfile

    import torch

    from .monitor import HackMonitor  # transformers

    knobs, tok, sets = prep.knobs, prep.tokenizer, prep.prompts
    monitor = HackMonitor(sets.holdout, tok, env=prep.env, every=knobs.monitor_every, stop_on=knobs.stop_on,
                          kl_budget=knobs.kl_budget, sampling=knobs.sampling(k=K),  # its own k, whatever the gate's
                          sample_fn=monitor_sample_fn)
    watch = _gate_callback(run, prep) if knobs.watch_every else None
    # TRL's scratch lives inside the partial run folder, so a killed run's is swept with it; saved
    # checkpoints go beside the run instead, where a watch started with the job finds them
    with tempfile.TemporaryDirectory(prefix=".trl-", dir=run.path) as scratch:
        trainer = build(_checkpoints(knobs, run) if knobs.save_steps else scratch,
                        [monitor, recorder, *([watch] if watch is not None else [])], monitor)
        started = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - started
        policy = trainer.model
        policy.save_pretrained(str(run.adapter_dir))
    with torch.no_grad():
        after = holdout_rows(policy, tok, sets.holdout, knobs, seed=knobs.sample_seed,
                             policy=resolved(knobs.run_name, "run_name"), eval_run="after", progress=progress,
                             desc="sampling holdout (after training)")
    run.rows(AFTER, after)
    gate = gate_runs(before, after, prep.env)
    run.jsonl(METRICS, recorder.rows)
    run.json(MONITOR, monitor.summary())
    run.json(GATE, gate.to_dict())
    steps_done = trainer.state.global_step
    record = {"steps_done": steps_done, "train_seconds": round(train_s, 3),
              "seconds_per_step": round(train_s / max(steps_done, 1), 4),
              "stopped_at": monitor.stopped_at or (watch.stopped_at if watch is not None else None),
              "passed": bool(gate.passed),
              "processes": getattr(getattr(trainer, "accelerator", None), "num_processes", 1),
              **(training(steps_done) if training else {})}
    run.json(CONFIG, config_record(prep, extra={**(extra or {}), "training": record}))
    return run.publish()


def _checkpoints(knobs: RunKnobs, run: RunWriter) -> str:
    """The ``save_steps`` folder, made empty: an earlier run's checkpoints under the name are replaced only when
    its run folder is (``overwrite``)."""
    import shutil

    folder = knobs.checkpoints_dir
    if folder.exists() and any(folder.iterdir()):
        if not run.overwrite:
            raise UsageError(f"--save-steps: {folder} holds an earlier run's checkpoints; pick another --run-name or "
                             "delete the folder")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def _gate_callback(run: RunWriter, prep: Prepared) -> GateCallback:
    """``watch_every``: a :class:`~pytest_rlgate.watch.callback.GateCallback` sampling the holdout as the run's
    own evaluation does, its looks in the run folder's ``rlgate-watch/``, picking the checkpoint to ship."""
    from ..watch.callback import GateCallback  # transformers

    knobs = prep.knobs
    return GateCallback(prep.prompts.holdout, env=prep.env, every=knobs.watch_every, out_dir=run.path / WATCH_FOLDER,
                        planned_looks=max(1, getattr(knobs, "steps", knobs.watch_every) // knobs.watch_every),
                        stop_on_regression=bool({"regression", "any"} & set(knobs.stop_on)), select=True,
                        sampling=knobs.sampling())


def metrics_recorder(keys: Mapping[str, str], *, when: str) -> MetricsRecorder:
    """A TrainerCallback keeping one ``metrics.jsonl`` row per logged training step.

    *keys* maps our column names to TRL's log keys; a log without *when* (an evaluation or
    the final summary) is skipped. The HackMonitor's ``monitor/*`` values ride along.
    Built on call because transformers is heavy to import.
    """
    from transformers import TrainerCallback

    class _Recorder(TrainerCallback):
        def __init__(self) -> None:
            self.rows: list[dict[str, float]] = []

        def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                   logs: Mapping[str, float] | None = None, **kw: object) -> None:
            if not logs or when not in logs:
                return
            row: dict[str, float] = {"step": state.global_step}
            row.update({name: float(logs[key]) for name, key in keys.items()
                        if isinstance(logs.get(key), (int, float))})
            row.update({key: float(value) for key, value in logs.items() if key.startswith("monitor/")})
            self.rows.append(row)

    return _Recorder()
