"""The transcripts on docs/harnesses.md are what the commands print today.

A transcript that a change to the gate silently outdates teaches the reader an output that no
longer exists, and nothing else would notice: Sybil runs the page's Python, and
``test_docs_commands.py`` only parses its command lines. So each ``text`` block of the page
that shows a session (``$ rlgate ...``, ``$ pytest ...``) is run here, in a folder laid out
with the page's short names, on the data the page says it was made from:

* ``out/base``, ``out/candidate``: the committed lm-eval logs (``tests/data/harness/lm_eval``);
* ``logs/base.eval``, ``logs/candidate.eval``, ``scans``: the committed Inspect logs and the
  Inspect Scout scan over them (``tests/data/harness/scout``), and ``policy.yaml``, the scout
  test's policy;
* ``eee/base``, ``eee/candidate``: the committed Every Eval Ever files (``tests/data/harness/eee``);
* ``results.json``, ``outputs/evals/...``, ``results/...``: the promptfoo, verifiers and NeMo
  files ``test_readers_schemas.py`` writes;
* ``test_candidate.py``: the page's own ``# test_candidate.py`` block.

The block must be the output line for line, except that a line ``...`` stands for lines left
out, trailing spaces are not compared, and a pytest run's closing ``N failed in S s`` line
(its timing) is not compared. ``$ echo $?`` prints the previous command's exit code.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _harness import HARNESS_DATA, LM_EVAL
from test_docs_commands import _blocks
from test_readers_schemas import _verifiers_v0, write_nemo_sides, write_promptfoo

from pytest_rlgate.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "harnesses.md"
CUT = "..."
#: pytest's closing line: its timing changes from run to run
_CLOSING = re.compile(r"^=*\s*\d+ (failed|passed|error)\b.* in [\d.]+s\b.*$")


@dataclass
class Step:
    argv: list[str]
    shown: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Transcript:
    line: int
    steps: tuple[Step, ...]

    @property
    def needs(self) -> set[str]:
        words = [w for step in self.steps for w in step.argv]
        out = {"inspect_ai"} if any(w.endswith(".eval") for w in words) else set()
        return out | ({"inspect_scout"} if "--findings" in words else set())


def transcripts() -> list[Transcript]:
    found = []
    for start, info, lines in _blocks(PAGE.read_text(encoding="utf-8")):
        if info != "text" or not lines or not re.match(r"\$ (rlgate|pytest) ", lines[0]):
            continue
        steps: list[Step] = []
        pending = ""
        for line in lines:
            if pending or line.startswith("$ "):
                text = pending + (line[2:] if not pending else " " + line.strip())
                if text.endswith("\\"):
                    pending = text[:-1].rstrip()
                    continue
                pending = ""
                steps.append(Step(shlex.split(text)))
            else:
                steps[-1].shown.append(line.rstrip())
        found.append(Transcript(start, tuple(steps)))
    return found


TRANSCRIPTS = transcripts()


def test_the_page_has_its_transcripts() -> None:
    """A change to the parser above must not quietly check nothing."""
    assert len(TRANSCRIPTS) >= 11
    assert {t.steps[0].argv[0] for t in TRANSCRIPTS} == {"rlgate", "pytest"}


def _python_block(name: str) -> str:
    for _, info, lines in _blocks(PAGE.read_text(encoding="utf-8")):
        if info == "python" and lines and lines[0] == f"# {name}":
            return "\n".join(lines) + "\n"
    raise AssertionError(f"docs/harnesses.md has no python block starting '# {name}'")


def _workspace(root: Path, *, scout_policy: str | None) -> None:
    for side in ("base", "candidate"):
        shutil.copytree(LM_EVAL / side, root / "out" / side)
        shutil.copytree(HARNESS_DATA / "eee" / side, root / "eee" / side)
        (log,) = (HARNESS_DATA / "scout" / side).glob("*.eval")
        (root / "logs").mkdir(exist_ok=True)
        shutil.copy(log, root / "logs" / f"{side}.eval")
    shutil.copytree(HARNESS_DATA / "scout" / "scans", root / "scans")
    if scout_policy is not None:
        (root / "policy.yaml").write_text(scout_policy, encoding="utf-8")
    write_promptfoo(root)
    _verifiers_v0(root / "outputs/evals/math-env--base/run1", regress=False)
    _verifiers_v0(root / "outputs/evals/math-env--ft/run1", regress=True)
    write_nemo_sides(root / "results")
    (root / "test_candidate.py").write_text(_python_block("test_candidate.py"), encoding="utf-8")


def _matches(shown: list[str], printed: list[str]) -> bool:
    """*shown* is *printed* with some runs of lines replaced by a ``...`` line each."""
    pieces, piece = [], []
    for line in shown:
        if line == CUT:
            pieces.append(piece)
            piece = []
        else:
            piece.append(line)
    pieces.append(piece)
    if len(pieces) == 1:
        return shown == printed
    first, *middle, last = pieces
    if printed[:len(first)] != first or (last and printed[len(printed) - len(last):] != last):
        return False
    at, end = len(first), len(printed) - len(last)
    for piece in middle:
        for start in range(at, end - len(piece) + 1):
            if printed[start:start + len(piece)] == piece:
                at = start + len(piece)
                break
        else:
            return False
    return at <= end


def _run(step: Step, rc: int | None, capsys, request) -> tuple[list[str], int | None]:
    if step.argv == ["echo", "$?"]:
        return [str(rc)], rc
    if step.argv[0] == "rlgate":
        capsys.readouterr()
        code = main(step.argv[1:])
        out, err = capsys.readouterr()
        return (out + err).splitlines(), code
    assert step.argv[0] == "pytest", f"docs/harnesses.md: no runner for {step.argv[0]!r}"
    result = request.getfixturevalue("pytester").runpytest(*step.argv[1:])
    lines = [*result.outlines, *result.errlines]
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and _CLOSING.match(lines[-1]):
        lines.pop()
    return lines, int(result.ret)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("transcript", TRANSCRIPTS, ids=[f"line{t.line}" for t in TRANSCRIPTS])
def test_the_transcript_is_what_the_command_prints(transcript: Transcript, tmp_path: Path, monkeypatch,
                                                   capsys, request) -> None:
    for module in sorted(transcript.needs):
        pytest.importorskip(module)
    policy = None
    if "inspect_scout" in transcript.needs:
        from test_readers_scout import POLICY as policy
    if any(step.argv[0] == "pytest" for step in transcript.steps):
        root = request.getfixturevalue("pytester").path    # pytester runs there, and chdirs there
        monkeypatch.setenv("COLUMNS", "80")                  # pytest's rules and cut lines are this wide
    else:
        root = tmp_path
        monkeypatch.chdir(root)
    _workspace(root, scout_policy=policy)
    rc = None
    for step in transcript.steps:
        printed, rc = _run(step, rc, capsys, request)
        printed = [line.rstrip() for line in printed]
        assert _matches(step.shown, printed), (
            f"docs/harnesses.md:{transcript.line}: `{shlex.join(step.argv)}` now prints\n" + "\n".join(printed))
