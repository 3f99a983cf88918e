"""The recipe gate: graded rows of several training seeds against one before side.

``compare(before, after)`` gates one adapter (:func:`pytest_rlgate.gate.adapter.compare`). When
*after* is several row sources, one per training seed of the same recipe (a list of row
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

This module sits above :mod:`pytest_rlgate.gate.adapter` (it reads rows with the gate's own side
reader, so both gates pair and validate alike); ``pytest_rlgate.compare`` and
``assert_no_regression`` are the ones here, which send a single after side to the gate.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..data.rows import header_of
from ..environment.contract import EnvSpec
from ..errors import DataError, RlgateWarning, UsageError
from . import adapter as gate, recipe_text
from .adapter import (
    GateResult,
    RegressionError,
    _groups,
    _label,
    _pair,
    _Paired,
    _ratio_k,
    _read_sides,
    _Side,
    _stream,
    _validate_options,
)
from .recipe_stats import RECIPE_METHOD, RecipeResult, SeedComparison, compare_recipe
from .stats import DEFAULT_METHOD, METHOD_NAMES, Method

__all__ = ["RecipeComparison", "RecipeGateResult", "assert_no_regression", "compare", "compare_seeds",
           "is_seed_sources", "seed_labels"]

#: verdicts that leave the recipe question open (``fail_on_inconclusive`` fails them)
_UNDECIDED = ("inconclusive", "insufficient", "unresolved")


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

    def to_dict(self) -> dict[str, Any]:
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
    options: Mapping[str, Any] = field(default_factory=dict)

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

    def to_dict(self) -> dict[str, Any]:
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
        return recipe_text.settings_line(self.to_dict())

    def table(self, *, verbose: bool = True) -> str:
        return recipe_text.render_table(self.to_dict(), verbose=verbose)

    def report(self, *, verbose: bool = True) -> str:
        """Header, recipe table, per-seed table, rule and failures: what ``rlgate gate`` prints."""
        return recipe_text.render_report(self.to_dict(), verbose=verbose)

    def message(self) -> str:
        """The :class:`RegressionError` text: what failed, with every seed's verdict, the rule, the remedy."""
        return recipe_text.render_failure(self.to_dict())


# -- which after sides ---------------------------------------------------------------------


def is_seed_sources(after: Any) -> bool:
    """True when *after* is several row sources (one per training seed), not one.

    A mapping (seed -> rows) always is; so is a list or tuple whose items are row files or
    row lists. A list of row dicts (or :class:`~pytest_rlgate.Rows`) is one side.
    """
    if isinstance(after, Mapping):
        return True
    if not isinstance(after, (list, tuple)) or not after:
        return False
    return all(isinstance(item, (str, os.PathLike)) or isinstance(item, Iterable) and not isinstance(item, Mapping)
               for item in after)


def seed_labels(sources: Sequence[Any]) -> list[int | str]:
    """Labels for a list of per-seed row sources, in this order of preference.

    The sampling seeds their headers name (a run's after rows are sampled at its trainer
    seed), when every source has a distinct one; else the run folder names of files that
    share a file name (``runs/a-seed17/holdout_after.jsonl`` -> ``a-seed17``), else the file
    names; else ``#1``, ``#2``, ...
    """
    seeds = [(header_of(s) or {}).get("sampling", {}).get("seed") for s in sources]
    if None not in seeds and len(set(seeds)) == len(seeds):
        return seeds
    if all(isinstance(s, (str, os.PathLike)) for s in sources):
        paths = [Path(s) for s in sources]
        for names in ([p.parent.name for p in paths], [p.name for p in paths], [str(p) for p in paths]):
            if all(names) and len(set(names)) == len(names):
                return list(names)
    return [f"#{i}" for i in range(1, len(sources) + 1)]


def _sources(after: Any) -> tuple[list[int | str], list[Any]]:
    if isinstance(after, Mapping):
        if not after:
            raise DataError("after has no training seeds: pass one row source per seed (seed -> rows)")
        return list(after), list(after.values())
    sources = list(after)
    _refuse_repeats(sources)
    return seed_labels(sources), sources


def _refuse_repeats(sources: Sequence[Any]) -> None:
    """One source given twice would count as two training seeds and halve the seed spread."""
    seen: dict[Any, int] = {}
    for position, source in enumerate(sources, 1):
        key = (os.path.realpath(source) if isinstance(source, (str, os.PathLike)) else id(source))
        if key in seen:
            shown = os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"the row list #{position}"
            raise UsageError(f"after side {position} ({shown}) is after side {seen[key]} again: each training seed "
                             "is its own run's rows; pass every seed's file once")
        seen[key] = position


# -- the comparison ------------------------------------------------------------------------


