"""``rlgate sample --shard I/N`` and ``rlgate merge``: byte-identical to one run, and every misjoin refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _openai_server import BASE, fake_server

from pytest_rlgate.cli import main
from pytest_rlgate.cli.fanout import shard_argv
from pytest_rlgate.data.prompts import build_prompts, write_prompts
from pytest_rlgate.data.rows import read_header
from pytest_rlgate.data.shards import Shard, item_hash, parse_shard, shard_of, shard_positions
from pytest_rlgate.errors import UsageError

pytest.importorskip("httpx")

FAST = ["--k", "2", "--max-new-tokens", "8", "--no-progress"]


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    write_prompts(path, build_prompts(0, "default")[:12])
    return path


@pytest.fixture(scope="module")
def run(prompts: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One unsharded run and its three shards (two seeds each), sampled from one fake server."""
    folder = tmp_path_factory.mktemp("run")
    files: dict[str, Path] = {}
    with fake_server() as fake:
        flags = ["sample", "--base-url", fake.url, "--model", BASE, "--prompts-file", str(prompts), "--base-runs", "2",
                 *FAST]
        files["whole"] = folder / "whole.jsonl"
        assert main([*flags, "--out", str(files["whole"])]) == 0
        for index in range(3):
            files[f"{index}/3"] = folder / f"shard-{index}.jsonl"
            assert main([*flags, "--shard", f"{index}/3", "--out", str(files[f"{index}/3"])]) == 0
        files["other-k"] = folder / "other-k.jsonl"
        assert main([*flags, "--k", "3", "--shard", "1/3", "--out", str(files["other-k"])]) == 0
        files["of-4"] = folder / "of-4.jsonl"
        assert main([*flags, "--shard", "1/4", "--out", str(files["of-4"])]) == 0
    return files


def _merge(tmp_path: Path, *shards: Path) -> tuple[int, Path]:
    out = tmp_path / "merged.jsonl"
    return main(["merge", *map(str, shards), "--out", str(out)]), out


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_merged_shards_are_byte_identical_to_one_run(run: dict[str, Path], tmp_path: Path) -> None:
    code, out = _merge(tmp_path, run["2/3"], run["0/3"], run["1/3"])  # any order
    assert code == 0
    assert out.read_bytes() == run["whole"].read_bytes()


def test_a_shard_header_is_the_run_plus_the_prompts_it_covers(run: dict[str, Path], prompts: Path) -> None:
    whole, shard = read_header(run["whole"]), read_header(run["1/3"])
    assert whole is not None and shard is not None
    record = shard.pop("shard")
    assert shard == whole
    items = [json.loads(line) for line in prompts.read_text().splitlines()]
    assert record["index"] == 1 and record["count"] == 3 and record["prompts"] == len(items)
    assert record["units"] == [[i, item_hash(items[i])] for i in shard_positions(items, Shard(1, 3))]


@pytest.mark.parametrize(("pick", "expected"), [
    (["0/3", "1/3"], "missing shard(s) 2/3"),
    (["0/3", "1/3", "1/3", "2/3"], "is shard 1/3 again"),
    (["0/3", "other-k", "2/3"], "belongs to another run"),
    (["0/3", "of-4", "2/3"], "is shard 1/4 but"),
    (["whole"], "not a shard"),
])
def test_every_misjoin_is_refused_in_one_line(pick: list[str], expected: str, run: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _merge(tmp_path, *(run[name] for name in pick))
    assert code == 2
    assert expected in _line(capsys)
    assert not out.exists()


def test_shards_of_another_prompt_set_are_refused(run: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "prompts.jsonl"
    write_prompts(other, build_prompts(1, "default")[:12])
    with fake_server() as fake:
        shard = tmp_path / "other.jsonl"
        assert main(["sample", "--base-url", fake.url, "--model", BASE, "--prompts-file", str(other),
                     "--base-runs", "2", *FAST, "--shard", "2/3", "--out", str(shard)]) == 0
    code, _ = _merge(tmp_path, run["0/3"], run["1/3"], shard)
    assert code == 2 and "prompts_fingerprint" in _line(capsys)


def test_an_edited_or_cut_shard_is_refused(run: dict[str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    lines = run["1/3"].read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-2]))
    assert _merge(tmp_path, run["0/3"], cut, run["2/3"])[0] == 2
    assert "incomplete" in _line(capsys)
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("".join([lines[0], *lines[3:5], *lines[1:3], *lines[5:]]))  # two prompts' rows swapped
    assert _merge(tmp_path, run["0/3"], swapped, run["2/3"])[0] == 2
    assert "edited" in _line(capsys)
    forged = tmp_path / "forged.jsonl"
    header = json.loads(lines[0])
    header["shard"]["units"] = header["shard"]["units"][:-1]  # a prompt dropped from the header
    forged.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    assert _merge(tmp_path, run["0/3"], forged, run["2/3"])[0] == 2
    assert "incomplete" in _line(capsys) or "gap" in capsys.readouterr().err
    partial = tmp_path / "s.jsonl.partial"
    partial.write_text(lines[0])
    assert _merge(tmp_path, run["0/3"], partial, run["2/3"])[0] == 2
    assert "unfinished shard" in _line(capsys)


def test_a_shard_is_a_stable_hash_of_the_scenario() -> None:
    items = build_prompts(0, "default")
    assert [shard_of(item, 7) for item in items] == [shard_of(dict(item), 7) for item in reversed(items)][::-1]
    by_scenario: dict[object, set[int]] = {}
    for item in items:
        by_scenario.setdefault(item["scenario_id"], set()).add(shard_of(item, 5))
    assert all(len(shards) == 1 for shards in by_scenario.values())
    assert sorted(p for i in range(5) for p in shard_positions(items, Shard(i, 5))) == list(range(len(items)))
    assert parse_shard(" 3 / 8 ") == Shard(3, 8)
    for bad in ("8/8", "1", "-1/4", "1/0"):
        with pytest.raises(UsageError, match="--shard"):
            parse_shard(bad)


def test_a_ray_task_runs_the_array_jobs_command() -> None:
    argv = ["sample", "--model", "m", "--ray", "auto", "--k", "2", "--ray=x", "--ray-tasks", "3", "--out", "o"]
    assert shard_argv(argv, Shard(1, 3)) == ["sample", "--model", "m", "--k", "2", "--ray-tasks", "3", "--out", "o",
                                             "--shard", "1/3"]
    assert shard_argv(["sample", "--ray", "--k", "2"], Shard(0, 2))[:3] == ["sample", "--k", "2"]


def test_shards_of_a_local_model_merge_to_its_unsharded_rows(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, build_prompts(0, "default")[:6])
    flags = ["sample", "--model", "rlgate/tiny-refund", "--prompts-file", str(prompts), *FAST]
    assert main([*flags, "--out", str(tmp_path / "whole.jsonl")]) == 0
    shards = [tmp_path / f"s{i}.jsonl" for i in range(2)]
    for index, shard in enumerate(shards):
        assert main([*flags, "--shard", f"{index}/2", "--out", str(shard)]) == 0
    code, out = _merge(tmp_path, *shards)
    assert code == 0 and out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
