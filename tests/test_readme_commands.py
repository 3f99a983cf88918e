"""Every shell command of README.md runs as written from a fresh clone (slow: it trains).

``test_docs_commands.py`` checks that each ``rlgate`` line parses; this runs them. The
repository's committed tree is cloned into a temporary folder and every command line of
README.md's ``bash`` blocks is run there, in the page's order, with ``bash``, as a reader
would paste it: in the venv the page's first command creates and activates (``.venv/bin`` first
on ``PATH``), so a later block that reads an earlier one's output (``runs/demo/...``) finds it.
Each must exit 0, or the code its own comment names (``# exit 1: ...``).

Two things are made short, never rewritten, so the page alone decides what runs and a
rewrite of the README needs no change here:

* **the install**: ``pip install ...`` is done before the commands run, offline: the clone's venv
  sees the clone first and this suite's packages after it (a ``.pth`` file), and has the
  ``rlgate`` command an install writes. The page's install is measured on its own (the README
  quotes it), not on every run of this test;
* **long runs** take the short flags their commands document: ``rlgate demo`` and ``rlgate
  train`` get ``--steps 2`` (the last ``--steps`` wins), and a ``pytest`` run of the whole suite
  (no path: this test is part of it) collects instead of running (``--collect-only``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_base_runs import _verdicts
from test_docs_commands import _blocks

from pytest_rlgate.demo.story import REPRODUCE_HINT
from pytest_rlgate.train.run import RunFolder

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: a comment naming the exit code a command is documented to end with (``# exit 1: the gate fails``),
#: read from the comment's text after its ``#``
_EXIT = re.compile(r"^\s*exit (\d+)\b")
_INSTALL = re.compile(r"\bpip install\b[^&;|]*?(?=\s*(?:&&|\|\||;|$))")
#: what an editable install puts in the venv's bin: the project's console script, as pip writes it
_SCRIPT = ("#!{python}\nimport sys\nfrom pytest_rlgate.cli import main\n\nif __name__ == '__main__':\n"
           "    sys.exit(main())\n")
#: commands that train, and the flag that makes them short
_SHORT = {("rlgate", "demo"): ["--steps", "2"], ("rlgate", "train"): ["--steps", "2"]}
#: one command may take this long here (the demo trains four runs of 2 steps on a shared machine)
TIMEOUT = 1800


@dataclass(frozen=True)
class Line:
    number: int
    text: str
    exit_code: int


def readme_lines() -> list[Line]:
    """The command lines of README.md's shell blocks, continuations joined, comments kept apart."""
    lines: list[Line] = []
    for start, info, body in _blocks(README.read_text(encoding="utf-8")):
        if info not in ("bash", "sh", "shell"):
            continue
        pending, first = "", start
        for offset, raw in enumerate(body):
            if not pending:
                first = start + offset
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            text = (pending + raw).strip()
            pending = ""
            command, _, comment = _split_comment(text)
            if command:
                found = _EXIT.search(comment)
                lines.append(Line(first, command, int(found.group(1)) if found else 0))
    return lines


def _split_comment(text: str) -> tuple[str, str, str]:
    """(command, '#', comment): the first ``#`` outside quotes starts the comment."""
    quote = None
    for at, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or text[at - 1].isspace()):
            return text[:at].strip(), "#", text[at + 1:]
    return text, "", ""


def shortened(command: str) -> str:
    """*command* as it runs here: the install offline, long runs with their short flags."""
    command = _INSTALL.sub("true", command)
    parts = []
    for part in re.split(r"(\s*(?:&&|\|\||;)\s*)", command):
        words = shlex.split(part) if part.strip() and part.strip() not in ("&&", "||", ";") else None
        if words:
            key = tuple(words[:2])
            if key in _SHORT:
                part = part + " " + shlex.join(_SHORT[key])
            elif _whole_suite(words):
                part = part + " --collect-only -q"
        parts.append(part)
    return "".join(parts)


def _whole_suite(words: list[str]) -> bool:
    """``pytest`` / ``python -m pytest`` with no path or node id: the suite this test is part of."""
    if words[:1] == ["pytest"]:
        rest = words[1:]
    elif words[:3] == ["python", "-m", "pytest"]:
        rest = words[3:]
    else:
        return False
    values = {"-m", "-k", "-p", "--rlgate-env"}
    args = [w for i, w in enumerate(rest) if not w.startswith("-") and (i == 0 or rest[i - 1] not in values)]
    return not args


