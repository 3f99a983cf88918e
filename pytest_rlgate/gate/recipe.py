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
own verdict decides, so a regressed adapter still fails. No Holm adjustment: the recipe
interval is a t interval without the per-comparison p-value Holm needs. No noise floor
either: the base runs' spread is sampling noise, which the seed piece of the recipe
interval already holds.

It reads rows with the gate's own side reader (:mod:`.sides`), so both gates pair and
validate alike; :func:`pytest_rlgate.compare` sends several after sides here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Literal, TypedDict

import numpy as np

from ..data.rows import RowInput
from ..errors import DataError, UsageError, hide_user_errors
from .afters import SeedSources, is_seed_sources, open_afters, seed_labels
from .options import METHOD_NAMES, GateOptions
from .recipe_stats import RECIPE_METHOD, RecipeResult, SeedComparison, compare_recipe
from .recipe_text import render_failure, render_report, render_table, settings_line
from .result import ComparisonKeys
from .sides import Paired, Side, groups, open_side, pair_units, ratio_k, read_sides, resample_stream, warn_caller

__all__ = ["RecipeComparison", "RecipeComparisonRecord", "RecipeGateResult", "RecipeRecord", "SeedRecord",
           "compare_seeds", "is_seed_sources", "seed_labels"]

#: a bad row file gated in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

#: verdicts that leave the recipe question open (``fail_on_inconclusive`` fails them)
_UNDECIDED = ("inconclusive", "insufficient", "unresolved")


class SeedRecord(TypedDict):
    """One seed's own comparison in a recipe record."""

    seed: int | str
    delta: float
    low: float | None
    high: float | None
    verdict: str
    mde: float | None


class RecipeComparisonRecord(ComparisonKeys):
    """:meth:`RecipeComparison.to_dict`: a gate comparison's keys plus the recipe's."""

    reason: str
    k_before: float | None
    k_after: float | None
    n_seeds: int
    regressed_seeds: int
    seeds_line: str
    seeds: list[SeedRecord]


class RecipeRecord(TypedDict):
    """:meth:`RecipeGateResult.to_dict`: what the recipe's text renders, and ``recipe.json`` keeps."""

    kind: Literal["recipe"]
    passed: bool
    rule: str
    comparisons: list[RecipeComparisonRecord]
    failures: list[str]
    seeds: list[int | str]
    recipe_method: str
    method: str
    confidence_level: float
    n_resamples: int
    seed: int | None
    margin: float
    holm: bool
    unit: str
    warnings: list[str]
    options: dict[str, object]


@dataclass(frozen=True)
class RecipeComparison:
    """One (metric, group) recipe comparison: the levels, and the recipe verdict with every seed's.

    ``before`` is the before side's level, ``after`` the mean over seeds of each seed's level.
    """

    metric: str
    group: str
    k: float
    before: float
    after: float
    recipe: RecipeResult
    flags: tuple[str, ...] = ()
    k_before: float | None = None
    k_after: float | None = None

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
    def mde(self) -> float | None:
        return self.recipe.mde

    @property
    def seeds(self) -> tuple[SeedComparison, ...]:
        return self.recipe.seeds

    @property
    def size(self) -> str:
        """``"15 units x 4 x 3 seeds"`` (``4/8`` when the sides sampled a different k): what the interval covers."""
        k = self.k if self.k_before is None or self.k_before == self.k_after else f"{self.k_before}/{self.k_after}"
        return f"{self.n_units} units x {k} x {self.n_seeds} seed{'s' if self.n_seeds != 1 else ''}"

    def to_dict(self) -> RecipeComparisonRecord:
        """The gate comparison's keys (so reports and summaries read both) plus the recipe's."""
        r = self.recipe
        return {
            "metric": self.metric, "group": self.group, "n_units": r.n_units, "k": self.k,
            "before": self.before, "after": self.after, "delta": r.delta, "low": r.low, "high": r.high,
            "verdict": r.verdict, "reason": r.reason, "mde": r.mde, "flags": list(self.flags),
            "k_before": self.k_before, "k_after": self.k_after, "n_seeds": r.n_seeds,
            "regressed_seeds": r.regressed_seeds, "seeds_line": r.seeds_line,
            "seeds": [{"seed": s.seed, "delta": s.delta, "low": s.low, "high": s.high, "verdict": s.verdict,
                       "mde": s.mde} for s in r.seeds],
        }


