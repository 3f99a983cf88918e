"""The recipe gate: graded rows of several training seeds against one before side.

``compare(before, after)`` gates one adapter (:func:`pytest_rlgate.gate.adapter.compare_adapter`).
When *after* is several row sources, one per training seed of the same recipe (a list of row
files or row lists, or a mapping seed -> rows), the question becomes "does this *training
change* break a category?", and one adapter cannot answer it: the same recipe at trainer
seeds 17, 18 and 19 moved no-id by +0.07, 0.00 and -0.17. So every seed is paired with the
before side on the same holdout units and, per metric and group,
:func:`~pytest_rlgate.gate.recipe_stats.compare_recipe` gives the recipe effect (the mean over seeds of
the paired delta), its interval over units *and* seeds, the minimum detectable effect, and
each seed's own verdict ("regressed in k of S seeds").

The gate's rules apply to the recipe interval: a recipe that regresses fails, as do the
optional ``max_drop``, ``require_moved`` and ``fail_on_inconclusive``. With one seed the
recipe is ``unresolved`` (one run shows no run-to-run spread of training) and that seed's
own verdict decides, so a regressed adapter still fails. The recipe's comparisons are one
family held by Bonferroni (the recipe interval has no per-scenario statistic for sign
flips): each at ``family_level / m``. No noise floor either: the base runs' spread is
sampling noise, which the seed piece of the recipe interval already holds.

It reads rows with the gate's own side reader (:mod:`.sides`), so both gates pair and
validate alike; :func:`pytest_rlgate.compare` sends several after sides here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..data.rows import RowInput
from ..errors import DataError, UsageError, hide_user_errors
from .afters import SeedSources, is_seed_sources, open_afters, seed_labels
from .baseruns import with_base_runs
from .family import FamilyTest
from .options import METHOD_NAMES, GateOptions
from .recipe_stats import RECIPE_METHOD, RecipeResult, SeedComparison, compare_recipe
from .recipe_text import render_failure, render_report, render_table, settings_line
from .record import from_record, to_record
from .release import Decision
from .result import GateSides, JudgedResult
from .sides import (
    Paired,
    Side,
    groups,
    metric_columns,
    open_side,
    pair_units,
    ratio_k,
    read_sides,
    resample_stream,
    warn_caller,
)
from .verdicts import MIN_UNITS, Evidence, Failure, judge, rule_text

__all__ = ["RecipeComparison", "RecipeGateResult", "compare_seeds", "is_seed_sources", "seed_labels"]

#: a bad row file gated in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


@dataclass(frozen=True)
class RecipeComparison:
    """One (metric, group) recipe comparison: the levels, the recipe verdict with every seed's, and its judgement.

    ``before`` is the before side's level, ``after`` the mean over seeds of each seed's level.
    """

    __record_properties__ = ("n_units", "n_seeds", "delta", "low", "high", "verdict", "reason", "mde",
                             "regressed_seeds", "seeds_line", "seeds")

    metric: str
    group: str
    k: float
    before: float
    after: float
    recipe: RecipeResult
    flags: tuple[str, ...] = ()
    k_before: float | None = None
    k_after: float | None = None
    #: the one-sided level of the recipe interval and of each seed's (each side)
    level: float | None = None
    failure: Failure | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def n_units(self) -> int:
        return self.recipe.n_units

    @property
    def n_seeds(self) -> int:
        return self.recipe.n_seeds

    @property
    def delta(self) -> float:
        return self.recipe.delta

    @property
    def low(self) -> float | None:
        return self.recipe.low

    @property
    def high(self) -> float | None:
        return self.recipe.high

    @property
    def verdict(self) -> str:
        return self.recipe.verdict

    @property
    def reason(self) -> str:
        return self.recipe.reason

    @property
    def mde(self) -> float | None:
        return self.recipe.mde

    @property
    def regressed_seeds(self) -> int:
        return self.recipe.regressed_seeds

    @property
    def seeds_line(self) -> str:
        return self.recipe.seeds_line

    @property
    def seeds(self) -> tuple[SeedComparison, ...]:
        return self.recipe.seeds

    @property
    def size(self) -> str:
        """``"15 units x 4 x 3 seeds"`` (``4/8`` when the sides sampled a different k): what the interval covers."""
        k = self.k if self.k_before is None or self.k_before == self.k_after else f"{self.k_before}/{self.k_after}"
        return f"{self.n_units} units x {k} x {self.n_seeds} seed{'s' if self.n_seeds != 1 else ''}"

    def to_dict(self) -> dict[str, Any]:
        """The record's fields, and the recipe's numbers flat beside them (what reports read)."""
        return dict(to_record(self))


@dataclass(frozen=True)
class RecipeGateResult(JudgedResult):
    """Every recipe comparison, what failed, and the rule that decided it (``kind`` "recipe")."""

    __record_properties__ = ("kind", "passed", "failures", "method", "recipe_method", "confidence_level",
                             "n_resamples", "seed", "margin")

    comparisons: tuple[RecipeComparison, ...]
    rule: str
    seeds: tuple[int | str, ...]
    options: GateOptions
    sides: GateSides
    family: FamilyTest | None = None
    side_failures: tuple[str, ...] = ()
    unit: str = "scenario"
    warnings: tuple[str, ...] = ()

    kind = "recipe"
    recipe_method = RECIPE_METHOD
    _named = "recipe gate"

    @property
    def n_resamples(self) -> int:
        return 0 if self.options.method == "t" else int(self.options.n_resamples)

    def comparison(self, metric: str, group: str) -> RecipeComparison:
        """The comparison of *metric* in *group*, e.g. ``result.comparison("pass@1", "no_id")``."""
        found: RecipeComparison = super().comparison(metric, group)
        return found

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``rlgate gate BEFORE AFTER AFTER... --json`` and of ``recipe.json``'s gate."""
        return dict(to_record(self))

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> RecipeGateResult:
        """The inverse of :meth:`to_dict`."""
        return from_record(cls, record)

    def settings_line(self) -> str:
        return settings_line(self.to_dict())

    def table(self, *, verbose: bool = True) -> str:
        return render_table(self.to_dict(), verbose=verbose)

    def report(self, *, verbose: bool = True) -> str:
        """Header, recipe table, per-seed table, rule and failures: what ``rlgate gate`` prints."""
        return render_report(self.to_dict(), verbose=verbose)

    def message(self) -> str:
        """The :class:`RegressionError` text: what failed, with every seed's verdict, the rule, the remedy."""
        return render_failure(self.to_dict())


