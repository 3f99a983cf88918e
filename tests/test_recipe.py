"""pytest_rlgate.gate.recipe_stats: the recipe interval against a direct scipy formula, the verdicts, bad input,
and a small simulation that fails any interval blind to the run-to-run spread of training."""

from __future__ import annotations

import importlib.util
import math
import statistics
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from scipy import stats as sps

from pytest_rlgate.errors import DataError, UsageError
from pytest_rlgate.gate import adapter as gate, verdicts
from pytest_rlgate.gate.recipe_stats import (
    MIN_UNITS,
    RECIPE_VERDICTS,
    compare_recipe,
    interval_verdict,
    recipe_interval,
    seed_unit_interval,
)
from pytest_rlgate.gate.stats import minimum_detectable_effect

K = 4
BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_recipe_calibration.py"


def _recipe(n_seeds: int, n_units: int, seed: int, seed_shift: float = 0.0,
            drop: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit pass rates over k = 4 rollouts: one before row, one after row per training seed."""
    rng = np.random.default_rng(seed)
    p = rng.beta(4, 2, size=n_units)
    before = rng.binomial(K, p) / K
    shifts = seed_shift * rng.standard_normal((n_seeds, 1))
    after = rng.binomial(K, np.clip(p + drop + shifts, 0, 1)) / K
    return before, after


def _reference(before: np.ndarray, after: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(delta, low, high) written out with python loops, statistics and scipy's t."""
    n_seeds, n_units = after.shape
    d = [[float(after[s][u] - before[u]) for u in range(n_units)] for s in range(n_seeds)]
    seed_means = [sum(row) / n_units for row in d]
    unit_means = [sum(d[s][u] for s in range(n_seeds)) / n_seeds for u in range(n_units)]
    q = 0.5 + level / 2
    delta = sum(seed_means) / n_seeds
    ss_resid = sum((d[s][u] - seed_means[s] - unit_means[u] + delta) ** 2
                   for s in range(n_seeds) for u in range(n_units))
    interaction = ss_resid / ((n_seeds - 1) * (n_units - 1)) / (n_seeds * n_units)
    unit_piece = max(statistics.variance(unit_means) / n_units - interaction, 0.0)
    half = (sps.t.ppf(q, n_seeds - 1) ** 2 * statistics.variance(seed_means) / n_seeds
            + sps.t.ppf(q, n_units - 1) ** 2 * unit_piece) ** 0.5
    return delta, delta - half, delta + half


@pytest.mark.parametrize(("n_seeds", "n_units", "level"), [(2, 5, 0.95), (3, 6, 0.95), (5, 15, 0.90)])
def test_interval_matches_direct_formula(n_seeds: int, n_units: int, level: float) -> None:
    before, after = _recipe(n_seeds, n_units, seed=n_units, seed_shift=0.1)
    res = recipe_interval(before, after, confidence_level=level)
    delta, low, high = _reference(before, after, level)
    assert res.delta == pytest.approx(delta, abs=1e-12)
    assert res.confidence_interval.low == pytest.approx(low, abs=1e-10)
    assert res.confidence_interval.high == pytest.approx(high, abs=1e-10)
    assert (res.n_seeds, res.n_units) == (n_seeds, n_units)


def test_batched_interval_equals_single_recipes() -> None:
    pairs = [_recipe(3, 8, seed=i, seed_shift=0.2) for i in range(4)]
    d = np.stack([a - b for b, a in pairs])
    delta, low, high = seed_unit_interval(d)
    for i, (b, a) in enumerate(pairs):
        single = recipe_interval(b, a)
        assert (delta[i], low[i], high[i]) == pytest.approx(
            (single.delta, *single.confidence_interval), abs=1e-12)


def test_identical_seeds_reduce_to_the_paired_t_interval() -> None:
    """No run-to-run spread: the seed piece is 0 and the interval is scipy's paired t on the units."""
    before, after = _recipe(1, 12, seed=3, drop=-0.2)
    res = recipe_interval(before, np.repeat(after, 3, axis=0))
    ref = sps.ttest_rel(after[0], before).confidence_interval(0.95)
    assert res.seed_variance == 0
    assert tuple(res.confidence_interval) == pytest.approx((ref.low, ref.high), abs=1e-10)
    assert res.mde == pytest.approx(minimum_detectable_effect(after[0] - before), rel=1e-10)


def test_seed_spread_widens_the_interval() -> None:
    before, after = _recipe(1, 15, seed=5)
    spread = after + np.array([[-0.1], [0.0], [0.1]])  # three seeds, same unit pattern, shifted
    calm = recipe_interval(before, np.repeat(after, 3, axis=0))
    noisy = recipe_interval(before, spread)
    assert noisy.delta == pytest.approx(calm.delta)
    assert noisy.seed_variance == pytest.approx(0.01 / 3)
    calm_half = (calm.confidence_interval.high - calm.confidence_interval.low) / 2
    seed_half = sps.t.ppf(0.975, 2) * (0.01 / 3) ** 0.5  # t(2) = 4.30 on the spread of the seed means
    noisy_half = (noisy.confidence_interval.high - noisy.confidence_interval.low) / 2
    assert noisy_half == pytest.approx((calm_half**2 + seed_half**2) ** 0.5, rel=1e-9)
    assert noisy_half > calm_half + 0.1


def test_one_seed_is_unresolved_and_says_why() -> None:
    before, after = _recipe(1, 15, seed=1, drop=-0.4)
    res = compare_recipe(before, after, seeds=(18,), rng=0)
    assert res.verdict == "unresolved"
    assert "one training seed cannot show the run-to-run spread" in res.reason
    assert (res.low, res.high, res.mde) == (None, None, None)
    assert res.delta == pytest.approx(float(np.mean(after[0] - before)))
    (only,) = res.seeds
    assert only.seed == 18 and only.verdict == "regressed"  # the adapter itself did regress
    assert res.seeds_line == "regressed in 1 of 1 seed"
    with pytest.raises(DataError, match="at least 2 training seeds, got 1"):
        recipe_interval(before, after)


def test_strongly_regressing_recipe_regresses_in_every_seed() -> None:
    before = np.full(20, 0.9)
    after = np.array([np.full(20, 0.3), np.full(20, 0.35), np.full(20, 0.25)])
    after[:, ::4] += 0.25  # some units fall less: spread over units, not only seeds
    res = compare_recipe(before, after, seeds=(17, 18, 19), rng=0)
    assert res.verdict == "regressed"
    assert res.high < 0 and res.low < res.delta < res.high
    assert [s.seed for s in res.seeds] == [17, 18, 19]
    assert res.regressed_seeds == 3
    assert res.seeds_line == "regressed in 3 of 3 seeds"
    assert res.mde is not None and res.mde > 0


def test_one_bad_seed_of_three_is_counted_but_not_a_recipe_regression() -> None:
    """The no_id story: one seed collapses, two do not; three seeds cannot pin the recipe."""
    before, after = _recipe(3, 20, seed=11)
    after[1] = np.clip(after[1] - 0.5, 0, 1)
    res = compare_recipe(before, after, rng=0)
    assert [s.verdict for s in res.seeds][1] == "regressed"
    assert res.regressed_seeds == 1
    assert res.seeds_line == "regressed in 1 of 3 seeds"
    assert res.verdict == "inconclusive"
    assert res.low < 0 < res.high


def test_flat_and_moved_recipes() -> None:
    rng = np.random.default_rng(2)
    before = rng.binomial(K, 0.5, size=400) / K
    flat = compare_recipe(before, np.repeat(before[None], 3, axis=0), rng=0)
    assert flat.verdict == "flat" and flat.low == flat.high == 0.0
    moved = compare_recipe(before, np.minimum(before + np.array([[0.25], [0.3], [0.35]]), 1.0), rng=0)
    assert moved.verdict == "moved" and moved.low > 0


def test_too_few_units_are_insufficient() -> None:
    before, after = _recipe(3, MIN_UNITS - 1, seed=4)
    res = compare_recipe(before, after, rng=0)
    assert res.verdict == "insufficient" and res.reason == f"fewer than {MIN_UNITS} units"
    assert all(s.verdict == "insufficient" and s.low is None for s in res.seeds)


def test_deterministic_under_a_seed() -> None:
    before, after = _recipe(3, 15, seed=6, seed_shift=0.1)
    first = compare_recipe(before, after, rng=7)
    assert compare_recipe(before, after, rng=7) == first
    assert compare_recipe(before, after, rng=np.random.default_rng(7)) == first
    other = compare_recipe(before, after, rng=8)
    assert (other.low, other.high, other.mde) == (first.low, first.high, first.mde)  # no resampling


def test_verdict_rules_are_the_gates() -> None:
    """One rule for both gates: the single-adapter gate imports it from here."""
    assert gate.MIN_UNITS is MIN_UNITS and gate.interval_verdict is interval_verdict
    assert set(verdicts.VERDICTS) | {"unresolved"} == set(RECIPE_VERDICTS)
    assert [interval_verdict(*bounds, 0.1) for bounds in ((-0.3, -0.01), (0.01, 0.3), (-0.1, 0.1), (-0.2, 0.05))] \
        == ["regressed", "moved", "flat", "inconclusive"]


@pytest.mark.parametrize(
    ("before", "after", "error", "message"),
    [
        ([0.5] * 6, [[0.5] * 6, [0.5] * 5], DataError, r"after seed #1 has 5 units, before has 6"),
        ([0.5] * 6, [], DataError, r"after has no training seeds"),
        ([0.5] * 6, np.empty((0, 6)), DataError, r"after has no training seeds"),
        ([0.5] * 6, np.full(6, 0.5), DataError, r"after must be seeds x units .* got shape \(6,\)"),
        ([0.5] * 5 + [float("nan")], [[0.5] * 6] * 2, DataError, r"before has a NaN"),
        ([0.5] * 6, [[0.5] * 6, [0.5] * 5 + [float("inf")]], DataError, r"after seed #1 has a NaN or infinite"),
        ([], [[]], DataError, r"before must be a non-empty 1-D array"),
    ],
)
def test_bad_data_is_a_one_line_data_error(before: object, after: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as info:
        compare_recipe(before, after)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"margin": 1.5}, r"margin must be in \[0, 1\), got 1.5"),
        ({"confidence_level": 1.0}, r"confidence level must be in \(0, 1\), got 1.0"),
        ({"n_resamples": 10}, r"resamples must be an integer >= 100, got 10"),
        ({"method": "bca"}, r"method must be one of .* got 'bca'"),
        ({"seeds": (17, 18)}, r"seeds must name each of the 3 after rows once, got \[17, 18\]"),
        ({"seeds": (17, 17, 18)}, r"seeds must name each of the 3 after rows once"),
    ],
)
def test_bad_options_are_a_one_line_usage_error(options: dict[str, object], message: str) -> None:
    before, after = _recipe(3, 6, seed=0)
    with pytest.raises(UsageError, match=message) as info:
        compare_recipe(before, after, **options)
    assert "\n" not in str(info.value)


