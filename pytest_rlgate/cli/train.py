"""``rlgate train <method>``: train a LoRA adapter into ``runs/<name>/`` and gate it.

One subcommand per method. ``add_run_arguments`` holds the flags every method shares
(the environment, prompts, split, base model, sampling, LoRA, monitor); each method adds
its own and maps the parsed flags onto its knobs. Exit code: 0 when the run's gate passed, 1 when it
failed, 2 for a usage error. ``--seeds 17 18 19`` trains the recipe once per trainer seed and gates
it across them (:mod:`pytest_rlgate.train.seeds`): exit 1 when the recipe regressed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .._io import ranks
from ..errors import DataError, UsageError
from ..gate.adapter import GateResult
from ..options import SEED, add_env_argument, add_output_arguments
from ..train import config as C, dpo as D
from ..train.config import GRPOKnobs
from ..train.difficulty import describe
from ..train.dpo import DPOKnobs, train_dpo
from ..train.grpo import train_grpo
from ..train.methods import knobs_class
from ..train.run import GATE, RunFolder
from ..train.seeds import train_seeds

HELP = "train a LoRA adapter with GRPO or DPO into runs/<name>/"


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Flags shared by every method (``RunKnobs``)."""
    add_env_argument(p)
    g = p.add_argument_group("prompts and policy")
    g.add_argument("--base-model", metavar="ID",
                   help=f"hub id, local folder or {C.TINY_POLICY} (default: the environment's own base model)")
    g.add_argument("--seed", type=SEED, default=C.SEED, help="prompt-set seed (default %(default)s)")
    g.add_argument("--size", default=C.SIZE, help="the environment's prompt-set size, e.g. small, default, large")
    g.add_argument("--prompts-file", metavar="PATH", help="a prompts JSONL instead of the environment's own set")
    g.add_argument("--holdout", type=C.RUN_BOUNDS["holdout"], default=C.HOLDOUT,
                   help="share held out by category (%(default)s)")
    g.add_argument("--balance", type=C.RUN_BOUNDS["balance"], default=C.BALANCE,
                   help="repeat minority categories of the train split up to this share (%(default)s = off)")
    g.add_argument("--run-name", metavar="NAME", help="folder name under --runs-dir (default <env>-<method>-s<seed>)")
    g.add_argument("--runs-dir", default=C.RUNS_DIR, metavar="DIR", help="where run folders go (%(default)s)")
    g.add_argument("--from-run", metavar="DIR", help="merge this finished run's adapter first (round two)")
    g.add_argument("--difficulty", nargs=2, type=C.PASS_RATE, metavar=("LOW", "HIGH"),
                   help="with --from-run: train on the tasks whose pass rate under that run lies in [LOW, HIGH] "
                        f"(default {C.DIFFICULTY[0]:g} {C.DIFFICULTY[1]:g}; 0 1 keeps every task)")
    g.add_argument("--no-decontaminate", action="store_true",
                   help="keep train prompts that repeat a holdout prompt (default: drop them)")
    g.add_argument("--overwrite", action="store_true", help="replace an existing run folder of the same name")
    s = p.add_argument_group("sampling and evaluation")
    s.add_argument("--temperature", type=C.RUN_BOUNDS["temperature"], default=C.TEMPERATURE,
                   help="rollouts and eval (%(default)s)")
    s.add_argument("--top-p", type=C.RUN_BOUNDS["top_p"], default=C.TOP_P, help="rollouts and eval (%(default)s)")
    s.add_argument("--sample-seed", type=SEED, default=C.SAMPLE_SEED,
                   help="trainer and first holdout seed; base runs use it, +1, +2 (%(default)s)")
    s.add_argument("--seeds", type=SEED, nargs="+", metavar="SEED",
                   help="train the recipe once per trainer seed (each a cached run in <runs-dir>/<name>-seed<S>/, "
                        "each its own --sample-seed) and gate the recipe across them into <runs-dir>/<name>-recipe/; "
                        "exit 1 when the recipe regressed, e.g. --seeds 17 18 19")
    s.add_argument("--base-runs", type=C.RUN_BOUNDS["base_runs"], default=C.BASE_RUNS,
                   help="base holdout samples (%(default)s)")
    s.add_argument("--eval-k", type=C.RUN_BOUNDS["eval_k"], default=C.EVAL_K,
                   help="replies per holdout prompt (%(default)s)")
    s.add_argument("--max-completion-length", type=C.RUN_BOUNDS["max_completion_length"], metavar="TOKENS",
                   help=f"default {C.MAX_COMPLETION_LENGTH}; {C.TINY_MAX_COMPLETION_LENGTH} on the tiny policy")
    m = p.add_argument_group("HackMonitor")
    m.add_argument("--monitor-every", type=C.RUN_BOUNDS["monitor_every"], default=C.MONITOR_EVERY,
                   help="steps between checks, 0 = off")
    m.add_argument("--stop-on", type=_csv, default=(), metavar="KINDS",
                   help=f"end training on these alarms: {','.join(C.STOP_ON_CHOICES)} (comma-separated)")
    m.add_argument("--kl-budget", type=C.RUN_BOUNDS["kl_budget"], metavar="KL",
                   help="drift alarm when the logged KL exceeds this")
    lora = p.add_argument_group("LoRA")
    lora.add_argument("--lora-rank", type=C.RUN_BOUNDS["lora_rank"], default=C.LORA_RANK, help="(%(default)s)")
    lora.add_argument("--lora-alpha", type=C.RUN_BOUNDS["lora_alpha"], default=C.LORA_ALPHA, help="(%(default)s)")
    lora.add_argument("--lora-targets", type=_csv, default=C.LORA_TARGETS, metavar="NAMES",
                      help="comma-separated module names (default: attention + MLP projections)")
    p.add_argument("--report-to", default="none", help="TRL/transformers report_to (tensorboard, wandb, ...)")
    add_output_arguments(p)


