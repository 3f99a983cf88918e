"""Half-done state (issue 11): what a killed process leaves is swept, never read, never lost.

Temporary names carry their owner (``stale.token()``): the next writer into the folder
removes the leftovers of dead owners (and of live pids that were reused), keeps a live
writer's, and ``--overwrite`` moves the old run aside instead of deleting it before the
new one is in place.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_rlgate._io import cache, stale
from pytest_rlgate._io.atomic import atomic_write
from pytest_rlgate.errors import DataError, UsageError
from pytest_rlgate.train.run import COMPLETE, RunFolder, RunWriter, sweep_runs


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _owner(pid: int) -> str:
    return stale.token().rsplit("-", 1)[0] + f"-{pid}"


def _fill(writer: RunWriter, marker: str) -> None:
    writer.json("config.json", {"knobs": {}, "marker": marker})
    writer.json("gate.json", {"passed": True})
    writer.jsonl("metrics.jsonl", [{"step": 1}])
    (writer.path / "holdout_after.jsonl").write_text("")
    writer.adapter_dir.mkdir()


def _leftover(folder: Path, name: str) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    (path / "holdout_after.jsonl").write_text("half a fil")
    return path


def test_a_dead_runs_partial_folder_is_swept_and_a_live_ones_kept(tmp_path, dead_pid) -> None:
    dead = _leftover(tmp_path, f".r.partial-{_owner(dead_pid)}-abc123")
    live = _leftover(tmp_path, f".other.partial-{_owner(os.getppid())}-def456")  # our parent: alive, older
    with pytest.raises(DataError, match="did not finish"):
        RunFolder.open(dead)  # never read as a run meanwhile
    with RunWriter(tmp_path, "r") as writer:
        _fill(writer, "new")
        writer.publish()
    assert not dead.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["r", live.name])


def test_a_run_killed_between_its_complete_marker_and_its_rename_is_no_run(tmp_path, dead_pid) -> None:
    """COMPLETE is written last inside the partial folder, then renamed: a kill between leaves every file."""
    with RunWriter(tmp_path, "r") as writer:
        _fill(writer, "whole")
        writer.publish()
    killed = tmp_path / f".r2.partial-{_owner(dead_pid)}-abc123"
    shutil.copytree(tmp_path / "r", killed)  # every file and the marker, under the partial name
    assert (killed / COMPLETE).is_file()
    with pytest.raises(DataError, match="a run being written or one moved aside"):
        RunFolder.open(killed)
    RunFolder.open(tmp_path / "r")  # the published one still opens


def test_a_reused_pid_does_not_keep_a_leftover_alive(tmp_path) -> None:
    if stale._started(os.getpid()) is None:
        pytest.skip("no /proc here: reuse is detected by age only")
    leftover = _leftover(tmp_path, f".r.partial-{_owner(os.getppid())}-abc123")
    old = time.time() - 3600 * 24 * 365 * 30  # written before our parent process started
    os.utime(leftover, (old, old))
    assert sweep_runs(tmp_path) == [leftover] and not leftover.exists()


def test_another_hosts_leftovers_go_only_when_older_than_the_bound(tmp_path) -> None:
    young = _leftover(tmp_path, f".a.partial-00000000-{os.getpid()}-x1")
    old = _leftover(tmp_path, ".b.partial-00000000-1-x2")
    past = time.time() - stale.MAX_AGE - 60
    os.utime(old, (past, past))
    assert sweep_runs(tmp_path) == [old]
    assert young.exists()


def test_overwrite_keeps_the_old_run_until_the_new_one_is_in_place(tmp_path, monkeypatch) -> None:
    with RunWriter(tmp_path, "r") as writer:
        _fill(writer, "old")
        writer.publish()
    real_replace = os.replace

    def new_run_cannot_move_in(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == tmp_path / "r" and ".partial-" in str(src):
            raise OSError("the disk went away")
        real_replace(src, dst)

    with pytest.raises(UsageError), RunWriter(tmp_path, "r", overwrite=True) as writer:
        _fill(writer, "new")
        monkeypatch.setattr(os, "replace", new_run_cannot_move_in)
        writer.publish()
    monkeypatch.undo()
    assert json.loads((tmp_path / "r" / "config.json").read_text())["marker"] == "old"
    assert (tmp_path / "r" / COMPLETE).is_file()
    with RunWriter(tmp_path, "r", overwrite=True) as writer:
        _fill(writer, "new")
        writer.publish()
    assert json.loads((tmp_path / "r" / "config.json").read_text())["marker"] == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_a_swap_killed_between_its_renames_gets_the_old_run_back(tmp_path, dead_pid) -> None:
    with RunWriter(tmp_path, "r") as writer:
        _fill(writer, "old")
        writer.publish()
    aside = tmp_path / f".r.old-{_owner(dead_pid)}-0a1b2c3d"
    os.replace(tmp_path / "r", aside)  # where a SIGKILL after the first rename leaves it
    _leftover(tmp_path, f".r.partial-{_owner(dead_pid)}-zz9")
    sweep_runs(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["r"]
    assert json.loads(RunFolder.open(tmp_path / "r").path.joinpath("config.json").read_text())["marker"] == "old"


def test_a_killed_cache_build_of_any_key_is_swept(tmp_path, dead_pid) -> None:
    kind = tmp_path / "rows"
    other_key = _leftover(kind, f".tmp-{'b' * 64}-{_owner(dead_pid)}-0123abcd")
    gone = _leftover(kind, f".tmp-gone-{'c' * 64}-{_owner(dead_pid)}-{'f' * 32}")
    live = _leftover(kind, f".tmp-{'d' * 64}-{_owner(os.getppid())}-0123abcd")
    folder = cache.cached_dir("rows", "a" * 64, lambda out: (out / "x").write_text("1"), root=tmp_path)
    assert (folder / "x").read_text() == "1"
    assert not other_key.exists() and not gone.exists() and live.exists()


def test_an_atomic_writes_killed_temp_file_is_swept_by_the_next_write(tmp_path, dead_pid) -> None:
    left = tmp_path / f".gate.json.{_owner(dead_pid)}-k2j3.tmp"
    left.write_text("{half")
    mine = tmp_path / f".gate.json.{stale.token()}-live.tmp"  # a write in progress in this process
    mine.write_text("{")
    atomic_write(tmp_path / "gate.json", "{}\n")
    assert not left.exists() and mine.exists()
    assert (tmp_path / "gate.json").read_text() == "{}\n"


def test_temp_names_carry_their_owner(tmp_path) -> None:
    writer = RunWriter(tmp_path, "r")
    assert re.fullmatch(rf"\.r\.partial-{re.escape(stale.token())}-[^.]+", writer.path.name)
    writer.discard()