def _simulation() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_recipe_calibration", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_simulated_null_recipe_with_noisy_training() -> None:
    """3 seeds x 40 units, seed effects of 1.0 logit: the benchmark's hardest cell, 400 recipes.

    The recipe interval must cover the true (zero) effect and rarely call it regressed; the
    same data gated on units alone (seed-averaged deltas, paired t: the seed spread ignored)
    must fail the same bounds, so this test cannot pass for an interval blind to seeds.
    """
    sim = _simulation()
    before, after, _ = sim.simulate(np.random.default_rng(2024), 400, 3, 40, 1.0, 0.0)
    d = after - before[:, None, :]
    _, low, high = seed_unit_interval(d)
    assert np.mean((low <= 0) & (0 <= high)) >= 0.90
    assert np.mean(high < 0) <= 0.06

    unit_means = d.mean(axis=1)
    half = sps.t.ppf(0.975, 39) * unit_means.std(axis=1, ddof=1) / np.sqrt(40)
    blind_low, blind_high = unit_means.mean(axis=1) - half, unit_means.mean(axis=1) + half
    assert np.mean((blind_low <= 0) & (0 <= blind_high)) < 0.85
    assert np.mean(blind_high < 0) > 0.06


def test_simulated_effect_is_exact() -> None:
    sim = _simulation()
    for tau in sim.TAUS:
        for target in sim.EFFECTS:
            assert sim.true_effect(sim.solve_mu(target, tau), tau) == pytest.approx(target, abs=1e-9)