# -- the comparison ------------------------------------------------------------------------


def _pair_all(before: Side, afters: Sequence[Side], categories: Sequence[str], shared_units_only: bool) -> str | None:
    """Every seed's units must be the before side's: the gate's pairing, for each seed.

    With *shared_units_only* the units missing from any side are dropped from all of them,
    and the returned note says how many from each.
    """
    if not shared_units_only:
        for after in afters:
            pair_units(before, after, categories, False)  # a one-line DataError naming the missing units
        return None
    sides = (before, *afters)
    common = {c: set.intersection(*(set(side.units[c]) for side in sides)) for c in categories}
    empty = [c for c, units in common.items() if not units]
    if empty:
        raise DataError(f"no unit of category {empty[0]!r} is on every side, so none pairs across the seeds; "
                        "sample every seed on the same holdout")
    for side in sides:
        side.drop_units({c: set(side.units[c]) - common[c] for c in categories})
    dropped = [f"{side.dropped} of {side.label}" for side in sides if side.dropped]
    return f"--shared-units-only: dropped {', '.join(dropped)} unit(s) that another side lacks" if dropped else None


def _pair_seeds(
    before: Side, afters: Sequence[Side], categories: Sequence[str], shared_units_only: bool
) -> tuple[list[str], list[str], str | None]:
    """Several after sides: a category missing from any side fails, as does a declared one on none.

    Then every seed's units are paired with the before side's (:func:`_pair_all`).
    """
    sides = (before, *afters)
    failures: list[str] = []
    present = [side.categories() for side in sides]
    shared = sorted(set.intersection(*present))
    for category in sorted(set.union(*present) - set(shared)):
        lacking = [side.label for side, cats in zip(sides, present) if category not in cats]
        failures.append(f"category {category!r} is missing from {', '.join(lacking)}")
    for category in categories:
        if not any(category in cats for cats in present):
            failures.append(f"declared category {category!r} is missing from every side")
    return failures, shared, _pair_all(before, afters, shared, shared_units_only)