def _pair_all(before: _Side, afters: Sequence[_Side], categories: Sequence[str], shared_units_only: bool) -> str | None:
    """Every seed's units must be the before side's: the gate's pairing, for each seed.

    With *shared_units_only* the units missing from any side are dropped from all of them,
    and the returned note says how many from each.
    """
    if not shared_units_only:
        for after in afters:
            _pair(before, after, categories, False)  # a one-line DataError naming the missing units
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
    before: _Side, afters: Sequence[_Side], categories: Sequence[str], shared_units_only: bool
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
    paired: Sequence[_Paired], metric: str, column: int, group: str, labels: Sequence[int | str], *,
    margin: float, confidence_level: float, n_resamples: int, method: Method, rng: np.random.Generator | None,
) -> RecipeComparison:
    before = paired[0].means(column)[0]
    after = np.stack([p.means(column)[1] for p in paired])
    result = compare_recipe(before, after, seeds=labels, margin=margin, confidence_level=confidence_level,
                            n_resamples=n_resamples, method=method, rng=rng)
    flags: list[str] = []
    if np.ptp(after - before) == 0:
        constant = np.ptp(before) == 0 and np.ptp(after) == 0 and after.flat[0] == before[0]
        flags.append("constant" if constant else "no variation")
    k_before = paired[0].k("before")
    k_after = _ratio_k(sum(float(p.after[:, 0].sum()) for p in paired),
                       sum(float(p.after[:, 1].sum()) for p in paired))
    k = _ratio_k(sum(float(m[:, 0].sum()) for p in paired for m in (p.before, p.after)),
                 sum(float(m[:, 1].sum()) for p in paired for m in (p.before, p.after)))
    return RecipeComparison(metric, group, k, float(before.mean()), float(after.mean()), result, tuple(flags),
                            k_before=k_before, k_after=k_after)


def _judge(c: RecipeComparison, max_drop: float | None, fail_on_inconclusive: bool) -> tuple[str | None, str | None]:
    """(the failure it adds, the flag that marks it) for one comparison; (None, None) when it passes."""
    r = c.recipe
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
    if fail_on_inconclusive and r.verdict in _UNDECIDED:
        return (f"{c.metric} in {c.group} is {r.verdict}: delta {r.delta:+.3f}, {c.size} "
                "(fail_on_inconclusive)"), None
    return None, None


def _rule(metrics: Sequence[str], n_seeds: int, confidence_level: float, method: str, margin: float,
          max_drop: float | None, require_moved: bool, fail_on_inconclusive: bool) -> str:
    level = f"{confidence_level:.0%}"
    if n_seeds > 1:
        test = (f"{level} {RECIPE_METHOD} upper bound < 0 on the mean over {n_seeds} seeds of the paired deltas; "
                "no Holm adjustment")
    else:
        test = (f"one training seed: the recipe is unresolved and the seed's own {level} "
                f"{METHOD_NAMES[method]} upper bound < 0 decides")
    parts = [f"fail if the recipe regressed {', '.join(metrics)} overall or in any category ({test})",
             "a category is missing from a side"]
    if max_drop is not None:
        parts.append(f"a lower bound is below -{max_drop:.2f} (non-inferiority)")
    if require_moved:
        parts.append("overall pass@1 did not move up")
    if fail_on_inconclusive:
        parts.append("any verdict is inconclusive, insufficient or unresolved")
    return "; or ".join(parts) + f"; flat = interval inside ±{margin:.2f}"


def _recipe_comparisons(
    before: _Side, afters: Sequence[_Side], metrics: Sequence[str], shared: list[str], labels: Sequence[int | str],
    *, margin: float, confidence_level: float, n_resamples: int, method: Method, seed: int | None,
) -> list[RecipeComparison]:
    """Every (metric, group) recipe comparison, each seed paired with the before side."""
    groups = _groups(shared)
    paired = {group: [_Paired.of(before, after, cats) for after in afters] for group, cats in groups}
    comparisons: list[RecipeComparison] = []
    index = 0
    for column, metric in enumerate(metrics, 2):
        for group, _cats in groups:
            index += 1
            comparisons.append(_recipe_one(
                paired[group], metric, column, group, labels, margin=margin, confidence_level=confidence_level,
                n_resamples=n_resamples, method=method, rng=_stream(seed, index),
            ))
    return comparisons


def _apply_rule(comparisons: list[RecipeComparison], max_drop: float | None, fail_on_inconclusive: bool,
                require_moved: bool) -> list[str]:
    """The failures the comparisons add; flags the comparisons (in place) that :func:`_judge` marks."""
    failures: list[str] = []
    for i, c in enumerate(comparisons):
        failure, flag = _judge(c, max_drop, fail_on_inconclusive)
        if failure:
            failures.append(failure)
        if flag:
            comparisons[i] = replace(c, flags=(*c.flags, flag))
    if require_moved and comparisons[0].verdict != "moved":
        head = comparisons[0]
        failures.append(f"headline pass@1 overall did not move: {head.verdict}, recipe delta {head.delta:+.3f} "
                        "(require_moved)")
    return failures


