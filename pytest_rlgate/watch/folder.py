"""Watching checkpoints we did not train: each ``checkpoint-N`` folder a job writes, gated as it appears.

A training job (TRL, a plain ``transformers`` Trainer, anything that saves Hugging Face
checkpoints) writes ``checkpoint-100/``, ``checkpoint-200/``, ... into its output folder.
:func:`watch_checkpoints` samples the holdout from each - a LoRA adapter (on its base model)
or full weights - as soon as it is complete, and tests it against step 0 (the base model,
sampled once) or a stored baseline with the same sequential test as
:class:`~pytest_rlgate.watch.callback.GateCallback`: the error budget is spent across the
looks, so a run that did not regress is stopped at most *family_level* of the time (the
gate's 5 % by default). It stops at
the first regression, and ends by selecting the checkpoint to ship, confirmed on a fresh
sample (:mod:`~pytest_rlgate.watch.select`).

Everything lands in the watch folder (default ``<CKPT_DIR>/rlgate-watch``): ``watch.json``
(the settings), ``step-<N>.jsonl`` per checkpoint (step 0 too), ``looks.json`` and
``selection.json``. It is resumable: a restart with the same settings replays the stored
rows (the test is deterministic) and samples only what is missing, an interrupted sample
continuing from its ``.partial`` file; other settings are refused, naming what differs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io.atomic import atomic_write
from ..data.prompts import fingerprint, read_prompts, write_prompts
from ..data.provenance import row_header
from ..data.resume import header_differences
from ..data.rows import Rows, load_rows
from ..environment.contract import Env, EnvSpec, load_env
from ..errors import DataError, UsageError
from ..gate.options import FAMILY_LEVEL, old_spelling
from ..policy.generate import SampleOptions, max_new_tokens_for
from ..policy.identity import base_identity
from ..policy.load import load_policy
from ..policy.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from ..policy.resumable import sample_to_file
from ..policy.served import ServedModel, adapter_name, served_identity
from ..records import PromptItem
from .looks import WINDOW, Look, SequentialGate, units_by_group
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
    from typing_extensions import Unpack

    from ..policy.generate import SampleKeywords

__all__ = ["WATCH_DIR", "WatchResult", "base_of_checkpoints", "checkpoints", "confirm_in_folder",
           "watch_checkpoints"]

WATCH_DIR = "rlgate-watch"
SETTINGS = "watch.json"
LOOKS = "looks.json"
HOLDOUT = "holdout_prompts.jsonl"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_FULL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
#: A checkpoint without trainer_state.json counts as written once its files are this old (seconds).
SETTLE = 30.0


@dataclass(frozen=True)
class WatchResult:
    """What a watch did: every look, where it stopped, and the selection."""

    out: Path
    looks: tuple[Look, ...]
    stopped_at: int | None
    selection: Selection | None
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """A checkpoint was gated, no look regressed, and the pick (when one was asked for) was confirmed.

        A watch that gated nothing did not pass: a CI step that watched the wrong folder, or a
        job that wrote no checkpoint, has nothing to ship (``rlgate select`` says the same).
        """
        if not self.looks or self.stopped_at is not None:
            return False
        return self.selection is None or self.selection.shipped is not None


def _kind(folder: Path) -> str | None:
    """``lora``, ``full``, or None when the folder holds no (complete) weights yet."""
    if (folder / ADAPTER_CONFIG).is_file() and (folder / ADAPTER_WEIGHTS).is_file():
        return "lora"
    if (folder / "config.json").is_file() and any((folder / w).is_file() for w in _FULL_WEIGHTS):
        return "full"
    return None


def _ready(folder: Path, now: float) -> bool:
    if _kind(folder) is None:
        return False
    if (folder / "trainer_state.json").is_file():  # the Trainer writes it after the weights
        return True
    newest = max((p.stat().st_mtime for p in folder.rglob("*") if p.is_file()), default=now)
    return now - newest >= SETTLE


def checkpoints(ckpt_dir: str | os.PathLike[str], *, ready_only: bool = True) -> list[tuple[int, Path]]:
    """The ``checkpoint-N`` folders in *ckpt_dir*, by step; with *ready_only* only the completely written ones."""
    root = Path(ckpt_dir)
    now = time.time()
    found = []
    for child in root.iterdir() if root.is_dir() else ():
        match = _CHECKPOINT.match(child.name)
        if match and child.is_dir() and (not ready_only or _ready(child, now)):
            found.append((int(match.group(1)), child))
    return sorted(found)


def base_of_checkpoints(ckpt_dir: str | os.PathLike[str]) -> str | None:
    """The base model the job's folder names (None: nothing does yet).

    The first checkpoint whose ``adapter_config.json`` names its base (a LoRA checkpoint names
    it as soon as it is written, before its weights are complete), else the ``base_model`` of
    an ``rlgate train`` run's ``config.json`` in the folder, which the run writes before its
    first step.
    """
    for _step, folder in checkpoints(ckpt_dir, ready_only=False):
        base = _base_of(folder)
        if base is not None:
            return base
    return _base_of_run(Path(ckpt_dir))


def _base_of(folder: Path) -> str | None:
    try:
        config = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    return str(base) if base else None


def _base_of_run(folder: Path) -> str | None:
    """The ``base_model`` an ``rlgate train`` run's config.json records (its knobs), or None."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    knobs = config.get("knobs") if isinstance(config, dict) else None
    base = knobs.get("base_model") if isinstance(knobs, dict) else None
    return str(base) if base else None


