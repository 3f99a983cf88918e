"""pytest_rlgate.gate.plan and ``rlgate plan``: the planned size checked by simulating the gate itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_gate import table_rows

from pytest_rlgate import UsageError, compare, plan, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.gate.plan import after_rates, needed_units
from pytest_rlgate.gate.stats import paired_bootstrap

#: 15 no-id scenarios as a baseline shows them: most pass 4/4, a few fail some rollouts
NO_ID_FAILS = [0, 0, 1, 0, 2, 0, 0, 4, 1, 0, 0, 3, 0, 0, 1]
WITH_ID_FAILS = [0, 1, 0, 0, 0, 3, 1, 0, 0, 0] * 4


def _rows() -> list[dict]:
    return table_rows("no_id", NO_ID_FAILS) + table_rows("with_id", WITH_ID_FAILS)


def _simulated_power(fails: list[int], n: int, drop: float, reps: int, seed: int, k: int = 4) -> float:
    """The gate's own test (expanded-percentile bootstrap, upper bound < 0) on holdouts of n new scenarios.

    New scenarios are drawn from the observed ones, sampled k times before and after a drop of
    *drop* spread as one logit shift: the population the plan describes, sampled, not solved.
    """
    rng = np.random.default_rng(seed)
    passes = k - np.asarray(fails, dtype=float)
    p = (passes + 0.5) / (k + 1.0)
    q = after_rates(p, drop)
    assert q is not None and q.mean() - p.mean() == pytest.approx(-drop, abs=1e-9)
    regressed = 0
    for _ in range(reps):
        units = rng.integers(0, len(p), n)
        before = rng.binomial(k, p[units]) / k
        after = rng.binomial(k, q[units]) / k
        res = paired_bootstrap(before, after, n_resamples=2000, rng=rng)
        regressed += res.confidence_interval.high < 0
    return regressed / reps


def test_planned_size_has_the_power_in_a_simulation_of_the_gate() -> None:
    result = plan(_rows(), drop=0.10, power=0.80)
    no_id = result["no_id"]
    assert no_id.n_units == 15 and no_id.rollouts == 4 and no_id.k == 4
    assert no_id.needed is not None and 30 < no_id.needed < 200 and not no_id.enough
    # 500 holdouts: +-3.5 points of Monte-Carlo error on an 80 % rate
    at_plan = _simulated_power(NO_ID_FAILS, no_id.needed, 0.10, reps=500, seed=1)
    assert at_plan == pytest.approx(0.80, abs=0.06)
    half = _simulated_power(NO_ID_FAILS, no_id.needed // 2, 0.10, reps=300, seed=2)
    assert half < 0.65  # the plan is not generous: half the scenarios lose the power


def test_todays_detectable_drop_has_the_power_in_a_simulation() -> None:
    result = plan(_rows())
    no_id = result["no_id"]
    assert no_id.mde is not None and 0.15 < no_id.mde < 0.5
    assert no_id.power_now is not None and no_id.power_now < 0.5
    seen = _simulated_power(NO_ID_FAILS, no_id.n_units, no_id.mde, reps=500, seed=3)
    assert seen == pytest.approx(0.80, abs=0.07)


def test_needed_units_solves_the_power_equation() -> None:
    from scipy import stats as sps

    n = needed_units(0.3, 0.1)
    def reach(m: int) -> float:
        return (sps.t.ppf(0.975, m - 1) + sps.t.ppf(0.8, m - 1)) * 0.3 / m**0.5
    assert reach(n) <= 0.1 < reach(n - 1)
    assert needed_units(0.0, 0.1) == 3
    # more confidence or power asks for more scenarios
    assert needed_units(0.3, 0.1, power=0.9) > n and needed_units(0.3, 0.1, confidence_level=0.99) > n


def test_a_category_that_cannot_drop_that_far_says_so() -> None:
    rows = table_rows("hard", [4, 4, 3, 4, 4, 4])  # pass@1 0.04
    result = plan(rows, drop=0.10)
    assert result["hard"].needed is None
    assert "pass@1 is too low to drop by 0.10" in result.report()


def test_bad_arguments_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="drop must be in"):
        plan(_rows(), drop=0)
    with pytest.raises(UsageError, match="category 'nope' is not in"):
        plan(_rows(), categories=["nope"])


def test_cli_prints_the_plan_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "before.jsonl"
    write_rows(path, _rows())
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), "--drop", "0.2", "--power", "0.9", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "scenarios needed to see a 0.20 drop in pass@1 with 90% power" in text
    assert "no_id" in text and "with_id" in text
    data = json.loads(out.read_text())
    assert data["drop"] == 0.2 and {c["category"] for c in data["categories"]} == {"no_id", "with_id"}
    assert main(["plan", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["plan", str(path), "--category", "nope"]) == 2


def test_an_inconclusive_verdict_points_at_rlgate_plan(tmp_path: Path) -> None:
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    write_rows(before, table_rows("no_id", [0, 0, 0, 0, 0, 0]))
    write_rows(after, table_rows("no_id", [4, 0, 0, 0, 0, 0]))  # one scenario collapses: 6 cannot tell
    result = compare(before, after, guards=())
    assert any(c.verdict == "inconclusive" for c in result.comparisons)
    hint = f"`rlgate plan {before} --drop 0.10` says how many each category needs"
    assert hint in result.report() and "inconclusive in overall, no_id" in result.report()
    flat = compare(before, before, guards=())
    assert "rlgate plan" not in flat.report()
