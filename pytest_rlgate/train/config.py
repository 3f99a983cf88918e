"""Training knobs: every default a named constant with its reason, validated in one place.

``RunKnobs`` holds what every method shares (the environment, prompts, split, base model,
sampling of the holdout, LoRA, the monitor); ``GRPOKnobs`` adds GRPO's own. A DPO method
subclasses ``RunKnobs`` the same way. Knobs left at ``None`` are *resolved*: the
environment's own base model, then a CPU-sized value when the base is the embedded tiny
policy, the reference run's value otherwise; ``resolve()`` records which ones it chose so the
run's ``config.json`` says so.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from ..data.prompts import PROMPT_SEED as SEED, SIZE
from ..environment.contract import Env, load_env
from ..errors import RlgateDeprecationWarning, UsageError
from ..options import HOLDOUT_FRACTION, SEED as SEED_RANGE, Number, bounds_of, knob, knob_meta, path_problem
from ..policy.generate import (
    DEFAULT_MAX_NEW_TOKENS,
    RUNS,
    SAMPLE_TEMPERATURE,
    SAMPLING,
    TINY_MAX_NEW_TOKENS,
    SampleOptions,
)
from ..policy.identity import is_tiny
from ..policy.load import TINY_POLICY
from ..policy.models import fetched_model_dir, is_model_name
from .reward import score_function

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# --- shared by every method -------------------------------------------------------------
# The prompt set's defaults (SEED, SIZE) are data.prompts'; the sampling settings' are
# policy.generate.SampleOptions' (SAMPLE_SEED seeds the trainer and the first holdout sample).
#: Share of scenarios held out of every category; None holds out the environment's own shares
#: (refund: 0.2 with an id, 0.65 without, 0.75 off topic; data.prompts.HOLDOUT where none are named).
HOLDOUT: float | None = None
#: Minority categories are repeated up to this share of the train split; 0 leaves it as written.
BALANCE = 0.0
#: Base-policy holdout samples at consecutive seeds: the run-to-run noise floor of the gate.
BASE_RUNS = 3
#: Knob names of an older release, still read (from a run's config.json, a marker, a keyword) as the new ones.
RENAMED = {"seed": "prompt_seed", "eval_k": "k", "max_completion_length": "max_new_tokens"}
#: LoRA rank: the reference run's 16 (enough for a one-rule behaviour change).
LORA_RANK = 16
#: LoRA alpha = 2 x rank, the usual scale that keeps the update size rank-independent.
LORA_ALPHA = 32
#: Attention and MLP projections of Llama/Qwen-style blocks.
LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: HackMonitor evaluates the live policy every this many steps (0 switches it off).
MONITOR_EVERY = 10
#: Alarm kinds ``stop_on`` may name (``regression``: the watched run's sequential test, with ``watch_every``);
#: ``any`` stops on the first alarm of any kind.
STOP_ON_CHOICES: tuple[str, ...] = ("feature", "length", "drift", "regression", "any")
#: Run folders live under ./runs/<name>/ .
RUNS_DIR = "runs"
#: Round two (``--from-run``) trains on the train tasks whose pass rate under round one lies in
#: this band, the reference run's: a task passed or failed every time gives GRPO no advantage, DPO no pair.
DIFFICULTY: tuple[float, float] = (0.2, 0.8)
#: Each end of the ``--difficulty`` band: a pass rate.
PASS_RATE = Number(0, 1, "0.2 0.8")

# --- GRPO -------------------------------------------------------------------------------
#: The ``--help`` section of GRPO's own knobs.
GRPO = "GRPO"
#: Optimizer steps: the reference run's 40 (reward visibly moves on a 1.5B model in ~15 GPU minutes).
STEPS = 40
#: Completions per prompt: a group of 8 gives a usable within-prompt baseline.
NUM_GENERATIONS = 8
#: Learning rate for a hub-sized model with LoRA (the reference run).
LEARNING_RATE = 5e-6
#: 5e-6 does not move a 2 M-parameter model in 40 steps; 2e-3 does (measured).
TINY_LEARNING_RATE = 2e-3
#: KL penalty to the adapter-off base: small, because the rule is close to the base behaviour.
BETA = 0.04
#: TRL's batch-normalised token-level loss, the reference run's choice.
LOSS_TYPE = "bnpo"
#: 0 means TRL's symmetric clip (epsilon 0.2); DAPO's clip-higher is 0.28.
EPSILON_HIGH = 0.0
#: The seed runs one prompt's group per optimizer step.
PROMPTS_PER_STEP = 1
#: Two groups per step halve the step-to-step noise on the tiny policy for ~1.6x the time.
TINY_PROMPTS_PER_STEP = 2
#: The training reward: None is the environment's own score (``train.reward.score_function``
#: also takes a variant the environment names, or ``module:attr``); the holdout is always
#: graded by the environment's own score.
REWARD: str | None = None

#: ``--async``: TRL's ``AsyncGRPOTrainer`` instead of ``GRPOTrainer`` (off; :func:`async_trainer_problem`).
ASYNC_TRAINER = False
#: What TRL's asynchronous GRPO needs beside itself (TRL 1.16: ``trl.experimental.async_grpo``).
_ASYNC_NEEDS = ("a CUDA GPU", "vllm", "kernels")

#: Used when TRL's help text cannot be read: the values TRL 1.16 documents.
_FALLBACK_LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
#: The ``--help`` sections of the knobs every method shares (and SAMPLING, policy.generate's).
PROMPTS, MONITOR, LORA = "prompts and policy", "HackMonitor", "LoRA"


def trl_choices(config: str, name: str, sentence: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
    """The values the installed TRL documents for field *name* of its *config* class: the quoted
    words of the help sentence that starts with *sentence* (*fallback* when TRL is missing or
    its text moved), so a new TRL loss is accepted the day it ships."""
    try:
        import trl
    except ImportError:  # pragma: no cover - the train extra is missing
        return fallback
    help_text = getattr(trl, config).__dataclass_fields__[name].metadata.get("help", "")
    found = re.search(re.escape(sentence) + r":?(.*?)\.\s", help_text)
    return tuple(re.findall(r"'([a-z_]+)'", found.group(1))) if found else () or fallback


def trl_loss_types() -> tuple[str, ...]:
    """The ``loss_type`` values the installed TRL's ``GRPOConfig`` documents."""
    return trl_choices("GRPOConfig", "loss_type", "Supported values are", _FALLBACK_LOSS_TYPES)


