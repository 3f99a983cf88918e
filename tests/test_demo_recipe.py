"""``rlgate demo --seeds N``: the recipe configurations, the table and story rendered from recipe
gates built on graded rows (nothing trained), and the command's usage errors."""

from __future__ import annotations

import pytest
from test_recipe_gate import BEFORE, side

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, stratified_split
from pytest_rlgate.demo.recipe import (
    RecipeSummary,
    recipe_configurations,
    recipe_seeds,
    render_recipe_story,
    render_recipe_table,
)
from pytest_rlgate.demo.story import configurations
from pytest_rlgate.gate import compare


def test_the_recipes_are_the_demos_honest_grpo_runs_so_the_first_seed_is_shared():
    single = {c.name: c for c in configurations()}
    for recipe in recipe_configurations():
        assert single[recipe.name].knobs == recipe.knobs
    assert recipe_seeds(3) == (17, 18, 19)


def test_the_default_holdout_holds_out_the_rare_categories_more_than_the_common_one():
    def units(size: str, fraction: float | None) -> dict[str, int]:
        holdout = stratified_split(build_prompts(0, size), fraction=fraction).holdout
        return {c: len({i["scenario_id"] for i in holdout if i["category"] == c}) for c in ("with_id", "no_id",
                                                                                                "off_topic")}

    assert units("default", None) == {"with_id": 24, "no_id": 30, "off_topic": 24}
    assert units("default", 0.2) == {"with_id": 24, "no_id": 9, "off_topic": 6}
    assert units("large", None)["no_id"] == 13  # 200 paraphrases, but of 20 scenarios: the gate's unit


@pytest.fixture
def summaries():
    lucky = compare(BEFORE, {17: side(10, 4), 18: side(12, 3), 19: side(14, 16)})
    steady = compare(BEFORE, {17: side(12, 2), 18: side(11, 3), 19: side(13, 2)})
    configs = recipe_configurations()
    return [RecipeSummary(configs[0], lucky.to_dict()), RecipeSummary(configs[1], steady.to_dict())]


def test_the_table_puts_the_recipe_verdicts_side_by_side_with_dots(summaries):
    table = render_recipe_table(summaries)
    head = table.splitlines()[1]
    assert head.index("with_id") < head.index("no_id") and "recipe gate" in head
    assert "(8 scenarios × 4, 3 seeds)" in table
    assert "regressed in 1 of 3 seeds" in table and "regressed in 0 of 3 seeds" in table
    assert "inconclusive, MDE" in table and "●" in table and "PASSED" in table
    assert table.splitlines()[-1].startswith("cells: pass@1 before → after (mean over seeds)")


def test_the_story_reads_the_recipe_verdict_and_what_one_seed_would_have_said(summaries):
    story = render_recipe_story(summaries, ("no_id",))
    first = story[0]
    assert first.startswith("GRPO, 20 steps: no_id is inconclusive as a recipe (Δ −0.18")
    assert "seed by seed 17 −0.06 inconclusive, 18 −0.03 inconclusive, 19 −0.44 REGRESSED" in first
    assert first.endswith("So the recipe gate PASSES it.")
    assert story[1].startswith("Gated one adapter at a time, GRPO, 20 steps would have failed on no_id")
    assert story[2].startswith("GRPO --balance 0.25, 20 steps: no_id")
    assert len(story) == 3  # no seed of the balanced recipe regressed: nothing to say about luck


def test_a_guard_one_seed_regressed_is_named_in_the_story(summaries):
    gate = dict(summaries[1].gate)
    no_id = next(c for c in gate["comparisons"] if c["group"] == "no_id")
    seeds = [{**no_id["seeds"][0], "verdict": "regressed"}, *no_id["seeds"][1:]]
    guard = {**no_id, "metric": "marker:well_formed", "group": "overall", "regressed_seeds": 1, "seeds": seeds,
             "seeds_line": "regressed in 1 of 3 seeds"}
    story = render_recipe_story([RecipeSummary(summaries[1].config, {**gate, "comparisons": [*gate["comparisons"],
                                                                                              guard]})], ("no_id",))
    assert "; the well_formed guard " in story[0] and "regressed in 1 of 3 seeds). So the recipe gate" in story[0]


@pytest.mark.parametrize(("args", "message"), [
    (["--seeds", "1"], "--seeds 1: a recipe needs 2 or more trainer seeds"),
    (["--seeds", "3", "--quick"], "--quick with --seeds"),
])
def test_bad_seed_options_exit_2_with_one_line(args, message, tmp_path, capsys):
    assert main(["demo", "--runs-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
