"""pytest_rlgate.gate.plan and ``rlgate plan``: the two noises, the simulated gate, the level, both answers.

The plan's numbers are checked against the gate itself: holdouts of the planned size are
drawn and gated with the gate's own bootstrap (``paired_bootstrap``, or ``compare`` in the
slow whole-procedure test that benchmarks/bench_plan.py runs at full size).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from _harness import HARNESS_DATA
from test_gate import table_rows

from pytest_rlgate import GateResult, UsageError, compare, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.gate.plan import (
    _expit,
    _location,
    _Population,
    _reply_noise,
    _simulated_power,
    _Test,
    family_level_per_comparison,
    needed_units,
)
from pytest_rlgate.gate.stats import paired_bootstrap, t_cdf, t_ppf
from pytest_rlgate.stats import FamilyMember, family_test, plan

#: 15 no-id scenarios as a baseline shows them: most pass 4/4, a few fail some rollouts
NO_ID_FAILS = [0, 0, 1, 0, 2, 0, 0, 4, 1, 0, 0, 3, 0, 0, 1]
WITH_ID_FAILS = [0, 1, 0, 0, 0, 3, 1, 0, 0, 0] * 4
BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_plan.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_plan", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_plan", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _rows() -> list[dict]:
    return table_rows("no_id", NO_ID_FAILS) + table_rows("with_id", WITH_ID_FAILS)


def _sampled(category: str, passes: np.ndarray, k: int, prompts: int = 1) -> list[dict]:
    """Rows where prompt j of scenario i passes the first ``passes[i, j]`` of its k replies."""
    passes = passes.reshape(len(passes), prompts)
    return [{"prompt": f"{category} {i}/{j}", "scenario_id": f"{category}-{i}", "category": category,
             "rollout_index": r, "reply": "...", "score": float(r < c), "reward": int(r < c), "markers": {}}
            for i, row in enumerate(passes.tolist()) for j, c in enumerate(row) for r in range(k)]


def _gated_power(bench: ModuleType, population: object, n: int, k: int, reps: int, seed: int) -> tuple[float, float]:
    """``compare`` with its defaults on *reps* holdouts of n new scenarios drawn from *population* after its drop:
    the share whose category regressed, and the mean level the gate tested it at."""
    rng = np.random.default_rng(seed)
    regressed, levels = 0, []
    for _ in range(reps):
        p, q = population.rates(rng, n)  # type: ignore[attr-defined]
        hit, level = bench.gate(bench.rows("c", rng.binomial(k, p), k), bench.rows("c", rng.binomial(k, q), k),
                                "defaults", 0.0)
        regressed += hit
        levels.append(level)
    return regressed / reps, float(np.mean(levels))


def test_the_two_noises_are_told_apart() -> None:
    """1,500 scenarios of Beta(2, 5) at k = 8: reply noise is E[p(1-p)], scenario noise Var(p)."""
    rng = np.random.default_rng(0)
    p = rng.beta(2, 5, 1500)
    result = plan(_sampled("c", rng.binomial(8, p), 8), level=0.025)["c"]
    mean, var = 2 / 7, 2 * 5 / (7**2 * 8)
    assert result.reply_sd is not None and result.reply_sd**2 == pytest.approx(mean - mean**2 - var, rel=0.03)
    assert result.scenario_sd**2 == pytest.approx(var, rel=0.12)
    assert result.n_units == 1500 and result.k == 8 and result.prompts == 1


def test_reply_noise_is_the_pooled_within_prompt_variance() -> None:
    """Two prompts a scenario: their own replies, not the prompts' difference, are reply noise."""
    passes = np.array([[4, 0], [3, 1], [2, 2], [4, 4], [1, 0]])
    result = plan(_sampled("c", passes, 4, prompts=2), level=0.025)["c"]
    replies = [np.array([1.0] * c + [0.0] * (4 - c)) for c in passes.ravel()]
    pooled = sum(float(r.var(ddof=1)) * 3 for r in replies) / (3 * len(replies))
    assert result.reply_sd == pytest.approx(math.sqrt(pooled))
    rates = passes.mean(axis=1) / 4
    assert result.scenario_sd**2 == pytest.approx(max(rates.var(ddof=1) - pooled / 8, 0.0))
    assert (result.prompts, result.k, result.rollouts) == (2, 4, 8)


