"""``rlgate prompts`` writes its set as one unit: never a holdout that belongs to another prompts file.

The three files are swapped in with renames (``pytest_rlgate.data.promptset``). Checked three ways:
the swap itself (an old set replaced, a user's folder refused, stale leftovers swept), a
failure injected at the swap, and the real thing - an ``rlgate prompts`` subprocess killed
with SIGKILL at random points while it overwrites another set - after which the folder must
hold one complete set (either one) or none, and the next run must leave no leftovers.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, read_prompts, stratified_split, write_prompts
from pytest_rlgate.data.promptset import SET_FILES, write_prompt_set
from pytest_rlgate.errors import DataError, UsageError


def _set(seed: int, env: str = "refund") -> dict[str, list[dict]]:
    items = build_prompts(seed, "small", env=env)
    split = stratified_split(items, 0.2, env=env)
    return {"prompts.jsonl": items, "train.jsonl": split.train, "holdout.jsonl": split.holdout}


def _snapshot(folder: Path) -> dict[str, bytes] | None:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else None


@pytest.mark.parametrize("env", ["refund", "arith"])
def test_a_set_replaces_the_old_one_whole(tmp_path: Path, env: str) -> None:
    out = tmp_path / "set"
    write_prompt_set(out, _set(0, env))
    digests = write_prompt_set(out, _set(1, env))
    assert sorted(p.name for p in out.iterdir()) == sorted(SET_FILES)
    assert read_prompts(out / "holdout.jsonl", env=env) == _set(1, env)["holdout.jsonl"]
    assert digests["prompts.jsonl"].startswith("sha256:")
    assert [p.name for p in tmp_path.iterdir()] == ["set"]  # no partial or old folder left


def test_a_folder_with_the_users_files_or_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(UsageError, match=r"--out-dir .*: holds files that are not a prompt set's \(notes.txt\)"):
        write_prompt_set(tmp_path, _set(0))
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    with pytest.raises(UsageError, match="is a file"):
        write_prompt_set(tmp_path / "notes.txt", _set(0))


def test_the_current_folder_is_refused_even_when_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for folder in (".", str(tmp_path), "sub/.."):
        with pytest.raises(UsageError, match="is the current folder or holds it"):
            write_prompt_set(folder, _set(0))
    write_prompt_set("sub/../set", _set(0))
    assert sorted(p.name for p in (tmp_path / "set").iterdir()) == sorted(SET_FILES)


def test_a_failed_swap_keeps_the_old_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "set"
    write_prompt_set(out, _set(0))
    before = _snapshot(out)
    real = os.replace

    def fail_into_place(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == out and ".partial-" in str(src):
            raise OSError("disk full")
        real(src, dst)

    monkeypatch.setattr(os, "replace", fail_into_place)
    with pytest.raises(OSError, match="disk full"):
        write_prompt_set(out, _set(1))
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["set"]


def test_leftovers_of_a_dead_writer_are_swept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    pid = int(dead.stdout)
    for kind in ("partial", "old"):
        (tmp_path / f".set.{kind}-{pid}-abc" / "x").mkdir(parents=True)
    (tmp_path / f".set.partial-{os.getpid()}-live").mkdir()  # a live writer's (this process): kept
    write_prompt_set(tmp_path / "set", _set(0))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".set.partial-{os.getpid()}-live", "set"]


CHILD = """
import sys
from pytest_rlgate.cli import main
import pytest_rlgate.cli.prompts
from pytest_rlgate.data.prompts import build_prompts
build_prompts(0, "large")
print("ready", flush=True)
sys.exit(main(sys.argv[1:]))
"""


def _expected(tmp_path: Path, seed: int) -> dict[str, bytes]:
    out = tmp_path / f"expected-{seed}"
    assert main(["prompts", "--size", "large", "--prompt-seed", str(seed), "--balance", "0.25",
                 "--out-dir", str(out)]) == 0
    return _snapshot(out) or {}


def test_killing_rlgate_prompts_at_random_points_never_leaves_a_mixed_set(tmp_path: Path, capsys) -> None:
    sets = {seed: _expected(tmp_path, seed) for seed in (0, 1)}
    capsys.readouterr()
    started = time.perf_counter()
    _expected(tmp_path, 2)
    work = time.perf_counter() - started  # one in-process run: the window the kills aim at
    capsys.readouterr()
    parent = tmp_path / "work"
    out = parent / "set"
    rng = random.Random(20240611)
    outcomes = []
    for i in range(12):
        seed = i % 2
        child = subprocess.Popen([sys.executable, "-c", CHILD, "prompts", "--size", "large", "--prompt-seed", str(seed),
                                  "--balance", "0.25", "--out-dir", str(out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 1.5 * work))
        child.send_signal(signal.SIGKILL)
        child.wait()
        outcomes.append(child.returncode)
        state = _snapshot(out)
        # one complete set (the old or the new one) or nothing; never a holdout of another prompts file
        assert state is None or state in sets.values(), f"kill {i}: a mixed set {sorted(state)}"
        if state is None:
            with pytest.raises(DataError, match="no such prompts file"):
                read_prompts(out / "holdout.jsonl")
    assert outcomes.count(-signal.SIGKILL) >= 6  # most runs were really interrupted
    assert main(["prompts", "--size", "large", "--prompt-seed", "1", "--balance", "0.25", "--out-dir", str(out)]) == 0
    assert _snapshot(out) == sets[1]
    assert [p.name for p in parent.iterdir()] == ["set"]  # the killed runs' leftovers are gone


#: every character str.splitlines breaks a line at, besides "\n" and "\r" (which JSON escapes)
SEPARATORS = "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"


@pytest.mark.parametrize("env", ["refund", "arith"])
def test_prompts_with_unicode_line_separators_round_trip(tmp_path: Path, env: str) -> None:
    items = [{**item, "prompt": item["prompt"].replace(" ", SEPARATORS[i % len(SEPARATORS)], 1) + SEPARATORS}
             for i, item in enumerate(build_prompts(0, "small", env=env))]
    out = tmp_path / "set"
    assert main(["prompts", "--env", env, "--prompts-file", str(_write(tmp_path / "odd.jsonl", items)),
                 "--out-dir", str(out)]) == 0
    assert read_prompts(out / "prompts.jsonl", env=env) == items
    lines = (out / "prompts.jsonl").read_bytes().split(b"\n")
    assert len(lines) == len(items) + 1 and "\u2028".encode() in lines[0]  # written raw, one line per prompt
    train = read_prompts(out / "train.jsonl", env=env)
    assert all(item in items for item in train + read_prompts(out / "holdout.jsonl", env=env))


def _write(path: Path, items: list[dict]) -> Path:
    write_prompts(path, items)
    return path