def _grpo_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("GRPO")
    g.add_argument("--steps", type=C.GRPO_BOUNDS["steps"], default=C.STEPS, help="optimizer steps (%(default)s)")
    g.add_argument("--num-generations", type=C.GRPO_BOUNDS["num_generations"], default=C.NUM_GENERATIONS,
                   help="group size (%(default)s)")
    g.add_argument("--batch-size", type=C.GRPO_BOUNDS["batch_size"], metavar="COMPLETIONS",
                   help="completions per step, a multiple of --num-generations "
                        f"(default 1 group; {C.TINY_PROMPTS_PER_STEP} on the tiny policy)")
    g.add_argument("--learning-rate", type=C.GRPO_BOUNDS["learning_rate"],
                   help=f"default {C.LEARNING_RATE:g}; {C.TINY_LEARNING_RATE:g} on the tiny policy")
    g.add_argument("--beta", type=C.GRPO_BOUNDS["beta"], default=C.BETA,
                   help="KL penalty to the adapter-off base (%(default)s)")
    g.add_argument("--loss-type", default=C.LOSS_TYPE,
                   help="any loss_type the installed TRL accepts: " + ", ".join(C.trl_loss_types()))
    g.add_argument("--epsilon-high", type=C.GRPO_BOUNDS["epsilon_high"], default=C.EPSILON_HIGH,
                   help="upper clip (0 = TRL's symmetric clip; DAPO 0.28)")
    g.add_argument("--no-scale-rewards", action="store_true", help="no std scaling of advantages (Dr.GRPO)")
    g.add_argument("--mask-truncated", action="store_true", help="drop truncated completions from the loss (DAPO)")
    g.add_argument("--reward", default=C.REWARD, metavar="NAME",
                   help="training reward: the environment's score (default), a variant it names (e.g. a "
                        "deliberately hackable one, for demos) or module:attr of a score(reply, case) function; "
                        "the holdout is always graded by the environment's own score")