def _holdout(population: _Population, drop: float, n: int, rows: int,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pass counts of n new scenarios before and after *drop*, drawn from the plan's own population."""
    shifted = _location(population.spread, population.mean - drop)  # the same logit shift for every scenario
    z = rng.standard_normal(n)
    p, q = _expit(population.location + population.spread * z), _expit(shifted + population.spread * z)
    return rng.binomial(rows, p), rng.binomial(rows, q)


def test_the_simulated_gate_is_the_gate() -> None:
    """Near the ceiling (base 0.9) at k = 19 the deltas are skewed. The plan's simulation of the
    gate's two tests must match the tests themselves on data drawn from the same population: the
    family's paired t (``family_test`` with its shrunk standard error) and the expanded-percentile
    bootstrap; the normal-theory power equation is far off the bootstrap."""
    population = _Population.fit(0.9, 0.0184, 0.9 * 0.1 - 0.0184)
    n, rows, reps = 15, 19, 300  # 300 holdouts: +-3 points of Monte-Carlo error
    rng = np.random.default_rng(7)
    family_hits, levels, bootstrap_hits = 0, [], 0
    for _ in range(reps):
        b, a = _holdout(population, 0.10, n, rows, rng)
        d = (a - b) / rows
        member = FamilyMember(d, np.arange(n), float(_reply_noise(b, a, rows).mean()))
        test = family_test([member, member], n_units=n, draws=2000, rng=rng)  # overall and the one category
        family_hits += d.mean() + test.critical[0] * member.standard_error() < 0
        levels.append(test.marginal)
        res = paired_bootstrap(b / rows, a / rows, n_resamples=2000, confidence_level=1 - 2 * 0.025, rng=rng)
        bootstrap_hits += res.confidence_interval.high < 0
    level = float(np.mean(levels))
    simulated = _simulated_power(population, 0.10, n, rows, _Test(level, "t", flips=True))
    assert simulated == pytest.approx(family_hits / reps, abs=0.05)
    bootstrap = bootstrap_hits / reps
    assert _simulated_power(population, 0.10, n, rows, _Test(0.025, "expanded")) == pytest.approx(bootstrap, abs=0.05)
    sd = float(population.sd(np.array([0.10]), rows)[0])
    normal_theory = t_cdf(0.10 * math.sqrt(n) / sd - t_ppf(1 - 0.025, n - 1), n - 1)
    assert normal_theory < bootstrap - 0.08


@pytest.mark.slow
def test_planned_size_has_the_power_in_a_simulation_of_the_gate() -> None:
    """A large baseline (its noise known well) of base rate 0.5, planned at the gate's own level and
    gated with ``compare``'s defaults (one category: the family is the sign-flip test itself): 80 %
    at the planned size, far less at half of it."""
    bench = _bench()
    population = bench.Population(0.5)
    rng = np.random.default_rng(3)
    p, _ = population.rates(rng, 1500)
    planned = plan(_sampled("c", rng.binomial(4, p), 4), drop=0.10, power=0.80)
    result = planned["c"]
    assert result.needed is not None and 40 < result.needed < 100 and result.enough
    assert result.aim == pytest.approx(0.80, abs=0.02)  # 1,500 scenarios leave little unknown
    at_plan, level = _gated_power(bench, population, result.needed, 4, reps=500, seed=1)
    assert level == pytest.approx(planned.level, rel=0.15)  # the level it planned for is the gate's
    assert at_plan == pytest.approx(0.80, abs=0.05)  # +-3.6 points of Monte-Carlo error
    half, _ = _gated_power(bench, population, result.needed // 2, 4, reps=200, seed=2)
    assert half < 0.65


def test_todays_detectable_drop_and_power() -> None:
    result = plan(_rows(), level=0.025)
    no_id = result["no_id"]
    assert no_id.mde is not None and 0.12 < no_id.mde < 0.4
    assert no_id.power_now is not None and no_id.power_now < 0.5
    assert no_id.needed is not None and no_id.needed > no_id.n_units and not no_id.enough
    # the drop it sees has the power; a drop of the margin has today's power
    population_power = plan(_rows(), drop=no_id.mde, level=0.025)["no_id"].power_now
    assert population_power == pytest.approx(0.80, abs=0.02)


def test_needed_units_solves_the_power_equation() -> None:
    from scipy import stats as sps

    n = needed_units(0.3, 0.1, level=0.025)

    def reach(m: int) -> float:
        return (sps.t.ppf(0.975, m - 1) + sps.t.ppf(0.8, m - 1)) * 0.3 / m**0.5

    assert reach(n) <= 0.1 < reach(n - 1)
    assert needed_units(0.0, 0.1) == 3
    assert needed_units(0.3, 0.1, power=0.9) > n and needed_units(0.3, 0.1, level=0.005) > n


def test_the_default_level_is_the_gates_family_level() -> None:
    """By default the plan sizes for the level the gate's family holds each comparison to. Measured
    by the gate itself (a side against a resample of itself): within 15 % of it when the categories
    are large, at most it when some are small (a category of 6 scenarios cannot reach the tail and
    spends less of the family than the normal law says), never below Šidák's bound."""
    rng = np.random.default_rng(0)

    def resampled(rows: list[dict]) -> list[dict]:
        return [{**row, "reward": int(rng.random() < 0.8)} for row in rows]

    large = [row for c in ("a", "b", "c", "d") for row in table_rows(c, list(rng.integers(0, 3, 40)))]
    gated = compare(large, resampled(large), guards=())
    assert isinstance(gated, GateResult) and gated.family is not None
    assert plan(large).level == pytest.approx(gated.family.marginal, rel=0.15)
    rows = _rows() + table_rows("off_topic", [0, 1, 0, 0, 2, 0])
    default = plan(rows)
    assert default.comparisons == 4 and default.family_level == 0.05
    assert default.level == pytest.approx(family_level_per_comparison([15, 40, 6], 0))
    gated = compare(rows, resampled(rows), guards=())
    assert isinstance(gated, GateResult) and gated.family is not None
    assert 1 - 0.95 ** (1 / 4) <= default.level <= gated.family.marginal * 1.05
    question = default.question()
    assert f"one-sided level {default.level:.4g}" in question
    assert "4 comparisons (overall and 3 categories, pass@1)" in question
    guarded = plan(rows, guards=["well_formed", "argument_grounding"], family_level=0.10)
    assert guarded.comparisons == 12 and guarded.level < plan(rows, family_level=0.10).level
    given = plan(rows, level=0.01)
    assert given.level == 0.01 and given.level_rule == "given" and given.comparisons is None
    strict = plan(rows, level=0.001)["no_id"].needed  # a smaller level needs more scenarios
    assert strict is not None and strict > (given["no_id"].needed or 0)
    # one category: overall is the same comparison, and costs nothing
    assert family_level_per_comparison([40], 0) == 0.05


def test_both_ways_to_see_the_drop_with_their_cost() -> None:
    result = plan(_rows(), level=0.025)
    no_id = result["no_id"]
    assert no_id.needed_k is not None and no_id.needed_k > no_id.k
    assert no_id.replies == 60 and no_id.replies_more_units == no_id.needed * 4
    assert no_id.replies_more_k == 15 * no_id.needed_k
    assert no_id.reply_share is not None and 0.5 < no_id.reply_share < 1
    text = result.report()
    assert f"add {no_id.needed - 15} scenarios ({no_id.needed} x 4 = {no_id.needed * 4} replies a side)" in text
    assert f"raise k to {no_id.needed_k} (15 x {no_id.needed_k} = {15 * no_id.needed_k} replies a side)" in text


def test_raising_k_cannot_beat_the_spread_between_scenarios() -> None:
    """Half the scenarios pass 4/4, half 0/4: a logit shift moves them unevenly, and no k is enough."""
    result = plan(table_rows("split", [0, 4] * 8), drop=0.10, level=0.025)["split"]
    assert result.needed is not None and result.needed_k is None
    assert result.effect_sd is not None and result.effect_sd > 0.1
    assert "no k is enough" in plan(table_rows("split", [0, 4] * 8), level=0.025).report()


def test_the_plan_is_the_same_every_time() -> None:
    assert plan(_rows()).to_dict() == plan(_rows()).to_dict()


def test_a_category_that_cannot_drop_that_far_says_so() -> None:
    rows = table_rows("hard", [4, 4, 3, 4, 4, 4])  # pass@1 0.04
    result = plan(rows, drop=0.10)
    assert result["hard"].needed is None and result["hard"].needed_k is None
    assert "pass@1 is too low to drop by 0.10" in result.report()


@pytest.mark.parametrize(("options", "message"), [
    ({"drop": 0}, "drop must be in"),
    ({"level": 0.5}, r"level must be in \(0, 0.5\)"),
    ({"family_level": 1.0}, "family level must be in"),
    ({"guards": "well_formed"}, "guards must be a list of marker names"),
    ({"categories": ["nope"]}, "category 'nope' is not in"),
    ({"method": "percentile"}, "method must be one of t, expanded"),
])
def test_bad_arguments_are_usage_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan(_rows(), **options)  # type: ignore[arg-type]


def test_cli_prints_the_plan_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "before.jsonl"
    write_rows(path, _rows())
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), "--drop", "0.2", "--power", "0.9", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    level = family_level_per_comparison([15, 40], 0)
    assert "needed to see a 0.20 drop in pass@1 with 90% power" in text
    assert f"one-sided level {level:.4g} (the gate's family: run-level 5% over 3 comparisons" in text
    assert "no_id" in text and "with_id" in text
    data = json.loads(out.read_text())
    assert data["drop"] == 0.2 and {c["category"] for c in data["categories"]} == {"no_id", "with_id"}
    assert data["level"] == pytest.approx(level) and data["comparisons"] == 3 and data["method"] == "t"
    assert main(["plan", str(path), "--level", "0.01"]) == 0
    assert "one-sided level 0.01 (given" in capsys.readouterr().out
    assert main(["plan", str(path), "--confidence", "0.9"]) == 0
    assert "one-sided level 0.05 (given" in capsys.readouterr().out
    assert main(["plan", str(path), "--guard", "well_formed", "--family-level", "0.1", "--method", "expanded"]) == 0
    text = capsys.readouterr().out
    assert "6 comparisons (overall and 2 categories, pass@1 and 1 guard)" in text
    assert "regressed = expanded-percentile bootstrap upper bound < 0" in text
    assert main(["plan", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["plan", str(path), "--category", "nope"]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", str(path), "--level", "0.01", "--confidence", "0.9"])
    assert exit_info.value.code == 2


def test_an_inconclusive_verdict_points_at_rlgate_plan(tmp_path: Path) -> None:
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    write_rows(before, table_rows("no_id", [0, 0, 0, 0, 0, 0]))
    write_rows(after, table_rows("no_id", [4, 0, 0, 0, 0, 0]))  # one scenario collapses: 6 cannot tell
    result = compare(before, after, guards=())
    assert any(c.verdict == "inconclusive" for c in result.comparisons)
    hint = f"`rlgate plan {before} --drop 0.10` says how many each category needs"
    assert hint in result.report() and "inconclusive in overall, no_id" in result.report()
    flat = compare(before, before, guards=())
    assert "inconclusive in" not in flat.report()


@pytest.mark.slow
def test_the_whole_procedure_has_the_planned_power() -> None:
    """A fresh 15-scenario baseline each time, planned for 80 %, the planned holdout gated with
    ``compare``: both answers land in 75-85 % at base rates 0.2, 0.5 and 0.9 (400 repetitions
    a base rate, +-4 points of Monte-Carlo error; benchmarks/bench_plan.py runs 1,000)."""
    bench = _bench()
    for base in bench.BASE_RATES:
        out = bench.run(bench.Population(base), 400, seed=5)
        assert 0.75 <= out.units.power <= 0.85, (base, out.units.power)
        assert 0.75 <= out.k.power <= 0.85, (base, out.k.power)


def test_the_plan_says_what_limits_a_small_category() -> None:
    """Two scenarios see no drop because they are fewer than the gate's minimum (not "a drop of none"); three
    whose noise is mostly their replies' are limited by the t's two degrees of freedom, which the plan names
    with its critical value, not by "the drop's own spread between scenarios" alone."""
    rows = (table_rows("three", [0, 4, 2], k=16) + table_rows("few", [1, 2], k=16)
            + table_rows("many", [2, 3, 1, 4, 2, 3, 2, 1, 3, 2, 4, 3], k=16))
    result = plan(rows)
    text = result.report()
    assert "none below" not in text and "drop of none" not in text
    assert "few: 2 scenarios x 16 replies are fewer than the gate's 3 scenarios and see no drop" in text
    three = result["three"]
    assert three.needed_k is None and three.reply_share is not None and three.reply_share > 0.8
    critical = t_ppf(1 - result.level, 2)
    assert (f"no k is enough: 3 scenarios leave the paired t 2 degrees of freedom, a critical value of "
            f"{critical:.1f} at one-sided {result.level:.2%}") in text


def test_plan_reads_the_harness_logs_the_gate_reads(capsys: pytest.CaptureFixture[str]) -> None:
    eee = HARNESS_DATA / "eee" / "base"
    assert main(["plan", str(eee), "--score-key", "contains,acc"]) == 0
    out = capsys.readouterr().out
    assert f"from {eee}" in out and "rg_refund " in out and "rg_refund_choice" in out
    assert main(["plan", str(eee)]) == 2  # the gate's own refusal: a sample under two filters
    assert "a sample counts once: choose one with --filter NAME" in capsys.readouterr().err