def _install_scripts(bin_dir: Path) -> None:
    """The commands an install of the clone writes into its venv: ``rlgate``, and those of this suite's
    packages (``pytest``, ``ruff``, ``mypy``, ...) as this suite's venv has them, run by the clone's python."""
    python = bin_dir / "python"
    for tool in Path(sys.executable).parent.iterdir():
        target = bin_dir / tool.name
        if target.exists() or tool.name.startswith(("python", "activate", "pip", "Activate")) or not tool.is_file():
            continue
        head = tool.read_bytes()[:200]
        if head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]:
            body = tool.read_text(encoding="utf-8").split("\n", 1)[1]
            target.write_text(f"#!{python}\n{body}", encoding="utf-8")
            target.chmod(0o755)
        elif os.access(tool, os.X_OK):
            target.symlink_to(tool)
    rlgate = bin_dir / "rlgate"
    rlgate.unlink(missing_ok=True)
    rlgate.write_text(_SCRIPT.format(python=python), encoding="utf-8")
    rlgate.chmod(0o755)


LINES = readme_lines()


def test_the_readme_has_commands_to_run() -> None:
    assert len(LINES) >= 10 and any("rlgate demo" in line.text for line in LINES)
    # the harness logs' gate fails, as its comment says: the exit code the fresh-clone run expects
    assert {line.exit_code for line in LINES if "tests/data/harness/lm_eval" in line.text} == {1}


@pytest.mark.slow
def test_every_readme_command_runs_from_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    # `python3` is this suite's interpreter, so the clone's venv can see this suite's packages
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "python3").symlink_to(sys.executable)
    subprocess.run([str(tools / "python3"), "-m", "venv", str(clone / ".venv")], check=True, timeout=300)
    purelib = Path(sysconfig.get_paths()["purelib"])
    site = next((clone / ".venv" / "lib").glob("python*/site-packages"))
    (site / "rlgate-suite.pth").write_text(f"{clone}\n{purelib}\n", encoding="utf-8")
    _install_scripts(clone / ".venv" / "bin")
    env = {**os.environ, "PATH": f"{clone / '.venv' / 'bin'}{os.pathsep}{tools}{os.pathsep}{os.environ['PATH']}",
           "VIRTUAL_ENV": str(clone / ".venv"), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    failures, hints = [], []
    for line in LINES:
        command = shortened(line.text)
        done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT)
        if done.returncode != line.exit_code:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            failures.append(f"README.md:{line.number}: `{line.text}` (run as `{command}`) exited {done.returncode}, "
                            f"not {line.exit_code}:\n{tail}")
        hints += [text.split(REPRODUCE_HINT, 1)[1] for text in done.stdout.splitlines() if REPRODUCE_HINT in text]
    assert not failures, "\n\n".join(failures)
    assert hints, "the demo prints the command that gives its verdicts from the run's files"
    for hint in hints:
        assert_hint_reproduces(hint, clone, env)


def assert_hint_reproduces(hint: str, cwd: Path, env: dict[str, str]) -> None:
    """The printed `rlgate gate ...` line, run as printed, gives the run's own verdicts and exit code."""
    again = cwd / "hint-again.json"
    done = subprocess.run(["bash", "-c", f"{hint} --json {shlex.quote(str(again))}"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    run = RunFolder.open(cwd / Path(shlex.split(hint)[2]).parent)  # rlgate gate BEFORE ...: BEFORE is in the run
    assert done.returncode == (0 if run.gate["passed"] else 1), done.stdout[-2000:] + done.stderr[-2000:]
    assert _verdicts(json.loads(again.read_text(encoding="utf-8"))) == _verdicts(run.gate)


@pytest.mark.parametrize(("written", "run"), [
    ('python3 -m venv .venv && source .venv/bin/activate && pip install torch==2.13.0 -e ".[demo]" && rlgate demo',
     "python3 -m venv .venv && source .venv/bin/activate && true && rlgate demo --steps 2"),
    ("rlgate train grpo --env arith --steps 40", "rlgate train grpo --env arith --steps 40 --steps 2"),
    ("python -m pytest -m slow", "python -m pytest -m slow --collect-only -q"),
    ("pytest examples/any_env --rlgate-env x", "pytest examples/any_env --rlgate-env x"),
    ("rlgate gate a b --json gate.json", "rlgate gate a b --json gate.json"),
])
def test_what_runs_here_is_the_command_with_its_short_flags(written: str, run: str) -> None:
    assert shortened(written) == run
