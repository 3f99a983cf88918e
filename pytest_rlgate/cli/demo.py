"""``rlgate demo [--env SPEC] [--runs-dir DIR] [--steps N] [--quick] [--base-model NAME]``: the whole story.

Builds (once) or loads the environment's tiny policy, writes its seeded prompt set and the
split, trains GRPO, GRPO with ``--balance 0.25`` and one DPO round with constructed
negatives (plus a clearly labelled run on a deliberately hackable reward the environment
offers when honest GRPO leaves the watched categories intact; refund, the default story,
watches no-id), gates each against three base runs by category, prints the categories side
by side and what happened, and writes run folders, reports and an index.

``--jobs N`` trains that many runs side by side (default: one per available core), each in
its own spawned process with one torch thread; the runs, the table and the story are the
same as one after the other.

``--base-model smollm2-135m`` tells it on a real model (the long version: the environment's
warm start, then the same runs with knobs scaled to a CPU; :mod:`pytest_rlgate.demo.real`).

``--seeds N`` tells the recipe story instead: honest GRPO and the balanced one, each trained
at N trainer seeds (17, 18, ...) on a larger holdout, gated as recipes across the seeds
(:mod:`pytest_rlgate.demo.recipe`).

Exit 0 when the story ran: a failed gate is a result the demo shows, not an error. Exit 2
for a usage error (one line).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .._io import ranks
from ..demo.recipe import run_recipe_demo
from ..demo.story import QUICK_STEPS, STEPS, run_demo
from ..errors import UsageError
from ..options import Number, add_env_argument, add_output_arguments, bounds_of, output_dir
from ..train.config import GRPOKnobs

HELP = "the whole story on the embedded tiny policy, CPU only"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_env_argument(parser)
    parser.add_argument("--runs-dir", type=output_dir, default="runs/demo", metavar="DIR",
                        help="where the run folders, prompt files and index.html go (%(default)s)")
    parser.add_argument("--steps", type=bounds_of(GRPOKnobs)["steps"], metavar="N",
                        help=f"training steps of every run (default {STEPS}; {QUICK_STEPS} with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="the whole flow on the small prompt set with very few steps (a smoke test: "
                             "too short for the verdicts to mean anything)")
    parser.add_argument("--jobs", type=Number(1, 256, "2", integer=True), metavar="N",
                        help="runs trained side by side, each in its own process with one thread (default: one "
                             "per available CPU core; 1 trains them one after the other); the table is the same")
    parser.add_argument("--base-model", metavar="NAME",
                        help="the story on a real model instead of the tiny policy, e.g. smollm2-135m (after `rlgate "
                             "models fetch smollm2-135m`): warm-started for the environment, knobs scaled to a CPU; "
                             "the long version (about an hour on 2 CPU cores)")
    parser.add_argument("--seeds", type=int, metavar="N",
                        help="the recipe story: honest GRPO and the balanced one at N trainer seeds each, gated "
                             "across the seeds (--seeds 3: about 10 minutes on 2 CPU cores)")
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    if args.seeds is not None and args.seeds < 2:
        raise UsageError(f"--seeds {args.seeds}: a recipe needs 2 or more trainer seeds (3 for a usable "
                         "interval), e.g. --seeds 3")
    if args.base_model is not None and args.seeds is not None:
        raise UsageError("--base-model with --seeds: the recipe story runs on the tiny policy; drop one of them")
    if args.quick and args.seeds is not None:
        raise UsageError("--quick with --seeds: the quick smoke test trains one seed per run; drop one of them")
    with _one_voice(args) as runs_dir:
        if args.seeds is None:
            run_demo(runs_dir, steps=args.steps, quick=args.quick, progress=args.progress, env=args.env,
                     jobs=args.jobs, verbose=args.verbose, base_model=args.base_model)
        else:
            run_recipe_demo(runs_dir, seeds=args.seeds, steps=args.steps, progress=args.progress, env=args.env)
    return 0


@contextlib.contextmanager
def _one_voice(args: argparse.Namespace) -> Iterator[Path]:
    """Where this process tells the story: the main process into ``--runs-dir`` on the terminal;
    under torchrun / accelerate the others follow every step (training and sampling are
    collective) into a scratch folder, silently, and it is thrown away."""
    if ranks.is_main_process():
        yield Path(args.runs_dir)
        return
    args.progress = False
    with tempfile.TemporaryDirectory(prefix=f"rlgate-demo-rank{ranks.rank()}-") as scratch, \
            open(os.devnull, "w", encoding="utf-8") as quiet, contextlib.redirect_stdout(quiet):
        yield Path(scratch)
