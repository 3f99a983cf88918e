"""``rlgate train <method>``: train a LoRA adapter into ``runs/<name>/`` and gate it.

One subcommand per method, its flags generated from the method's knobs dataclass
(:func:`~pytest_rlgate.options.add_knob_arguments`: each knob's default, help and range are
declared once, in its field; the sampling knobs are copies of
:class:`~pytest_rlgate.policy.generate.SampleOptions`' fields). Exit code: 0 when the run's gate passed, 1 when it
failed, 2 for a usage error. ``--seeds 17 18 19`` trains the recipe once per trainer seed and gates
it across them (:mod:`pytest_rlgate.train.seeds`): exit 1 when the recipe regressed.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from .._io import ranks
from .._io.progress import heartbeat
from ..errors import DataError, UsageError
from ..options import SEED, add_env_argument, add_knob_arguments, add_output_arguments
from ..policy.generate import SAMPLING
from ..report.data import alarm_message
from ..report.markdown import reproduce_command
from ..train.config import PROMPTS, GRPOKnobs, RunKnobs
from ..train.difficulty import describe
from ..train.dpo import train_dpo
from ..train.dpo_config import DPOKnobs
from ..train.grpo import train_grpo
from ..train.methods import knobs_class
from ..train.run import GATE, WATCH_FOLDER, RunFolder
from ..train.seeds import train_seeds

HELP = "train a LoRA adapter with GRPO or DPO into runs/<name>/"


def add_run_arguments(p: argparse.ArgumentParser, knobs_cls: type[RunKnobs]) -> None:
    """The flags of *knobs_cls*, the environment, and the flags that are not knobs."""
    add_env_argument(p)
    groups = add_knob_arguments(p, knobs_cls)
    groups[PROMPTS].add_argument("--overwrite", action="store_true",
                                 help="replace an existing run folder of the same name")
    groups[SAMPLING].add_argument(
        "--seeds", type=SEED, nargs="+", metavar="SEED",
        help="train the recipe once per trainer seed (each a cached run in <runs-dir>/<name>-seed<S>/, each its own "
             "--sample-seed) and gate the recipe across them into <runs-dir>/<name>-recipe/; exit 1 when the recipe "
             "regressed, e.g. --seeds 17 18 19")
    p.add_argument("--report-to", default="none", help="TRL/transformers report_to (tensorboard, wandb, ...)")
    add_output_arguments(p)


def knob_values(args: argparse.Namespace, knobs_cls: type[RunKnobs]) -> dict[str, Any]:
    """The parsed flags that are fields of *knobs_cls*."""
    names = {f.name for f in dataclasses.fields(knobs_cls) if f.init}
    return {k: v for k, v in vars(args).items() if k in names}


def _run_grpo(args: argparse.Namespace) -> RunFolder:
    return train_grpo(GRPOKnobs(**knob_values(args, GRPOKnobs)), progress=args.progress,
                      report_to=args.report_to, overwrite=args.overwrite)


def _run_dpo(args: argparse.Namespace) -> RunFolder:
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


#: method -> (its knobs, run it -> RunFolder, help). A new method adds one entry.
METHODS: dict[str, tuple[type[RunKnobs], Callable[[argparse.Namespace], RunFolder], str]] = {
    "grpo": (GRPOKnobs, _run_grpo, "GRPO with TRL's GRPOTrainer and a LoRA adapter"),
    "dpo": (DPOKnobs, _run_dpo, "DPO on on-policy pairs with TRL's DPOTrainer and a LoRA adapter"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="method", metavar="METHOD", required=True)
    for name, (knobs_cls, _, help_) in METHODS.items():
        add_run_arguments(sub.add_parser(name, help=help_, description=help_), knobs_cls)


def run(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with heartbeat("rlgate train", lambda: "still working (bars show on a terminal)", args.progress):
        if args.seeds:
            return _run_seeds(args)
        if args.save_steps and ranks.is_main_process():
            knobs = METHODS[args.method][0](**knob_values(args, METHODS[args.method][0])).resolve()
            print(f"checkpoints: {knobs.checkpoints_dir}/checkpoint-N every {args.save_steps} steps; `rlgate watch "
                  f"{knobs.checkpoints_dir} --idle 600` gates them beside the run", flush=True)
        folder = METHODS[args.method][1](args)
    return report(folder) if ranks.is_main_process() else 0  # the job exits with the main process's verdict


def _run_seeds(args: argparse.Namespace) -> int:
    """``--seeds``: one cached run per trainer seed, then the recipe gate printed and written beside them."""
    if args.report_to != "none":
        raise UsageError(f"--report-to {args.report_to}: --seeds trains through the run cache, which reports to "
                         "nothing; drop --report-to or train one seed at a time with --sample-seed")
    if args.save_steps:
        raise UsageError(f"--save-steps {args.save_steps}: --seeds trains through the run cache, where no watch "
                         "finds the checkpoints; train one seed at a time with --sample-seed")
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
        seconds, per_step = training.get("train_seconds"), training.get("seconds_per_step")
        took = f"{seconds:.0f} s" if isinstance(seconds, (int, float)) else f"{seconds} s"
        rate = f"{per_step:.1f} s/step" if isinstance(per_step, (int, float)) else f"{per_step} s/step"
        print(f"trained {training.get('steps_done')} steps in {took} ({rate})")
    monitor = folder.monitor or {}
    for alarm in monitor.get("alarms", []):
        print(f"monitor alarm at step {alarm['step']}: {alarm['kind']}: {alarm_message(alarm)}")
    if monitor.get("stopped_at"):
        print(f"stopped early at step {monitor['stopped_at']['step']} on {monitor['stopped_at']['alarm']}")
    watched = folder.path / WATCH_FOLDER
    if (watched / "looks.json").is_file():
        print(f"watched every {config['knobs'].get('watch_every')} steps: `rlgate select {watched}` prints every "
              f"look's verdicts and the checkpoint to ship, `rlgate report {watched}` draws them")
    print(_gate_text(folder))
    return 0 if gate.get("passed") else 1


def _gate_text(folder: RunFolder) -> str:
    """The gate table from the gate.json the run wrote, printed like `rlgate gate`, and the
    `rlgate gate` command that gives the same verdicts from the run's files."""
    try:
        result = folder.gate_result()
    except DataError as exc:
        raise DataError(f"{exc.reason}; re-run `rlgate train` for this run", path=folder.path / GATE) from None
    return f"{result.report()}\nthe same gate from the run's files: {reproduce_command(result)}"