@dataclass(frozen=True)
class RecipeGateResult:
    """Every recipe comparison, what failed, and the rule that decided it (``kind`` "recipe")."""

    comparisons: tuple[RecipeComparison, ...]
    failures: tuple[str, ...]
    rule: str
    seeds: tuple[int | str, ...]
    method: str
    confidence_level: float
    n_resamples: int
    seed: int | None
    margin: float
    unit: str = "scenario"
    warnings: tuple[str, ...] = ()
    options: Mapping[str, object] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.failures

    def __bool__(self) -> bool:
        return self.passed

    def comparison(self, metric: str, group: str) -> RecipeComparison:
        """The comparison of *metric* in *group*, e.g. ``result.comparison("pass@1", "no_id")``."""
        for c in self.comparisons:
            if (c.metric, c.group) == (metric, group):
                return c
        known = ", ".join(sorted({f"{c.metric}/{c.group}" for c in self.comparisons}))
        raise UsageError(f"no comparison {metric}/{group} in this recipe gate; it has {known}")

    def to_dict(self) -> RecipeRecord:
        """The JSON shape of ``rlgate gate BEFORE AFTER AFTER... --json`` and of ``recipe.json``'s gate."""
        return {
            "kind": "recipe",
            "passed": self.passed,
            "rule": self.rule,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "failures": list(self.failures),
            "seeds": list(self.seeds),
            "recipe_method": RECIPE_METHOD,
            "method": self.method,
            "confidence_level": self.confidence_level,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "margin": self.margin,
            "holm": False,
            "unit": self.unit,
            "warnings": list(self.warnings),
            "options": dict(self.options),
        }

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
    *, rng: np.random.Generator | None,
) -> RecipeComparison:
    before = paired[0].means(column)[0]
    after = np.stack([p.means(column)[1] for p in paired])
    result = compare_recipe(before, after, seeds=labels, margin=opts.margin, confidence_level=opts.confidence_level,
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
                            k_before=k_before, k_after=k_after)


def _judge(c: RecipeComparison, opts: GateOptions) -> tuple[str | None, str | None]:
    """(the failure it adds, the flag that marks it) for one comparison; (None, None) when it passes."""
    r = c.recipe
    max_drop = opts.max_drop
    levels = f"{c.before:.3f} -> {c.after:.3f}"
    if r.verdict == "regressed":
        return (f"{c.metric} regressed in {c.group} across {r.n_seeds} seeds: {levels}, recipe delta "
                f"{r.delta:+.3f} [{r.low:+.3f}, {r.high:+.3f}], {r.seeds_line}, {c.size}"), None
    if r.verdict == "unresolved" and r.seeds[0].verdict == "regressed":
        only = r.seeds[0]
        return (f"{c.metric} regressed in {c.group} at the only training seed {only.seed}: {levels}, delta "
                f"{only.delta:+.3f} [{only.low:+.3f}, {only.high:+.3f}], {c.size} (recipe unresolved)"), \
            "the only seed regressed"
    low = r.low if r.n_seeds > 1 else r.seeds[0].low
    if max_drop is not None and low is not None and low < -max_drop:
        return (f"{c.metric} in {c.group} may have dropped more than max_drop {max_drop:.3f}: lower bound "
                f"{low:+.3f} (delta {r.delta:+.3f}, {c.size})"), "below -max_drop"
    if opts.fail_on_inconclusive and r.verdict in _UNDECIDED:
        return (f"{c.metric} in {c.group} is {r.verdict}: delta {r.delta:+.3f}, {c.size} "
                "(fail_on_inconclusive)"), None
    return None, None


def _rule(metrics: Sequence[str], n_seeds: int, opts: GateOptions) -> str:
    level = f"{opts.confidence_level:.0%}"
    if n_seeds > 1:
        test = (f"{level} {RECIPE_METHOD} upper bound < 0 on the mean over {n_seeds} seeds of the paired deltas; "
                "no Holm adjustment")
    else:
        test = (f"one training seed: the recipe is unresolved and the seed's own {level} "
                f"{METHOD_NAMES[opts.method]} upper bound < 0 decides")
    parts = [f"fail if the recipe regressed {', '.join(metrics)} overall or in any category ({test})",
             "a category is missing from a side"]
    if opts.max_drop is not None:
        parts.append(f"a lower bound is below -{opts.max_drop:.2f} (non-inferiority)")
    if opts.require_moved:
        parts.append("overall pass@1 did not move up")
    if opts.fail_on_inconclusive:
        parts.append("any verdict is inconclusive, insufficient or unresolved")
    return "; or ".join(parts) + f"; flat = interval inside ±{opts.margin:.2f}"


