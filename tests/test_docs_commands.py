"""Every ``rlgate`` command line in README.md and docs/ parses with the real argument parser.

A shell example that no longer parses (a renamed flag, a removed subcommand, a value out of
range) is a broken promise to whoever pastes it, and nothing else would notice: the command
is never run. So each command line of the ``bash``, ``console``, ``sh``, ``shell`` and plain
fenced blocks is read the way a shell would split it (a leading ``$ ``, ``.venv/bin/``,
variable assignments, ``\\`` continuations, ``&&`` and ``;`` chains, ``# comments``) and handed
to :func:`pytest_rlgate.cli.build_parser`; an error or a deprecation warning fails with the
page, the line and argparse's own message.

Two kinds of line are read differently: in a block that shows a session (some lines start with
``$ ``) only those lines are commands, the rest is output; and a usage synopsis (``rlgate gate
BEFORE AFTER [--guard NAME]...``) is checked flag by flag, since its placeholders are not
values: every ``--flag`` it names must be one of that subcommand's options.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_rlgate.cli import COMMANDS, build_parser
from pytest_rlgate.errors import RlgateDeprecationWarning
from pytest_rlgate.options import Deprecated

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = {"", "bash", "console", "sh", "shell", "shell-session"}

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_OPERATORS = {"&&", "||", ";", "|", "&"}
#: what rlgate itself prints ("rlgate report: error: ..."), not a command
_MESSAGE = re.compile(r"^rlgate(?: [a-z]+)*: ")


#: a usage synopsis: an optional part in brackets (``[--margin X]``), not a shell glob (``env[a,b]``)
_SYNOPSIS = re.compile(r"(?:^|\s)\[")


@dataclass(frozen=True)
class Command:
    page: Path
    line: int
    text: str
    argv: tuple[str, ...]
    synopsis: bool = False

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """``(first line number, info string, lines)`` of every fenced block."""
    blocks, open_fence, info, start, body = [], None, "", 0, []
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if open_fence is None:
            if match:
                open_fence, info, start, body = match["fence"], match["info"].lower(), number + 1, []
        elif match and match["fence"].startswith(open_fence) and not match["info"]:
            blocks.append((start, info, body))
            open_fence = None
        else:
            body.append(line)
    return blocks


def _logical_lines(start: int, lines: list[str]) -> list[tuple[int, str]]:
    """Lines joined at ``\\`` continuations (and a synopsis at its indented lines), each with
    the number of its first line."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, line in enumerate(lines):
        number = start + offset
        if pending is not None:
            number, line = pending[0], pending[1] + " " + line.strip()
            pending = None
        elif out and line[:1].isspace() and _SYNOPSIS.search(out[-1][1]) and line.strip():
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
            continue
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1])
            continue
        out.append((number, line))
    if pending is not None:
        out.append(pending)
    return out


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def _commands_of(words: list[str], variables: dict[str, str]) -> list[list[str]]:
    """The ``rlgate`` commands of one shell line, variables substituted."""
    commands, current = [], []
    for word in [*words, ";"]:
        if word in _OPERATORS:
            while current and _ASSIGNMENT.match(current[0]):
                current.pop(0)
            if current and current[0].split("/")[-1] == "rlgate":
                commands.append(["rlgate", *current[1:]])
            current = []
        else:
            current.append(_VARIABLE.sub(lambda m: variables.get(m[1] or m[2], m[0]), word))
    return commands


def commands(page: Path) -> list[Command]:
    """Every ``rlgate`` command line of the page's shell blocks."""
    found = []
    for start, info, lines in _blocks(page.read_text(encoding="utf-8")):
        if info not in SHELL_BLOCKS:
            continue
        session = any(line.lstrip().startswith("$ ") for line in lines)
        variables: dict[str, str] = {}
        for number, line in _logical_lines(start, lines):
            stripped = line.strip()
            if session:
                if not stripped.startswith("$ "):
                    continue
                stripped = stripped[2:]
            if _MESSAGE.match(stripped):
                continue
            if _SYNOPSIS.search(stripped) and stripped.startswith("rlgate "):
                found.append(Command(page, number, stripped, tuple(stripped.split()[1:]), synopsis=True))
                continue
            words = _words(stripped)
            if words and words[0] == "export":
                words = words[1:]
            if words and all(_ASSIGNMENT.match(w) for w in words):  # E=quickmath:QuickMath
                variables.update(w.split("=", 1) for w in words)
                continue
            for argv in _commands_of(words, variables):
                found.append(Command(page, number, stripped, tuple(argv[1:])))
    return found


