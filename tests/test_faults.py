"""Faults survived: a kill mid-sample, a full disk, a read-only cache, two sessions racing for one adapter.

Each fault is made for real in a subprocess: SIGKILL, ``RLIMIT_FSIZE`` (a write past the limit
fails with EFBIG, what a full disk's ENOSPC is to the writer; Python ignores SIGXFSZ), a
read-only bind mount (skipped where the test may not mount and runs as root, whom file modes
do not stop). What must hold: one clear line (exit 2 in the CLI), nothing half-published under
a final name, no leftovers that the next run trips on, and the next run as clean as a first.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pytest_rlgate as rg
from pytest_rlgate._io import cache
from pytest_rlgate.data.prompts import write_prompts
from pytest_rlgate.errors import DataError
from pytest_rlgate.train.run import RunWriter

ROOT = Path(__file__).resolve().parents[1]
#: a small, fast sample: 16 refund prompts, 2 replies each, pieces of 4 prompts
SAMPLE = ["--model", "rlgate/tiny-refund", "--k", "2", "--max-new-tokens", "16", "--batch-size", "2",
          "--no-progress"]


def _env(cache_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "RLGATE_CACHE_DIR": str(cache_dir)}


def _limit(size: int) -> Callable[[], None]:
    """A subprocess's preexec_fn: no file it writes may grow past *size* bytes."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return apply


def _cli(args: list[str], cwd: Path, *, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", *args], cwd=cwd, env=_env(cwd / "cache"),
                          capture_output=True, text=True, timeout=900,
                          preexec_fn=None if limit is None else _limit(limit))


