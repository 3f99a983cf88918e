"""The watched run's statistics: exact p-values against independent references, the spending, the families,
and the false-stop rate by simulation."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from pytest_rlgate.errors import RlgateDeprecationWarning, UsageError
from pytest_rlgate.gate.options import FAMILY_LEVEL
from pytest_rlgate.gate.sequential import (
    BagTest,
    Spending,
    bag_test,
    betting_p,
    lattice,
    sign_flip_p,
    tarone_holm,
)
from pytest_rlgate.watch.looks import Look, SequentialGate, Test as LookTest, Units, look_alpha

CATEGORIES = ("a", "b", "c")


def _rows(rng: random.Random, rates: dict, run: str, k: int = 4, prompts: int = 2) -> list[dict]:
    rows = []
    for (category, scenario), rate in rates.items():
        for p in range(prompts):
            for j in range(k):
                passed = rng.random() < rate
                rows.append({"prompt": f"{category}{scenario}-{p}", "scenario_id": f"{category}{scenario}",
                             "category": category, "rollout_index": j, "reply": "r", "score": float(passed),
                             "reward": int(passed), "markers": {"tidy": float(rng.random() < 0.8)},
                             "eval_run": run})
    return rows


def _rates(rng: random.Random, per_category: int) -> dict:
    return {(c, s): rng.uniform(0.1, 0.9) for c in CATEGORIES for s in range(per_category)}


def _order(bags: np.ndarray) -> np.ndarray:
    """Units by bag width, widest first (ties by position): the order that breaks ties of the sum."""
    widths = bags.max(axis=1) - bags.min(axis=1)
    return np.lexsort((np.arange(len(bags)), -widths))


def _brute(bags: np.ndarray) -> float:
    """Every assignment of the step-0 side, counted: the tie-broken p-value by enumeration."""
    bags = bags[bags.max(axis=1) > bags.min(axis=1)][_order(bags[bags.max(axis=1) > bags.min(axis=1)])]
    n, sides = bags.shape
    observed = (int(bags[:, 0].sum()), tuple(bags[:, 0].tolist()))
    hits = sum((int(drawn.sum()), tuple(drawn.tolist())) >= observed
               for pick in itertools.product(range(sides), repeat=n)
               for drawn in [bags[np.arange(n), pick]])
    return hits / sides ** n


def _exact_rational(bags: list[list[int]]) -> Fraction:
    """The same p-value in exact rational arithmetic (no floats): P(sum > t) + P(sum = t, lexicographically >=)."""
    rows = np.array(bags)
    rows = rows[rows.max(axis=1) > rows.min(axis=1)]
    rows = [list(r) for r in rows[_order(rows)]]
    suffix: list[dict[int, Fraction]] = [{0: Fraction(1)}]
    for bag in rows[:0:-1]:
        new: dict[int, Fraction] = {}
        for s, q in suffix[-1].items():
            for v in bag:
                new[s + v] = new.get(s + v, Fraction(0)) + q / len(bag)
        suffix.append(new)
    suffix.reverse()
    total = sum(bag[0] for bag in rows)
    first = rows[0] if rows else [0]
    p = sum((q / len(first) for v in first for s, q in suffix[0].items() if v + s > total), Fraction(0))
    weight, prefix = Fraction(1), 0
    for bag, rest in zip(rows, suffix):
        o = bag[0]
        for v in set(bag):
            if v > o:  # the first unit to differ is higher here, and the total ties
                p += weight * Fraction(bag.count(v), len(bag)) * rest.get(total - prefix - v, Fraction(0))
        weight *= Fraction(bag.count(o), len(bag))
        prefix += o
    return p + weight


# --- the spending ------------------------------------------------------------------------

def test_the_spent_levels_never_sum_past_the_family_level() -> None:
    planned = Spending(planned=10)
    assert planned.family_level == FAMILY_LEVEL == 0.05  # the gate's default, one budget for both
    assert sum(planned.level(i) for i in range(1, 11)) == pytest.approx(0.05)
    assert planned.level(10) > 20 * planned.level(1) > 0  # most of it on the late looks
    assert all(planned.level(i) < planned.level(i + 1) for i in range(1, 10))
    open_ended = Spending()
    assert sum(open_ended.level(i) for i in range(1, 100_001)) < 0.05
    assert open_ended.spent(10) == pytest.approx(0.025)  # half by the horizon
    assert look_alpha(1) > look_alpha(2) > look_alpha(10) > 0
    with pytest.raises(UsageError, match="spent"):
        look_alpha(11, planned=10)
    with pytest.raises(UsageError, match="family_level"):
        SequentialGate(family_level=0.7)
    with pytest.warns(RlgateDeprecationWarning, match="alpha= is now family_level="):
        assert SequentialGate(alpha=0.02).family_level == 0.02 == Spending(alpha=0.02).family_level
    with pytest.raises(UsageError, match="window"):
        SequentialGate(window=0)


# --- exact p-values against references ---------------------------------------------------

@pytest.mark.parametrize("seed", range(12))
def test_bag_p_values_equal_an_enumeration_of_every_assignment(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, sides = int(rng.integers(1, 8)), int(rng.integers(2, 5))
    bags = rng.integers(0, 5, size=(n, sides))
    found = bag_test(bags)
    assert found.p == pytest.approx(_brute(bags), abs=1e-12)
    assert found.p == pytest.approx(float(_exact_rational(bags.tolist())), abs=1e-12)
    assert found.min_p <= found.p


@pytest.mark.parametrize("n", [5, 9, 14])
def test_the_p_value_lies_between_scipys_exact_sign_flip_tests_with_and_without_ties(n: int) -> None:
    """On lattice deltas (k = 4, ties galore) scipy's exact permutation test counts ties as extreme
    (the upper bound); its opposite tail without the ties is the lower one. Ours lies between."""
    scipy_stats = pytest.importorskip("scipy.stats")
    deltas = np.random.default_rng(n).integers(-4, 4, size=n) / 4

    def exact(alternative: str) -> float:
        return float(scipy_stats.permutation_test((deltas,), np.mean, permutation_type="samples",
                                                  alternative=alternative, n_resamples=math.inf).pvalue)

    found = sign_flip_p(deltas)
    assert 1 - exact("greater") - 1e-12 <= found <= exact("less") + 1e-12
    ints, _scale = lattice(np.stack([np.zeros(n), deltas], axis=1))
    assert found == pytest.approx(_brute(ints), abs=1e-12)


def test_continuous_deltas_match_scipy_without_ties() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    deltas = np.random.default_rng(3).normal(-0.3, 1.0, size=12)
    reference = scipy_stats.permutation_test((deltas,), np.mean, permutation_type="samples",
                                             alternative="less", n_resamples=math.inf).pvalue
    assert sign_flip_p(deltas) == pytest.approx(reference, rel=0.02)  # rounded onto a 2^15-step grid


@pytest.mark.parametrize("sides", [2, 4])
def test_tails_are_exact_in_rational_arithmetic_down_past_1e_12(sides: int) -> None:
    rng = np.random.default_rng(sides)
    bags = rng.integers(1, 8, size=(60, sides))
    bags[:, 0] = bags[:, 1:].max(axis=1) + 1  # step 0 above the rest of its bag ...
    bags[:2, 0] = bags[:2, 1:].min(axis=1) - 1  # ... but in two units: a far tail, not its very end
    reference = _exact_rational(bags.tolist())
    found = bag_test(bags).p
    assert float(reference) < 1e-12
    assert found == pytest.approx(float(reference), rel=1e-9)


def test_a_total_collapse_of_n_units_has_p_two_to_the_minus_n() -> None:
    for n in (20, 40, 60):
        assert sign_flip_p(-np.ones(n)) == pytest.approx(2.0 ** -n, rel=1e-9)
    assert sign_flip_p(np.zeros(5)) == 1.0


def test_unequal_row_counts_go_onto_a_common_lattice() -> None:
    values = np.array([[3 / 8, 5 / 8], [2 / 6, 1 / 6], [0.5, 0.25]])
    ints, scale = lattice(values)
    assert scale == 24 and ints.tolist() == [[9, 15], [8, 4], [12, 6]]
    rounded, scale = lattice(np.array([[0.1234567, 0.7654321]]), width=1000)  # not a fraction: the finest grid
    assert scale == 1557 and rounded.tolist() == [[192, 1192]]  # 1557 * 0.642 <= 1000 steps wide


def test_breaking_ties_uses_the_size_and_stays_below_it() -> None:
    """The size at level 0.25 % (10 planned looks), exactly, by enumerating all 2^15 sign patterns of null
    datasets on a k = 4 lattice (15 units of 4 rows): given the deltas' magnitudes a test's size is the
    share of patterns it rejects. With ties of the sum broken no two patterns tie, so the size is the
    level rounded down to 2^-15; counting ties as extreme (scipy's rule) uses a fraction of it."""
    rng = np.random.default_rng(0)
    level, n = 0.0025, 15
    signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)
    tied_sizes = []
    for _ in range(40):
        p = rng.beta(2, 2, size=n)
        magnitude = np.abs(rng.binomial(4, p) - rng.binomial(4, p))
        totals = (signs * magnitude).sum(axis=1)  # step 0 minus the checkpoint, summed, for each pattern
        at_least = np.searchsorted(np.sort(totals), totals, side="left")
        p_tied = 1 - at_least / 2 ** n  # P(sum >= observed): ties counted as extreme
        tied_sizes.append(np.mean(p_tied <= level))
        pick = signs[rng.integers(2 ** n)]
        bags = np.stack([np.where(pick > 0, magnitude, 0), np.where(pick > 0, 0, magnitude)], axis=1)
        assert sign_flip_p((bags[:, 1] - bags[:, 0]) / 4) == pytest.approx(_brute(bags), abs=1e-12)
        moving = int(np.count_nonzero(magnitude))
        attainable = math.floor(level * 2 ** moving) / 2 ** moving  # every pattern its own atom
        assert attainable <= level
    assert np.mean(tied_sizes) < 0.6 * level  # what counting ties as extreme leaves unused


