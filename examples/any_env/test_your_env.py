"""Your own tests, on any environment: the fixtures follow ``--rlgate-env`` (or ini ``rlgate_env``).

    pytest examples/any_env                                                       # refund, the default
    pytest examples/any_env --rlgate-env "reasoning_gym[basic_arithmetic,leg_counting]"
    pytest examples/any_env --rlgate-env examples/quickmath/quickmath.py:QuickMath \\
        --rlgate-prompts-file examples/quickmath/prompts.jsonl

Nothing here trains: the split the fixtures hand every training test is checked the way a gate
needs it, so a new environment's prompts are known to be gateable before anything is trained.
"""

from __future__ import annotations


def test_every_category_is_held_out_and_no_scenario_is_on_both_sides(rlgate_env, rlgate_split):
    held = {item["category"] for item in rlgate_split.holdout}
    assert held == set(rlgate_env.categories)
    trained = {item["scenario_id"] for item in rlgate_split.train}
    assert not trained & {item["scenario_id"] for item in rlgate_split.holdout}


def test_every_holdout_prompt_is_graded_by_the_environment(rlgate_env, rlgate_split):
    for item in rlgate_split.holdout:
        assert 0.0 <= rlgate_env.score("", item["case"]) <= 1.0