def compare_seeds(
    before_rows: Any,
    after_rows: Mapping[Any, Any] | Sequence[Any],
    *,
    by: str = "category",
    guards: Sequence[str] | None = None,
    margin: float = 0.10,
    confidence_level: float = 0.95,
    n_resamples: int = 10_000,
    method: Method = DEFAULT_METHOD,
    seed: int | None = 0,
    max_drop: float | None = None,
    require_moved: bool = False,
    fail_on_inconclusive: bool = False,
    holm: bool | None = None,
    categories: Sequence[str] | None = None,
    env: EnvSpec = None,
    allow_env_change: bool = False,
    shared_units_only: bool = False,
) -> RecipeGateResult:
    """Gate a recipe: BEFORE rows against the AFTER rows of each training seed, per category.

    *after_rows* is a mapping seed -> row source or a list of row sources (labels from
    :func:`seed_labels`). The options are :func:`pytest_rlgate.gate.adapter.compare`'s, applied to
    the recipe interval; *method*, *n_resamples* and *seed* make each seed's own interval.
    ``holm=True`` is a :class:`UsageError`: the recipe interval has no p-value to adjust.
    """
    _validate_options(by, margin, confidence_level, n_resamples, method, max_drop)
    if holm:
        raise UsageError("holm=True: the recipe interval (over units and seeds) has no p-value to Holm-adjust; "
                         "drop --holm, or gate each seed's rows on its own")
    labels, sources = _sources(after_rows)
    if len(set(labels)) != len(labels):
        raise UsageError(f"seeds must name each after side once, got {labels!r}")
    after_labels = [_label(source, f"after seed {s}") for s, source in zip(labels, sources)]
    sides = _read_sides(before_rows, sources, after_labels, guards=guards, categories=categories, env=env,
                        allow_env_change=allow_env_change, shared_units_only=shared_units_only, pair=_pair_seeds)
    before, afters, notes, shared = sides.before, sides.afters, sides.notes, sides.shared
    if len(labels) == 1:
        notes.append(f"one training seed ({labels[0]}): the recipe is unresolved, and this adapter's own verdicts "
                     "decide; train the recipe at 3 or more seeds to gate it")
    for note in notes:
        warnings.warn(note, RlgateWarning, stacklevel=2)
    if not shared:
        raise DataError(f"{before.label} and the after sides share no category; nothing to compare")

    metrics = ["pass@1", *(f"marker:{g}" for g in sides.guards)]
    comparisons = _recipe_comparisons(before, afters, metrics, shared, labels, margin=margin,
                                      confidence_level=confidence_level, n_resamples=n_resamples, method=method,
                                      seed=seed)
    failures = sides.failures + _apply_rule(comparisons, max_drop, fail_on_inconclusive, require_moved)

    return RecipeGateResult(
        comparisons=tuple(comparisons),
        failures=tuple(failures),
        rule=_rule(metrics, len(labels), confidence_level, method, margin, max_drop, require_moved,
                   fail_on_inconclusive),
        seeds=tuple(labels),
        method=method,
        confidence_level=float(confidence_level),
        n_resamples=0 if method == "t" else int(n_resamples),
        seed=seed,
        margin=float(margin),
        warnings=tuple(notes),
        options={"env": None if sides.declared is None else sides.declared.name, "guards": list(sides.guards),
                 "max_drop": max_drop, "require_moved": require_moved,
                 "fail_on_inconclusive": fail_on_inconclusive, "categories": list(sides.categories or ()),
                 "before": before.label, "after": after_labels,
                 "headers": {"before": sides.before_header, "after": sides.after_headers},
                 "allow_env_change": allow_env_change, "shared_units_only": shared_units_only,
                 "dropped_units": {side.label: side.dropped for side in (before, *afters)}},
    )

def compare(before_rows: Any, after_rows: Any, **options: Any) -> GateResult | RecipeGateResult:
    """Gate AFTER against BEFORE graded rows by category: one adapter, or a recipe over seeds.

    One after side (a row file, or an iterable of row dicts) gates that adapter:
    :func:`pytest_rlgate.gate.adapter.compare`, which documents every option. Several after sides,
    one per training seed of the same recipe (a list of row files or row lists, or a
    mapping seed -> rows, each sampled on the before side's holdout units), gate the recipe:
    :func:`compare_seeds`, with the same options.
    """
    if is_seed_sources(after_rows):
        return compare_seeds(before_rows, after_rows, **options)
    return gate.compare(before_rows, after_rows, **options)


def assert_no_regression(before: Any, after: Any, **options: Any) -> GateResult | RecipeGateResult:
    """Run :func:`compare` and raise :class:`~pytest_rlgate.RegressionError` (an AssertionError) on failure.

    *after* may be one row source or several (a list, or a mapping seed -> rows); *options*
    are :func:`compare`'s. Returns the result when the gate passes.
    """
    __tracebackhide__ = True
    result = compare(before, after, **options)
    if not result.passed:
        raise RegressionError(result.message(), result)  # type: ignore[arg-type]
    return result
