"""The family test: one level for every comparison a gate makes, set by scenario sign flips.

Checked against an exact enumeration of every sign pattern (the reference), by simulation of
unchanged runs, and on the dependence it must use (identical members cost one test, constant
ones cost nothing).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from pytest_rlgate.gate import family as family_module
from pytest_rlgate.gate.family import FamilyMember, family_test, t_to_z, z_to_t


def _member(deltas: list[float], units: list[int] | None = None, **kwargs: float) -> FamilyMember:
    return FamilyMember(np.asarray(deltas, dtype=float), np.asarray(units if units is not None else range(len(deltas))),
                        **kwargs)


def _exact_p(deltas: np.ndarray, noise: float) -> float:
    """The one-sided randomization p-value of the shrunk t over every one of the 2^n sign patterns."""
    member = FamilyMember(deltas, np.arange(deltas.size), noise)
    observed = deltas.mean() / member.standard_error()
    values = []
    for signs in itertools.product((-1.0, 1.0), repeat=deltas.size):
        flipped = FamilyMember(deltas * np.asarray(signs), np.arange(deltas.size), noise)
        values.append(flipped.deltas.mean() / flipped.standard_error())
    return float(np.mean(np.asarray(values) <= observed + 1e-12))


def test_one_member_is_the_exact_sign_flip_test() -> None:
    rng = np.random.default_rng(0)
    agree = 0
    for _ in range(40):
        deltas = rng.choice([-0.5, -0.25, 0.0, 0.25, 0.5], size=10, p=[0.35, 0.2, 0.2, 0.15, 0.1])
        if not deltas.any():
            continue
        exact = _exact_p(deltas, noise=0.02)
        test = family_test([_member(list(deltas), noise=0.02)], n_units=10, level=0.05, draws=20_000, rng=1)
        rejects = deltas.mean() / FamilyMember(deltas, np.arange(10), 0.02).standard_error() < -test.critical[0]
        # a randomization test at 5 %: rejects exactly when the exact p-value is at most 5 % (away from the edge)
        if abs(exact - 0.05) > 0.01:
            assert rejects == (exact <= 0.05), (deltas, exact)
            agree += 1
        assert test.adjusted[0] == pytest.approx(exact, abs=0.01)
    assert agree >= 30


def test_identical_members_cost_one_test_and_constant_ones_nothing() -> None:
    rng = np.random.default_rng(2)
    deltas = list(rng.normal(0, 0.2, size=20))
    alone = family_test([_member(deltas)], n_units=20, rng=0)
    twice = family_test([_member(deltas), _member(deltas)], n_units=20, rng=0)
    assert twice.marginal == pytest.approx(alone.marginal, rel=0.02)
    quiet = family_test([_member(deltas), _member([0.0] * 20)], n_units=20, rng=0)
    assert quiet.marginal == alone.marginal and quiet.size == 1 and quiet.members == 2
    # two independent members (disjoint scenarios) each get about half
    other = list(rng.normal(0, 0.2, size=20))
    apart = family_test([_member(deltas), _member(other, list(range(20, 40)))], n_units=40, rng=0)
    assert 0.4 * alone.marginal < apart.marginal < 0.6 * alone.marginal


def test_untested_members_spend_nothing_and_weights_share_the_level() -> None:
    rng = np.random.default_rng(3)
    a, b = list(rng.normal(0, 0.2, size=15)), list(rng.normal(0, 0.2, size=15))
    both = family_test([_member(a), _member(b, list(range(15, 30)))], n_units=30, rng=0)
    advisory = family_test([_member(a), _member(b, list(range(15, 30)), tested=False)], n_units=30, rng=0)
    assert advisory.members == 1 and advisory.marginal > 1.8 * both.marginal
    weighted = family_test([_member(a, weight=2.0), _member(b, list(range(15, 30)))], n_units=30, rng=0)
    # the critical value of the weighted member is that of twice the level
    assert weighted.critical[0] < weighted.critical[1]
    assert stats.t.sf(weighted.critical[0], 14) == pytest.approx(2 * stats.t.sf(weighted.critical[1], 14), rel=0.05)


def test_an_unchanged_family_fails_at_most_its_level() -> None:
    # 3 categories x 12 scenarios, overall beside them, k = 4 replies a side, rates from Beta(2, 2)
    rng = np.random.default_rng(4)
    runs, fails = 300, 0
    for run in range(runs):
        rates = rng.beta(2, 2, size=36)
        d = (rng.binomial(4, rates) - rng.binomial(4, rates)) / 4
        members = [_member(list(d), noise=0.1)] + [
            _member(list(d[c * 12:(c + 1) * 12]), list(range(c * 12, c * 12 + 12)), noise=0.1) for c in range(3)]
        test = family_test(members, n_units=36, draws=2000, rng=run)
        fails += any(m.deltas.mean() / m.standard_error() < -crit for m, crit in zip(members, test.critical))
    # exact at 5 %: 15 of 300 expected; 3 standard errors above is 26
    assert fails <= 26


def test_the_normal_law_stands_in_for_the_flips_at_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    members = [_member(list(rng.normal(0, 0.3, size=200)), list(range(c * 200, (c + 1) * 200))) for c in range(3)]
    flips = family_test(members, n_units=600, rng=0)
    monkeypatch.setattr(family_module, "_FLIP_BUDGET", 0)
    normal = family_test(members, n_units=600, rng=0)
    assert flips.law == "sign flips" and normal.law == "normal"
    assert normal.marginal == pytest.approx(flips.marginal, rel=0.15)
    # three independent tests at 5 %: Sidak's level
    assert normal.marginal == pytest.approx(1 - 0.95 ** (1 / 3), rel=0.1)


def test_the_transform_is_monotone_and_inverts() -> None:
    t = np.linspace(-12, 12, 97)
    for df in (2.0, 5.0, 30.0):
        z = t_to_z(t, np.full_like(t, df))
        assert np.all(np.diff(z) > 0)
        assert all(z_to_t(float(zi), df) == pytest.approx(ti, rel=1e-9, abs=1e-9) for zi, ti in zip(z, t))
        # close to the normal deviate of the t's own tail (it only balances members, but it is a good one)
        assert abs(float(t_to_z(np.array([3.0]), np.array([df]))[0]) - stats.norm.ppf(stats.t.cdf(3.0, df))) < 0.05
    assert math.isinf(float(t_to_z(np.array([-np.inf]), np.array([3.0]))[0]))