def async_trainer_problem() -> str:
    """Why ``--async`` does not train here, as the one line it fails with.

    TRL's ``AsyncGRPOTrainer`` scores rollouts in a spawned process (which rlgate's rewards and
    environment factories survive: they pickle), but it generates every rollout on a vLLM
    server over HTTP, trains with a FlashAttention-3 tree-attention kernel that the ``kernels``
    package fetches for CUDA, and pushes weights to the server over NCCL (or as a LoRA folder
    the server loads). None of that runs on a CPU, and rlgate's own trainer (``GRPOTrainer``,
    in one process) is what every run folder, the monitor and the fixtures are measured with.
    """
    import importlib.util

    try:
        import trl
    except ImportError:  # pragma: no cover - the train extra is missing
        return "--async: TRL is not installed; pip install \"pytest-rlgate[train]\""
    version = str(getattr(trl, "__version__", "?"))
    with warnings.catch_warnings():  # finding the module imports trl.experimental, which warns on import
        warnings.simplefilter("ignore")
        found = hasattr(trl, "AsyncGRPOTrainer") or importlib.util.find_spec("trl.experimental.async_grpo") is not None
    if not found:
        return f"--async: the installed TRL {version} has no AsyncGRPOTrainer; drop --async"
    import torch

    present = (torch.cuda.is_available(), importlib.util.find_spec("vllm") is not None,
               importlib.util.find_spec("kernels") is not None)
    missing = [need for need, here in zip(_ASYNC_NEEDS, present) if not here]
    needs = (f"TRL {version}'s AsyncGRPOTrainer generates on a vLLM server (trl vllm-serve), trains with a CUDA "
             "FlashAttention-3 kernel (the kernels package) and syncs weights over NCCL")
    if missing:
        return f"--async: {needs}; missing here: {', '.join(missing)}. Drop --async: rlgate trains with GRPOTrainer"
    return (f"--async: {needs}, which rlgate train does not drive; build AsyncGRPOTrainer in your own script with "
            "rg.env_reward(env) (it pickles) and gate its saved checkpoints with rlgate sample and rlgate gate")


