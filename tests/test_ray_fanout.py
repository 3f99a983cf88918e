"""``rlgate sample --ray``: the shards as Ray tasks on a local Ray cluster, merged into the unsharded rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _openai_server import BASE, fake_server

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, write_prompts

ray = pytest.importorskip("ray")
pytest.importorskip("httpx")

FAST = ["--k", "2", "--max-new-tokens", "8", "--no-progress"]


@pytest.fixture
def local_ray() -> Iterator[None]:
    """The local cluster ``--ray`` starts in this process, shut down after the test."""
    yield
    ray.shutdown()


def test_ray_tasks_write_the_unsharded_rows_and_a_failed_task_is_one_line(
        local_ray: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, build_prompts(0, "default")[:10])
    with fake_server() as fake:
        flags = ["sample", "--base-url", fake.url, "--model", BASE, "--prompts-file", str(prompts), *FAST]
        assert main([*flags, "--out", str(tmp_path / "whole.jsonl")]) == 0
        assert main([*flags, "--ray", "--ray-tasks", "2", "--out", str(tmp_path / "ray.jsonl")]) == 0
        assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
        assert not (tmp_path / "ray.jsonl.shards").exists()  # the kept shards go once merged
        assert "2 shard(s) as Ray tasks on a local Ray cluster" in capsys.readouterr().out
        fake.mode = "dead"
        assert main([*flags, "--ray", "--ray-tasks", "2", "--out", str(tmp_path / "dead.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "(a Ray task) failed" in err and "engine died" in err, err
    assert not (tmp_path / "dead.jsonl").exists()
