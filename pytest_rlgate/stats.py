"""The statistics behind the gate, for use on their own: paired intervals, the family test that
holds a gate's comparisons together, the recipe interval across training seeds, and planning a
holdout's size.

A facade (like :mod:`pytest_rlgate`'s top level): each name lives in the module of ``gate/``
that owns it, and nothing in the package imports from here. Importing it loads numpy.
"""

from __future__ import annotations

from .gate.family import FamilyMember, FamilyTest, family_test
from .gate.plan import CategoryPlan, Plan, plan
from .gate.recipe_stats import RecipeInterval, RecipeResult, SeedComparison, compare_recipe, recipe_interval
from .gate.stats import ConfidenceInterval, PairedBootstrapResult, holm, minimum_detectable_effect, paired_bootstrap

__all__ = ["CategoryPlan", "ConfidenceInterval", "FamilyMember", "FamilyTest", "PairedBootstrapResult", "Plan",
           "RecipeInterval", "RecipeResult", "SeedComparison", "compare_recipe", "family_test", "holm",
           "minimum_detectable_effect", "paired_bootstrap", "plan", "recipe_interval"]