def csv(text: str) -> tuple[str, ...]:
    """A comma-separated flag value as a tuple of names."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


_Value = TypeVar("_Value")


def resolved(value: _Value | None, knob: str) -> _Value:
    """*value* of a knob that ``resolve()`` fills (the base model, the run name, the budgets);
    reading one before ``resolve()`` is a bug in rlgate, not in the caller's input."""
    if value is None:
        raise RuntimeError(f"the knob {knob!r} was read before resolve() filled it")
    return value


def renamed(knobs: Mapping[str, _Value], *, warn: bool = False) -> dict[str, _Value]:
    """*knobs* with each older name (:data:`RENAMED`) read as the new one; *warn*: say so (a
    keyword someone wrote), not for a run's own config.json (written by an older release)."""
    out = dict(knobs)
    for old, new in RENAMED.items():
        if old in out:
            if new in out:
                raise UsageError(f"pass the knob {new} or its old name {old}, not both")
            if warn:
                warnings.warn(f"the knob {old!r} is now {new!r}; {old!r} will be removed", RlgateDeprecationWarning,
                              stacklevel=4)
            out[new] = out.pop(old)
    return out


def _fail(flag: str, value: object, fix: str) -> NoReturn:
    raise UsageError(f"--{flag} {value!r}: {fix}")


def check_numbers(knobs: DataclassInstance) -> None:
    """Raise ``UsageError`` naming the flag for the first knob outside its range (None = resolved later)."""
    for name, number in bounds_of(knobs).items():
        value = getattr(knobs, name)
        problem = None if value is None else number.problem(value)
        if problem is not None:
            _fail(name.replace("_", "-"), value, problem)


