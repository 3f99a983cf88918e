"""torchrun / accelerate: sharded sampling equals one process, one writer, one exit, one error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_rlgate._io import ranks
from pytest_rlgate.data.prompts import build_prompts, write_prompts
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy.sampling import shard

TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
ROOT = Path(__file__).resolve().parent.parent


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "RLGATE_CACHE_DIR": str(tmp_path / "cache")}


def _torchrun(tmp_path: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node", "2", *args], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=timeout)


def test_one_process_is_no_job() -> None:
    assert (ranks.rank(), ranks.world_size(), ranks.is_main_process()) == (0, 1, True)
    assert ranks.gather("x") == ["x"] and ranks.broadcast(3) == 3
    ranks.barrier()
    assert ranks.run_everywhere(lambda: 5) == [5] and ranks.together(lambda: 6) == 6
    with pytest.raises(UsageError, match="mine"):  # one process: the original error, untouched
        ranks.together(lambda: (_ for _ in ()).throw(UsageError("mine")))


@pytest.mark.parametrize("world", [2, 3, 5])
def test_shards_cover_every_prompt_once_and_keep_scenarios_whole(world: int) -> None:
    items = build_prompts(0, "default")
    items += [dict(items[0], prompt=items[0]["prompt"] + " (again)")]  # a second prompt of one scenario
    parts = [shard(items, r, world) for r in range(world)]
    assert sorted(p for part in parts for p in part) == list(range(len(items)))
    owner = {items[p]["scenario_id"]: r for r, part in enumerate(parts) for p in part}
    assert all(owner[items[p]["scenario_id"]] == r for r, part in enumerate(parts) for p in part)
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= max(3, len(items) // (4 * world))  # about the same work each


SCRIPT = textwrap.dedent("""
    import sys
    from pytest_rlgate._io import ranks
    from pytest_rlgate.cli import _leave_together
    from pytest_rlgate.errors import UsageError

    ranks.init_from_launcher()
    def work():
        if ranks.rank() == int(sys.argv[1]):
            raise UsageError("rank-local trouble")
        return ranks.rank()
    try:
        ranks.run_everywhere(work)
        code, message = 0, None
    except Exception as exc:
        code, message = 2, f"job: error: {exc}"
    raise SystemExit(_leave_together(code, message))
""")


@pytest.mark.slow
def test_one_ranks_failure_ends_every_rank_with_one_error(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    done = _torchrun(tmp_path, str(script), "1", timeout=120)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "job: error" in line]
    assert lines == ["job: error: rank 1 of 2 failed: rank-local trouble"]
    assert "exitcode  : 2" in done.stderr


GROUP_GONE = textwrap.dedent("""
    import os
    from pytest_rlgate._io import ranks

    ranks.init_from_launcher()
    import torch.distributed.fsdp  # what transformers imports while loading a model, after the group is up
    ranks.gather(ranks.rank())
    ranks.finish()
    threads = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    raise SystemExit(sum("gloo" in name for name in threads))  # how many of the group's threads are left
""")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a process's threads from /proc")
def test_finish_ends_the_groups_threads_even_after_torch_modules_bound_it(tmp_path: Path) -> None:
    # A group that outlives finish() keeps its worker threads, which then race the interpreter's
    # shutdown: an abort (SIGABRT) after the command's work is done, in about one job of twenty.
    script = tmp_path / "job.py"
    script.write_text(GROUP_GONE)
    done = _torchrun(tmp_path, str(script), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]  # every rank: no thread of the group left


@pytest.mark.slow
@pytest.mark.parametrize("env", ["refund", "refund_agent"])  # one-turn replies, and whole episodes
def test_two_process_sample_rows_equal_one_process_rows(tmp_path: Path, env: str) -> None:
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, load_env(env).build_prompts(0, "default")[:20])
    flags = ["sample", "--env", env, "--model", f"rlgate/tiny-{env}", "--prompts-file", str(prompts), "--k", "2",
             "--max-new-tokens", "12", "--base-runs", "2", "--batch-size", "4", "--no-progress"]
    one = subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", *flags, "--out", "one.jsonl"], cwd=tmp_path,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, one.stderr
    two = _torchrun(tmp_path, "-m", "pytest_rlgate.cli", *flags, "--out", "two.jsonl")
    assert two.returncode == 0, two.stderr[:2000] + " ... " + two.stderr[-1000:]  # the cause comes first
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert two.stdout.count("sampled 20 prompts") == 1 and "2 process(es)" in two.stdout
    assert sorted(p.name for p in tmp_path.iterdir() if "jsonl" in p.name) == ["one.jsonl", "prompts.jsonl",
                                                                                "two.jsonl"]


@pytest.mark.slow
def test_two_process_grpo_writes_one_run_folder(tmp_path: Path) -> None:
    done = _torchrun(tmp_path, "-m", "pytest_rlgate.cli", "train", "grpo", "--steps", "2", "--batch-size", "4",
                     "--num-generations", "2", "--base-runs", "1", "--k", "2", "--monitor-every", "1",
                     "--run-name", "tr2", "--no-progress")
    assert done.returncode in (0, 1), done.stderr[-3000:]  # the gate's verdict, on every rank
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["tr2"]
    config = json.loads((tmp_path / "runs" / "tr2" / "config.json").read_text())
    assert config["world_size"] == 2 and config["training"]["processes"] == 2
    assert config["training"]["steps_done"] == 2
    assert done.stdout.count("run: ") == 1  # the main process reports
    monitor = json.loads((tmp_path / "runs" / "tr2" / "monitor.json").read_text())
    assert [h["step"] for h in monitor["history"]] == [0, 1, 2]
