"""Choosing the checkpoint to ship: the best that passes, the ones as good, and a confirmation that is
calibrated where the pick itself is not (simulated late-collapse runs)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_rlgate.errors import UsageError
from pytest_rlgate.watch.looks import SequentialGate
from pytest_rlgate.watch.select import Selection, confirm_pick, parse_criterion, select_checkpoint

SIZES = {"a": 8, "b": 12, "c": 20}
PROMPTS, K = 2, 4
OPTIONS = {"show_flips": 0}


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


UNITS = [(c, f"{c}{i}") for c, n in SIZES.items() for i in range(n)]
CATEGORY = np.array([u[0] for u in UNITS])


def _rows(rng: np.random.Generator, rates: np.ndarray, run: str) -> list[dict]:
    rows = []
    for (category, scenario), rate in zip(UNITS, rates):
        for p in range(PROMPTS):
            for j in range(K):
                ok = int(rng.random() < rate)
                rows.append({"prompt": f"{scenario}/{p}", "scenario_id": scenario, "category": category,
                             "rollout_index": j, "reply": "r", "score": float(ok), "reward": ok, "markers": {},
                             "eval_run": run})
    return rows


#: a run that improves for six checkpoints, then collapses in category c
SHIFTS = [0.3, 0.6, 0.9, 1.2, 1.2, 1.2, -2.5, -2.5]


def _rates(p: np.ndarray, look: int) -> np.ndarray:
    shift = SHIFTS[look - 1]
    if shift < 0:
        return np.where(CATEGORY == "c", _expit(_logit(p) + shift), _expit(_logit(p) + 1.2))
    return _expit(_logit(p) + shift)


def _watched(rng: np.random.Generator) -> tuple[np.ndarray, list[dict], SequentialGate, dict[int, list[dict]]]:
    p = rng.beta(2, 2, size=len(UNITS))
    before = _rows(rng, p, "step-0")
    gate = SequentialGate(planned=len(SHIFTS), options=OPTIONS)
    rows: dict[int, list[dict]] = {}
    for look in range(1, len(SHIFTS) + 1):
        rows[look * 10] = _rows(rng, _rates(p, look), f"step-{look * 10}")
        gate.look(before, rows[look * 10], step=look * 10)
    return p, before, gate, rows


def test_a_criterion_is_a_gated_metric_never_the_reward() -> None:
    assert parse_criterion("pass@1/overall") == ("pass@1", "overall")
    assert parse_criterion("well_formed/no_id") == ("marker:well_formed", "no_id")
    for bad in ("pass@1", "reward/overall", "/x"):
        with pytest.raises(UsageError, match="select="):
            parse_criterion(bad)


def test_the_pick_passes_the_collapse_does_not_and_the_record_round_trips() -> None:
    rng = np.random.default_rng(0)
    p, before, gate, rows = _watched(rng)
    selection = select_checkpoint(gate.looks, rows)
    collapsed = [c for c in selection.candidates if c.step >= 70]
    assert collapsed and not any(c.passed for c in collapsed)
    assert all(c.verdicts["pass@1/c"] == "regressed" for c in collapsed)
    assert selection.best is not None and selection.best <= 60
    assert selection.best in selection.tied and 10 not in selection.tied  # step 10 is told apart
    best = next(c for c in selection.candidates if c.step == selection.best)
    assert best.score == max(c.score for c in selection.candidates if c.passed)
    with pytest.raises(UsageError, match="no such gated comparison"):
        select_checkpoint(gate.looks, rows, criterion="pass@1/nowhere")
    pick = _rows(rng, _rates(p, selection.best // 10), "confirm")
    confirmed = confirm_pick(selection, _rows(rng, p, "confirm-base"), pick, seed=99, **OPTIONS)
    assert confirmed.confirmation is not None and confirmed.confirmation.step == selection.best
    assert Selection.from_dict(confirmed.to_dict()) == confirmed
    text = confirmed.summary()
    assert f"best by pass@1/overall: step {selection.best}" in text and "confirmation on a fresh sample" in text


def test_nothing_passes_so_nothing_is_shipped() -> None:
    rng = np.random.default_rng(1)
    p = rng.beta(2, 2, size=len(UNITS))
    before = _rows(rng, p, "step-0")
    gate = SequentialGate(planned=2, options=OPTIONS)
    rows = {s: _rows(rng, np.zeros_like(p), f"step-{s}") for s in (5, 10)}
    for s, r in rows.items():
        gate.look(before, r, step=s)
    selection = select_checkpoint(gate.looks, rows)
    assert selection.best is None and selection.shipped is None and "ship step 0" in selection.summary()
    with pytest.raises(UsageError, match="nothing to confirm"):
        confirm_pick(selection, before, before, seed=1)


@pytest.mark.slow
def test_late_collapse_runs_pick_a_sound_checkpoint_and_the_confirmation_is_calibrated() -> None:
    """150 simulated runs: the pick is never a collapsed checkpoint; its own look overstates it (the
    winner's curse) while the confirmation on fresh rows is unbiased and its interval covers."""
    rng = np.random.default_rng(2026)
    picked, sound, curse, error, covered, passed = 0, 0, [], [], 0, 0
    runs = 150
    for _ in range(runs):
        p, _before, gate, rows = _watched(rng)
        selection = select_checkpoint(gate.looks, rows)
        if selection.best is None:
            continue
        picked += 1
        look = selection.best // 10
        truth = _rates(p, look) - p
        sound += all(truth[CATEGORY == c].mean() >= 0 for c in SIZES)
        true_delta = float(truth.mean())
        curse.append(next(c.score for c in selection.candidates if c.step == selection.best) - true_delta)
        confirmed = confirm_pick(selection, _rows(rng, p, "confirm-base"), _rows(rng, _rates(p, look), "confirm"),
                                 seed=1, **OPTIONS)
        assert confirmed.confirmation is not None
        overall = next(c for c in confirmed.confirmation.gate.comparisons
                       if c.metric == "pass@1" and c.group == "overall")
        error.append(overall.delta - true_delta)
        covered += overall.low <= true_delta <= overall.high
        passed += confirmed.confirmation.passed
    assert picked >= 0.95 * runs and sound == picked
    se = np.std(curse) / math.sqrt(len(curse))
    assert np.mean(curse) > 3 * se  # the pick's own look overstates it
    assert abs(np.mean(error)) < 3 * np.std(error) / math.sqrt(len(error))  # the confirmation does not
    assert covered >= 0.9 * picked and passed >= 0.9 * picked
