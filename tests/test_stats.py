"""pytest_rlgate.gate.stats against scipy (the oracle) and by invariants (Hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as sps

from pytest_rlgate.gate import stats as stats_module
from pytest_rlgate.gate.stats import BOOTSTRAP_METHOD, METHODS, _resample_means, normal_cdf, t_cdf, t_ppf
from pytest_rlgate.stats import (
    ConfidenceInterval,
    PairedBootstrapResult,
    holm,
    minimum_detectable_effect,
    paired_bootstrap,
)

K = 4


def _holdout(n: int, seed: int, drop: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit pass rates over k = 4 rollouts, heterogeneous prompts."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, size=n)
    before = rng.binomial(K, p) / K
    after = rng.binomial(K, np.clip(p + drop, 0, 1)) / K
    return before, after


@pytest.mark.parametrize("df", [1, 2, 5, 14, 162, 9999])
def test_t_distribution_matches_scipy(df: int) -> None:
    for x in (-40.0, -3.0, -0.5, 0.0, 0.1, 2.2, 40.0):
        assert t_cdf(x, df) == pytest.approx(sps.t.cdf(x, df), abs=1e-11)
    for q in (1e-4, 0.025, 0.2, 0.5, 0.8, 0.975, 0.9999):
        assert t_ppf(q, df) == pytest.approx(sps.t.ppf(q, df), rel=1e-9, abs=1e-12)
    assert normal_cdf(-1.3) == pytest.approx(sps.norm.cdf(-1.3), abs=1e-14)


@pytest.mark.parametrize("n", [15, 163])
def test_percentile_agrees_with_scipy_within_monte_carlo_error(n: int) -> None:
    before, after = _holdout(n, seed=n, drop=-0.1)
    d = after - before
    ours = paired_bootstrap(before, after, method="percentile", n_resamples=40_000, rng=1)
    ref = sps.bootstrap((before, after), lambda b, a, axis: np.mean(a - b, axis=axis), paired=True,
                        vectorized=True, method="percentile", n_resamples=40_000, rng=np.random.default_rng(2))
    se = d.std(ddof=1) / math.sqrt(n)
    # Each endpoint is a bootstrap quantile: its MC error is a small fraction of the SE,
    # and both sit on the 1/(n k) lattice, so allow one lattice step plus 0.05 SE.
    tol = 1.0 / (n * K) + 0.05 * se
    assert ours.confidence_interval.low == pytest.approx(ref.confidence_interval.low, abs=tol)
    assert ours.confidence_interval.high == pytest.approx(ref.confidence_interval.high, abs=tol)
    assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.03)
    assert ours.delta == pytest.approx(d.mean())


def test_t_method_is_scipys_paired_t() -> None:
    before, after = _holdout(25, seed=3, drop=-0.05)
    ours = paired_bootstrap(before, after, method="t")
    ref = sps.ttest_rel(after, before)
    low, high = ref.confidence_interval(0.95)
    assert ours.confidence_interval == pytest.approx((low, high), abs=1e-10)
    assert ours.p_less == pytest.approx(sps.ttest_rel(after, before, alternative="less").pvalue, abs=1e-10)
    assert ours.p_greater == pytest.approx(sps.ttest_rel(after, before, alternative="greater").pvalue, abs=1e-10)
    assert ours.n_resamples == 0 and ours.bootstrap_distribution is None


def test_expanded_percentile_uses_hesterbergs_tail_level() -> None:
    before, after = _holdout(15, seed=4, drop=-0.1)
    res = paired_bootstrap(before, after, method="expanded", n_resamples=20_000, rng=5)
    n = 15
    tail = sps.norm.cdf(math.sqrt(n / (n - 1)) * sps.t.ppf(0.025, n - 1))
    expect = np.quantile(res.bootstrap_distribution, [tail, 1 - tail])
    assert tuple(res.confidence_interval) == pytest.approx(tuple(expect))
    plain = paired_bootstrap(before, after, method="percentile", n_resamples=20_000, rng=5)
    assert res.confidence_interval.low <= plain.confidence_interval.low
    assert res.confidence_interval.high >= plain.confidence_interval.high


def test_basic_interval_reflects_percentile() -> None:
    before, after = _holdout(30, seed=6)
    pct = paired_bootstrap(before, after, method="percentile", rng=7)
    basic = paired_bootstrap(before, after, method="basic", rng=7)
    assert basic.confidence_interval.low == pytest.approx(2 * pct.delta - pct.confidence_interval.high)
    assert basic.confidence_interval.high == pytest.approx(2 * pct.delta - pct.confidence_interval.low)


@pytest.mark.parametrize(
    ("n", "resamples", "grid"),
    [(200, 40_000, None), (5_000, 10_000, None), (300, 20_000, 16)],
    ids=["sum-distribution-full-grid", "sum-distribution-window", "multinomial"],
)
def test_lattice_shortcuts_and_index_resampling_give_the_same_distribution(
    monkeypatch: pytest.MonkeyPatch, n: int, resamples: int, grid: int | None
) -> None:
    # n = 200: the whole grid of sums; n = 5,000: a window around the mean (cyclic FFT);
    # a tiny grid limit forces the multinomial draws.
    if grid is not None:
        monkeypatch.setattr(stats_module, "_MAX_SUM_GRID", grid)
    before, after = _holdout(n, seed=8)
    d = after - before
    assert np.unique(d).size <= 2 * K + 1
    shortcut = _resample_means(d, resamples, np.random.default_rng(9))
    rng = np.random.default_rng(10)
    by_index = np.concatenate([d[rng.integers(0, n, size=(500, n))].mean(axis=1) for _ in range(resamples // 500)])
    qs = [0.025, 0.25, 0.5, 0.75, 0.975]
    se = d.std() / math.sqrt(n)
    # MC s.e. of a 2.5 % quantile at B = 10,000 is ~0.03 se per side: allow ~4 s.e. of the difference
    assert np.quantile(shortcut, qs) == pytest.approx(np.quantile(by_index, qs), abs=2 / (n * K) + 0.15 * se)
    assert shortcut.std() == pytest.approx(by_index.std(), rel=0.04)
    assert shortcut.mean() == pytest.approx(d.mean(), abs=0.05 * se)


def test_sum_distribution_near_the_edges_of_its_grid() -> None:
    # nearly every unit at the lowest (or highest) value: the window is clamped to the grid
    for low_side in (True, False):
        d = np.full(20_000, -1.0 if low_side else 1.0)
        d[:30] = 0.25
        means = _resample_means(d, 50_000, np.random.default_rng(2))
        assert means.mean() == pytest.approx(d.mean(), abs=2e-6)
        assert means.std() == pytest.approx(d.std() / math.sqrt(d.size), rel=0.03)
        assert (means >= d.min()).all() and (means <= d.max()).all()


def test_grids_that_are_not_regular_use_the_multinomial_path() -> None:
    d = np.array([0.0, 0.4, 1.0, 0.4, 0.0, 1.0, 0.4])  # distinct values, no common step
    means = _resample_means(d, 20_000, np.random.default_rng(1))
    assert set(np.round(means * 7, 6)) <= {round(0.4 * a + b, 6) for a in range(8) for b in range(8)}
    assert means.mean() == pytest.approx(d.mean(), abs=0.01)
    assert means.std() == pytest.approx(d.std() / math.sqrt(7), rel=0.04)


def test_non_lattice_values_fall_back_to_chunked_resampling() -> None:
    rng = np.random.default_rng(11)
    before = rng.normal(size=2_000)
    after = before + rng.normal(0.1, 1.0, size=2_000)
    res = paired_bootstrap(before, after, n_resamples=3_000, method="percentile", rng=12)
    d = after - before
    se = d.std(ddof=1) / math.sqrt(d.size)
    assert res.standard_error == pytest.approx(se, rel=0.08)
    assert res.confidence_interval.low == pytest.approx(d.mean() - 1.96 * se, abs=0.15 * se)
    assert res.confidence_interval.high == pytest.approx(d.mean() + 1.96 * se, abs=0.15 * se)


def test_result_shape_and_reproducibility() -> None:
    before, after = _holdout(40, seed=13, drop=-0.2)
    first = paired_bootstrap(before, after, rng=123)
    again = paired_bootstrap(before, after, rng=np.random.default_rng(123))
    assert isinstance(first, PairedBootstrapResult)
    assert isinstance(first.confidence_interval, ConfidenceInterval)
    assert first.confidence_interval == again.confidence_interval
    assert first.method == BOOTSTRAP_METHOD == "expanded"
    assert first.n == 40 and first.n_resamples == 10_000 and first.confidence_level == 0.95
    assert "bootstrap_distribution" not in repr(first)
    with pytest.raises(AttributeError):
        first.delta = 0.0  # type: ignore[misc]


def test_one_sided_p_and_mde_follow_the_paired_t_test() -> None:
    before, after = _holdout(15, seed=14, drop=-0.2)
    d = after - before
    res = paired_bootstrap(before, after, rng=0)
    assert res.p_less == pytest.approx(sps.ttest_1samp(d, 0, alternative="less").pvalue, abs=1e-10)
    expect = (sps.t.ppf(0.975, 14) + sps.t.ppf(0.8, 14)) * d.std(ddof=1) / math.sqrt(15)
    assert res.mde == pytest.approx(expect, rel=1e-9)
    assert minimum_detectable_effect(d) == pytest.approx(expect, rel=1e-9)
    # The MDE really is 80 % power: a noncentral t check of the formula at that effect.
    nc = expect / (d.std(ddof=1) / math.sqrt(15))
    assert sps.nct.sf(sps.t.ppf(0.975, 14), 14, nc) == pytest.approx(0.80, abs=0.02)


def test_no_variation_gives_a_zero_width_interval() -> None:
    before = np.full(10, 0.75)
    after = np.full(10, 0.5)
    for method in METHODS:
        res = paired_bootstrap(before, after, method=method, rng=0)
        assert res.confidence_interval == pytest.approx((-0.25, -0.25))
        assert res.p_less == 0.0 and res.p_greater == 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"before": [1, 2], "after": [1, 2, 3]}, "same length (got 2 and 3)"),
        ({"before": [1.0], "after": [1.0]}, "at least 2 paired units"),
        ({"before": [[1, 2]], "after": [[1, 2]]}, "1-D"),
        ({"before": [1, float("nan")], "after": [1, 2]}, "finite"),
        ({"n_resamples": 0}, "`n_resamples` must be a positive integer"),
        ({"n_resamples": 2.5}, "`n_resamples` must be a positive integer"),
        ({"confidence_level": 1.0}, "`confidence_level` must be in (0, 1)"),
        ({"method": "BCa"}, "`method` must be one of"),
        ({"rng": "seed"}, "`rng` must be"),
    ],
)
def test_bad_arguments_read_like_scipy(kwargs: dict, message: str) -> None:
    args = {"before": [0.0, 0.5, 1.0], "after": [0.25, 0.5, 0.75], **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        paired_bootstrap(args.pop("before"), args.pop("after"), **args)


def test_holm_matches_the_step_down_definition() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    reject, adjusted = holm(p, alpha=0.05)
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert reject.tolist() == [True, False, False, True]
    # Holm never rejects more than the unadjusted test, and always at least Bonferroni's set.
    rng = np.random.default_rng(15)
    for _ in range(200):
        ps = rng.uniform(0, 0.2, size=rng.integers(1, 7))
        rej, adj = holm(ps, alpha=0.05)
        assert np.all(adj >= ps - 1e-15)
        assert set(np.flatnonzero(ps * ps.size <= 0.05)) <= set(np.flatnonzero(rej))
        assert set(np.flatnonzero(rej)) <= set(np.flatnonzero(ps <= 0.05))
    with pytest.raises(ValueError):
        holm([0.5, 1.5])


# -- invariants -----------------------------------------------------------------------------

_rates = st.lists(st.integers(0, K).map(lambda c: c / K), min_size=3, max_size=60)


@settings(max_examples=60, deadline=None)
@given(values=_rates, method=st.sampled_from(METHODS), seed=st.integers(0, 2**32 - 1))
def test_identical_inputs_give_zero_and_cover_zero(values: list[float], method: str, seed: int) -> None:
    res = paired_bootstrap(values, values, method=method, n_resamples=500, rng=seed)
    assert res.delta == 0.0
    assert res.confidence_interval.low <= 0.0 <= res.confidence_interval.high


@settings(max_examples=60, deadline=None)
@given(data=st.data(), method=st.sampled_from(METHODS), shift=st.sampled_from([-0.5, -0.25, 0.125, 0.75]))
def test_shifting_after_shifts_delta_and_interval(data: st.DataObject, method: str, shift: float) -> None:
    before = data.draw(_rates)
    after = data.draw(st.lists(st.integers(0, K).map(lambda c: c / K), min_size=len(before), max_size=len(before)))
    base = paired_bootstrap(before, after, method=method, n_resamples=500, rng=7)
    moved = paired_bootstrap(before, np.asarray(after) + shift, method=method, n_resamples=500, rng=7)
    assert moved.delta == pytest.approx(base.delta + shift, abs=1e-12)
    assert moved.confidence_interval.low == pytest.approx(base.confidence_interval.low + shift, abs=1e-9)
    assert moved.confidence_interval.high == pytest.approx(base.confidence_interval.high + shift, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), method=st.sampled_from(METHODS))
def test_permuting_units_changes_nothing(data: st.DataObject, method: str) -> None:
    before = data.draw(_rates)
    after = data.draw(st.lists(st.integers(0, K).map(lambda c: c / K), min_size=len(before), max_size=len(before)))
    order = data.draw(st.permutations(range(len(before))))
    base = paired_bootstrap(before, after, method=method, n_resamples=500, rng=3)
    perm = paired_bootstrap(np.asarray(before)[order], np.asarray(after)[order], method=method,
                            n_resamples=500, rng=3)
    assert perm.delta == pytest.approx(base.delta, abs=1e-12)
    assert tuple(perm.confidence_interval) == pytest.approx(tuple(base.confidence_interval), abs=1e-12)


def test_stats_and_gate_import_numpy_only() -> None:
    import subprocess
    import sys

    code = ("import sys, pytest_rlgate.gate.stats, pytest_rlgate.gate.adapter, pytest_rlgate.data.rows; "
            "print(sorted(m for m in ('scipy', 'torch', 'hypothesis', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