def _recipe_one(
    paired: Sequence[Paired], metric: str, column: int, group: str, labels: Sequence[int | str], opts: GateOptions,
    level: float, *, rng: np.random.Generator | None,
) -> RecipeComparison:
    before = paired[0].means(column)[0]
    after = np.stack([p.means(column)[1] for p in paired])
    result = compare_recipe(before, after, seeds=labels, margin=opts.margin, confidence_level=1.0 - 2.0 * level,
                            n_resamples=opts.n_resamples, method=opts.method, rng=rng)
    flags: list[str] = []
    if np.ptp(after - before) == 0:
        constant = np.ptp(before) == 0 and np.ptp(after) == 0 and after.flat[0] == before[0]
        flags.append("constant" if constant else "no variation")
    k_before = paired[0].k("before")
    k_after = ratio_k(sum(float(p.after[:, 0].sum()) for p in paired),
                      sum(float(p.after[:, 1].sum()) for p in paired))
    k = ratio_k(sum(float(m[:, 0].sum()) for p in paired for m in (p.before, p.after)),
                sum(float(m[:, 1].sum()) for p in paired for m in (p.before, p.after)))
    return RecipeComparison(metric, group, k, float(before.mean()), float(after.mean()), result, tuple(flags),
                            k_before=k_before, k_after=k_after, level=level)


def _evidence(c: RecipeComparison) -> Evidence:
    """The recipe interval when the recipe has one; with one seed, that seed's own (the recipe is unresolved)."""
    r = c.recipe
    if r.verdict == "unresolved":
        only = r.seeds[0]  # its regression decides; anything else leaves the recipe unresolved
        verdict = "regressed" if only.verdict == "regressed" else "unresolved"
        return Evidence(c.metric, c.group, verdict, c.before, c.after, only.delta, only.low, only.high,
                        f"{c.size} (recipe unresolved)", c.flags, scope=f" at the only training seed {only.seed}")
    return Evidence(c.metric, c.group, r.verdict, c.before, c.after, r.delta, r.low, r.high, c.size, c.flags,
                    scope=f" across {r.n_seeds} seeds", detail=r.seeds_line)


def _flagged(c: RecipeComparison, failure: Failure | None) -> RecipeComparison:
    """The comparison with its judgement, flagged where the table would not show why it failed."""
    flag = None if failure is None else failure.flag
    if failure is not None and failure.kind == "regressed" and c.verdict == "unresolved":
        flag = "the only seed regressed"
    return replace(c, failure=failure, flags=(*c.flags, flag) if flag else c.flags)


def _rule(metrics: Sequence[str], n_seeds: int, opts: GateOptions, family: FamilyTest | None) -> str:
    level = "" if family is not None else f"{opts.confidence_level:.0%} "
    if n_seeds > 1:
        test = f"{level}{RECIPE_METHOD} upper bound < 0 on the mean over {n_seeds} seeds of the paired deltas"
    else:
        test = (f"one training seed: the recipe is unresolved and the seed's own {level}"
                f"{METHOD_NAMES[opts.method]} upper bound < 0 decides")
    return rule_text(metrics, opts, family, test=test, subject="the recipe ")