def test_betting_p_is_an_e_value_that_reaches_what_the_data_allow() -> None:
    assert betting_p(np.zeros(10)) == 1.0
    assert betting_p(np.full(10, 0.5)) == 1.0  # it never bets that deltas are positive
    assert betting_p(-np.ones(30)) < 1e-7
    rng = np.random.default_rng(1)
    nulls = [betting_p(rng.choice([-1, 1], size=20) * rng.uniform(0, 1, size=20)) for _ in range(2000)]
    assert np.mean(np.array(nulls) <= 0.05) <= 0.05  # Ville: P(1/E <= a) <= a


# --- one family at one look --------------------------------------------------------------

def _fixed(p: float, min_p: float) -> BagTest:
    return BagTest(p=p, min_p=min_p, n_units=1)


def test_tarone_leaves_out_the_tests_that_cannot_reach_their_level() -> None:
    # the third test can never get below 0.02 (6 units): Holm would split 0.03 three ways
    reject, level = tarone_holm([_fixed(0.012, 1e-6), _fixed(0.2, 1e-6), _fixed(0.5, 0.02)], 0.03)
    assert reject == [True, False, False] and level[0] == pytest.approx(0.015)
    reject, _level = tarone_holm([_fixed(0.012, 1e-6), _fixed(0.2, 1e-6), _fixed(0.5, 1e-6)], 0.03)
    assert reject == [False, False, False]  # plain Holm: 0.012 > 0.03 / 3
    reject, level = tarone_holm([_fixed(0.001, 1e-6), _fixed(0.014, 1e-6), _fixed(0.9, 1e-6)], 0.03)
    assert reject == [True, True, False] and level[1] == pytest.approx(0.015)  # the step-down


