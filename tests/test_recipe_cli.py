"""``rlgate gate BEFORE AFTER AFTER ...``: the recipe gate from the command line (exit codes, text, --json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_recipe_gate import side

from pytest_rlgate import write_rows
from pytest_rlgate.cli import main


@pytest.fixture
def seeds(tmp_path: Path):
    """``make({seed: (with_id fails, no_id fails)}) -> (before, [after per seed])``: run folders per seed."""
    before = str(write_rows(tmp_path / "before.jsonl", side(30, 2)))

    def make(afters: dict[int, tuple[int, int]]) -> tuple[str, list[str]]:
        paths = []
        for seed, fails in afters.items():
            folder = tmp_path / f"grpo-seed{seed}"
            folder.mkdir(exist_ok=True)
            paths.append(str(write_rows(folder / "holdout_after.jsonl", side(*fails))))
        return before, paths

    return make


def test_a_regressing_recipe_exits_1_with_the_recipe_table_and_each_seed(seeds, tmp_path: Path, capsys) -> None:
    before, afters = seeds({17: (30, 14), 18: (30, 16), 19: (30, 15)})
    out_json = tmp_path / "recipe.json"
    assert main(["gate", before, *afters, "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("recipe gate FAILED (2 failures) over 3 training seeds (grpo-seed17, grpo-seed18, "
                          "grpo-seed19)")
    assert "per-seed Δ" in out and "each seed on its own:" in out
    assert "FAIL: pass@1 regressed in no_id across 3 seeds" in out and "regressed in 3 of 3 seeds" in out
    payload = json.loads(out_json.read_text(encoding="utf-8"))
    assert payload["kind"] == "recipe" and not payload["passed"]
    assert payload["seeds"] == ["grpo-seed17", "grpo-seed18", "grpo-seed19"]


def test_one_bad_seed_of_three_passes_and_says_so(seeds, capsys) -> None:
    before, afters = seeds({17: (10, 4), 18: (12, 3), 19: (14, 16)})
    assert main(["gate", before, *afters]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recipe gate PASSED")
    no_id = next(line for line in out.splitlines() if line.startswith("pass@1") and " no_id " in line)
    assert "inconclusive" in no_id and "1 of 3" in no_id


def test_one_after_file_is_still_the_adapter_gate(seeds, capsys) -> None:
    before, afters = seeds({17: (10, 4)})
    assert main(["gate", before, *afters]) == 0
    assert capsys.readouterr().out.startswith("gate PASSED")


@pytest.mark.parametrize(("extra", "message"), [
    (["--gate-metric", "pass^2"], "pass^K / pass@K gate one adapter"),
    (["missing.jsonl"], "after row file 'missing.jsonl' does not exist"),
])
def test_bad_recipe_options_exit_2_with_one_line(seeds, capsys, extra: list[str], message: str) -> None:
    before, afters = seeds({17: (10, 4), 18: (12, 3)})
    assert main(["gate", before, *afters, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