def _recipe_comparisons(
    before: Side, afters: Sequence[Side], metrics: Sequence[str], shared: list[str], labels: Sequence[int | str],
    opts: GateOptions,
) -> tuple[list[RecipeComparison], FamilyTest | None]:
    """Every (metric, group) recipe comparison, each seed paired with the before side, at the family's level.

    The recipe interval has no per-comparison p-value to calibrate a joint law with, so the
    family is held by Bonferroni: each comparison that can fail at ``family_level / m``.
    """
    grouped = groups(shared)
    paired = {group: [Paired.of(before, after, cats) for after in afters] for group, cats in grouped}
    cells = [(metric, column, group) for column, metric in enumerate(metrics, 2) for group, _ in grouped]
    family = None
    level = (1.0 - opts.confidence_level) / 2.0
    if opts.family_level is not None:
        members = sum(1 for _m, _c, group in cells if paired[group][0].n >= MIN_UNITS)
        level = opts.family_level / max(members, 1)
        family = FamilyTest(opts.family_level, level, members, members, "bonferroni", 0)
    comparisons = [_recipe_one(paired[group], metric, column, group, labels, opts, level,
                               rng=resample_stream(opts.bootstrap_seed, at))
                   for at, (metric, column, group) in enumerate(cells, 1)]
    return comparisons, family


def compare_seeds(before_rows: RowInput, after_rows: SeedSources, options: GateOptions | None = None,
                  **overrides: object) -> RecipeGateResult:
    """Gate a recipe: BEFORE rows against the AFTER rows of each training seed, per category.

    *after_rows* is a mapping seed -> row source or a list of row sources (labels from
    :func:`seed_labels`). The options are :func:`pytest_rlgate.gate.adapter.compare_adapter`'s,
    applied to the recipe interval; ``method``, ``n_resamples`` and ``bootstrap_seed`` make
    each seed's own interval. The family (``family_level``) is held by Bonferroni over the
    recipe comparisons. Each row file is opened once. Flips (``show_flips``) are an
    adapter's and not listed here; a ``release_policy`` is refused (it is written for one
    adapter's verdicts).
    """
    opts = GateOptions.build(options, **overrides)
    if opts.base_runs:
        before_rows = with_base_runs(before_rows, opts.base_runs)
    if opts.release_policy is not None:
        raise UsageError("a release policy gates one adapter; gate each seed's rows on its own with --release-policy, "
                         "or drop it for the recipe")
    if opts.metrics:
        raise UsageError("pass^K / pass@K gate one adapter; gate each seed's rows on its own with --gate-metric")
    with ExitStack() as stack:
        before_reader = stack.enter_context(open_side(before_rows, "before"))
        labels, after_readers = open_afters(after_rows, stack)
        after_labels = [reader.label for reader in after_readers]
        sides = read_sides(before_reader, after_readers, opts, _pair_seeds)
    before, afters, notes, shared = sides.before, sides.afters, sides.notes, sides.shared
    if len(labels) == 1:
        notes.append(f"one training seed ({labels[0]}): the recipe is unresolved, and this adapter's own verdicts "
                     "decide; train the recipe at 3 or more seeds to gate it")
    for note in notes:
        warn_caller(note)
    if not shared:
        raise DataError(f"{before.label} and the after sides share no category; nothing to compare")

    metrics = metric_columns((), sides.guards)
    comparisons, family = _recipe_comparisons(before, afters, metrics, shared, labels, opts)
    decision = Decision.default(confidence_level=opts.confidence_level, margin=opts.margin, max_drop=opts.max_drop)
    comparisons = [_flagged(c, judge(_evidence(c), decision, opts)) for c in comparisons]
    return RecipeGateResult(
        comparisons=tuple(comparisons), rule=_rule(metrics, len(labels), opts, family), seeds=tuple(labels),
        options=opts, family=family, side_failures=tuple(sides.failures), warnings=tuple(notes),
        sides=GateSides(before=before.label, after=tuple(after_labels),
                        env=None if sides.declared is None else sides.declared.name, guards=tuple(sides.guards),
                        categories=tuple(sides.categories or ()),
                        headers={"before": sides.before_header, "after": sides.after_headers},
                        dropped_units={side.label: side.dropped for side in (before, *afters)}),
    )
