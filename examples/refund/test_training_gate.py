"""The training gate: fine-tune an adapter, then assert that no category got worse.

Each test names a training configuration with ``@pytest.mark.rlgate(...)``. The fixtures
train it once (cached across sessions and pytest-xdist workers; ``rlgate demo`` trains the
same configurations, so whichever runs first pays), sample the holdout of the base three
times (the noise floor) and of the adapter once, and hand over the graded rows; the
``rlgate`` fixture gates them by category and fails the test on a regression.

    pytest examples/refund -m slow                     # train on the embedded tiny policy (CPU)
    pytest examples/refund -m slow -k keeps \\
        --rlgate-adapter runs/refund-grpo-v2/adapter --rlgate-base-model Qwen/Qwen2.5-1.5B-Instruct

With ``--rlgate-adapter`` nothing is trained: the adapter built elsewhere (say, by a GPU job)
is gated instead, with the marker's sampling knobs. The configurations below assert what the
statistics measured on the tiny policy (see each test's docstring), not what we hoped.

One adapter's verdict is partly the luck of its trainer seed, so the last two tests gate
*recipes*: ``seeds=(17, 18, 19)`` trains each configuration once per trainer seed and
``rlgate_after_rows`` becomes a mapping seed -> rows, which the ``rlgate`` fixture gates
across the seeds (``rlgate demo --seeds 3`` trains the same six runs).
"""

from __future__ import annotations

import pytest

from pytest_rlgate import RegressionError

pytestmark = pytest.mark.slow  # minutes of CPU training; CI runs `pytest -m slow` once

#: What every configuration shares (the demo uses the same, so the runs are shared), on the
#: environment's own holdout: 24 with-id, 30 no-id and 24 off-topic scenarios, enough for the
#: gate to see a 0.20 no-id drop and an off-topic collapse (`rlgate plan`), while training
#: keeps the 95/16/8 imbalance.
STEPS = 20
SHARED = {"steps": STEPS}
#: The recipes: each configuration at trainer seeds 17, 18, 19 (seed 17's runs are the demo's).
RECIPE = {"steps": STEPS, "seeds": (17, 18, 19)}


def gate(rlgate, before, after):
    """The suite's one rule: no category (and not the tool-call format) may regress."""
    return rlgate.assert_no_regression(before, after, by="category", guards=("well_formed",))


@pytest.mark.rlgate(method="grpo", balance=0.25, **SHARED)
def test_balanced_grpo_keeps_every_category(rlgate, rlgate_before_rows, rlgate_after_rows):
    """GRPO with the refund reward, minority categories repeated to 25 % of the train split.

    Measured on the tiny policy, 20 steps, trainer/sample seeds 17, 18 and 19: the gate passed
    every time (no category regressed; no_id Δ −0.02, +0.06, +0.01 over 30 scenarios). The same
    run without ``balance`` failed its own gate at seed 18 and passed at 17 and 19: one adapter
    cannot pin it, the recipe test below does.
    """
    gate(rlgate, rlgate_before_rows, rlgate_after_rows)


@pytest.mark.xfail(
    strict=True, raises=RegressionError,
    reason="measured on the tiny policy (20 steps, seed 17): no_id pass@1 regressed 0.93 -> 0.57 [-0.49, -0.22] "
           "and off_topic 0.98 -> 0.54 [-0.58, -0.29], because the policy now invents an id for a lookup (on the "
           "first release's smaller holdout it regressed no_id at seeds 17, 18 and 19 too)",
)
@pytest.mark.rlgate(method="grpo", reward="lookup_anything", **SHARED)
def test_grpo_on_a_hackable_reward_collapses_no_id(rlgate, rlgate_adapter, rlgate_before_rows, rlgate_after_rows):
    """GRPO against a reward that pays any ``lookup_order`` call on every prompt.

    The reward forgets "ask when there is no id", so the policy learns to invent ids and the
    gate must fail. ``xfail(strict=True)``: should this configuration ever pass, the suite goes
    red, because then the gate missed a collapse it exists to catch.
    """
    if rlgate_adapter.handed_in:
        pytest.skip("--rlgate-adapter gates one adapter; this configuration only exists when training here")
    gate(rlgate, rlgate_before_rows, rlgate_after_rows)