def test_taking_the_interaction_out_once_is_narrower_and_still_covers() -> None:
    """The unit piece less the interaction it shares with the seed piece: narrower than Banerjee on the raw
    margins in every cell of the benchmark's grid that this samples, and still covering where it is tightest."""
    sim = _simulation()
    for n_seeds, n_units, tau in ((5, 6, 0.0), (3, 40, 1.0), (3, 15, 0.0)):
        before, after, _ = sim.simulate(np.random.default_rng([9, n_seeds, n_units]), 600, n_seeds, n_units, tau, 0.0)
        d = after - before[:, None, :]
        _, low, high = seed_unit_interval(d)
        raw_low, raw_high = sim.banerjee_raw_margins(d, 0.95)
        assert np.all(high - low <= raw_high - raw_low + 1e-12)
        assert np.mean(high - low) < np.mean(raw_high - raw_low)
        assert np.mean((low <= 0) & (0 <= high)) >= 0.92  # 600 recipes: +-1.8 points around 95 %


@pytest.mark.parametrize(("n_seeds", "n_units", "tau"), [(3, 40, 1.0), (3, 12, 0.5)])
def test_the_interval_holds_at_an_adjusted_level(n_seeds: int, n_units: int, tau: float) -> None:
    """At 99 % (one-sided 0.5 %, a level a family-wise gate calls it at) the interval still covers
    a null recipe and rarely calls it regressed, in the benchmark's seed-dominated cell and at 3 x 12."""
    sim = _simulation()
    rng = np.random.default_rng([11, n_seeds, n_units])
    before, after, _ = sim.simulate(rng, 1000, n_seeds, n_units, tau, 0.0)
    _, low, high = seed_unit_interval(after - before[:, None, :], confidence_level=0.99)
    assert np.mean((low <= 0) & (0 <= high)) >= 0.98  # 1,000 recipes: +-0.6 points around 99 %
    assert np.mean(high < 0) <= 0.012
    _, low95, high95 = seed_unit_interval(after - before[:, None, :], confidence_level=0.95)
    assert np.all(high - low > high95 - low95)


