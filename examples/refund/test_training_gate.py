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
    every time (no category regressed; no_id Δ between −0.04 and +0.07 over 6 scenarios).
    The same run without ``balance`` passed at seed 17 but regressed no_id at seed 18
    (0.92 -> 0.75, interval [-0.53, -0.00]): one adapter cannot pin it, the recipe test below does.
    """
    gate(rlgate, rlgate_before_rows, rlgate_after_rows)


@pytest.mark.xfail(
    strict=True, raises=RegressionError,
    reason="measured on the tiny policy (20 steps): no_id pass@1 regressed at every seed tried - 0.89 -> 0.08 "
           "[-0.97, -0.64] (seed 17), 0.92 -> 0.00 [-1.00, -0.75] (18), 0.92 -> 0.25 [-0.96, -0.32] (19) - "
           "because the policy now invents an id for a lookup; off_topic regressed too",
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
def test_unbalanced_grpo_recipe_moves_with_id_and_leaves_no_id_undecided(rlgate, rlgate_adapter, rlgate_before_rows,
                                                                          rlgate_after_rows):
    """Honest GRPO on the imbalanced split, as a recipe over trainer seeds 17, 18 and 19.

    Measured on the tiny policy (20 steps, 10 no-id scenarios x 4 replies x 3 seeds): no_id
    Δ −0.06 [−0.61, +0.49], inconclusive, minimum detectable effect 0.61. Seed 18 lost the most
    (−0.15), seeds 17 and 19 little (+0.03, −0.05); none regressed on its own at the level the
    recipe's family holds each comparison to (its 8 comparisons at a 5 % run-level false fail,
    on 2 degrees of freedom for the seeds). So the recipe gate passes, and its MDE says how
    large a no-id drop 3 seeds of 10 scenarios can miss. with_id moved (recipe Δ +0.25
    [+0.01, +0.49]) and moved at every seed.
    """
    if next(iter(rlgate_adapter.values())).handed_in:
        pytest.skip("--rlgate-adapter hands in one adapter; a recipe needs one trained per seed")
    result = gate(rlgate, rlgate_before_rows, rlgate_after_rows)
    no_id = result.comparison("pass@1", "no_id")
    assert no_id.verdict == "inconclusive" and no_id.mde > 0.25
    assert _seed_deltas(no_id) == {17: 0.025, 18: -0.15, 19: -0.05}
    assert no_id.recipe.seeds_line == "regressed in 0 of 3 seeds"
    with_id = result.comparison("pass@1", "with_id")
    assert with_id.verdict == "moved" and all(seed.verdict == "moved" for seed in with_id.seeds)


@pytest.mark.rlgate(method="grpo", balance=0.25, **RECIPE)
def test_balanced_grpo_recipe_holds_no_id(rlgate, rlgate_adapter, rlgate_before_rows, rlgate_after_rows):
    """GRPO balanced to 25 % minority categories, as a recipe over trainer seeds 17, 18 and 19.

    Measured on the tiny policy: no_id Δ +0.03 [−0.13, +0.18] (MDE 0.17), no seed lost any
    (0.00, +0.03, +0.05): balancing removes the no-id risk the unbalanced recipe carries, whose
    interval reaches −0.61 on the same scenarios. The interval still reaches past the ±0.10
    margin, so the verdict is inconclusive, not flat: 3 seeds give the seed piece 2 degrees of
    freedom at the family's level. It buys little with_id (Δ +0.03 [−0.26, +0.32],
    inconclusive), and seed 18 alone regressed the well_formed guard, which the recipe reads
    as inconclusive (1 of 3 seeds), so the gate passes.
    """
    if next(iter(rlgate_adapter.values())).handed_in:
        pytest.skip("--rlgate-adapter hands in one adapter; a recipe needs one trained per seed")
    result = gate(rlgate, rlgate_before_rows, rlgate_after_rows)
    no_id = result.comparison("pass@1", "no_id")
    assert no_id.verdict == "inconclusive" and no_id.recipe.regressed_seeds == 0
    assert no_id.low > -0.15 and no_id.delta > 0 and no_id.mde < 0.2
    assert _seed_deltas(no_id) == {17: 0.0, 18: 0.025, 19: 0.05}
    assert result.comparison("marker:well_formed", "overall").recipe.seeds_line == "regressed in 1 of 3 seeds"
