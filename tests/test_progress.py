"""Progress on a terminal, silence elsewhere: the TTY decision, ``--no-progress``, the named bars
of building, sampling and training, and third-party chatter kept off the CLI's stderr unless
``--verbose`` (real ``rlgate`` processes, piped and on a pseudo-terminal)."""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_rlgate import cli
from pytest_rlgate._io.progress import bar, progress_enabled, third_party_quiet, trainer_progress
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.errors import RlgateWarning
from pytest_rlgate.policy.load import TINY_POLICY, load_policy
from pytest_rlgate.policy.sampling import sample
from pytest_rlgate.policy.tiny.build import build_policy
from pytest_rlgate.policy.tiny.spec import spec_of
from pytest_rlgate.policy.tiny.warmstart import TrainSchedule

#: The cheapest real training run of the CLI on the shipped tiny policy (seconds).
TRAIN = ["train", "grpo", "--size", "small", "--steps", "1", "--base-runs", "1", "--monitor-every", "0",
         "--max-new-tokens", "16", "--k", "1"]
#: What transformers, TRL and datasets print when nobody silences them.
CHATTER = ("Loading weights", "Writing model shards", "FutureWarning", "DeprecationWarning", "examples/s")


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal and keeps what was written."""

    def isatty(self) -> bool:
        return True


def _on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> _Terminal:
    """Make sys.stderr a terminal for the rest of the test (in the test body: pytest's capture
    re-installs its own stderr between fixtures and the call)."""
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    return term


# -- the decision -------------------------------------------------------------------------------


def test_the_default_follows_whether_stderr_is_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    _on_a_terminal(monkeypatch)
    assert progress_enabled(None) is True
    assert progress_enabled(False) is False  # --no-progress wins on a terminal
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress_enabled(None) is False
    assert progress_enabled(True) is True  # progress=True forces a bar into a pipe
    monkeypatch.setattr(sys, "stderr", None)  # pythonw: no stderr at all
    assert progress_enabled(None) is False


def test_a_bar_is_named_on_a_terminal_and_absent_from_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _on_a_terminal(monkeypatch)
    with bar(3, "GRPO steps", None, unit="step") as shown:
        shown.update(3)
    assert "GRPO steps" in terminal.getvalue() and "3/3" in terminal.getvalue() and "\r" in terminal.getvalue()
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    with bar(3, "GRPO steps", None) as shown:
        shown.update(3)
    assert stream.getvalue() == ""


def test_no_progress_is_one_flag_on_every_command_that_samples_trains_or_builds() -> None:
    commands = [["train", "grpo"], ["train", "dpo"], ["eval", "--run", "x"], ["demo"], ["policy", "build"]]
    for argv in commands:
        assert cli.build_parser(argv).parse_args(argv).progress is None  # decided by the terminal
        assert cli.build_parser(argv).parse_args([*argv, "--no-progress"]).progress is False
        assert cli.build_parser(argv).parse_args([*argv, "--verbose"]).verbose is True


# -- the bars of each stage ---------------------------------------------------------------------


def test_the_policy_build_shows_its_warm_start_steps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    terminal = _on_a_terminal(monkeypatch)
    pytest.importorskip("torch")

    env = load_env("refund")
    few = dataclasses.replace(spec_of(env), schedule=TrainSchedule(steps=3, batch_size=4, warmup_steps=1))
    build_policy(tmp_path, env, few)
    assert f"building tiny policy {few.name}" in terminal.getvalue() and "3/3" in terminal.getvalue()


def test_a_sampling_pass_is_named_and_silenced_by_progress_false(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _on_a_terminal(monkeypatch)
    pytest.importorskip("torch")

    model, tok = load_policy(TINY_POLICY)
    sample(model, tok, ["Please refund ORD-4017."], k=1, max_new_tokens=2, desc="sampling holdout (after training)")
    assert "sampling holdout (after training)" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    sample(model, tok, ["Please refund ORD-4017."], k=1, max_new_tokens=2, progress=False)
    assert terminal.getvalue() == ""


def test_the_trainer_bar_counts_steps_and_shows_the_last_logged_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _on_a_terminal(monkeypatch)
    pytest.importorskip("transformers")

    callback = trainer_progress("DPO steps", None)
    state = SimpleNamespace(max_steps=2, global_step=0)
    callback.on_train_begin(None, state, None)
    for step in (1, 2):
        state.global_step = step
        callback.on_step_end(None, state, None)
        callback.on_log(None, state, None, logs={"loss": 0.5, "learning_rate": 1e-4})
    callback.on_train_end(None, state, None)
    text = terminal.getvalue()
    assert "DPO steps" in text and "2/2" in text and "loss=0.5" in text and "learning_rate" not in text


# -- third-party chatter ------------------------------------------------------------------------


def test_quiet_silences_third_party_warnings_and_logs_and_restores_them(caplog: pytest.LogCaptureFixture) -> None:
    before = dict(os.environ)
    with warnings.catch_warnings(record=True) as seen, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        with third_party_quiet():
            assert os.environ["TRANSFORMERS_VERBOSITY"] == "error"
            warnings.warn("`x` is deprecated", FutureWarning, stacklevel=1)
            warnings.warn_explicit("chatter", UserWarning, "modeling_utils.py", 1, module="transformers.modeling_utils")
            warnings.warn("look at this", RlgateWarning, stacklevel=1)
            logging.getLogger("trl.trainer").warning("a trl notice")
        logging.getLogger("trl.trainer").warning("after the command")
        warnings.warn("`y` is deprecated", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["look at this", "`y` is deprecated"]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("trl")] == ["after the command"]
    assert dict(os.environ) == before


def test_verbose_lets_everything_through() -> None:
    before = dict(os.environ)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with third_party_quiet(verbose=True):
            assert dict(os.environ) == before
            warnings.warn("`x` is deprecated", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["`x` is deprecated"]


# -- real rlgate processes ----------------------------------------------------------------------


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "TRANSFORMERS_VERBOSITY")}
    return {**env, "RLGATE_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _rlgate(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    """``rlgate ARGS`` with stdout and stderr piped, as CI runs it."""
    return subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", *args], check=False, capture_output=True,
                          text=True, env=_env(cache), timeout=600)


def _rlgate_on_a_terminal(args: list[str], cache: Path, tmp_path: Path) -> str:
    """``rlgate ARGS`` with stderr on a 120-column pseudo-terminal; what reached it."""
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    with open(tmp_path / "stdout.txt", "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pytest_rlgate.cli", *args], stdout=out, stderr=slave,
                                env=_env(cache))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=600) in (0, 1)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    pytest.importorskip("trl")
    cache, runs = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("runs")
    return _rlgate([*TRAIN, "--runs-dir", str(runs), "--run-name", "piped"], cache), cache, runs / "piped"


def test_a_piped_run_has_no_bars_and_no_third_party_chatter(piped_run) -> None:
    done, _, _ = piped_run
    assert done.returncode in (0, 1), done.stderr
    assert "\r" not in done.stderr
    assert not [line for line in done.stderr.splitlines() if any(c in line for c in CHATTER)], done.stderr
    assert all(line.startswith("rlgate") for line in done.stderr.splitlines()), done.stderr  # only our own lines


def test_verbose_lets_third_party_chatter_through(piped_run) -> None:
    _, cache, run = piped_run
    done = _rlgate(["eval", "--run", str(run), "--verbose"], cache)
    assert done.returncode in (0, 1), done.stderr
    assert "Loading weights" in done.stderr
    assert "sampling holdout" not in done.stderr  # --verbose is about others' output, not our bars


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_a_training_run_on_a_terminal_names_every_stage(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    shown = _rlgate_on_a_terminal([*TRAIN, "--runs-dir", str(tmp_path / "runs")], tmp_path / "cache", tmp_path)
    for stage in ("sampling holdout (base run 1/1)", "GRPO steps: 100%", "sampling holdout (after training)"):
        assert stage in shown, shown
    assert not [c for c in CHATTER if c in shown], shown