def _one_clear_line(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert len(lines) == 1 and "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with 16 refund prompts and the rows an uninterrupted `rlgate sample` writes of them."""
    folder = tmp_path_factory.mktemp("sample")
    write_prompts(folder / "prompts.jsonl", rg.build_prompts(0, "default")[:16])
    done = _cli(["sample", *SAMPLE, "--prompts-file", "prompts.jsonl", "--out", "reference.jsonl"], folder)
    assert done.returncode == 0, done.stderr
    return folder


# --------------------------------------------------------------------------- a kill mid-sample


@pytest.mark.slow
def test_sigkill_during_sample_then_resume_writes_the_uninterrupted_rows(sample_dir: Path) -> None:
    out, partial = sample_dir / "killed.jsonl", sample_dir / "killed.jsonl.partial"
    argv = [sys.executable, "-m", "pytest_rlgate.cli", "sample", *SAMPLE, "--prompts-file", "prompts.jsonl",
            "--out", out.name]
    proc = subprocess.Popen(argv, cwd=sample_dir, env=_env(sample_dir / "cache"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:  # a piece or two in: kill it
        if partial.is_file() and len(partial.read_bytes().splitlines()) >= 1 + 2 * 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sample finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    kept = len(partial.read_bytes().splitlines()) - 1
    assert not out.exists() and 0 < kept < 32, kept  # nothing published, some rows on disk
    resumed = _cli(["sample", *SAMPLE, "--prompts-file", "prompts.jsonl", "--out", out.name], sample_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert "kept from an interrupted run" in resumed.stdout
    assert out.read_bytes() == (sample_dir / "reference.jsonl").read_bytes()
    assert not partial.exists()


# --------------------------------------------------------------------------- a full disk


@pytest.mark.slow
def test_a_full_disk_while_rows_are_written_is_one_line_and_the_rerun_is_clean(sample_dir: Path) -> None:
    out = sample_dir / "full.jsonl"
    done = _cli(["sample", *SAMPLE, "--prompts-file", "prompts.jsonl", "--out", out.name], sample_dir, limit=12_000)
    _one_clear_line(done, "full.jsonl.partial", "File too large", "the disk is full", "a rerun continues")
    assert not out.exists()
    again = _cli(["sample", *SAMPLE, "--prompts-file", "prompts.jsonl", "--out", out.name], sample_dir)
    assert again.returncode == 0, again.stderr
    assert out.read_bytes() == (sample_dir / "reference.jsonl").read_bytes()
    assert sorted(p.name for p in sample_dir.iterdir() if p.name.startswith(("full", ".full"))) == ["full.jsonl"]


def test_a_full_disk_while_a_row_file_is_published_leaves_the_old_file(tmp_path: Path) -> None:
    rows = rg.grade_replies(rg.build_prompts(0, "small")[:8], [["Could you share the order id?"] * 4] * 8)
    old = rg.write_rows(tmp_path / "rows.jsonl", rows[:4])
    before = old.read_bytes()
    script = f"""
        import json, pytest_rlgate as rg
        rows = [json.loads(line) for line in open({str(tmp_path / 'all.json')!r})]
        rg.write_rows({str(old)!r}, rows)
    """
    (tmp_path / "all.json").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = _python(script, tmp_path, limit=len(before) + 2000)
    assert "DataError" in done.stderr and "cannot write the file: File too large" in done.stderr, done.stderr
    assert old.read_bytes() == before  # the old file stands, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".rows")] == []  # no temp file left


def _python(script: str, cwd: Path, *, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=cwd, env=_env(cwd / "cache"),
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=None if limit is None else _limit(limit))


def test_a_full_disk_while_a_run_folder_is_written_publishes_nothing(tmp_path: Path) -> None:
    script = f"""
        import sys
        from pytest_rlgate.errors import DataError
        from pytest_rlgate.train.run import RunWriter

        name, size, config = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "config"
        try:
            with RunWriter({str(tmp_path / 'runs')!r}, name) as run:
                run.json("config.json", {{"knobs": {{}}, "padding": "x" * (size if config else 10)}})
                run.jsonl("metrics.jsonl", [{{"step": 1, "loss": 0.5}}])
                run.json("gate.json", {{"passed": True, "comparisons": []}})
                run.jsonl("holdout_after.jsonl", [])
                run.adapter_dir.mkdir()  # what a trainer saves itself, not through rlgate's writers
                (run.adapter_dir / "adapter_model.safetensors").write_bytes(b"0" * size)
                run.publish()
        except DataError as exc:
            print("ERROR", exc)
        else:
            print("PUBLISHED")
    """

    def write(name: str, size: int, where: str, limit: int | None) -> str:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), name, str(size), where], cwd=tmp_path,
                              env=_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300,
                              preexec_fn=None if limit is None else _limit(limit))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return done.stdout.strip()

    said = write("r", 60_000, "config", 50_000)
    assert said.startswith("ERROR ") and "config.json: cannot write the file: File too large" in said, said
    raw = write("r", 60_000, "adapter", 50_000)
    assert raw.startswith("ERROR ") and "runs/r: cannot write the run folder: File too large" in raw, raw
    assert list((tmp_path / "runs").iterdir()) == []  # no run, no partial folder
    assert write("r", 1_000, "config", None) == "PUBLISHED"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["r"]


@pytest.mark.parametrize("how", ["atomic", "raw"])
def test_a_full_disk_while_the_cache_builds_publishes_nothing(tmp_path: Path, how: str) -> None:
    write = ("atomic_write(out / 'rows.jsonl', 'x' * 60_000)" if how == "atomic"
             else "(out / 'model.bin').write_bytes(b'0' * 60_000)")
    script = f"""
        from pytest_rlgate._io import cache
        from pytest_rlgate._io.atomic import atomic_write
        from pytest_rlgate.errors import DataError

        def build(out):
            {write}

        try:
            print("BUILT", cache.cached_dir("rows", "k1", build, root={str(tmp_path / 'cache')!r}))
        except DataError as exc:
            print("ERROR", exc)
    """
    full = _python(script, tmp_path, limit=50_000)
    assert full.stdout.startswith("ERROR ") and "File too large" in full.stdout, (full.stdout, full.stderr)
    assert "the disk is full" in full.stdout
    assert sorted(p.name for p in (tmp_path / "cache" / "rows").iterdir()) == ["k1.lock"]  # no build, no temp
    clean = _python(script, tmp_path)
    assert clean.stdout.startswith("BUILT ") and cache.is_complete(tmp_path / "cache" / "rows" / "k1")


# --------------------------------------------------------------------------- a read-only cache


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """*folder* read-only for this process: a read-only bind mount (or file modes, when not root)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("runs as root and may not mount: nothing can make a folder read-only for it")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("may not remount read-only")
        yield
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_read_only_cache_serves_what_it_holds_and_refuses_to_build_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache.cached_dir("rows", "held", lambda out: (out / "rows.jsonl").write_text("{}\n"), root=root)
    with _read_only(root):
        served = cache.cached_dir("rows", "held", lambda out: pytest.fail("rebuilt a published artifact"), root=root)
        assert (served / "rows.jsonl").read_text() == "{}\n"
        with pytest.raises(DataError) as info:
            cache.cached_dir("rows", "new", lambda out: pytest.fail("built in a read-only cache"), root=root)
        text = str(info.value)
        assert "cannot write the artifact cache (RLGATE_CACHE_DIR moves it)" in text and "\n" not in text
        assert "read-only" in text


@pytest.mark.slow
def test_a_read_only_cache_fails_a_pytest_session_with_one_line(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(root))
    pytester.makepyfile(test_ro="""
        import pytest

        @pytest.mark.rlgate(method="grpo", size="small", steps=2)
        def test_gate(rlgate_adapter):
            pass
    """)
    with _read_only(root):
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    result.stdout.fnmatch_lines(["rlgate: *cache/runs-grpo: cannot write the artifact cache (RLGATE_CACHE_DIR moves "
                                 "it): Read-only file system*"])


def test_a_read_only_runs_folder_is_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with _read_only(runs):
        done = _cli(["train", "grpo", "--size", "small", "--steps", "1", "--runs-dir", str(runs)], tmp_path)
        with pytest.raises(DataError, match=r"runs/x: cannot write the run folder: Read-only file system"):
            RunWriter(runs, "x")
    _one_clear_line(done, f"--runs-dir '{runs}': is not writable; choose a place you may write to")


# --------------------------------------------------------------------------- two sessions, one adapter

RACE = """
import json, os, pytest

@pytest.mark.rlgate(method="grpo", size="small", steps=2, max_new_tokens=16, monitor_every=0, base_runs=1)
@pytest.mark.parametrize("i", range(2))
def test_asks_for_the_adapter(rlgate_adapter, i):
    assert (rlgate_adapter.adapter / "adapter_model.safetensors").is_file()
    report = {"hit": rlgate_adapter.from_cache, "adapter": str(rlgate_adapter.adapter), "pid": os.getpid()}
    with open(os.path.join(os.environ["REPORTS"], f"{os.getpid()}-{i}.json"), "w") as out:
        json.dump(report, out)
"""


@pytest.mark.slow
def test_two_sessions_and_their_xdist_workers_train_one_adapter_once(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    (tmp_path / "test_race.py").write_text(RACE, encoding="utf-8")
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {**_env(tmp_path / "cache"), "REPORTS": str(reports)}
    argv = [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q", "test_race.py"]
    sessions = [subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True) for _ in range(2)]
    outputs = [session.communicate(timeout=1800)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    found = [json.loads(path.read_text()) for path in sorted(reports.iterdir())]
    assert len(found) == 4 and len({r["pid"] for r in found}) >= 3  # two sessions, their workers
    assert sorted(r["hit"] for r in found) == [False, True, True, True]  # trained once, served three times
    assert len({r["adapter"] for r in found}) == 1
    entries = sorted(p.name for p in (tmp_path / "cache" / "runs-grpo").iterdir())
    assert len(entries) == 2 and entries[1].endswith(".lock")  # one run, its lock; no temp folder left