def _fits(value: object, hint: object) -> bool:
    """Whether a value read back from a run's config.json has the type of a knob's annotation."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str or hint is Env:  # an environment is recorded as its spec
        return isinstance(value, str)
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, (list, tuple)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(item, args[0]) for item in value)
        return len(value) == len(args) and all(_fits(item, arg) for item, arg in zip(value, args))
    return True


def recorded_knobs_problem(cls: type, knobs: Mapping[str, object]) -> str | None:
    """None when *knobs*, read back from a run's ``config.json``, fit the knobs class *cls*: each
    known knob of its annotated type and, when numeric, in its range; else what is wrong."""
    hints = typing.get_type_hints(cls)
    bounds = bounds_of(cls)
    for declared in dataclasses.fields(cls):
        if declared.name not in knobs:
            continue
        value = knobs[declared.name]
        if not _fits(value, hints.get(declared.name, object)):
            wanted = hints[declared.name]
            return (f"knob {declared.name!r} is {type(value).__name__} {repr(value)[:40]}, expected "
                    f"{getattr(wanted, '__name__', None) or str(wanted).replace('typing.', '')}")
        problem = None if value is None or declared.name not in bounds else bounds[declared.name].problem(value)
        if problem is not None:
            return f"knob {declared.name!r}: {problem}"
    return None


def _check_band(band: object, from_run: str | None) -> None:
    """``--difficulty LOW HIGH``: two pass rates, 0 <= LOW <= HIGH <= 1, and only with ``--from-run``."""
    shown = " ".join(map(str, band)) if isinstance(band, (tuple, list)) else band
    if not isinstance(band, (tuple, list)) or len(band) != 2:
        _fail("difficulty", shown, "give two pass rates LOW HIGH, e.g. 0.2 0.8")
    problem = PASS_RATE.problem(band[0]) or PASS_RATE.problem(band[1])
    if problem is None and band[0] > band[1]:
        problem = "LOW must not exceed HIGH, e.g. 0.2 0.8"
    if problem is None and not from_run:
        problem = "it selects round two's train tasks; add --from-run RUN, or drop --difficulty"
    if problem is not None:
        _fail("difficulty", shown, problem)


_Knobs = TypeVar("_Knobs", bound="RunKnobs")


@dataclass(frozen=True)
class RunKnobs:
    """Knobs every training method shares; field names are the CLI flags with ``_`` for ``-``.

    ``env`` is the environment (a spec, an :class:`Env`, or None for the default one); after
    ``resolve()`` it is its spec string (an object loaded from no spec stays an ``Env``), so
    knobs compare and hash by value. ``base_model`` None is the environment's own.
    """

    env: str | Env | None = None
    base_model: str | None = knob(None, f"hub id, local folder, {TINY_POLICY} or a fetched model such as "
                                  "smollm2-135m (default: the environment's own base model)", group=PROMPTS,
                                  metavar="ID")
    prompt_seed: int = knob(SEED, "prompt-set seed (%(default)s)", group=PROMPTS, bound=SEED_RANGE,
                            aliases=("--seed",))
    size: str = knob(SIZE, "the environment's prompt-set size, e.g. small, default, large", group=PROMPTS)
    prompts_file: str | None = knob(None, "a prompts JSONL instead of the environment's own set", group=PROMPTS,
                                    metavar="PATH")
    holdout: float | None = knob(HOLDOUT, "share held out of every category (default: the environment's own "
                                 "shares, each category's holdout sized to see a drop; else 0.2)", group=PROMPTS,
                                 bound=HOLDOUT_FRACTION, metavar="FRACTION")
    balance: float = knob(BALANCE, "repeat minority categories of the train split up to this share "
                          "(%(default)s = off)", group=PROMPTS,
                          bound=Number(0, 1, "0.25 (0 leaves the split as written)", high_open=True))
    # The sampling settings the run evaluates with (and, where TRL reads them, rolls out with):
    # SampleOptions' fields, each copied with its flag, range and help (sampling() gathers them).
    #: the rollouts' too: TRL divides the logits by it, so 0 (greedy) is refused here
    temperature: float = SampleOptions.as_knob("temperature", help="rollouts and evaluation (%(default)s)",
                                               bound=Number(0, 10, f"{SAMPLE_TEMPERATURE:g}", low_open=True))
    top_p: float = SampleOptions.as_knob("top_p", help="rollouts and evaluation (%(default)s)")
    sample_seed: int = SampleOptions.as_knob("seed", help="trainer and first holdout seed; base runs use it, +1, +2 "
                                                          "(%(default)s)")
    base_runs: int = knob(BASE_RUNS, "base holdout samples (%(default)s)", group=SAMPLING, bound=RUNS)
    k: int = SampleOptions.as_knob("k", help="replies per holdout prompt (%(default)s)", aliases=("--eval-k",))
    #: TRL's max_completion_length for the rollouts, and the evaluation's budget
    max_new_tokens: int | None = SampleOptions.as_knob(
        "max_new_tokens", default=None, aliases=("--max-completion-length",),
        help=f"reply budget of the rollouts (TRL's max_completion_length) and the evaluation (default "
             f"{DEFAULT_MAX_NEW_TOKENS}; {TINY_MAX_NEW_TOKENS} on the tiny policy)")
    monitor_every: int = knob(MONITOR_EVERY, "steps between checks, 0 = off", group=MONITOR,
                              bound=Number(0, 1_000_000, "10 (0 switches the monitor off)", integer=True))
    stop_on: tuple[str, ...] = knob((), f"end training on these alarms: {','.join(STOP_ON_CHOICES)} "
                                    "(comma-separated)", group=MONITOR, parse=csv, metavar="KINDS")
    kl_budget: float | None = knob(None, "drift alarm when the logged KL exceeds this", group=MONITOR,
                                   metavar="KL", bound=Number(0, 1_000_000, "0.1", low_open=True))
    save_steps: int = knob(0, "save a checkpoint-N folder every N steps in <runs-dir>/<run-name>-checkpoints/, "
                              "where `rlgate watch` gates them beside the run (0 = none)", group=MONITOR,
                           metavar="N", bound=Number(0, 1_000_000, "10 (0 saves none)", integer=True))
    watch_every: int = knob(0, "gate the policy against step 0 every N steps (GateCallback's sequential test) "
                               "into the run's rlgate-watch/ and pick the checkpoint to ship; --stop-on regression "
                               "ends training at a regression (0 = off)", group=MONITOR, metavar="N",
                            bound=Number(0, 1_000_000, "10 (0 switches the watch off)", integer=True))
    lora_rank: int = knob(LORA_RANK, "(%(default)s)", group=LORA, bound=Number(1, 1024, "16", integer=True))
    lora_alpha: int = knob(LORA_ALPHA, "(%(default)s)", group=LORA, bound=Number(1, 65536, "32", integer=True))
    lora_targets: tuple[str, ...] = knob(LORA_TARGETS, "comma-separated module names (default: attention + MLP "
                                         "projections)", group=LORA, parse=csv, metavar="NAMES")
    run_name: str | None = knob(None, "folder name under --runs-dir (default <env>-<method>-s<prompt seed>)",
                                group=PROMPTS, metavar="NAME")
    runs_dir: str = knob(RUNS_DIR, "where run folders go (%(default)s)", group=PROMPTS, metavar="DIR")
    from_run: str | None = knob(None, "merge this finished run's adapter first (round two)", group=PROMPTS,
                                metavar="DIR")
    #: (LOW, HIGH) pass-rate band of round two's train tasks; resolved to DIFFICULTY with from_run
    difficulty: tuple[float, float] | None = knob(
        None, "with --from-run: train on the tasks whose pass rate under that run lies in [LOW, HIGH] "
        f"(default {DIFFICULTY[0]:g} {DIFFICULTY[1]:g}; 0 1 keeps every task)", group=PROMPTS,
        parse=PASS_RATE, nargs=2, metavar=("LOW", "HIGH"))
    no_decontaminate: bool = knob(False, "keep train prompts that repeat a holdout prompt (default: drop them)",
                                  group=PROMPTS)
    #: names of knobs that ``resolve`` filled with a CPU/tiny-policy default
    auto: tuple[str, ...] = field(default=(), compare=False)

    method: str = field(default="", init=False)

    def _resolved_values(self, tiny: bool) -> dict[str, Any]:
        return {"max_new_tokens": TINY_MAX_NEW_TOKENS if tiny else DEFAULT_MAX_NEW_TOKENS}

    def sampling(self, **overrides: Any) -> SampleOptions:
        """How the run samples its holdout (resolved knobs): each knob that fills a
        :class:`SampleOptions` field, *overrides* on top (a base run's ``seed``, DPO's ``k``)."""
        values = {field: getattr(self, knob) for knob, field in self.sampling_knobs().items()}
        values["max_new_tokens"] = resolved(self.max_new_tokens, "max_new_tokens")
        return SampleOptions(**{**values, **overrides})

    @classmethod
    def sampling_knobs(cls) -> dict[str, str]:
        """Each knob that fills a :class:`SampleOptions` field -> that field's name."""
        return {f.name: meta["fills"] for f in dataclasses.fields(cls)
                if (meta := knob_meta(f)) is not None and meta["fills"] is not None}

    @property
    def environment(self) -> Env:
        """The resolved environment (string specs resolve once a process)."""
        try:
            return load_env(self.env)
        except UsageError as exc:
            raise UsageError(f"--env {self.env!r}: {exc}") from None

    def resolve(self: _Knobs) -> _Knobs:
        """Fill every ``None`` knob (the environment's base model, tiny-policy CPU defaults or
        the reference run's) and validate."""
        check_numbers(self)  # before resolving derives values (batch sizes) from them
        env = self.environment
        chosen: dict[str, Any] = {}
        if self.base_model is None:
            if env.base_model is None:
                policy = ("a tiny agent built for it (`rlgate policy build --env SPEC --out DIR`, then "
                          "--base-model DIR)" if env.is_episodic else repr(TINY_POLICY))
                raise UsageError(f"--base-model: environment {env.name} names no base model of its own; pass a "
                                 f"hub id, a local model folder or {policy}")
            chosen["base_model"] = env.base_model
        tiny = is_tiny(chosen.get("base_model", self.base_model))
        chosen.update({k: v for k, v in self._resolved_values(tiny).items() if getattr(self, k) is None})
        stop_on = tuple(self.stop_on.split(",")) if isinstance(self.stop_on, str) else tuple(self.stop_on)
        out = dataclasses.replace(
            self, **chosen, env=env.spec or env, stop_on=tuple(s.strip() for s in stop_on if s.strip()),
            lora_targets=tuple(self.lora_targets), auto=tuple(sorted({*self.auto, *chosen})),
        )
        band = DIFFICULTY if out.difficulty is None and out.from_run else out.difficulty
        out = dataclasses.replace(out, run_name=out.run_name or out.default_run_name(),
                                  difficulty=None if band is None else cast("tuple[float, float]", tuple(band)))
        out.validate()
        return out

    def default_run_name(self) -> str:
        return f"{self.environment.name}-{self.method or 'run'}-s{self.prompt_seed}"

    def with_overrides(self: _Knobs, **overrides: Any) -> _Knobs:
        """These knobs with keyword *overrides* applied, resolved; an unknown name is a ``UsageError``
        listing the known ones. An older name (:data:`RENAMED`) still reads as the new one, with a warning."""
        overrides = renamed(overrides, warn=True)
        names = {f.name for f in dataclasses.fields(self) if f.init}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise UsageError(f"unknown {self.method.upper() or 'run'} knob(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(names))}")
        return dataclasses.replace(self, **overrides).resolve()

    @property
    def checkpoints_dir(self) -> Path:
        """Where ``save_steps`` puts each ``checkpoint-N``: beside the run folder, under a name known before the
        run starts, so a watch started with the job finds it (the run folder is published at the end)."""
        return Path(self.runs_dir) / f"{resolved(self.run_name, 'run_name')}-checkpoints"

    def saving(self) -> dict[str, object]:
        """The trainer config's saving arguments: a ``checkpoint-N`` (the adapter, its config naming the base,
        the trainer state) every ``save_steps`` steps, or none."""
        if not self.save_steps:
            return {"save_strategy": "no"}
        return {"save_strategy": "steps", "save_steps": self.save_steps, "save_only_model": True}

    def validate(self) -> None:
        """Raise ``UsageError`` naming the flag and the fix for any value that cannot run."""
        check_numbers(self)
        if "regression" in self.stop_on and not self.watch_every:
            _fail("stop-on", ",".join(self.stop_on), "regression is the watched run's stop: add --watch-every N")
        unknown = [s for s in self.stop_on if s not in STOP_ON_CHOICES]
        if unknown:
            _fail("stop-on", ",".join(self.stop_on), f"choose from {', '.join(STOP_ON_CHOICES)} (comma-separated)")
        if not self.lora_targets:
            _fail("lora-targets", "", "name at least one module, e.g. q_proj,v_proj")
        if self.difficulty is not None:
            _check_band(self.difficulty, self.from_run)
        if self.run_name is not None and not _RUN_NAME.match(self.run_name):
            _fail("run-name", self.run_name, "use letters, digits, '.', '_' or '-' (it becomes a folder name)")
        problem = path_problem(self.runs_dir, directory=True)
        if problem is not None:
            _fail("runs-dir", self.runs_dir, problem)
        if is_model_name(self.base_model):  # refused here, before prompts load or anything trains
            try:
                fetched_model_dir(self.base_model)
            except UsageError as exc:
                _fail("base-model", self.base_model, exc.reason)

    def to_dict(self) -> dict[str, object]:
        """Every knob as JSON-ready values (tuples become lists; an ``Env`` without a spec, its name)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if isinstance(self.env, Env):
            out["env"] = self.env.name
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


@dataclass(frozen=True)
class GRPOKnobs(RunKnobs):
    """GRPO's knobs ; ``None`` means "resolve for the base model"."""

    steps: int = knob(STEPS, "optimizer steps (%(default)s)", group=GRPO,
                      bound=Number(1, 1_000_000, "40", integer=True))
    num_generations: int = knob(NUM_GENERATIONS, "group size (%(default)s)", group=GRPO,
                                bound=Number(2, 1024, "8 (GRPO compares completions within a group)", integer=True))
    batch_size: int | None = knob(None, "completions per step, a multiple of --num-generations (default 1 group; "
                                  f"{TINY_PROMPTS_PER_STEP} on the tiny policy)", group=GRPO,
                                  metavar="COMPLETIONS", bound=Number(2, 65536, "16", integer=True))
    learning_rate: float | None = knob(None, f"default {LEARNING_RATE:g}; {TINY_LEARNING_RATE:g} on the tiny policy",
                                       group=GRPO, bound=Number(0, 1, "5e-6", low_open=True))
    beta: float = knob(BETA, "KL penalty to the adapter-off base (%(default)s)", group=GRPO,
                       bound=Number(0, 100, "0.04 (0 disables the KL penalty)"))
    loss_type: str = knob(LOSS_TYPE, lambda: "any loss_type the installed TRL accepts: "
                          + ", ".join(trl_loss_types()), group=GRPO)
    epsilon_high: float = knob(EPSILON_HIGH, "upper clip (0 = TRL's symmetric clip; DAPO 0.28)", group=GRPO,
                               bound=Number(0, 10, "0.28 (0 keeps TRL's symmetric clip)"))
    no_scale_rewards: bool = knob(False, "no std scaling of advantages (Dr.GRPO)", group=GRPO)
    mask_truncated: bool = knob(False, "drop truncated completions from the loss (DAPO)", group=GRPO)
    reward: str | None = knob(REWARD, "training reward: the environment's score (default), a variant it names "
                              "(e.g. a deliberately hackable one, for demos) or module:attr of a score(reply, case) "
                              "function; the holdout is always graded by the environment's own score",
                              group=GRPO, metavar="NAME")
    async_trainer: bool = knob(ASYNC_TRAINER, "train with TRL's AsyncGRPOTrainer (rollouts in a spawned process); "
                               "it needs a CUDA GPU and a vLLM server, and is refused with what is missing",
                               group=GRPO, flag="--async")

    method: str = field(default="grpo", init=False)

    def _resolved_values(self, tiny: bool) -> dict[str, Any]:
        per_step = TINY_PROMPTS_PER_STEP if tiny else PROMPTS_PER_STEP
        return {
            **super()._resolved_values(tiny),
            "learning_rate": TINY_LEARNING_RATE if tiny else LEARNING_RATE,
            "batch_size": self.num_generations * per_step,
        }

    def validate(self) -> None:
        super().validate()
        if self.batch_size is not None and self.batch_size % self.num_generations:
            _fail("batch-size", self.batch_size,
                  f"the batch counts completions and must be a multiple of --num-generations "
                  f"{self.num_generations}, e.g. {self.num_generations * 2}")
        accepted = trl_loss_types()
        if self.loss_type not in accepted:
            _fail("loss-type", self.loss_type, f"the installed TRL accepts {', '.join(accepted)}")
        score_function(self.environment, self.reward)  # a UsageError naming --reward and the choices
        if self.async_trainer:
            raise UsageError(async_trainer_problem())