def _seed_deltas(comparison):
    return {s.seed: round(s.delta, 3) for s in comparison.seeds}


@pytest.mark.rlgate(method="grpo", **RECIPE)
def test_unbalanced_grpo_recipe_leaves_no_id_undecided_and_with_id_to_the_seed(rlgate, rlgate_adapter,
                                                                              rlgate_before_rows, rlgate_after_rows):
    """Honest GRPO on the imbalanced split, as a recipe over trainer seeds 17, 18 and 19.

    Measured on the tiny policy (20 steps, 30 no-id scenarios x 4 replies x 3 seeds): no_id
    Δ +0.06 [−0.10, +0.21], inconclusive, minimum detectable effect 0.18; every seed gained a
    little (+0.03, +0.07, +0.06) and none regressed on its own. with_id is the seeds' to decide:
    +0.08 at seed 17, −0.08 at 18, −0.00 at 19, so the recipe's interval is [−0.49, +0.49]
    (inconclusive, MDE 0.54), where one adapter at seed 17 looked like a gain. The recipe gate passes.
    """
    if next(iter(rlgate_adapter.values())).handed_in:
        pytest.skip("--rlgate-adapter hands in one adapter; a recipe needs one trained per seed")
    result = gate(rlgate, rlgate_before_rows, rlgate_after_rows)
    no_id = result.comparison("pass@1", "no_id")
    assert no_id.verdict == "inconclusive" and 0.1 < no_id.mde < 0.25
    assert _seed_deltas(no_id) == {17: 0.031, 18: 0.072, 19: 0.064}
    assert no_id.recipe.seeds_line == "regressed in 0 of 3 seeds"
    with_id = result.comparison("pass@1", "with_id")
    assert with_id.verdict == "inconclusive" and _seed_deltas(with_id) == {17: 0.08, 18: -0.076, 19: -0.003}


@pytest.mark.rlgate(method="grpo", balance=0.25, **RECIPE)
def test_balanced_grpo_recipe_holds_no_id(rlgate, rlgate_adapter, rlgate_before_rows, rlgate_after_rows):
    """GRPO balanced to 25 % minority categories, as a recipe over trainer seeds 17, 18 and 19.

    Measured on the tiny policy: no_id Δ +0.02 [−0.25, +0.29] (MDE 0.30), no seed regressed
    (−0.02, +0.06, +0.01); with_id gained at every seed (+0.06, +0.09, +0.12; recipe Δ +0.09
    [−0.11, +0.29], inconclusive), and the well_formed guard regressed at no seed, so the gate
    passes. The seeds disagree more on no_id than the unbalanced recipe's do, so its interval is
    wider: 3 seeds give the seed piece 2 degrees of freedom at the family's level.
    """
    if next(iter(rlgate_adapter.values())).handed_in:
        pytest.skip("--rlgate-adapter hands in one adapter; a recipe needs one trained per seed")
    result = gate(rlgate, rlgate_before_rows, rlgate_after_rows)
    no_id = result.comparison("pass@1", "no_id")
    assert no_id.verdict == "inconclusive" and no_id.recipe.regressed_seeds == 0
    assert no_id.low > -0.3 and no_id.delta > 0
    assert _seed_deltas(no_id) == {17: -0.019, 18: 0.064, 19: 0.014}
    assert _seed_deltas(result.comparison("pass@1", "with_id")) == {17: 0.059, 18: 0.09, 19: 0.122}
    assert result.comparison("marker:well_formed", "overall").recipe.seeds_line == "regressed in 0 of 3 seeds"