def _recipe_comparisons(
    before: Side, afters: Sequence[Side], metrics: Sequence[str], shared: list[str], labels: Sequence[int | str],
    opts: GateOptions,
) -> list[RecipeComparison]:
    """Every (metric, group) recipe comparison, each seed paired with the before side."""
    grouped = groups(shared)
    paired = {group: [Paired.of(before, after, cats) for after in afters] for group, cats in grouped}
    comparisons: list[RecipeComparison] = []
    index = 0
    for column, metric in enumerate(metrics, 2):
        for group, _cats in grouped:
            index += 1
            comparisons.append(_recipe_one(paired[group], metric, column, group, labels, opts,
                                           rng=resample_stream(opts.bootstrap_seed, index)))
    return comparisons


def _apply_rule(comparisons: list[RecipeComparison], opts: GateOptions) -> list[str]:
    """The failures the comparisons add; flags the comparisons (in place) that :func:`_judge` marks."""
    failures: list[str] = []
    for i, c in enumerate(comparisons):
        failure, flag = _judge(c, opts)
        if failure:
            failures.append(failure)
        if flag:
            comparisons[i] = replace(c, flags=(*c.flags, flag))
    if opts.require_moved and comparisons[0].verdict != "moved":
        head = comparisons[0]
        failures.append(f"headline pass@1 overall did not move: {head.verdict}, recipe delta {head.delta:+.3f} "
                        "(require_moved)")
    return failures


def compare_seeds(before_rows: RowInput, after_rows: SeedSources, options: GateOptions | None = None,
                  **overrides: object) -> RecipeGateResult:
    """Gate a recipe: BEFORE rows against the AFTER rows of each training seed, per category.

    *after_rows* is a mapping seed -> row source or a list of row sources (labels from
    :func:`seed_labels`). The options are :func:`pytest_rlgate.gate.adapter.compare_adapter`'s,
    applied to the recipe interval; ``method``, ``n_resamples`` and ``bootstrap_seed`` make
    each seed's own interval. ``holm=True`` is a :class:`UsageError`: the recipe interval
    has no p-value to adjust. Each row file is opened once. Flips (``show_flips``) are an
    adapter's and not listed here; a release ``policy`` is refused (it is written for one
    adapter's verdicts).
    """
    opts = GateOptions.build(options, **overrides)
    if opts.holm:
        raise UsageError("holm=True: the recipe interval (over units and seeds) has no p-value to Holm-adjust; "
                         "drop --holm, or gate each seed's rows on its own")
    if opts.policy is not None:
        raise UsageError("a release policy gates one adapter; gate each seed's rows on its own with --policy, "
                         "or drop it for the recipe")
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

    metrics = ["pass@1", *(f"marker:{g}" for g in sides.guards)]
    comparisons = _recipe_comparisons(before, afters, metrics, shared, labels, opts)
    failures = sides.failures + _apply_rule(comparisons, opts)

    return RecipeGateResult(
        comparisons=tuple(comparisons),
        failures=tuple(failures),
        rule=_rule(metrics, len(labels), opts),
        seeds=tuple(labels),
        method=opts.method,
        confidence_level=float(opts.confidence_level),
        n_resamples=0 if opts.method == "t" else int(opts.n_resamples),
        seed=opts.bootstrap_seed,
        margin=float(opts.margin),
        warnings=tuple(notes),
        options={"env": None if sides.declared is None else sides.declared.name, "guards": list(sides.guards),
                 "max_drop": opts.max_drop, "require_moved": opts.require_moved,
                 "fail_on_inconclusive": opts.fail_on_inconclusive, "categories": list(sides.categories or ()),
                 "before": before.label, "after": after_labels,
                 "headers": {"before": sides.before_header, "after": sides.after_headers},
                 "allow_env_change": opts.allow_env_change, "shared_units_only": opts.shared_units_only,
                 "dropped_units": {side.label: side.dropped for side in (before, *afters)}},
    )