# --- the sequential gate -----------------------------------------------------------------

def test_a_real_regression_stops_the_run() -> None:
    rng = random.Random(1)
    rates = _rates(rng, 30)
    before = _rows(rng, rates, "step-0")
    worse = {unit: max(0.0, rate - 0.3) if unit[0] == "b" else rate for unit, rate in rates.items()}
    gate = SequentialGate(planned=10, guards=("tidy",), report=False)
    look = gate.look(before, _rows(rng, worse, "step-1"), step=1)
    assert "pass@1/b" in look.regressed and "tidy/b" not in look.regressed
    assert look.alpha == pytest.approx(Spending(planned=10).level(1))
    assert {t.kind for t in look.tests} == {"checkpoint"}  # no window at the first look
    second = gate.look(before, _rows(rng, worse, "step-2"), step=2)
    window = [t for t in second.tests if t.kind == "window"]
    assert window and all(t.steps == (1, 2) for t in window)
    record = Look.from_dict(second.to_dict())
    assert record.regressed == second.regressed and record.tests == second.tests


def test_the_window_pools_the_last_checkpoints_against_step_0() -> None:
    rng = random.Random(2)
    rates = _rates(rng, 12)
    before = _rows(rng, rates, "step-0")
    gate = SequentialGate(planned=10, window=3, report=False)
    afters = [_rows(rng, rates, f"step-{j}") for j in range(1, 5)]
    for j, after in enumerate(afters, 1):
        look = gate.look(before, after, step=j)
    test = next(t for t in look.tests if t.kind == "window" and t.group == "b")
    assert test.steps == (2, 3, 4)
    units = sorted({(r["category"], r["scenario_id"]) for r in before if r["category"] == "b"})

    def counts(rows: list[dict]) -> list[int]:
        return [sum(r["reward"] for r in rows if (r["category"], r["scenario_id"]) == u) for u in units]

    bags = np.array([counts(before), *(counts(a) for a in afters[1:])]).T
    assert test.p == pytest.approx(bag_test(bags).p)
    assert test.delta == pytest.approx(np.mean(bags[:, 1:].mean(axis=1) - bags[:, 0]) / 8)


