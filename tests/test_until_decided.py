"""Sampling until decided: the looks, what grows, the rows, the level across looks, the file and the CLI."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import pytest_rlgate as rg
from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, write_prompts
from pytest_rlgate.data.provenance import row_header
from pytest_rlgate.data.rows import Rows, load_rows, read_header, write_rows
from pytest_rlgate.errors import DataError, RlgateWarning, UsageError
from pytest_rlgate.gate.adaptive import AdaptiveDesign, LookOutcome, gate_look, until_decided
from pytest_rlgate.gate.options import GateOptions
from pytest_rlgate.policy.adaptive import policy_draw
from pytest_rlgate.policy.sampling import sample, sample_rows
from pytest_rlgate.records import PromptItem, Row

FAST = GateOptions(n_resamples=400, show_flips=0)


def _row(item: PromptItem, j: int, passed: bool) -> Row:
    return {"prompt": item["prompt"], "scenario_id": item["scenario_id"], "category": item["category"],
            "rollout_index": j, "reply": "r", "score": float(passed), "reward": int(passed), "markers": {}}


class World:
    """One-prompt scenarios with pass rates before and after, per category; reply j of a prompt is a fixed draw."""

    def __init__(self, rates: dict[str, tuple[Sequence[float], Sequence[float]]], seed: int, k_before: int = 8,
                 k_max: int = 32) -> None:
        self.items: list[PromptItem] = []
        before, after = [], []
        for category, (b, a) in rates.items():
            for s, (rb, ra) in enumerate(zip(b, a)):
                self.items.append({"prompt": f"{category}/s{s}", "category": category,
                                   "scenario_id": f"{category}/{s}"})
                before.append(rb)
                after.append(ra)
        rng = np.random.default_rng(seed)
        passes_b = rng.random((len(self.items), k_before)) < np.array(before)[:, None]
        self.before = Rows([_row(item, j, bool(passes_b[i, j])) for i, item in enumerate(self.items)
                            for j in range(k_before)])
        self.passes = rng.random((len(self.items), k_max)) < np.array(after)[:, None]
        self.calls: list[tuple[list[str], int, int]] = []

    def draw(self, items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        self.calls.append(([item["category"] for item in items], first, count))
        index = {item["prompt"]: i for i, item in enumerate(self.items)}
        return [_row(item, j, bool(self.passes[index[item["prompt"]], j]))
                for item in items for j in range(first, first + count)]


def _mixed(seed: int = 0) -> World:
    """``solid``: every reply passes on both sides (flat at once); ``middling``: unchanged rates near 0.5."""
    rng = np.random.default_rng([seed, 99])
    middling = rng.uniform(0.3, 0.7, 12)
    return World({"solid": ([1.0] * 12, [1.0] * 12), "middling": (middling, middling)}, seed)


def test_levels_sum_to_the_family_level_and_the_schedule_doubles() -> None:
    assert AdaptiveDesign.plan().ks == (4, 32)
    assert AdaptiveDesign.plan(2, 16, looks=None).ks == (2, 4, 8, 16)
    assert AdaptiveDesign.plan(3, 20, looks=None).ks == (3, 6, 12, 20)
    assert AdaptiveDesign.plan(4, 32, looks=3).ks == (4, 8, 32)
    assert AdaptiveDesign.plan(8, 8).ks == (8,) and AdaptiveDesign.plan(8, 8).levels == (0.05,)
    for spending in ("obf", "pocock", "equal"):
        design = AdaptiveDesign.plan(2, 16, looks=None, spending=spending, family_level=0.1)
        assert sum(design.levels) == pytest.approx(0.1) and all(v > 0 for v in design.levels)
    obf = AdaptiveDesign.plan(2, 16, looks=None, spending="obf").levels
    assert obf[0] < 1e-6 < obf[-1] and obf[-1] > 0.04  # O'Brien-Fleming keeps most for the last look
    assert AdaptiveDesign.plan(2, 16, looks=None, spending="equal").levels == pytest.approx((0.0125,) * 4)
    # Pocock-like spending, by its formula: alpha * ln(1 + (e - 1) t)
    assert AdaptiveDesign.plan(4, 32).levels[0] == pytest.approx(0.05 * np.log(1 + (np.e - 1) / 8))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"k0": 8, "k_max": 4}, "below the first look"), ({"k0": 0}, "k0 must be"), ({"spending": "wild"}, "spending"),
    ({"looks": 0}, "looks must be"), ({"family_level": 0.7}, "family_level"), ({"budget": 0}, "budget"),
])
def test_a_bad_design_is_one_usage_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        AdaptiveDesign.plan(**kwargs)  # type: ignore[arg-type]


def test_a_decided_category_stops_and_only_the_undecided_grow() -> None:
    world = _mixed()
    result = until_decided(world.before, world.draw, world.items, design=AdaptiveDesign.plan(4, 16, looks=None),
                           options=FAST)
    solid, middling = result.category("solid"), result.category("middling")
    assert (solid.verdict, solid.decided_at, solid.k, solid.replies) == ("flat", 1, 4, 48)
    assert world.calls[0] == (["solid"] * 12 + ["middling"] * 12, 0, 4)
    assert all(set(cats) == {"middling"} for cats, _first, _count in world.calls[1:])
    assert [(first, count) for _cats, first, count in world.calls[1:]] == [(4, 4), (8, 8)][:len(world.calls) - 1]
    assert middling.k == 4 + sum(count for _c, _f, count in world.calls[1:])
    assert result.replies == len(result.rows) == 48 + 12 * middling.k
    assert [look.sampled for look in result.looks[1:]] == [("middling",)] * (len(result.looks) - 1)
    assert "solid" in result.decided and result.passed


def test_the_rows_pair_with_the_before_side_and_record_each_scenarios_k() -> None:
    world = _mixed(1)
    result = until_decided(world.before, world.draw, world.items, design=AdaptiveDesign.plan(4, 16, looks=None),
                           options=FAST)
    per_prompt: dict[str, list[int]] = {}
    for row in result.rows:
        per_prompt.setdefault(row["prompt"], []).append(row["rollout_index"])
    for item in world.items:  # rollouts 0 .. k-1 of each prompt, each once: what a fixed run at that k samples
        k = result.category(item["category"]).k
        assert sorted(per_prompt[item["prompt"]]) == list(range(k))
        assert [r["reward"] for r in result.rows if r["prompt"] == item["prompt"]] == \
            [int(world.passes[world.items.index(item), j]) for j in range(k)]
    gated = rg.compare(world.before, result.rows, options=FAST)
    assert {c.group: c.k_after for c in gated.comparisons} == {
        "overall": pytest.approx((4 * 12 + result.category("middling").k * 12) / 24), "solid": 4,
        "middling": result.category("middling").k}


def test_a_budget_stops_the_growth_and_is_never_passed() -> None:
    world = _mixed(2)
    design = AdaptiveDesign.plan(4, 32, budget=24 * 4 + 12 * 3)  # room for 3 more replies on each middling prompt
    result = until_decided(world.before, world.draw, world.items, design=design, options=FAST)
    middling = result.category("middling")
    assert result.replies <= design.budget
    assert middling.k == 7 and world.calls[-1][1:] == (4, 3)


def test_each_look_is_gated_at_its_share_and_a_claim_at_any_look_fails_the_run() -> None:
    world = _mixed(3)
    seen: list[float] = []

    def claims_at_the_first_look(before: Rows, after: Rows, options: GateOptions) -> LookOutcome:
        seen.append(float(options.family_level or 0))
        outcome = gate_look(before, after, options)
        if len(seen) == 1:  # say overall regressed at look 1: later looks that pass do not take it back
            return LookOutcome(outcome.verdicts, True, True, outcome.result)
        return outcome

    design = AdaptiveDesign.plan(4, 16, looks=None, spending="equal")
    result = until_decided(world.before, world.draw, world.items, design=design, options=FAST,
                           judge=claims_at_the_first_look)
    assert seen == pytest.approx(list(design.levels)) and len(result.looks) == 3
    assert not result.looks[-1].outcome.failed and not result.passed
    assert "a regression was claimed at look 1" in result.summary()


def test_a_regressed_category_is_decided_at_once() -> None:
    world = World({"solid": ([1.0] * 12, [1.0] * 12), "collapsed": ([1.0] * 12, [0.0] * 12)}, 0)
    result = until_decided(world.before, world.draw, world.items, options=FAST)
    collapsed = result.category("collapsed")
    assert (collapsed.verdict, collapsed.decided_at, collapsed.regressed_at, collapsed.k) == ("regressed", 1, 1, 4)
    assert len(world.calls) == 1 and not result.passed and "REGRESSED" in result.report()


def test_the_false_regress_rate_of_unchanged_candidates_holds_across_looks() -> None:
    # Small and fast here (benchmarks/bench_until_decided.py has the full numbers): unchanged candidates under
    # the doubling schedule, four looks. A gate that looked four times at the full level would fail about
    # twice as often as the level; spent, the rate stays at or below it.
    runs, claims, naive = 30, 0, 0
    for run in range(runs):
        rng = np.random.default_rng([run, 7])
        rates = {f"c{c}": (r := rng.beta(2, 2, 6), r) for c in range(2)}
        world = World(rates, run, k_before=4, k_max=16)
        design = AdaptiveDesign.plan(2, 16, looks=None, spending="equal")
        result = until_decided(world.before, world.draw, world.items, design=design,
                               options=FAST.replace(bootstrap_seed=run))
        claims += any(look.outcome.regressed for look in result.looks)
        naive_design = AdaptiveDesign(design.ks, (0.05,) * 4, 0.05, "equal")  # not a valid design: each look at 5 %
        world = World(rates, run, k_before=4, k_max=16)
        naive_result = until_decided(world.before, world.draw, world.items, design=naive_design,
                                     options=FAST.replace(bootstrap_seed=run))
        naive += any(look.outcome.regressed for look in naive_result.looks)
    assert claims <= 3  # 1.5 expected at 5 %; P(Binomial(30, 0.05) > 3) = 6 %
    assert claims <= naive


def test_a_sampler_that_returns_other_rows_is_a_data_error() -> None:
    world = _mixed()

    def shifted(items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        return world.draw(items, first + 1, count)

    with pytest.raises(DataError, match="should be reply 0 of prompt"):
        until_decided(world.before, shifted, world.items, options=FAST)
    with pytest.raises(UsageError, match="family level"):
        until_decided(world.before, world.draw, world.items, options=FAST.replace(family_level=None))
    with pytest.raises(UsageError, match="pass\\^8 needs at least 8"):
        until_decided(world.before, world.draw, world.items, options=FAST.replace(metrics=("pass^8",)))


def _header() -> dict[str, object]:
    return row_header({"name": "simulated", "fingerprint": "sha256:simulated"}, policy="sim", seed=17, k=4)


def test_the_file_is_resumable_and_its_header_records_the_design(tmp_path: Path) -> None:
    world = _mixed(4)
    design = AdaptiveDesign.plan(4, 16, looks=None)
    whole = tmp_path / "whole.jsonl"
    until_decided(world.before, world.draw, world.items, design=design, options=FAST, out=whole,
                  header=_header())
    out = tmp_path / "after.jsonl"
    later: list[int] = []

    def dies_in_the_second_look(items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        if first > 0:
            later.append(first)
            if len(later) == 2:  # the second piece of the second look
                raise KeyboardInterrupt
        return world.draw(items, first, count)

    with pytest.raises(KeyboardInterrupt):
        until_decided(world.before, dies_in_the_second_look, world.items, design=design, options=FAST, out=out,
                      header=_header(), piece=6)
    partial = out.with_name(out.name + ".partial")
    assert partial.exists() and not out.exists()
    assert len(partial.read_text().splitlines()) == 1 + 24 * 4 + 6 * 4  # the header, look 1, one piece of look 2
    drawn: list[int] = []

    def counting(items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        drawn.append(len(items) * count)
        return world.draw(items, first, count)

    result = until_decided(world.before, counting, world.items, design=design, options=FAST, out=out,
                           header=_header(), piece=6)
    assert out.read_bytes() == whole.read_bytes() and not partial.exists()
    assert sum(drawn) == result.replies - 24 * 4 - 6 * 4  # what had landed is not drawn again
    header = read_header(out)
    assert header is not None
    plan = header["adaptive"]
    assert plan["ks"] == [4, 8, 16] and plan["levels"] == pytest.approx(list(design.levels))
    assert plan["outcome"]["categories"]["solid"]["decided_at"] == 1 and header["sampling"]["k"] is None
    with pytest.warns(RlgateWarning, match="sampled until decided .*looks at k 4, 8, 16"):
        rg.compare(world.before, out, options=FAST)


def test_a_resumed_run_says_it_resumed_and_a_fresh_one_does_not(tmp_path: Path) -> None:
    world = _mixed(4)
    design = AdaptiveDesign.plan(4, 16, looks=None)
    out = tmp_path / "after.jsonl"

    def dies_in_the_second_look(items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        if first > 0:
            raise KeyboardInterrupt
        return world.draw(items, first, count)

    with pytest.raises(KeyboardInterrupt):
        until_decided(world.before, dies_in_the_second_look, world.items, design=design, options=FAST, out=out,
                      header=_header())
    resumed = until_decided(world.before, world.draw, world.items, design=design, options=FAST, out=out,
                            header=_header())
    assert resumed.resumed == 24 * 4  # look 1 had landed
    assert "(resumed: 96 replies kept from an interrupted run)" in resumed.summary().splitlines()[0]
    fresh = until_decided(world.before, world.draw, world.items, design=design, options=FAST,
                          out=tmp_path / "fresh.jsonl", header=_header())
    assert fresh.resumed == 0 and "resumed" not in fresh.summary()


def test_the_plan_hint_names_the_before_file_not_a_placeholder(tmp_path: Path) -> None:
    world = _mixed(5)
    before = write_rows(tmp_path / "base.jsonl", world.before)
    result = until_decided(str(before), world.draw, world.items, design=AdaptiveDesign.plan(4, 4), options=FAST)
    assert result.category("middling").verdict == "inconclusive"
    report = result.report()
    assert f"`rlgate plan {before} --drop 0.10`" in report and "BEFORE.jsonl" not in report


def test_a_last_look_that_fails_another_rule_fails_the_run_and_the_decision_line_says_which() -> None:
    """No look claims a regression, but the last look's gate fails its non-inferiority rule: the run fails
    (exit 1, as ``rlgate gate`` fails the same rows) and the decision line names the rule, not a regression."""
    world = _mixed(6)
    result = until_decided(world.before, world.draw, world.items, design=AdaptiveDesign.plan(4, 8),
                           options=FAST.replace(max_drop=0.02))
    assert not any(look.outcome.regressed for look in result.looks) and not result.passed
    decision = result.summary().splitlines()[-1]
    assert decision.startswith("decision: FAILED at the last look (2): no look claimed a regression, but the gate "
                               "failed its other rules (max_drop")
    assert rg.compare(world.before, result.rows, options=FAST.replace(max_drop=0.02, family_level=0.05)).failures


def test_sample_first_draws_the_replies_a_longer_run_has_there() -> None:
    items = build_prompts(0, "default")[:3]

    def policy(messages: list[dict[str, object]], seed: int) -> str:
        return f"reply {seed % 9973}"

    whole = sample(policy, None, items, k=6, seed=17)
    assert sample(policy, None, items, k=2, first=4, seed=17) == [r[4:6] for r in whole]
    rows = sample_rows(policy, None, items, k=2, first=4, seed=17)
    assert [r["rollout_index"] for r in rows] == [4, 5] * 3 and [r["reply"] for r in rows[:2]] == whole[0][4:6]
    draw = policy_draw(policy, None, seed=17, policy="p")
    assert [r["reply"] for r in draw(items[:1], 2, 3)] == whole[0][2:5]
    with pytest.raises(UsageError, match="vllm backend"):
        policy_draw(policy, None, backend="vllm")
    with pytest.raises(UsageError, match="first=-1"):
        sample(policy, None, items, k=2, first=-1)


# -- the command line --------------------------------------------------------------------------------------------

TINY = ["--model", "rlgate/tiny-refund", "--max-new-tokens", "8", "--no-progress"]


@pytest.fixture(scope="module")
def tiny_before(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("until")
    prompts = folder / "prompts.jsonl"
    items = build_prompts(0, "default")
    # mostly with-id, where the tiny policy can fail: 5 with-id, 2 no-id and 1 off-topic prompt
    eight = [[item for item in items if item["category"] == category][:n]
             for category, n in (("with_id", 5), ("no_id", 2), ("off_topic", 1))]
    write_prompts(prompts, [item for chosen in eight for item in chosen])
    before = folder / "before.jsonl"
    assert main(["sample", *TINY, "--prompts-file", str(prompts), "--out", str(before), "--k", "4"]) == 0
    return prompts, before


def test_the_cli_exits_0_when_no_look_regressed_and_1_when_one_did(tiny_before: tuple[Path, Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    prompts, before = tiny_before
    out = tmp_path / "after.jsonl"
    argv = ["sample", *TINY, "--prompts-file", str(prompts), "--k", "2", "--k-max", "4", "--resamples", "500"]
    assert main([*argv, "--until-decided", str(before), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "until decided: 2 looks at k 2, 4" in text and "decision: passed" in text
    assert read_header(out)["adaptive"]["outcome"]["passed"] is True  # type: ignore[index]
    perfect = load_rows(before)
    for row in perfect:
        row["reward"], row["score"] = 1, 1.0
    write_rows(tmp_path / "perfect.jsonl", perfect)
    assert main([*argv, "--until-decided", str(tmp_path / "perfect.jsonl"), "--out", str(tmp_path / "b.jsonl")]) == 1
    assert "decision: FAILED" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    (["--until-decided", "missing.jsonl"], "--until-decided 'missing.jsonl': no such row file"),
    (["--base-runs", "3"], "--base-runs 3: --until-decided samples one candidate run"),
    (["--backend", "vllm"], "--backend vllm seeds a prompt's replies together"),
    (["--k-max", "1"], "k_max 1 is below the first look's k 4"),
])
def test_the_cli_refuses_bad_input_in_one_line(tiny_before: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str], extra: list[str],
                                               message: str) -> None:
    prompts, before = tiny_before
    argv = ["sample", *TINY, "--prompts-file", str(prompts), "--out", str(tmp_path / "a.jsonl"),
            "--until-decided", str(before), *extra]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "a.jsonl").exists()


FIXTURE_TEST = '''
import pytest_rlgate as rg
from pytest_rlgate.gate import AdaptiveDesign


def asks(messages, seed):
    return "What is the order id?"


def test_until(rlgate):
    items = rg.stratified_split(rg.build_prompts(seed=0), 0.2).holdout
    before = rg.sample_rows(asks, None, items, k=4)
    result = rlgate.until_decided(before, asks, items=items, design=AdaptiveDesign.plan(2, 8))
    assert result.passed, result.summary()
    assert result.looks[0].k == 2 and len(result.looks) == 1
    assert {c.category: c.decided_at or c.stopped for c in result.categories} == {
        'with_id': 1, 'no_id': 1, 'off_topic': 1}
'''


def test_the_fixture_samples_until_decided_and_records_the_last_look(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_until=FIXTURE_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rlgate-resamples", "400", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= rlgate: gates =*", "test_until.py::test_until*pass@1*overall*flat*"])
