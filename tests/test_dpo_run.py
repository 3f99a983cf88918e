"""A real DPO round (and round two) on the embedded tiny policy: pairs, run folder, lineage.

Small on purpose (the small prompt set, a few steps, one base run): what is checked is
what the round writes and how round two is wired, not how much the policy learns. The
per-category effect of a full round is in docs/dpo.md, with its commands.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from pytest_rlgate import cli  # noqa: E402
from pytest_rlgate.data.prompts import build_prompts  # noqa: E402
from pytest_rlgate.data.rows import read_rows  # noqa: E402
from pytest_rlgate.envs import refund  # noqa: E402
from pytest_rlgate.errors import UsageError  # noqa: E402
from pytest_rlgate.policy.load import TINY_POLICY, load_policy  # noqa: E402
from pytest_rlgate.train.dpo import DPOKnobs, sample_pairs, train_dpo  # noqa: E402
from pytest_rlgate.train.pairs import read_pairs, turn_key  # noqa: E402
from pytest_rlgate.train.run import RunFolder  # noqa: E402

torch.set_num_threads(1)

FAST = {"size": "small", "steps": 4, "base_runs": 1, "monitor_every": 0, "k": 2}


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("dpo-runs")


@pytest.fixture(scope="module")
def round_one(runs_dir) -> RunFolder:
    return train_dpo(base_model=TINY_POLICY, runs_dir=str(runs_dir), run_name="r1", constructed_negatives=True,
                     **FAST)


def test_round_one_leaves_the_grpo_run_folder_plus_pairs(round_one: RunFolder) -> None:
    names = {p.name for p in round_one.path.iterdir()}
    assert {"config.json", "metrics.jsonl", "adapter", "holdout_before.jsonl", "holdout_after.jsonl",
            "gate.json", "monitor.json", "pairs.jsonl", "COMPLETE"} <= names
    assert RunFolder.open(round_one.path).config["method"] == "dpo"
    comparisons = round_one.gate["comparisons"]
    assert {c["group"] for c in comparisons} == {"overall", *refund.CATEGORIES}
    assert {c["metric"] for c in comparisons} == {"pass@1", "marker:well_formed", "marker:argument_grounding"}
    metrics = round_one.metrics()
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert all("rewards/margins" in m and "loss" in m for m in metrics)


def test_round_one_pairs_obey_the_rules_and_the_cap(round_one: RunFolder) -> None:
    config = round_one.config
    stats = config["pairs"]
    pairs = read_pairs(round_one.path / "pairs.jsonl")
    sampled = [p for p in pairs if p.origin == "sampled"]
    constructed = [p for p in pairs if p.origin == "constructed"]
    assert len(sampled) == stats["sampled_pairs"] >= 8
    assert len(constructed) == stats["constructed_pairs"] <= math.floor(0.3 * len(sampled))
    assert stats["constructed_limit"] == math.floor(0.3 * len(sampled)) and stats["constructed_cap"] == 0.3
    assert stats["constructed_candidates"] >= len(constructed) >= 1  # the tiny policy passes on no-id prompts
    for pair in sampled:
        assert pair.margin >= 0.5 and turn_key(pair.chosen) != turn_key(pair.rejected)
    per_prompt: dict[int, int] = {}
    for pair in sampled:
        per_prompt[pair.item_index] = per_prompt.get(pair.item_index, 0) + 1
    assert max(per_prompt.values()) <= 2
    for pair in constructed:
        assert pair.category in ("no_id", "off_topic")
        call = refund.parse_tool_call(pair.rejected)
        assert call is not None and call.name == "lookup_order"
        assert call.arguments["order_id"][4:] not in pair.prompt
        assert refund.parse_tool_call(pair.chosen) is None and pair.chosen_score == 1.0
    knobs = config["knobs"]
    assert (knobs["beta"], knobs["pairs_per_step"], knobs["constructed_negatives"]) == (0.1, 8, True)
    assert {"learning_rate", "pairs_per_device", "max_length"} <= set(config["auto_defaults"])
    assert config["dpo"] == {"round": 1, "reference": "base model, adapter off", "merged_adapters": []}


def test_pairs_are_deterministic_for_a_seed() -> None:
    model, tok = load_policy(TINY_POLICY)
    items = build_prompts(seed=0, size="small")[:12]
    knobs = DPOKnobs(pair_samples=4, constructed_negatives=True, constructed_cap=1.0).resolve()
    first = sample_pairs(model, tok, items, knobs)
    assert sample_pairs(model, tok, items, knobs).pairs == first.pairs
    other = sample_pairs(model, tok, items, DPOKnobs(pair_samples=4, sample_seed=99, constructed_negatives=True,
                                                     constructed_cap=1.0).resolve())
    assert [p.to_dict() for p in other.pairs] != [p.to_dict() for p in first.pairs]


def test_round_two_from_the_cli_merges_round_one_and_records_lineage(round_one: RunFolder, runs_dir,
                                                                     capsys) -> None:
    # every task kept (--difficulty 0 1): the default band leaves the tiny policy too few pairs
    # here; tests/test_difficulty.py checks the band itself
    code = cli.main(["train", "dpo", "--from-run", str(round_one.path), "--runs-dir", str(runs_dir),
                     "--run-name", "r2", "--size", "small", "--steps", "2", "--base-runs", "1",
                     "--monitor-every", "0", "--k", "2", "--difficulty", "0", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert code in (0, 1) and "pairs:" in out and "sampled from" in out
    second = RunFolder.open(runs_dir / "r2")
    config = second.config
    assert [step["run"] for step in config["lineage"]] == ["r1"]
    assert config["knobs"]["from_run"] == str(round_one.path)
    assert config["next_round"]["band"] == [0, 1] and config["next_round"]["kept"] == config["next_round"]["tasks"]
    assert "next round: kept" in out
    assert config["dpo"]["round"] == 2 and config["dpo"]["reference"] == "merged policy (base + r1), adapter off"
    import hashlib

    adapter_sha = hashlib.sha256((round_one.adapter / "adapter_model.safetensors").read_bytes()).hexdigest()
    assert config["dpo"]["merged_adapters"][0]["adapter_sha256"] == adapter_sha
    # "before" of round two is the merged round-one policy, sampled fresh
    assert {row["policy"] for row in read_rows(second.before_files[0])} == {"r1(merged)"}
    assert read_pairs(second.path / "pairs.jsonl") != read_pairs(round_one.path / "pairs.jsonl")
    # the gate reads a DPO run's files like a GRPO run's
    assert cli.main(["gate", str(second.before_files[0]), str(second.after_file)]) in (0, 1)


def test_too_few_pairs_is_a_usage_error_and_leaves_no_run(runs_dir) -> None:
    with pytest.raises(UsageError, match=r"DPO found \d+ preference pair"):
        train_dpo(base_model=TINY_POLICY, runs_dir=str(runs_dir), run_name="starved", size="small",
                  min_margin=1.0, pair_samples=2, temperature=0.05, base_runs=1, monitor_every=0)
    assert not (runs_dir / "starved").exists()
    assert not [p for p in runs_dir.iterdir() if p.name.startswith(".starved")]
