"""``rlgate watch CKPT_DIR``: gate each ``checkpoint-N`` folder a training job writes, as it appears.

For a job rlgate did not start (TRL, a plain Trainer, a cluster job): every checkpoint - a
LoRA adapter on its base model, or full weights - is sampled on the holdout (or, with
``--base-url``, each adapter is loaded into a running server and sampled there) and tested
against step 0 (the base model, sampled once) or a stored baseline, with the error budget
spent across the looks; the watch stops at the first regression (exit 1) and ends by
choosing the checkpoint to ship, confirmed on a fresh sample. A watch that gated nothing
exits 1 too (nothing to ship), and a folder that holds no checkpoint-N is refused (exit 2)
unless ``--idle`` waits for the job to write one. Resumable: rerun the same command after a
restart. ``rlgate select`` and ``rlgate report`` read the watch folder.
"""

from __future__ import annotations

import argparse
import os

from ..environment.contract import Env
from ..gate.options import FAMILY_LEVEL, LEVEL
from ..options import Number, add_deprecated, add_env_argument, add_knob_arguments, add_output_arguments
from ..policy.generate import SAMPLING, SampleOptions
from ..watch.folder import WATCH_DIR, watch_checkpoints
from .sample import add_prompt_arguments, prompts_of
from .served import add_served_arguments, served_from

HELP = "gate each checkpoint-N folder a training job writes, as it appears, and pick the one to ship"
LOOKS = Number(1, 10_000, "10", integer=True)
WINDOW = Number(1, 16, "3", integer=True)
SECONDS = Number(0, 7 * 24 * 3600, "600")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ckpt_dir", metavar="CKPT_DIR", help="the job's output folder, where it writes checkpoint-N/")
    add_env_argument(parser, resolve="always")
    parser.add_argument("--base-model", metavar="ID|DIR|NAME",
                        help="step 0: the model the run started from (default: the LoRA adapters' base model); with "
                             "--base-url, the name the server serves it under")
    parser.add_argument("--baseline", metavar="ROWS", help="gate against these stored rows instead of sampling step 0")
    add_prompt_arguments(parser)
    s = add_knob_arguments(parser, SampleOptions, defaults={"max_new_tokens": None})[SAMPLING]
    s.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda when available)")
    g = parser.add_argument_group("the sequential test")
    g.add_argument("--family-level", type=LEVEL, default=FAMILY_LEVEL, metavar="L",
                   help="how often a run that did not regress may be stopped, over all its looks (default "
                        f"{FAMILY_LEVEL:g}, the gate's --family-level)")
    add_deprecated(g, "--alpha", "--family-level", dest="family_level", type=LEVEL)
    g.add_argument("--looks", type=LOOKS, metavar="N", help="checkpoints the run will write (default: open-ended)")
    g.add_argument("--window", type=WINDOW, help="checkpoints pooled by the window test (3)")
    g.add_argument("--release-policy", metavar="FILE", help="a release policy (YAML/TOML) for each look's gate")
    add_deprecated(g, "--policy", "--release-policy", dest="release_policy", metavar="FILE")
    g.add_argument("--select", default="pass@1/overall", metavar="METRIC/GROUP",
                   help="rank checkpoints by this gated metric (%(default)s)")
    g.add_argument("--no-select", action="store_true", help="gate only; pick no checkpoint")
    w = parser.add_argument_group("waiting")
    w.add_argument("--idle", type=SECONDS, default=0.0, metavar="SECONDS",
                   help="wait this long each for CKPT_DIR to appear, for the first checkpoint (step 0: its base "
                        "model) and for every next one, so the watch can start beside its job (%(default)s: gate "
                        "what is there and finish)")
    w.add_argument("--poll", type=SECONDS, default=10.0, metavar="SECONDS", help="(%(default)s)")
    add_served_arguments(parser, "--base-model")
    parser.add_argument("--out", metavar="DIR", help=f"the watch folder (default: CKPT_DIR/{WATCH_DIR})")
    parser.add_argument("--restart", action="store_true", help="drop what the watch folder holds and start over")
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    env: Env = args.env  # resolved at the door (cli._resolve_env)
    items, _source = prompts_of(args, env)
    served = served_from(args, args.base_model, "--base-model")
    result = watch_checkpoints(
        args.ckpt_dir, items, env=env, base_model=args.base_model, baseline=args.baseline, out=args.out,
        sampling=SampleOptions.from_args(args, model=args.base_model), budget_of_base=args.max_new_tokens is None,
        family_level=args.family_level, planned_looks=args.looks,
        window=args.window, release_policy=args.release_policy,
        select=None if args.no_select else args.select, idle=args.idle, poll=args.poll, restart=args.restart,
        device=args.device, progress=args.progress, served=served, say=lambda line: print(line, flush=True))
    for note in result.notes:
        print(note)
    where = f"-> {result.out}"
    if not result.looks:
        print(f"FAILED: no checkpoint was gated, so there is nothing to ship {where}")
        return 1
    if result.stopped_at is not None:
        print(f"STOPPED at checkpoint-{result.stopped_at}: a regression {where}")
        return 1
    if result.selection is not None and result.selection.shipped is None:
        print(f"FAILED: no checkpoint to ship {where}")
        return 1
    print(f"{len(result.looks)} checkpoint(s) gated, no regression {where}")
    return 0
