"""Next-round task selection (``--from-run`` + ``--difficulty``): the band, the counts, the run record.

The pure part (pass rates -> kept tasks, counts per category, warnings) is checked on made-up
rates; the flag's validation through the CLI; and the whole second round on the embedded tiny
policies of refund and arith, where round one leaves refund's no-id and off-topic tasks
solved every time (the filter empties them, with a warning naming them) and keeps with-id
tasks the policy sometimes passes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rlgate import RlgateWarning
from pytest_rlgate.cli import main
from pytest_rlgate.errors import UsageError
from pytest_rlgate.train.cached import run_key
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.difficulty import (
    describe,
    pass_rates,
    select_by_pass_rate,
    selection_seed,
)
from pytest_rlgate.train.grpo import train_grpo

#: the tiny policies' guards are constant over a one-step round: the gate says so, which is not this test's topic
pytestmark = pytest.mark.filterwarnings("ignore:guard .* is constant:pytest_rlgate.RlgateWarning")

TASKS = [{"prompt": f"p{i}", "scenario_id": f"s{i}", "category": c}
         for i, c in enumerate(["a", "a", "a", "a", "b", "b"])]


def test_the_band_keeps_inclusive_ends_and_counts_solved_and_unsolved_per_category() -> None:
    rates = [0.0, 0.2, 0.8, 1.0, 0.5, 0.25]
    picked = select_by_pass_rate(TASKS, rates, (0.2, 0.8), k=4, seed=517, policy="r1(merged)")
    assert [t["prompt"] for t in picked.kept] == ["p1", "p2", "p4", "p5"] and picked.rates == [0.2, 0.8, 0.5, 0.25]
    assert picked.by_category == {"a": {"tasks": 4, "kept": 2, "solved": 1, "unsolved": 1},
                                  "b": {"tasks": 2, "kept": 2, "solved": 0, "unsolved": 0}}
    record = picked.to_dict()
    assert (record["tasks"], record["kept"], record["emptied"]) == (6, 4, [])
    assert record["kept_tasks"][0] == {"scenario_id": "s1", "prompt": "p1", "pass_rate": 0.2}
    assert record["kept_fingerprint"].startswith("sha256:")
    assert describe(record) == [
        "next round: kept 4 of 6 train tasks with a pass rate in [0.2, 0.8] under r1(merged) "
        "(4 samples each, seed 517)",
        "  a: kept 2 of 4; dropped 1 solved (> 0.8), 1 unsolved (< 0.2)",
        "  b: kept 2 of 2; dropped 0 solved (> 0.8), 0 unsolved (< 0.2)",
    ]


def test_an_emptied_category_is_a_warning_naming_it_and_an_empty_round_an_error() -> None:
    with pytest.warns(RlgateWarning, match=r"left no train task in b \(every one solved or unsolved"):
        picked = select_by_pass_rate(TASKS, [0.5, 0.5, 0.5, 0.5, 1.0, 0.0], (0.2, 0.8), k=4, seed=1, policy="r1")
    assert picked.emptied == ["b"]
    with pytest.raises(UsageError, match=r"--difficulty 0.2 0.8: no train task .* \(1 solved, 5 unsolved of 6\); "
                                         r"widen the band, e.g. --difficulty 0 1"):
        select_by_pass_rate(TASKS, [0, 0, 0, 0, 1, 0], (0.2, 0.8), k=4, seed=1, policy="r1")


def test_pass_rates_are_the_share_of_passing_rows_per_prompt() -> None:
    rows = [{"prompt": "p0", "reward": r} for r in (1, 0, 0, 1)] + [{"prompt": "p1", "reward": 0}] * 4
    assert pass_rates(TASKS[:2], rows) == [0.5, 0.0]


@pytest.mark.parametrize(("args", "needle"), [
    (["--difficulty", "nan", "0.8"], "not a finite number"),
    (["--difficulty", "0.2", "1.5"], "expected a number in [0, 1]"),
    (["--difficulty", "0.9", "0.1", "--from-run", "runs/x"], "--difficulty '0.9 0.1': LOW must not exceed HIGH"),
    (["--difficulty", "0.2", "0.8"], "it selects round two's train tasks; add --from-run RUN"),
])
def test_bad_bands_are_one_line_usage_errors(args: list[str], needle: str, capsys, tmp_path: Path) -> None:
    try:
        code = main(["train", "grpo", "--base-model", "rlgate/tiny-refund", "--runs-dir", str(tmp_path), *args])
    except SystemExit as exc:  # argparse's own range check
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_from_run_defaults_the_band_and_round_one_has_none() -> None:
    assert GRPOKnobs(base_model="rlgate/tiny-refund").resolve().difficulty is None
    assert GRPOKnobs(base_model="rlgate/tiny-refund", from_run="runs/x").resolve().difficulty == (0.2, 0.8)
    knobs = GRPOKnobs(base_model="rlgate/tiny-refund", from_run="runs/x", difficulty=[0, 1])
    assert knobs.resolve().difficulty == (0, 1)


def test_the_seed_comes_from_the_round_one_run(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--from-run .*no such run folder"):
        selection_seed(str(tmp_path / "missing"))


# -- the whole second round on the tiny policies --------------------------------------------------

FAST = {"size": "small", "steps": 2, "base_runs": 1, "monitor_every": 0, "k": 2}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("trl")
    return tmp_path_factory.mktemp("next-round")


def _round_one(runs: Path, env: str) -> Path:
    return train_grpo(env=env, base_model=f"rlgate/tiny-{env}", runs_dir=str(runs), run_name=f"{env}-r1", **FAST).path


def test_round_two_on_refund_keeps_the_half_solved_tasks_and_records_them(runs: Path, capsys) -> None:
    r1 = _round_one(runs, "refund")
    capsys.readouterr()
    with pytest.warns(RlgateWarning, match="left no train task in no_id, off_topic"):
        code = main(["train", "grpo", "--from-run", str(r1), "--runs-dir", str(runs), "--run-name", "refund-r2",
                     "--size", "small", "--steps", "1", "--base-runs", "1", "--monitor-every", "0", "--k", "4",
                     "--no-progress"])
    out = capsys.readouterr().out
    assert code in (0, 1)
    config = json.loads((runs / "refund-r2" / "config.json").read_text(encoding="utf-8"))
    record = config["next_round"]
    assert (record["band"], record["k"], record["seed"]) == ([0.2, 0.8], 4, 17 + 500)
    # the tiny policy passes every no-id and off-topic task and some with-id ones
    assert record["by_category"]["no_id"] == {"tasks": 2, "kept": 0, "solved": 2, "unsolved": 0}
    assert record["by_category"]["off_topic"] == {"tasks": 2, "kept": 0, "solved": 2, "unsolved": 0}
    with_id = record["by_category"]["with_id"]
    assert with_id["kept"] == record["kept"] > 0 and with_id["unsolved"] > 0
    assert all(0.2 <= t["pass_rate"] <= 0.8 for t in record["kept_tasks"])
    assert record["emptied"] == ["no_id", "off_topic"]
    assert config["prompts"]["train"] == {"with_id": record["kept"]}  # trained on the kept tasks only
    assert "  no_id: kept 0 of 2; dropped 2 solved (> 0.8), 0 unsolved (< 0.2)" in out
    assert config["decontamination"]["dropped"] == 0 and "decontamination: dropped 0 of 26" in out


def test_round_two_on_arith_and_its_cache_key(runs: Path) -> None:
    import dataclasses


    r1 = _round_one(runs, "arith")
    knobs = dict(FAST, env="arith", from_run=str(r1), runs_dir=str(runs), k=4)
    r2 = train_grpo(run_name="arith-r2", **dict(knobs, steps=1))
    record = r2.config["next_round"]
    assert set(record["by_category"]) == {"add", "compare", "unanswerable"}
    assert 0 < record["kept"] < record["tasks"]
    assert sum(n["solved"] + n["unsolved"] for n in record["by_category"].values()) == record["tasks"] - record["kept"]
    # the kept list is decided by the band, the round-one adapter and the sampling: each is in the key
    resolved = GRPOKnobs(**knobs).resolve()
    key = run_key(resolved)
    assert run_key(dataclasses.replace(resolved, difficulty=(0.3, 0.8))) != key
    assert run_key(dataclasses.replace(resolved, k=3)) != key
    assert run_key(dataclasses.replace(resolved, no_decontaminate=True)) != key
    weights = r1 / "adapter" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")  # another round-one adapter
    assert run_key(resolved) != key