ALL = [command for page in PAGES for command in commands(page)]


def _parse(argv: list[str]) -> str | None:
    """argparse's error for *argv* (or a deprecation warning), None when it parses cleanly."""
    stderr = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr):
        warnings.simplefilter("always")
        try:
            build_parser(argv).parse_args(argv)
        except SystemExit as exit_:
            if exit_.code:
                return stderr.getvalue().strip() or f"exit {exit_.code}"
    deprecated = [str(w.message) for w in caught
                  if issubclass(w.category, (DeprecationWarning, RlgateDeprecationWarning))]
    return f"deprecated: {'; '.join(deprecated)}" if deprecated else None


def _subparser(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The deepest subcommand parser *argv* names, and the words left after it."""
    parser: argparse.ArgumentParser = build_parser(argv)
    rest = list(argv)
    while rest:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or rest[0] not in sub.choices:
            break
        parser = sub.choices[rest.pop(0)]
    return parser, rest


def _check_synopsis(argv: list[str]) -> str | None:
    """A synopsis names an existing subcommand, and only options that subcommand has."""
    head = [word for word in argv if re.fullmatch(r"[a-z]+", word)][:2]
    if not head or head[0] not in COMMANDS:
        return f"no rlgate subcommand {head[0] if head else argv[:1]!r}"
    parser, _ = _subparser(head)
    actions = {flag: action for action in parser._actions for flag in action.option_strings}
    flags = {m for word in argv for m in re.findall(r"--[a-z][a-z0-9-]*", word)}
    unknown = sorted(flags - set(actions))
    if unknown:
        return f"unknown option(s) {', '.join(unknown)} for {parser.prog}"
    old = sorted(flag for flag in flags if isinstance(actions[flag], Deprecated))
    return f"deprecated: {', '.join(old)} (see {parser.prog} --help)" if old else None


def test_the_docs_have_rlgate_commands() -> None:
    # the extractor finds what the pages show (a broken reader would pass every page vacuously)
    names = {command.argv[0] for command in ALL if command.argv}
    assert {"prompts", "train", "gate", "eval", "report", "demo", "baseline", "regrade"} <= names
    assert len(ALL) >= 30


@pytest.mark.parametrize("command", ALL, ids=[c.where for c in ALL])
def test_command_parses(command: Command) -> None:
    argv = list(command.argv)
    error = _check_synopsis(argv) if command.synopsis else _parse(argv)
    if error:
        pytest.fail(f"{command.where}: `{command.text}` does not parse: {error}", pytrace=False)


def test_the_reader_splits_lines_as_a_shell_does(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\n"
        "python3 -m venv .venv && .venv/bin/rlgate demo --quick   # comment\n"
        "E=arith\n"
        "OMP_NUM_THREADS=1 rlgate train grpo --env $E \\\n"
        "    --steps 3\n"
        "```\n"
        "```console\n"
        "$ rlgate prompts --out-dir p\n"
        "rlgate prompts --prompt-seed 0 -> p\n"
        "```\n"
        "```\n"
        "rlgate report: error: runs/x/metrics.jsonl:40: truncated\n"
        "```\n"
        "```python\n"
        "rlgate gate a b\n"
        "```\n", encoding="utf-8")
    found = [(c.line, c.argv) for c in commands(page)]
    assert found == [(2, ("demo", "--quick")), (4, ("train", "grpo", "--env", "arith", "--steps", "3")),
                     (8, ("prompts", "--out-dir", "p"))]


def test_a_broken_command_fails_with_its_place_and_argparse_message() -> None:
    assert "--no-such-flag" in (_parse(["gate", "a.jsonl", "b.jsonl", "--no-such-flag"]) or "")
    assert "deprecated" in (_parse(["prompts", "--seed", "0", "--out-dir", "p"]) or "")
    assert _parse(["prompts", "--prompt-seed", "0", "--out-dir", "p"]) is None
    assert "--nope" in (_check_synopsis(["gate", "BEFORE", "[--nope]"]) or "")
    assert _check_synopsis(["gate", "BEFORE", "AFTER", "[--guard", "NAME]..."]) is None
    assert "deprecated" in (_check_synopsis(["prompts", "[--seed", "N]"]) or "")