def knob_values(args: argparse.Namespace, knobs_cls: type) -> dict[str, Any]:
    """The parsed flags that are fields of *knobs_cls*."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(knobs_cls) if f.init}
    return {k: v for k, v in vars(args).items() if k in names}


def _run_grpo(args: argparse.Namespace) -> Any:
    return train_grpo(GRPOKnobs(**knob_values(args, GRPOKnobs)), progress=args.progress,
                      report_to=args.report_to, overwrite=args.overwrite)


def _dpo_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("DPO")
    g.add_argument("--steps", type=D.DPO_BOUNDS["steps"], default=D.STEPS, help="optimizer steps (%(default)s)")
    g.add_argument("--pairs-per-step", type=D.DPO_BOUNDS["pairs_per_step"], default=D.PAIRS_PER_STEP,
                   help="pairs per step (%(default)s)")
    g.add_argument("--pairs-per-device", type=D.DPO_BOUNDS["pairs_per_device"], metavar="PAIRS",
                   help=f"pairs per forward, the rest is accumulation (default {D.PAIRS_PER_DEVICE}; "
                        f"{D.TINY_PAIRS_PER_DEVICE} on the tiny policy)")
    g.add_argument("--learning-rate", type=D.DPO_BOUNDS["learning_rate"],
                   help=f"default {D.LEARNING_RATE:g}; {D.TINY_LEARNING_RATE:g} on the tiny policy")
    g.add_argument("--beta", type=D.DPO_BOUNDS["beta"], default=D.BETA, help="DPO beta, KL strength (%(default)s)")
    g.add_argument("--loss-type", metavar="TYPES",
                   help=f"comma-separated TRL DPO losses (default {','.join(D.LOSS_TYPE)}; "
                        f"{','.join(D.TINY_LOSS_TYPE)} on the tiny policy): " + ", ".join(D.dpo_loss_types()))
    g.add_argument("--max-length", type=D.DPO_BOUNDS["max_length"], metavar="TOKENS",
                   help=f"prompt + reply tokens (default {D.MAX_LENGTH}; {D.TINY_MAX_LENGTH} on the tiny policy)")
    pairs = p.add_argument_group("pairs")
    pairs.add_argument("--pair-samples", type=D.DPO_BOUNDS["pair_samples"], default=D.PAIR_SAMPLES,
                       help="replies sampled per train prompt for pairing (%(default)s)")
    pairs.add_argument("--min-margin", type=D.DPO_BOUNDS["min_margin"], default=D.MIN_MARGIN,
                       help="smallest raw-score gap chosen - rejected (%(default)s)")
    pairs.add_argument("--max-pairs-per-prompt", type=D.DPO_BOUNDS["max_pairs_per_prompt"],
                       default=D.MAX_PAIRS_PER_PROMPT, help="(%(default)s)")
    pairs.add_argument("--constructed-negatives", action="store_true",
                       help="add (own passing reply, the environment's rejected_reply) pairs on the prompts it "
                            "builds one for")
    pairs.add_argument("--constructed-cap", type=D.DPO_BOUNDS["constructed_cap"], default=D.CONSTRUCTED_CAP,
                       metavar="SHARE",
                       help="constructed pairs at most this share of the sampled pairs (%(default)s)")


def _run_dpo(args: argparse.Namespace) -> Any:
    folder = train_dpo(DPOKnobs(**knob_values(args, DPOKnobs)), progress=args.progress,
                       report_to=args.report_to, overwrite=args.overwrite)
    if not ranks.is_main_process():
        return folder
    pairs = folder.config.get("pairs", {})
    cap = (f", cap {pairs['constructed_cap']} -> at most {pairs['constructed_limit']}"
           if pairs.get("constructed_negatives") else "")
    print(f"pairs: {pairs.get('sampled_pairs')} sampled from {pairs.get('prompts_with_pairs')} of "
          f"{pairs.get('prompts')} prompts, {pairs.get('constructed_pairs')} constructed{cap} "
          f"({folder.path / 'pairs.jsonl'})")
    if pairs.get("constructed_note"):
        print(f"note: {pairs['constructed_note']}")
    return folder


#: method -> (add its flags, run it -> RunFolder, help). A new method adds one entry.
METHODS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], Any], str]] = {
    "grpo": (_grpo_arguments, _run_grpo, "GRPO with TRL's GRPOTrainer and a LoRA adapter"),
    "dpo": (_dpo_arguments, _run_dpo, "DPO on on-policy pairs with TRL's DPOTrainer and a LoRA adapter"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="method", metavar="METHOD", required=True)
    for name, (adder, _, help_) in METHODS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        add_run_arguments(p)
        adder(p)


def run(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.seeds:
        return _run_seeds(args)
    folder = METHODS[args.method][1](args)
    return report(folder) if ranks.is_main_process() else 0  # the job exits with the main process's verdict


def _run_seeds(args: argparse.Namespace) -> int:
    """``--seeds``: one cached run per trainer seed, then the recipe gate printed and written beside them."""
    if args.report_to != "none":
        raise UsageError(f"--report-to {args.report_to}: --seeds trains through the run cache, which reports to "
                         "nothing; drop --report-to or train one seed at a time with --sample-seed")
    cls = knobs_class(args.method)
    runs = train_seeds(cls(**knob_values(args, cls)), args.seeds, overwrite=args.overwrite,
                       progress=args.progress)
    if not ranks.is_main_process():
        return 0
    print(runs.result.report(verbose=True))
    print(f"recipe: {runs.folder} (recipe.json, recipe.txt; `rlgate report {runs.folder}` draws it)")
    return 0 if runs.result.passed else 1


def report(folder: RunFolder) -> int:
    """Print where the run went, its speed, the monitor's alarms and the gate; exit code of the gate."""
    config, gate = folder.config, folder.gate
    training = config.get("training", {})
    print(f"run: {folder.path}")
    env = config.get("env") or {}
    if env:
        print(f"environment: {env['name']} v{env['version']} ({env['fingerprint'][:19]})")
    auto = [k for k in config.get("auto_defaults", []) if k != "base_model"]
    if "base_model" in config.get("auto_defaults", []):
        print(f"base model: {config['knobs']['base_model']} (the environment's own)")
    if auto:
        picked = ", ".join(f"{k}={config['knobs'][k]}" for k in auto)
        print(f"tiny-policy CPU defaults: {picked}")
    if config.get("decontamination"):
        print(config["decontamination"]["summary"])
    for line in describe(config["next_round"]) if config.get("next_round") else ():
        print(line)
    if training:
        print(f"trained {training.get('steps_done')} steps in {training.get('train_seconds')} s "
              f"({training.get('seconds_per_step')} s/step)")
    monitor = folder.monitor or {}
    for alarm in monitor.get("alarms", []):
        print(f"monitor alarm at step {alarm['step']}: {alarm['kind']}")
    if monitor.get("stopped_at"):
        print(f"stopped early at step {monitor['stopped_at']['step']} on {monitor['stopped_at']['alarm']}")
    print(_gate_text(folder))
    return 0 if gate.get("passed") else 1


def _gate_text(folder: RunFolder) -> str:
    """The gate table from the gate.json the run wrote, printed like `rlgate gate`."""
    try:
        return GateResult.from_dict(folder.gate).report()
    except DataError as exc:
        raise DataError(f"{exc.reason}; re-run `rlgate train` for this run", path=folder.path / GATE) from None