def test_sides_with_more_replies_are_compared_on_the_replies_they_share() -> None:
    rng = random.Random(3)
    rates = _rates(rng, 10)
    before = _rows(rng, rates, "step-0", k=8)
    after = _rows(rng, rates, "step-1", k=4)
    trimmed = [r for r in before if r["rollout_index"] < 4]
    one = SequentialGate(planned=2, report=False).look(before, after, step=1)
    two = SequentialGate(planned=2, report=False).look(trimmed, after, step=1)
    assert [(t.group, t.p) for t in one.tests] == [(t.group, t.p) for t in two.tests]


def test_advisory_comparisons_cannot_stop_the_run(tmp_path) -> None:
    policy = tmp_path / "release.yaml"
    policy.write_text("rules:\n  a: advisory\n", encoding="utf-8")
    rng = random.Random(4)
    rates = _rates(rng, 10)
    gate = SequentialGate(planned=4, report=False, options={"release_policy": str(policy)})
    look = gate.look(_rows(rng, rates, "s0"), _rows(rng, rates, "s1"), step=1)
    assert {t.group for t in look.tests} == {"b", "c"}  # overall is advisory under a policy, and so is a


def test_the_figures_name_each_group_and_metric() -> None:
    rng = random.Random(5)
    rates = _rates(rng, 8)
    gate = SequentialGate(planned=3, guards=("tidy",), options={"show_flips": 0})
    look = gate.look(_rows(rng, rates, "s0"), _rows(rng, rates, "s1"), step=10)
    figures = look.figures()
    for group in ("overall", *CATEGORIES):
        for metric in ("pass@1", "tidy"):
            key = f"rlgate/{group}/{metric}"
            assert {f"{key}/{f}" for f in ("delta", "low", "high", "verdict", "p", "stop")} <= set(figures)
            assert figures[f"{key}/low"] <= figures[f"{key}/delta"] <= figures[f"{key}/high"]
    assert all(isinstance(v, float) for v in figures.values())


def test_reach_says_which_categories_cannot_stop_the_run() -> None:
    planned = {r.group: r for r in SequentialGate(planned=10).reach({"big": 38, "six": 6, "three": 3})}
    assert planned["big"].first == 1 and "every look" in planned["big"].message
    assert planned["six"].first == 3
    assert planned["six"].message.startswith("six: 6 scenarios — this run cannot stop on six before look 3")
    assert planned["three"].first is None and "can never stop on three" in planned["three"].message
    assert "add scenarios (4 can" in planned["three"].message
    # a window of 1: a lone checkpoint's sign flips, 2^-6 = 1.6 %, is never enough
    assert SequentialGate(planned=10, window=1).reach({"six": 6})[0].first is None
    open_ended = SequentialGate().reach({"six": 6})[0]
    assert open_ended.first == 2 and open_ended.last is not None and "after look" in open_ended.message


def _null_stops(runs: int, planned: int | None, looks: int) -> int:
    rng = np.random.default_rng(planned or 0)
    units = [(c, f"{c}{i}") for c, n in zip(CATEGORIES, (6, 12, 20)) for i in range(n)]

    def side(p: np.ndarray) -> Units:
        return Units.from_sums({u: (float(v),) for u, v in zip(units, rng.binomial(8, p))}, dict.fromkeys(units, 8))

    stops = 0
    for _ in range(runs):
        p = rng.beta(2, 2, size=len(units))
        base = side(p)
        gate = SequentialGate(planned=planned, report=False)
        stops += any(gate.look(base, side(p), step=j).regressed for j in range(1, looks + 1))
    return stops


def test_a_null_run_watched_at_ten_checkpoints_rarely_stops() -> None:
    assert _null_stops(80, 10, 10) <= 9  # 5 % of 80 is 4; even at that rate, 10 or more has p ~ 0.01


@pytest.mark.slow
def test_a_null_run_false_stops_at_most_the_family_level_planned_or_open_ended() -> None:
    runs, level = 400, FAMILY_LEVEL
    for planned, looks in ((10, 10), (None, 30)):
        stops = _null_stops(runs, planned, looks)
        assert stops / runs <= level + 2 * math.sqrt(level * (1 - level) / runs), (planned, stops)


def test_test_records_round_trip() -> None:
    test = LookTest("pass@1", "a", "window", (1, 2), 5, -0.1, 0.01, 1e-4, 0.001, False)
    assert LookTest.from_dict(test.to_dict()) == test
