"""``rlgate sample --model ID|DIR --out rows.jsonl``: any checkpoint's graded holdout rows.

A model trained anywhere (a hub id or a local folder, with or without a LoRA adapter)
sampled on a holdout - a prompts file, or the environment's own split as ``rlgate train``
holds it out - and graded by the environment into rows that ``rlgate gate`` compares. The
file starts with the provenance header: the model's identity (a folder's content hash),
the adapter's hash, the sampling, the environment's and the prompt set's fingerprints.

Resumable: pieces land in ``<out>.partial`` as they finish, ``<out>`` appears at the end;
a rerun with the same flags continues where the last one stopped, and one with other flags
is refused (``--restart`` starts over). Under ``torchrun`` / ``accelerate launch`` every
process samples its share of the prompts and the main process writes the file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Any

from .._io import ranks
from ..data.prompts import Holdout, fingerprint, read_prompts
from ..data.provenance import row_header
from ..data.shards import parse_shard, shard_header, shard_positions, shard_summary
from ..environment.contract import Env
from ..errors import UsageError
from ..gate.adaptive import DEFAULT_SPENDING, K_MAX, LOOKS, SPENDING, AdaptiveDesign, total_level, until_decided
from ..gate.options import GateOptions
from ..options import (
    HOLDOUT_FRACTION,
    SEED,
    Number,
    add_deprecated,
    add_env_argument,
    add_knob_arguments,
    add_output_arguments,
    bounds_of,
    output_file,
)
from ..policy.adaptive import policy_draw
from ..policy.generate import RUNS, SAMPLING
from ..policy.identity import adapter_identity, base_identity
from ..policy.load import TINY_POLICY, load_policy
from ..policy.lora import check_adapter
from ..policy.resumable import sample_to_file
from ..policy.sampling import SampleOptions, VllmSampler
from ..policy.served import ServedModel, adapter_name, served_identity
from ..records import PromptItem
from .fanout import sample_on_ray
from .gate import add_option
from .served import add_served_arguments, served_from

HELP = "sample a model (hub id or folder, optional adapter) on a holdout into graded rows"
BACKENDS = ("transformers", "vllm")
#: the gate's options a sample until decided takes (the others keep their defaults)
UNTIL_DECIDED_GATE = ("family_level", "margin", "guards", "metrics", "n_resamples", "max_drop", "release_policy",
                      "fail_on_inconclusive")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="ID|DIR",
                        help=f"a hub id, a local model folder, or {TINY_POLICY} (default: the environment's own "
                             "policy, when it names one)")
    parser.add_argument("--adapter", metavar="DIR", help="a PEFT LoRA adapter folder put on top of --model")
    add_env_argument(parser, resolve="always")
    add_prompt_arguments(parser)
    s = add_knob_arguments(parser, SampleOptions, defaults={"max_new_tokens": None})[SAMPLING]
    s.add_argument("--base-runs", type=RUNS, default=1,
                   help="sample this many runs at seeds S, S+1, ... (3 measures a noise floor; %(default)s)")
    s.add_argument("--backend", choices=BACKENDS, default="transformers", help="(%(default)s; vllm needs a GPU)")
    parser.add_argument("--out", required=True, type=output_file, metavar="PATH",
                        help="the row file to write (.gz: compressed); <PATH>.partial holds it while it grows")
    parser.add_argument("--restart", action="store_true", help="drop an unfinished <PATH>.partial and start over")
    add_served_arguments(parser)
    add_scale_arguments(parser)
    u = parser.add_argument_group(
        "until decided: --k replies for every prompt, a gate against BEFORE, then more replies only for the "
        "categories still inconclusive (exit 1 when the gate fails: a look claims a regression, or the last look "
        "fails a rule of the gate's (a --release-policy tier's max_drop or min_units, --max-drop, "
        "--fail-on-inconclusive))")
    u.add_argument("--until-decided", metavar="BEFORE.jsonl",
                   help="the before side's rows (e.g. the base's `rlgate sample`) to gate each look against")
    u.add_argument("--k-max", type=bounds_of(SampleOptions)["k"], default=K_MAX,
                   help="most replies a prompt gets (%(default)s)")
    u.add_argument("--looks", type=Number(1, 16, "2", integer=True), default=LOOKS,
                   help="planned looks at k, 2k, 4k, ... and the last at --k-max (%(default)s)")
    u.add_argument("--budget", type=Number(1, 10**9, "2000", integer=True), metavar="REPLIES", default=None,
                   help="most replies over all looks (default: --k-max for every prompt)")
    u.add_argument("--spending", choices=SPENDING, default=DEFAULT_SPENDING,
                   help="how the family level is split between the looks (%(default)s)")
    for name in UNTIL_DECIDED_GATE:
        add_option(parser, GateOptions.field(name), none=False)
    add_output_arguments(parser)


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    """``--shard I/N`` (one job of an array) and ``--ray [ADDRESS]`` (all of them, as Ray tasks)."""
    g = parser.add_argument_group("scale out: shards of one run, merged by `rlgate merge` into the unsharded rows")
    g.add_argument("--shard", metavar="I/N",
                   help="sample only shard I of N (0-based: a SLURM array's or an indexed job's index); the scenarios "
                        "whose stable hash falls in it; `rlgate merge` joins the N files")
    g.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="run the shards as Ray tasks (ADDRESS: a cluster, e.g. auto or ray://head:10001; none: a "
                        "local one) and write the merged rows to --out")
    g.add_argument("--ray-tasks", type=Number(1, 100_000, "8", integer=True), metavar="N",
                   help="shards (Ray tasks) to split the run into (default: the cluster's CPUs, or GPUs with "
                        "--ray-gpus)")
    g.add_argument("--ray-gpus", type=Number(0, 64, "1"), default=0, metavar="G",
                   help="GPUs each task reserves, when each loads --model itself (%(default)s: tasks sample "
                        "--base-url, or on CPU)")


def add_prompt_arguments(parser: argparse.ArgumentParser) -> None:
    """The prompts a command samples, as :func:`holdout_items` reads them."""
    p = parser.add_argument_group("prompts (default: the environment's own holdout, split as `rlgate train` does)")
    p.add_argument("--prompts-file", metavar="FILE", help="a prompts JSONL to sample instead (every line)")
    add_deprecated(p, "--prompts", "--prompts-file", dest="prompts_file", metavar="FILE")
    p.add_argument("--prompt-seed", type=SEED, default=Holdout.seed, help="prompt-set seed (%(default)s)")
    p.add_argument("--size", default=Holdout.size, help="the environment's prompt-set size (%(default)s)")
    p.add_argument("--holdout", type=HOLDOUT_FRACTION, default=Holdout.fraction, metavar="FRACTION",
                   help="share held out of every category (default: the environment's own shares)")


def holdout_items(prompts_file: str | os.PathLike[str] | None, holdout: Holdout,
                  env: Env) -> tuple[list[PromptItem], str]:
    """The prompts to sample (of *env*, the command's environment) and where they came from:
    every line of *prompts_file*, else *holdout* of the environment's own set."""
    if prompts_file:
        if not Path(prompts_file).is_file():
            raise UsageError(f"--prompts-file {str(prompts_file)!r}: no such file; write one with `rlgate prompts`")
        return read_prompts(prompts_file, env=env), str(prompts_file)
    return holdout.items(env), holdout.describe(env)


def prompts_of(args: argparse.Namespace, env: Env) -> tuple[list[PromptItem], str]:
    """:func:`holdout_items` as the flags of :func:`add_prompt_arguments` ask."""
    return holdout_items(args.prompts_file, Holdout(args.prompt_seed, args.size, args.holdout), env)


def _policy(args: argparse.Namespace) -> tuple[Any, Any]:
    if args.backend == "vllm":
        return VllmSampler(args.model, adapter=args.adapter), None
    return load_policy(args.model, adapter=args.adapter)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before sampling first imports torch
    ranks.init_from_launcher()
    env: Env = args.env  # resolved at the door (cli._resolve_env)
    if args.model is None and args.base_url is None:
        if env.base_model is None:
            raise UsageError(f"--model: environment {env.name} names no policy of its own (no base_model); pass a hub "
                             f"id, a local model folder, or a tiny policy ({TINY_POLICY} for a one-turn "
                             "environment; `rlgate policy build --env SPEC --out DIR` builds one for a tool "
                             "environment)")
        args.model = env.base_model
    served = served_from(args, args.model)
    if args.adapter is not None:
        check_adapter(args.adapter, flag="--adapter")
    shard = parse_shard(args.shard) if args.shard is not None else None
    if args.ray is not None:
        return sample_on_ray(args)
    items, source = prompts_of(args, env)
    sampling = SampleOptions.from_args(args, model=None if served is not None else args.model)
    seeds = [sampling.seed + i for i in range(args.base_runs)]
    label = str(args.model) if args.adapter is None else f"{args.model}+{Path(args.adapter).name}"
    with contextlib.ExitStack() as stack:
        if served is not None:
            if args.adapter is not None:
                served = stack.enter_context(served.loaded(adapter_name(args.adapter), args.adapter))
            label = f"{label} (served)"
            sampler: dict[str, Any] = served_identity(served, env, items, sampling, adapter=args.adapter)
        else:
            sampler = {"model": base_identity(str(args.model)),
                       "adapter": None if args.adapter is None else adapter_identity(args.adapter),
                       "backend": args.backend}
        header = {
            **row_header(env, prompts_fingerprint=fingerprint(items), policy=label, sampling=sampling.drawn()),
            "sampler": {**sampler, "seeds": seeds, "prompts": source},
        }
        if args.until_decided is not None:
            if shard is not None:
                raise UsageError("--shard and --until-decided: a sample until decided gates the whole holdout at "
                                 "each look; drop --shard")
            return _until_decided(args, env, items, header, label, sampling, served)
        if shard is not None:
            header = shard_header(header, items, shard)
            items = [items[i] for i in shard_positions(items, shard)]
        model, tokenizer = (served, None) if served is not None else _policy(args)
        sampled, kept = sample_to_file(
            model, tokenizer, items, args.out, header=header, env=env, seeds=seeds, policy=label, sampling=sampling,
            restart=args.restart, progress=args.progress, backend=args.backend)
    if ranks.is_main_process():
        resumed = f", {kept} kept from an interrupted run" if kept else ""
        part = f"{shard_summary(header)}, " if shard is not None else ""
        print(f"sampled {len(items)} prompts x {sampling.k} at seed(s) {', '.join(map(str, seeds))} "
              f"({part}{sampled} units now{resumed}; {ranks.world_size()} process(es)) -> {args.out}")
    return 0


def _until_decided(args: argparse.Namespace, env: Env, items: list[PromptItem], header: dict[str, Any], label: str,
                   sampling: SampleOptions, served: ServedModel | None) -> int:
    """``--until-decided BEFORE``: sample look by look, gating each against BEFORE; 1 when the gate failed
    (a look claimed a regression, or the last look failed the gate's other rules)."""
    if ranks.group_size() > 1:
        raise UsageError("--until-decided runs on one process (each look depends on the last); start it without "
                         "torchrun / accelerate launch")
    if args.base_runs != 1:
        raise UsageError(f"--base-runs {args.base_runs}: --until-decided samples one candidate run; drop --base-runs")
    if args.backend == "vllm":
        raise UsageError("--backend vllm seeds a prompt's replies together, so it cannot add replies to a prompt: "
                         "use --backend transformers with --until-decided")
    if not Path(args.until_decided).is_file():
        raise UsageError(f"--until-decided {args.until_decided!r}: no such row file; sample the before side first "
                         "(`rlgate sample --model BASE --out BEFORE.jsonl`)")
    values: dict[str, Any] = {name: getattr(args, name) for name in UNTIL_DECIDED_GATE}
    if values["guards"] is not None:
        values["guards"] = tuple(g for g in values["guards"] if g)
    values["metrics"] = tuple(values["metrics"] or ())
    options = GateOptions(env=env, **values, given=frozenset(getattr(args, "given", ())))
    design = AdaptiveDesign.plan(sampling.k, args.k_max, looks=args.looks, spending=args.spending, budget=args.budget,
                         family_level=total_level(options))
    model, tokenizer = (served, None) if served is not None else _policy(args)
    draw = policy_draw(model, tokenizer, env=env, sampling=sampling, policy=label, backend=args.backend)
    result = until_decided(args.until_decided, draw, items, design=design, options=options, out=args.out,
                           header=header, restart=args.restart)
    print(result.report())
    print(f"sampled {len(items)} prompts until decided: {result.replies:,} replies in {len(result.looks)} look(s) "
          f"-> {args.out}")
    return 0 if result.passed else 1
