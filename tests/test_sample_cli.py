"""``rlgate sample``: any checkpoint to graded rows, resumable, the fixtures' own sampler."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, read_prompts, write_prompts
from pytest_rlgate.data.rows import load_rows, read_header
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.policy import resumable
from pytest_rlgate.policy.load import load_policy
from pytest_rlgate.policy.sampling import sample_rows

pytest.importorskip("torch")

FAST = ["--k", "2", "--max-new-tokens", "8", "--no-progress"]


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    write_prompts(path, build_prompts(0, "default")[:6])
    return path


def _sample(out: Path, prompts: Path, *extra: str, model: str = "rlgate/tiny-refund") -> int:
    return main(["sample", "--model", model, "--prompts-file", str(prompts), "--out", str(out), *FAST, *extra])


def test_rows_are_the_fixtures_sampler_rows_with_a_provenance_header(prompts: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    assert _sample(out, prompts) == 0
    rows = load_rows(out)
    model, tok = load_policy("rlgate/tiny-refund", device="cpu")
    direct = sample_rows(model, tok, read_prompts(prompts), k=2, seed=17, max_new_tokens=8, progress=False)
    assert [r["reply"] for r in rows] == [r["reply"] for r in direct]
    assert [r["score"] for r in rows] == [r["score"] for r in direct]
    header = read_header(out)
    assert header is not None
    assert header["sampling"] == {"temperature": 0.8, "top_p": 0.95, "seed": 17, "k": 2, "max_new_tokens": 8}
    assert header["prompts_fingerprint"] == direct.header["prompts_fingerprint"]
    assert header["sampler"]["model"]["tiny"].startswith("sha256:")
    assert header["sampler"]["adapter"] is None
    assert not out.with_name(out.name + ".partial").exists()


def test_an_interrupted_sample_continues_where_it_stopped(prompts: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    whole = tmp_path / "whole.jsonl"
    assert _sample(whole, prompts, "--batch-size", "1") == 0
    out = tmp_path / "rows.jsonl"
    real, calls = resumable.sample_rows, []

    def dies_on_the_second_piece(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(resumable, "sample_rows", dies_on_the_second_piece)
    assert _sample(out, prompts, "--batch-size", "1") == 130
    partial = out.with_name(out.name + ".partial")
    assert not out.exists() and partial.exists()
    kept = partial.read_text().splitlines()
    assert len(kept) == 1 + 2 * 2  # the header, one piece of 2 prompts x k=2
    with partial.open("a") as handle:
        handle.write('{"prompt": "torn')  # killed mid-line
    monkeypatch.setattr(resumable, "sample_rows", real)
    calls.clear()
    assert _sample(out, prompts, "--batch-size", "1") == 0
    assert out.read_bytes() == whole.read_bytes()
    assert not partial.exists()


def test_a_partial_file_of_another_configuration_is_never_continued(prompts: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.jsonl"
    partial = out.with_name(out.name + ".partial")
    header = {"rlgate_rows": 1, "env": "refund", "sampling": {"k": 5}}
    partial.write_text(json.dumps(header) + "\n")
    assert _sample(out, prompts) == 2
    err = capsys.readouterr().err
    assert "another configuration" in err and "--restart" in err and "sampling.k" in err
    assert _sample(out, prompts, "--restart") == 0
    assert len(load_rows(out)) == 12


def test_gz_output_and_base_runs(prompts: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl.gz"
    assert _sample(out, prompts, "--base-runs", "2") == 0
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    rows = load_rows(out)
    assert {r["eval_run"] for r in rows} == {"seed-17", "seed-18"} and len(rows) == 24
    assert json.loads(gzip.decompress(out.read_bytes()).splitlines()[0])["sampler"]["seeds"] == [17, 18]


def test_bad_flags_are_one_line_usage_errors(prompts: Path, tmp_path: Path, capsys) -> None:
    assert main(["sample", "--model", str(tmp_path / "none"), "--prompts-file", str(prompts),
                 "--out", str(tmp_path / "r.jsonl")]) == 2
    assert main(["sample", "--model", "rlgate/tiny-refund", "--adapter", str(tmp_path),
                 "--prompts-file", str(prompts), "--out", str(tmp_path / "r.jsonl")]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(lines) == 2 and "does not exist" in lines[0] and "--adapter" in lines[1]


def test_a_hub_shaped_checkpoint_goes_from_sample_to_gate(hub_model_dir: Path, prompts: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A user's folder, no `rlgate train` anywhere: base rows with a noise floor, then the gate."""
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    assert _sample(before, prompts, "--base-runs", "2", model=str(hub_model_dir)) == 0
    assert _sample(after, prompts, model=str(hub_model_dir)) == 0
    header = read_header(after)
    assert header is not None and set(header["sampler"]["model"]) == {"folder"}
    capsys.readouterr()
    assert main(["gate", str(before), str(after)]) == 0  # the same policy does not regress
    assert "PASS" in capsys.readouterr().out.upper()


def test_the_environment_names_its_own_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agent = load_env("refund_agent")
    items = tmp_path / "agent.jsonl"
    write_prompts(items, build_prompts(0, "small", env=agent)[:3])
    out = tmp_path / "agent-rows.jsonl"
    assert main(["sample", "--env", "refund_agent", "--prompts-file", str(items), "--out", str(out), *FAST]) == 0
    header = read_header(out)
    assert header["policy"] == "rlgate/tiny-refund_agent" and "tiny" in header["sampler"]["model"]
    assert len(load_rows(out)) == 6
    # an environment that names none is told what to pass, in one line
    capsys.readouterr()
    assert main(["sample", "--env", "_calc_env:CalcEnv", "--prompts-file", str(items), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--model: environment calc names no policy of its own (no base_model); pass a hub id" in err
