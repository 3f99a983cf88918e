"""``rlgate eval --run DIR``: re-sample a finished run's holdout with its adapter and gate it.

It rebuilds the policy exactly as the run trained it (the base, every ``--from-run``
adapter of its lineage merged, then its own adapter), samples the holdout prompts the run
recorded at the run's seed (or ``--sample-seed``), grades them with the run's environment
(or ``--env``, whose fingerprint must match the run's) and gates the new rows against the
run's base rows with that environment's guards and categories. With ``--base-url URL --model
BASE`` the run's adapter is loaded into a running server that serves its base, and sampled
there. A run trained on another machine re-evaluates here; the same seed on the same versions reproduces
``holdout_after.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os

from .._io import ranks
from ..data.rows import read_rows, write_rows
from ..environment.contract import Env
from ..options import add_env_argument, add_knob_arguments, add_output_arguments, output_file
from ..policy.generate import SampleOptions
from ..train.evaluate import resample_run
from ..train.pipeline import gate_runs
from ..train.run import RunFolder
from .served import add_served_arguments, served_from

HELP = "re-sample a finished run's holdout and gate it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # --run-dir: torchrun reads an abbreviation of its own --run-path into "--run", before the module's arguments
    parser.add_argument("--run", "--run-dir", dest="run", required=True, metavar="DIR",
                        help="a finished runs/<name>/ folder (--run-dir under torchrun)")
    add_env_argument(parser, default="the run's environment", resolve="given")
    add_knob_arguments(parser, SampleOptions, only=("seed",), defaults={"seed": None},
                       helps={"seed": "sample at this seed instead of the run's"})
    parser.add_argument("--out", metavar="PATH", type=output_file, help="also write the new rows to this JSONL file")
    parser.add_argument("--json", action="store_true", help="print the gate as JSON")
    parser.add_argument("--model", metavar="NAME",
                        help="with --base-url: the name the server serves the run's base model under")
    add_served_arguments(parser)
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before sampling first imports torch
    override: Env | None = args.env  # resolved at the door (cli._resolve_env), before the run is opened
    folder = RunFolder.open(args.run)
    env = folder.environment(override)
    served = served_from(args, args.model)
    rows = resample_run(folder, seed=args.seed, progress=args.progress, env=env, served=served)
    if not ranks.is_main_process():  # the job exits with the main process's verdict
        return 0
    if args.out:
        write_rows(args.out, rows)
    result = gate_runs([list(read_rows(p)) for p in folder.before_files], rows, env=env)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        print(f"run: {folder.path} (re-sampled {len(rows)} replies, environment {env.name})")
        print(result.report())
    return 0 if result.passed else 1
