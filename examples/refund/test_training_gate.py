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
"""

from __future__ import annotations

import pytest

from pytest_rlgate import RegressionError

pytestmark = pytest.mark.slow  # minutes of CPU training; CI runs `pytest -m slow` once

#: What every configuration shares (the demo uses the same, so the runs are shared).
#: A 0.4 holdout keeps 6 no-id and 3 off-topic scenarios out of training: enough units
#: for the gate to call a category, where 0.2 would leave 3 and 2.
STEPS = 20
SHARED = {"steps": STEPS, "holdout": 0.4}


def gate(rlgate, before, after):
    """The suite's one rule: no category (and not the tool-call format) may regress."""
    return rlgate.assert_no_regression(before, after, by="category", guards=("well_formed",))


@pytest.mark.rlgate(method="grpo", balance=0.25, **SHARED)
def test_balanced_grpo_keeps_every_category(rlgate, rlgate_before_rows, rlgate_after_rows):
    """GRPO with the refund reward, minority categories repeated to 25 % of the train split.

    Measured on the tiny policy, 20 steps, trainer/sample seeds 17, 18 and 19: the gate passed
    every time (no category regressed; no_id Δ between −0.04 and +0.07 over 6 scenarios).
    The same run without ``balance`` passed at seed 17 but regressed no_id at seed 18
    (0.92 -> 0.75, interval [-0.53, -0.00]): too seed-fragile to pin either way here.
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
