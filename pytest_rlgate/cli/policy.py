"""``rlgate policy build [--env SPEC] [--out DIR]``: rebuild a tiny policy from nothing.

The built-in tiny policies ship as package data and load without building; this command is
how they were made and how to check that a machine can make them again. It builds the
environment's ``tiny_policy`` spec (minutes on one CPU core) into ``--out`` (new or
empty; pass ``pytest_rlgate/policies/tiny-<env>`` to refresh a shipped one) or, without it,
into the artifact cache, and prints the folder, the content hash and whether it matches the
shipped policy's. Exit 0, or 2 with one line for an environment without a spec or a
non-empty ``--out``.
"""

from __future__ import annotations

import argparse

from ..data.prompts import read_prompts
from ..environment.contract import load_env
from ..errors import UsageError
from ..options import add_env_argument, add_output_arguments, output_dir
from ..policy.load import build_tiny_policy, tiny_policy_key, tiny_policy_names
from ..policy.tiny.agent import agent_spec
from ..policy.tiny.manifest import read_build_info
from ..policy.tiny.spec import spec_of

HELP = "rebuild an environment's tiny policy from its spec (minutes on CPU)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help=HELP, description=HELP)
    add_env_argument(build)
    build.add_argument("--out", type=output_dir, metavar="DIR",
                       help="build into this new or empty folder (default: the artifact cache)")
    build.add_argument("--prompts-file", metavar="FILE",
                       help="a tool environment without a tiny_policy: the prompts its tiny agent warms up on "
                            "(default: the environment's own prompt set)")
    add_output_arguments(build)


def run(args: argparse.Namespace) -> int:
    env = load_env(args.env)
    if env.tiny_policy is None and env.is_episodic:  # any tool environment: the generic tiny agent's recipe
        items = read_prompts(args.prompts_file, env=env) if args.prompts_file else env.build_prompts(0, "default")
        spec = agent_spec(env, items)
    else:
        spec = spec_of(env)
    print(f"building {spec.name} for environment {env.name} "
          f"({spec.schedule.steps} warm-start steps; minutes on one CPU core)", flush=True)
    folder = build_tiny_policy(env, args.out, spec=spec, progress=args.progress)
    info = read_build_info(folder)
    built = info["content_sha256"]
    print(f"{spec.name}: {folder}")
    print(f"content hash: {built} ({info['build_seconds']:.0f} s, {info['parameters']:,} parameters)")
    if spec.name in tiny_policy_names():
        try:
            shipped = tiny_policy_key(spec.name)
        except UsageError as exc:
            print(f"shipped policy: unreadable ({exc})")
        else:
            same = "identical to" if shipped == built else "differs from (judge it by behaviour: docs/policy.md)"
            print(f"shipped {spec.name}: {shipped}, {same} this build")
    return 0
