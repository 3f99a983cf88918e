"""The ``rlgate`` command.

Each subcommand lives in ``pytest_rlgate.commands.<name>`` with ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their
command runs, so ``rlgate gate`` never pays for torch. Exit codes: 0 pass, 1 gate failed,
2 usage or data error (one line naming the file, row or field; never a traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence

from . import __version__
from .errors import RlgateError

#: subcommand -> (module, one-line help); the module is imported lazily
COMMANDS: dict[str, tuple[str, str]] = {
    "prompts": ("pytest_rlgate.commands.prompts", "write a seeded prompt set, its split and fingerprint"),
    "gate": ("pytest_rlgate.commands.gate", "gate AFTER against BEFORE graded rows, by category"),
    "train": ("pytest_rlgate.commands.train", "train a LoRA adapter with GRPO or DPO into runs/<name>/"),
    "eval": ("pytest_rlgate.commands.eval", "re-sample a finished run's holdout and gate it"),
    "regrade": ("pytest_rlgate.commands.regrade", "re-score stored replies with the current environment"),
    "baseline": ("pytest_rlgate.commands.baseline", "keep a run's graded rows as a stored baseline"),
    "report": ("pytest_rlgate.commands.report", "write report.html with plots for a run folder"),
    "demo": ("pytest_rlgate.commands.demo", "the whole story on the embedded tiny policy, CPU only"),
    "policy": ("pytest_rlgate.commands.policy", "rebuild a tiny policy from its environment's recipe"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; keep it one line
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="rlgate", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"pytest-rlgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    wanted = next((a for a in (argv or []) if a in COMMANDS), None)
    for name, (module, help_) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_, description=help_)
        if name == wanted or wanted is None and argv is None:
            _load(module).add_arguments(cmd)
    return parser


def _load(module: str):  # noqa: ANN202 - a module object
    return importlib.import_module(module)


def _one_line_warning(message: Warning | str, category: type[Warning], *_: object, **__: object) -> str:
    return f"rlgate: {category.__name__}: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning  # a terminal tool, not a library: no source lines
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(_load(COMMANDS[args.command][0]).run(args))
    except RlgateError as exc:
        print(f"rlgate {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rlgate {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
