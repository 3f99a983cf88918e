"""Checkpoints tested again and again against step 0: the false-stop rate, by simulation."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pytest_rlgate.errors import UsageError
from pytest_rlgate.gate.looks import SequentialGate, look_alpha, sign_flip_p

CATEGORIES = ("a", "b", "c")


def _rows(rng: random.Random, rates: dict, run: str, k: int = 4) -> list[dict]:
    rows = []
    for (category, scenario), rate in rates.items():
        for j in range(k):
            passed = rng.random() < rate
            rows.append({"prompt": f"{category}{scenario}", "scenario_id": f"{category}{scenario}",
                         "category": category, "rollout_index": j, "reply": "r", "score": float(passed),
                         "reward": int(passed), "markers": {"tidy": float(rng.random() < 0.8)}, "eval_run": run})
    return rows


def _rates(rng: random.Random, per_category: int) -> dict:
    return {(c, s): rng.uniform(0.1, 0.9) for c in CATEGORIES for s in range(per_category)}


def test_the_spent_levels_never_sum_past_alpha() -> None:
    assert sum(look_alpha(i, 0.025, planned=10) for i in range(1, 11)) == pytest.approx(0.025)
    assert sum(look_alpha(i, 0.025) for i in range(1, 100_001)) < 0.025
    assert look_alpha(1) > look_alpha(2) > look_alpha(10)
    with pytest.raises(UsageError, match="spent"):
        look_alpha(11, planned=10)
    with pytest.raises(UsageError, match="alpha"):
        SequentialGate(alpha=0.7)


@pytest.mark.parametrize("n", [5, 9, 14])
def test_sign_flip_p_matches_scipys_permutation_test(n: int) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    deltas = np.random.default_rng(n).normal(-0.3, 1.0, size=n)
    reference = scipy_stats.permutation_test((deltas,), np.mean, permutation_type="samples",
                                             alternative="less", n_resamples=math.inf).pvalue
    assert sign_flip_p(deltas) == pytest.approx(reference)
    big = np.random.default_rng(1).normal(-0.3, 1.0, size=40)  # Monte Carlo beyond exact enumeration
    reference = scipy_stats.permutation_test((big,), np.mean, permutation_type="samples", alternative="less",
                                             n_resamples=200_000, rng=0).pvalue
    assert sign_flip_p(big) == pytest.approx(reference, abs=0.005)


def test_a_real_regression_stops_the_run() -> None:
    rng = random.Random(1)
    rates = _rates(rng, 30)
    before = _rows(rng, rates, "step-0")
    worse = {unit: max(0.0, rate - 0.3) if unit[0] == "b" else rate for unit, rate in rates.items()}
    gate = SequentialGate(planned=10, guards=("tidy",), report=False)
    look = gate.look(before, _rows(rng, worse, "step-1"), step=1)
    assert look.regressed == ["pass@1/b"] or look.regressed == ["pass@1/overall", "pass@1/b"]
    assert look.alpha == pytest.approx(0.0025)


def _false_stops(runs: int, *, spend: bool) -> int:
    stops = 0
    for run in range(runs):
        rng = random.Random(run)
        rates = _rates(rng, 12)
        before = _rows(rng, rates, "step-0")
        gate = SequentialGate(planned=10, guards=("tidy",), report=False)
        for look in range(1, 11):
            after = _rows(rng, rates, f"step-{look}")  # nothing changed: a null run
            if not spend:
                gate = SequentialGate(planned=1, guards=("tidy",), report=False)  # every look at the full level
            if gate.look(before, after, step=look).regressed:
                stops += 1
                break
    return stops


@pytest.mark.slow
def test_a_null_run_watched_at_ten_checkpoints_false_stops_at_most_2_5_percent() -> None:
    runs = 300
    spent = _false_stops(runs, spend=True)
    unspent = _false_stops(runs, spend=False)
    assert spent / runs <= 0.025, f"{spent} of {runs} null runs stopped"
    assert unspent > 2 * max(spent, 1)  # looking ten times at the full level would stop far more