@pytest.mark.parametrize(("seed_share", "unit_share", "exact"), [
    (1.0, 0.0, True), (0.0, 1.0, True), (0.0, 0.0, False), (0.4, 0.6, False), (0.3, 0.5, False)])
def test_under_normal_theory_the_interval_is_exact_at_the_extremes_and_safe_between(
        seed_share: float, unit_share: float, exact: bool) -> None:
    """Normal crossed data, d[s, u] = a_s + b_u + e_su with the given shares of Var(mean d), 3 seeds x 12 units.

    Where seeds or units dominate the interval is exactly at its level; where both matter, or
    the seed x unit interaction dominates (its share sits in the seed piece, at the seed
    piece's 2 degrees of freedom), it is conservative (Banerjee's combination). It cannot be
    narrowed there without going below the level at the exact ends: from 3 seeds the variance
    shares are too uncertain to tell where a recipe sits (benchmarks/bench_recipe_calibration.py
    measures the candidates that try).
    """
    rng = np.random.default_rng([3, int(seed_share * 10), int(unit_share * 10)])
    n_seeds, n_units, reps = 3, 12, 4000
    inter_share = 1.0 - seed_share - unit_share
    d = (math.sqrt(seed_share * n_seeds) * rng.standard_normal((reps, n_seeds, 1))
         + math.sqrt(unit_share * n_units) * rng.standard_normal((reps, 1, n_units))
         + math.sqrt(inter_share * n_seeds * n_units) * rng.standard_normal((reps, n_seeds, n_units)))
    _, low, high = seed_unit_interval(d, confidence_level=0.95)
    covered = float(np.mean((low <= 0) & (0 <= high)))  # 4,000 datasets: +-0.7 points
    if exact:
        assert covered == pytest.approx(0.95, abs=0.009)
    else:
        assert covered > 0.962
