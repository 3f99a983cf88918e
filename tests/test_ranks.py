"""Several processes, one run folder: only rank 0 publishes, only when every rank succeeded.

A rank that fails, is stopped (SIGTERM, what ``torchrun`` sends the survivors) or is killed
(SIGKILL) never leaves a published-looking run folder, and every leftover it could not
remove itself is swept by the next writer into the same folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_rlgate._io.ranks import agree, is_main_process, stopped_cleanly, world_size
from pytest_rlgate.errors import DataError
from pytest_rlgate.train.run import COMPLETE, RunFolder, RunWriter, sweep_runs

#: A writer that fills a run folder as training would, then publishes; ``MODE`` says how
#: this rank ends: ``ok``, ``raise`` (an error), ``term`` (SIGTERM to itself) or ``kill``
#: (SIGKILL to itself) just before publishing.
WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    mode, runs = sys.argv[1], sys.argv[2]
    if os.environ.get("WORLD_SIZE", "1") != "1":
        import torch.distributed as dist
        dist.init_process_group("gloo")
    from pytest_rlgate.train.run import RunWriter
    rank = int(os.environ.get("RANK", 0))
    with RunWriter(runs, "shared") as run:
        for name in ("config.json", "gate.json"):
            run.json(name, {"rank": rank})
        run.jsonl("metrics.jsonl", [{"step": 1}])
        (run.path / "holdout_after.jsonl").write_text("{}\\n")
        (run.path / "adapter").mkdir()
        failing = rank == int(os.environ.get("FAILING_RANK", 0))
        print("ready", flush=True)
        if failing and mode == "raise":
            raise RuntimeError("this rank fails")
        if failing and mode in ("term", "kill"):
            os.kill(os.getpid(), signal.SIGTERM if mode == "term" else signal.SIGKILL)
        run.publish()
""")


def _writer(tmp_path: Path) -> Path:
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    return script


def _leftovers(runs: Path) -> list[str]:
    return sorted(p.name for p in runs.iterdir() if p.name.startswith("."))


def test_one_process_is_the_main_one_and_agrees_with_itself() -> None:
    assert is_main_process() and world_size() == 1
    assert agree(True) is True and agree(False) is False


def test_sigterm_inside_the_block_is_an_exit_that_cleans_up() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info, stopped_cleanly():
        os.kill(os.getpid(), signal.SIGTERM)
    assert info.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is previous


@pytest.mark.parametrize(("mode", "code"), [("ok", 0), ("raise", 1), ("term", 143), ("kill", -signal.SIGKILL)])
def test_a_single_process_run_is_whole_or_absent(tmp_path: Path, mode: str, code: int) -> None:
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, str(_writer(tmp_path)), mode, str(runs)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120)
    assert proc.returncode == code, proc.stderr
    if mode == "ok":
        assert (RunFolder.open(runs / "shared").path / COMPLETE).is_file()
    else:
        assert not (runs / "shared").exists()
    # an error or SIGTERM cleans up itself; SIGKILL cannot, and the next writer sweeps it
    assert bool(_leftovers(runs)) == (mode == "kill")
    sweep_runs(runs)
    assert _leftovers(runs) == []


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "failing_rank"), [("ok", 0), ("raise", 0), ("raise", 1), ("kill", 0), ("kill", 1)])
def test_torchrun_two_processes_publish_once_or_not_at_all(tmp_path: Path, mode: str, failing_rank: int) -> None:
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    if not Path(torchrun).exists():
        pytest.skip("torchrun is not installed")
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "FAILING_RANK": str(failing_rank),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", str(_writer(tmp_path)), mode,
                           str(runs)], capture_output=True, text=True, env=env, timeout=300)
    if mode == "ok":
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (RunFolder.open(runs / "shared").path / COMPLETE).is_file()
        assert _leftovers(runs) == []  # rank 1's scratch is gone, rank 0's partial was renamed
        return
    assert proc.returncode != 0
    assert not (runs / "shared").exists(), "a failed launch published a run"
    with pytest.raises(DataError):
        RunFolder.open(runs / "shared")
    sweep_runs(runs)  # what the next run does first: every dead rank's leftover goes
    assert _leftovers(runs) == []


def test_a_writer_of_another_rank_neither_publishes_nor_keeps_its_scratch(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with RunWriter(tmp_path, "shared") as run:
        assert ".rank1.partial-" in run.path.name
        run.json("config.json", {})
        folder = run.publish()
    assert folder.path == tmp_path / "shared" and not folder.path.exists()
    assert _leftovers(tmp_path) == []
