"""The hub-shaped checkpoint trained and gated end to end: the CLI and the pytest fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.data.rows import read_header

pytest.importorskip("trl")

SMALL = ["--size", "small", "--steps", "1", "--batch-size", "4", "--num-generations", "2", "--base-runs", "2",
         "--k", "2", "--max-new-tokens", "16", "--monitor-every", "1", "--learning-rate", "2e-3",
         "--no-progress"]

SUITE = '''
import os, pytest
from pytest_rlgate import compare

@pytest.mark.rlgate(method="grpo", base_model=os.environ["HUB_MODEL"], size="small", steps=1, batch_size=4,
                    num_generations=2, base_runs=2, k=2, max_new_tokens=16, monitor_every=0)
def test_gate(rlgate_adapter, rlgate_before_rows, rlgate_after_rows):
    assert (rlgate_adapter.adapter / "adapter_model.safetensors").is_file()
    assert {r["sample_seed"] for r in rlgate_before_rows} == {17, 18}
    result = compare(rlgate_before_rows, rlgate_after_rows, by="category")
    assert result.comparisons
'''


@pytest.mark.slow
def test_train_then_sample_the_adapter_then_gate(hub_model_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    assert main(["train", "grpo", "--base-model", str(hub_model_dir), *SMALL, "--runs-dir", str(runs),
                 "--run-name", "hub"]) in (0, 1)
    config = json.loads((runs / "hub" / "config.json").read_text())
    assert config["base_model"] == str(hub_model_dir) and config["training"]["steps_done"] == 1
    after = tmp_path / "after.jsonl"
    assert main(["sample", "--model", str(hub_model_dir), "--adapter", str(runs / "hub" / "adapter"),
                 "--size", "small", "--k", "2", "--max-new-tokens", "16", "--out", str(after), "--no-progress"]) == 0
    header = read_header(after)
    assert header is not None and header["sampler"]["adapter"] and set(header["sampler"]["model"]) == {"folder"}
    # the run's own after rows and the sampled ones are the same draws (same seed, same policy)
    ours = [json.loads(line)["reply"] for line in (runs / "hub" / "holdout_after.jsonl").read_text().splitlines()[1:]]
    theirs = [json.loads(line)["reply"] for line in after.read_text().splitlines()[1:]]
    assert sorted(ours) == sorted(theirs)
    assert main(["gate", str(runs / "hub" / "holdout_before.jsonl"), str(after)]) in (0, 1)


@pytest.mark.slow
def test_the_fixtures_train_and_gate_it(pytester: pytest.Pytester, hub_model_dir: Path, tmp_path: Path,
                                        monkeypatch) -> None:
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HUB_MODEL", str(hub_model_dir))
    pytester.makepyfile(test_hub=SUITE)
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