def _wait(ready: Callable[[], bool], idle: float, poll: float) -> bool:
    """Whether *ready* came true, polling every *poll* seconds for at most *idle* seconds."""
    end = time.monotonic() + idle
    while not ready():
        if time.monotonic() >= end:
            return False
        time.sleep(max(0.01, min(poll, end - time.monotonic())))
    return True


def _contents(root: Path) -> str:
    """What a folder holds, shortly: ``(it holds a/, b.json, ...)`` or ``(it is empty)``."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir()) if root.is_dir() else []
    if not names:
        return "(it is empty)"
    return f"(it holds {', '.join(names[:6])}{', ...' if len(names) > 6 else ''})"


class _Sampler:
    """Sampling one model's rows into a watch file, with the provenance header of ``rlgate sample``.

    With *served* (a model behind an endpoint) nothing is loaded here: step 0 is the served base,
    and a LoRA checkpoint is loaded into the server by its content's name, sampled by that name
    and unloaded after (``/v1/load_lora_adapter``), so the base is never reloaded.
    """

    def __init__(self, env: Env, items: Sequence[PromptItem], sampling: SampleOptions, *, device: str | None,
                 progress: bool | None, served: ServedModel | None = None) -> None:
        self.env, self.items, self.sampling = env, list(items), sampling
        self.device, self.progress, self.served = device, progress, served

    def rows(self, out: Path, model_id: str, adapter: Path | None, *, seed: int, label: str) -> Rows:
        if not out.exists():
            sampling = SampleOptions.of(self.sampling, seed=seed)
            header = row_header(self.env, prompts_fingerprint=fingerprint(self.items), policy=label,
                                sampling=sampling.drawn())
            if self.served is not None:
                with self.served.loaded(adapter_name(adapter), adapter) if adapter is not None \
                        else contextlib.nullcontext(self.served) as served:
                    sampler = served_identity(served, self.env, self.items, sampling, adapter=adapter)
                    sample_to_file(served, None, self.items, out, header={**header, "sampler": {
                        **sampler, "seeds": [seed]}}, env=self.env, seeds=[seed], sampling=sampling, policy=label,
                        progress=self.progress)
                return load_rows(out)
            header["sampler"] = {"model": base_identity(model_id), "adapter": None if adapter is None else str(adapter),
                                 "seeds": [seed]}
            model, tokenizer = load_policy(model_id, adapter=adapter, device=self.device)
            sample_to_file(model, tokenizer, self.items, out, header=header, env=self.env, seeds=[seed],
                           sampling=sampling, policy=label, progress=self.progress)
            del model
        return load_rows(out)


def _settings_check(out: Path, settings: dict[str, Any], restart: bool) -> None:
    path = out / SETTINGS
    if path.exists() and not restart:
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise DataError(f"unreadable watch settings ({exc}); pass --restart to start over", path=path) from None
        differ = header_differences(json.loads(json.dumps(settings)), kept)
        if differ:
            raise UsageError(f"{path}: this watch folder was started with other settings ({', '.join(differ)}); "
                             "pass the same flags, another --out, or --restart to start over")
    if restart:
        for stale in [*out.glob("step-*.jsonl*"), *out.glob("confirm-step-*.jsonl*"), out / LOOKS, out / SELECTION]:
            stale.unlink(missing_ok=True)
    atomic_write(path, json.dumps(settings, indent=2, sort_keys=True) + "\n")


def watch_checkpoints(
    ckpt_dir: str | os.PathLike[str],
    holdout: Sequence[PromptItem],
    *,
    env: EnvSpec = None,
    base_model: str | None = None,
    baseline: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    sampling: SampleOptions | None = None,
    budget_of_base: bool = False,
    family_level: float = FAMILY_LEVEL,
    planned_looks: int | None = None,
    window: int | None = None,
    release_policy: str | os.PathLike[str] | None = None,
    select: str | None = CRITERION,
    idle: float = 0.0,
    poll: float = 10.0,
    restart: bool = False,
    device: str | None = None,
    progress: bool | None = None,
    served: ServedModel | None = None,
    say: Callable[[str], None] = lambda _line: None,
    alpha: float | None = None,
    policy: str | os.PathLike[str] | None = None,
    **keywords: Unpack[SampleKeywords],
) -> WatchResult:
    """Gate every ``checkpoint-N`` folder in *ckpt_dir* against step 0, as it appears; stop at a regression;
    then select the checkpoint to ship.

    Each checkpoint is sampled as *sampling* (a :class:`~pytest_rlgate.policy.generate.SampleOptions`,
    its fields as keywords on top: ``k``, ``seed``, ...). Step 0 is *base_model* sampled at its
    *seed* (for LoRA checkpoints it defaults to the
    adapters' own base model), or the rows of *baseline* (a stored baseline file). With
    *idle* > 0 it can be started beside the job, before the job writes anything: it waits up
    to *idle* seconds each for the folder to appear, for step 0 (the first checkpoint that
    names its base, when no *base_model* or *baseline* is given) and for every next
    checkpoint, polling every *poll* seconds, until none has appeared for *idle* seconds (or
    *planned_looks* are done). Without *idle*, a folder that holds no ``checkpoint-N`` is
    refused: the watch was pointed at the wrong place. *budget_of_base*: the replies' token
    budget is the base model's default (fewer on a tiny policy), set once step 0's base is
    known. *say* receives one line per event (the CLI prints them). *served* samples through a
    running server instead of loading models here: step 0 is *base_model* as the server names
    it (default: *served*'s own model), each LoRA checkpoint is loaded into the server for its
    look and unloaded after.
    """
    env_ = load_env(env)
    sampling = SampleOptions.of(sampling, **keywords)
    if alpha is not None:
        family_level = old_spelling("alpha", alpha, "family_level")
    if policy is not None:
        release_policy = old_spelling("policy", policy, "release_policy")
    root = Path(ckpt_dir)
    if select is not None:
        parse_criterion(select)
    if not holdout:
        raise UsageError("the holdout is empty; pass the prompt items to sample")
    if not root.is_dir():
        if idle <= 0:
            raise UsageError(f"{root}: no such folder; pass the training job's output folder (where it writes "
                             "checkpoint-N/), or --idle SECONDS to wait for the job to create it")
        say(f"waiting up to {idle:g} s for {root} to appear")
        if not _wait(root.is_dir, idle, poll):
            raise UsageError(f"{root}: no such folder after waiting {idle:g} s (--idle); is it the training job's "
                             "output folder?")
    if idle <= 0 and not checkpoints(root, ready_only=False):
        raise UsageError(f"{root} holds no checkpoint-N folder {_contents(root)}; pass the training job's output "
                         "folder (the one holding checkpoint-N/), or --idle SECONDS to wait for the first")
    if served is not None:
        if any(_kind(p) == "full" for _s, p in checkpoints(root, ready_only=False)):
            raise UsageError(f"{root} holds full-weight checkpoints: a running server loads LoRA adapters only; watch "
                             "them without --base-url (each is loaded here), or save LoRA checkpoints")
        base_model = base_model or served.model
        served = served.with_model(base_model)
    if base_model is None and baseline is None:
        base_model = base_of_checkpoints(root)
        if base_model is None and idle > 0:
            say(f"waiting up to {idle:g} s for the first checkpoint to name its base model (step 0; or pass "
                "--base-model)")
            _wait(lambda: base_of_checkpoints(root) is not None or any(
                _kind(p) == "full" for _s, p in checkpoints(root, ready_only=False)), idle, poll)
            base_model = base_of_checkpoints(root)
        if base_model is None:
            kinds = {_kind(p) for _s, p in checkpoints(root, ready_only=False)} - {None}
            why = "; full-weight checkpoints name no base" if "full" in kinds else ""
            raise UsageError("no step 0: pass --base-model (the model the run started from) or --baseline ROWS "
                             f"(a stored baseline){why}")
    if budget_of_base:  # the base was not known when the watch started (it waited for the job)
        sampling = replace(sampling, max_new_tokens=max_new_tokens_for(
            base_model or base_of_checkpoints(root)))
    seed = sampling.seed
    folder = Path(out) if out is not None else root / WATCH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    settings = {"checkpoints": str(root.resolve()), "env": env_.describe(), "prompts": fingerprint(list(holdout)),
                "base_model": base_model, "baseline": None if baseline is None else str(baseline),
                **sampling.drawn(), "family_level": family_level, "planned_looks": planned_looks, "window": window,
                "release_policy": None if release_policy is None else str(release_policy), "select": select,
                "engine": None if served is None else "served"}
    _settings_check(folder, settings, restart)
    write_prompts(folder / HOLDOUT, holdout)
    sampler = _Sampler(env_, holdout, sampling, device=device, progress=progress, served=served)
    options: dict[str, Any] = {"release_policy": str(release_policy)} if release_policy is not None else {}
    gate = SequentialGate(family_level, planned=planned_looks, env=env_, options=options,
                          window=WINDOW if window is None else window)
    for reach in gate.reach(units_by_group(holdout)):
        say(reach.message)
    if baseline is not None:
        step0 = load_rows(baseline)
        say(f"step 0: the stored baseline {baseline} ({len(step0)} rows)")
    else:
        assert base_model is not None
        step0 = sampler.rows(folder / "step-000000.jsonl", base_model, None, seed=seed, label=f"{base_model} (step 0)")
        say(f"step 0: {base_model} sampled at seed {seed}")
    rows: dict[int, Rows] = {}
    paths: dict[int, Path] = {}
    stopped: int | None = None
    notes: list[str] = []
    last_new = time.monotonic()
    while True:
        fresh = [(s, p) for s, p in checkpoints(root) if s not in rows and s > 0]
        for step, path in fresh:
            if gate.planned is not None and len(gate.looks) >= gate.planned:
                notes.append(f"checkpoint-{step} and later were not gated: the {gate.planned} planned looks are done")
                break
            kind = _kind(path)
            if kind == "full" and served is not None:
                raise UsageError(f"{path} holds full weights: a running server loads LoRA adapters only; watch it "
                                 "without --base-url")
            model_id = str(base_model) if kind == "lora" else str(path)
            if kind == "lora" and base_model is None:
                base_model = _base_of(path)
                model_id = str(base_model)
            rows[step] = sampler.rows(folder / f"step-{step:06d}.jsonl", model_id, path if kind == "lora" else None,
                                      seed=seed, label=path.name)
            paths[step] = path
            look = gate.look(step0, rows[step], step=step)
            _write_looks(folder, gate, stopped=None)
            say(look.line(path.name))
            last_new = time.monotonic()
            if look.regressed:
                stopped = step
                break
        done = stopped is not None or (gate.planned is not None and len(gate.looks) >= gate.planned)
        if done or idle <= 0 or time.monotonic() - last_new >= idle:
            break
        time.sleep(poll)
    _write_looks(folder, gate, stopped=stopped)
    if not gate.looks:
        waited = f" within {idle:g} s (--idle)" if idle > 0 else ""
        pending = [p.name for _s, p in checkpoints(root, ready_only=False) if _s > 0 and _s not in rows]
        notes.append(f"no checkpoint was gated: {root} " + (
            f"holds {', '.join(pending)}, not yet completely written{waited} (--idle SECONDS waits for it)"
            if pending else f"had no checkpoint-N folder{waited} {_contents(root)}"))
    selection = None
    if select is not None and gate.looks:
        selection = select_checkpoint(gate.looks, rows, criterion=select, family_level=family_level, stopped_at=stopped)
        if selection.best is not None:
            selection = _confirm(selection, sampler, folder, paths, step0, base_model=base_model,
                                 stored=baseline is not None, seed=seed + CONFIRM_SEED_OFFSET, env=env_,
                                 options=options)
        atomic_write(folder / SELECTION, json.dumps(selection.to_dict(), indent=2, sort_keys=True) + "\n")
        for line in selection.summary().splitlines():
            say(line)
    return WatchResult(out=folder, looks=tuple(gate.looks), stopped_at=stopped, selection=selection,
                       notes=tuple(notes))


def _confirm(selection: Selection, sampler: _Sampler, folder: Path, paths: dict[int, Path], step0: Rows, *,
             base_model: str | None, stored: bool, seed: int, env: Env, options: dict[str, Any]) -> Selection:
    """The pick and step 0 sampled afresh at *seed* (step 0 stays the stored baseline when there is one)."""
    assert selection.best is not None
    path = paths[selection.best]
    lora = _kind(path) == "lora"
    pick = sampler.rows(folder / f"confirm-step-{selection.best:06d}.jsonl", str(base_model) if lora else str(path),
                        path if lora else None, seed=seed, label=f"{path.name} (confirmation)")
    base = step0 if stored else sampler.rows(folder / "confirm-step-000000.jsonl", str(base_model), None, seed=seed,
                                             label=f"{base_model} (step 0, confirmation)")
    return confirm_pick(selection, base, pick, seed=seed, base="stored" if stored else "fresh", env=env, **options)


def confirm_in_folder(folder: str | os.PathLike[str], selection: Selection, *, device: str | None = None,
                      progress: bool | None = None) -> Selection:
    """Confirm *selection*'s pick now, with the settings a watch folder recorded (``rlgate select --confirm``)."""
    root = Path(folder)
    if selection.best is None:
        raise UsageError("no checkpoint was picked, so there is nothing to confirm")
    if not (root / SETTINGS).is_file():
        raise UsageError(f"{root}: no {SETTINGS}; --confirm re-samples a folder rlgate watch wrote (a GateCallback "
                         "run confirms its pick when training ends: GateCallback(select=...))")
    try:
        settings = json.loads((root / SETTINGS).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"unreadable watch settings ({exc})", path=root / SETTINGS) from None
    if settings.get("engine") == "served":
        raise UsageError(f"{root} was watched through a server (--base-url): confirm by running that `rlgate watch` "
                         "command again, with the server up; it confirms its pick when it ends")
    env = load_env(settings["env"]["name"] if isinstance(settings.get("env"), dict) else settings.get("env"))
    items = read_prompts(root / HOLDOUT, env=env)
    sampling = SampleOptions(**{name: settings[name] for name in SampleOptions().drawn()})
    sampler = _Sampler(env, items, sampling, device=device, progress=progress)
    paths = {selection.best: Path(settings["checkpoints"]) / f"checkpoint-{selection.best}"}
    baseline = settings.get("baseline")
    step0 = load_rows(baseline if baseline else root / "step-000000.jsonl")
    policy = settings.get("release_policy") or settings.get("policy")  # a folder an older release wrote
    options = {"release_policy": policy} if policy else {}
    return _confirm(selection, sampler, root, paths, step0, base_model=settings.get("base_model"),
                    stored=bool(baseline), seed=settings["seed"] + CONFIRM_SEED_OFFSET, env=env, options=options)


def _write_looks(folder: Path, gate: SequentialGate, *, stopped: int | None) -> None:
    record = {"settings": {"sequential": gate.settings()}, "looks": [look.to_dict() for look in gate.looks],
              "stopped_at": None if stopped is None else {"step": stopped}}
    atomic_write(folder / LOOKS, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
