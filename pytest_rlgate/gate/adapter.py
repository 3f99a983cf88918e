"""The gate of one adapter: per-category paired comparisons of graded rows and the rule that fails a suite.

``compare_adapter(before, after)``, what :func:`pytest_rlgate.compare` runs for one after
side, reduces each side to one value per *unit* (scenario, else prompt) and per metric
while it streams the rows (:mod:`.sides`), pairs the units, and runs
:func:`~pytest_rlgate.gate.stats.paired_bootstrap` per (metric, group). The metrics are
``pass@1`` (the mean ``reward``) and ``marker:<name>`` for each guard; the groups are
``overall`` and each category. Each comparison gets a verdict:

* ``moved``: the interval lies above 0;
* ``regressed``: the interval lies below 0 (the gate fails);
* ``flat``: the interval lies inside ±margin;
* ``inconclusive``: it covers 0 but is wider than the margin (too few units to tell);
* ``insufficient``: fewer than 3 units.

The gate also fails on a category present on one side only (or a declared one missing) and,
optionally, on a lower bound below ``-max_drop``, a headline that did not move, or any
inconclusive verdict. The rule in force is part of every result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import DataError, hide_user_errors
from .options import GateOptions
from .result import Comparison, GateResult
from .sides import Paired, Side, groups, open_side, pair_units, read_sides, resample_stream, warn_caller
from .stats import METHOD_NAMES, holm, paired_bootstrap, t_ppf
from .verdicts import MIN_UNITS, interval_verdict

__all__ = ["HOLM_FROM", "compare_adapter"]

#: Holm turns itself on from this many categories (~7 % run-level false
#: fails with three categories at 95 % each)
HOLM_FROM = 4

#: a bad row file gated in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


def _noise_band(before_runs: list[float], after_runs: list[float], confidence_level: float) -> float | None:
    """q · run_std · sqrt(1/n_a + 1/n_b), run_std pooled over the eval runs of each side.

    Needs at least two eval runs on one side (3 base re-runs at sample
    seeds 17, 18, 19); otherwise there is no floor and None is returned.
    """
    df = sum(len(r) - 1 for r in (before_runs, after_runs) if len(r) > 1)
    if df < 1:
        return None
    ss = sum(float(np.sum((np.asarray(r) - np.mean(r)) ** 2)) for r in (before_runs, after_runs) if len(r) > 1)
    run_std = math.sqrt(ss / df)
    q = t_ppf(0.5 + confidence_level / 2.0, df)
    return q * run_std * math.sqrt(1.0 / len(before_runs) + 1.0 / len(after_runs))


def _pair_adapter(
    before: Side, afters: Sequence[Side], categories: Sequence[str], shared_units_only: bool
) -> tuple[list[str], list[str], str | None]:
    """One after side: a category on one side only fails, as does a declared one missing; then :func:`_pair`."""
    (after,) = afters
    failures: list[str] = []
    cats_b, cats_a = before.categories(), after.categories()
    for category in sorted(cats_b ^ cats_a):
        has, lacks = (before, after) if category in cats_b else (after, before)
        failures.append(
            f"category {category!r} has {has.unit_counts(category)} unit(s) in {has.label} but none in {lacks.label}"
        )
    for category in categories:
        absent = [s.label for s in (before, after) if category not in s.categories()]
        if len(absent) == 2:
            failures.append(f"declared category {category!r} is missing from both sides")
        elif absent and category not in cats_b ^ cats_a:
            failures.append(f"declared category {category!r} is missing from {absent[0]}")
    shared = sorted(cats_b & cats_a)
    return failures, shared, pair_units(before, after, shared, shared_units_only)


def compare_adapter(before_rows: Any, after_rows: Any, options: GateOptions | None = None,
                    **overrides: Any) -> GateResult:
    """Compare AFTER against BEFORE graded rows, per category, and apply the gate's rule.

    *before_rows*/*after_rows* are row-file paths (each opened once and streamed, never
    held) or iterables of row dicts; *options* (a :class:`~pytest_rlgate.gate.options.GateOptions`,
    *overrides* applied) say how. ``guards`` are marker names that must not regress (higher
    is better); ``categories`` declares categories that must appear on both sides. Both
    default to what ``env``, the environment that graded the rows, declares (``env.guards``,
    ``env.categories``). Without ``env``, guards default to those of the registered
    environment the rows' headers name (:mod:`~pytest_rlgate.data.provenance`), else nothing is
    guarded or declared: foreign rows do not say which task graded them. ``holm`` adjusts
    the regression test across categories (family one-sided alpha = 1 - confidence_level);
    by default on from four categories. ``bootstrap_seed`` fixes the resamples (each
    comparison draws from its own stream derived from it).

    Sides whose headers name different environment fingerprints or prompt sets are a
    :class:`DataError` unless ``allow_env_change``; units on one side only are one unless
    ``shared_units_only`` (which drops them and says how many). Either way the result's
    warnings say what was let through.
    """
    opts = GateOptions.build(options, **overrides)
    with ExitStack() as stack:
        before_reader = stack.enter_context(open_side(before_rows, "before"))
        after_reader = stack.enter_context(open_side(after_rows, "after"))
        sides = read_sides(before_reader, [after_reader], opts, _pair_adapter)
    before, (after,) = sides.before, sides.afters
    notes, shared = sides.notes, sides.shared
    for note in notes:  # what the caller let through: in the result, and loud in pytest too
        warn_caller(note)
    if not shared:
        raise DataError(f"{before.label} and {after.label} share no category; nothing to compare")

    use_holm = len(shared) >= HOLM_FROM if opts.holm is None else bool(opts.holm)
    metrics = ["pass@1", *(f"marker:{g}" for g in sides.guards)]
    comparisons = _comparisons(before, after, metrics, shared, notes, opts, use_holm=use_holm)
    failures = sides.failures + _verdict_failures(comparisons, opts)
    max_drop = opts.max_drop
    if max_drop is not None:
        comparisons = [
            _with_flag(c, "below -max_drop") if c.low is not None and c.low < -max_drop else c for c in comparisons
        ]

    return GateResult(
        comparisons=tuple(comparisons),
        failures=tuple(failures),
        rule=_rule(metrics, opts, use_holm, len(shared)),
        method=opts.method,
        confidence_level=float(opts.confidence_level),
        n_resamples=0 if opts.method == "t" else int(opts.n_resamples),
        seed=opts.bootstrap_seed,
        margin=float(opts.margin),
        holm=use_holm,
        unit="scenario",
        warnings=tuple(notes),
        options={"env": None if sides.declared is None else sides.declared.name, "guards": list(sides.guards),
                 "max_drop": max_drop, "require_moved": opts.require_moved,
                 "fail_on_inconclusive": opts.fail_on_inconclusive, "categories": list(sides.categories or ()),
                 "before": before.label, "after": after.label,
                 "headers": {"before": sides.before_header, "after": sides.after_headers[0]},
                 "allow_env_change": opts.allow_env_change, "shared_units_only": opts.shared_units_only,
                 "dropped_units": {"before": before.dropped, "after": after.dropped}},
    )


def _comparisons(
    before: Side, after: Side, metrics: Sequence[str], shared: list[str], notes: list[str], opts: GateOptions, *,
    use_holm: bool,
) -> list[Comparison]:
    """Every (metric, group) comparison, metric by metric, Holm-adjusted across categories when on.

    A guard constant on both sides cannot fail the gate: that is warned (to the caller of
    :func:`compare_adapter`) and added to *notes*.
    """
    grouped = groups(shared)
    alpha = 1.0 - opts.confidence_level
    comparisons: list[Comparison] = []
    index = 0
    paired = {group: Paired.of(before, after, cats) for group, cats in grouped}
    for column, metric in enumerate(metrics, 2):
        per_metric: list[Comparison] = []
        for group, _cats in grouped:
            index += 1
            per_metric.append(_one(paired[group], metric, column, group, opts,
                                   rng=resample_stream(opts.bootstrap_seed, index)))
        if use_holm:
            per_metric = _apply_holm(per_metric, alpha)
        if metric != "pass@1":
            overall = per_metric[0]
            if "constant" in overall.flags:
                note = (f"guard {metric[7:]!r} is constant ({overall.before:.3f}) on both sides: it cannot "
                        "fail this gate (pick a marker that varies, or drop the guard)")
                warn_caller(note)
                notes.append(note)
        comparisons.extend(per_metric)
    return comparisons


def _verdict_failures(comparisons: Sequence[Comparison], opts: GateOptions) -> list[str]:
    """The failures the comparisons' verdicts and bounds add under the rule's options."""
    max_drop = opts.max_drop
    failures: list[str] = []
    for c in comparisons:
        if c.verdict == "regressed":
            failures.append(
                f"{c.metric} regressed in {c.group}: {c.before:.3f} -> {c.after:.3f}, "
                f"delta {c.delta:+.3f} [{c.low:+.3f}, {c.high:+.3f}], {c.size}"
            )
        elif max_drop is not None and c.low is not None and c.low < -max_drop:
            failures.append(
                f"{c.metric} in {c.group} may have dropped more than max_drop {max_drop:.3f}: "
                f"lower bound {c.low:+.3f} (delta {c.delta:+.3f}, {c.size})"
            )
        elif opts.fail_on_inconclusive and c.verdict in ("inconclusive", "insufficient"):
            failures.append(f"{c.metric} in {c.group} is {c.verdict}: delta {c.delta:+.3f}, "
                            f"{c.size} (fail_on_inconclusive)")
    if opts.require_moved:
        head = comparisons[0]
        if head.verdict != "moved":
            failures.append(f"headline pass@1 overall did not move: {head.verdict}, delta {head.delta:+.3f} "
                            "(require_moved)")
    return failures


def _with_flag(c: Comparison, flag: str, **changes: Any) -> Comparison:
    return replace(c, flags=(*c.flags, flag), **changes)


def _one(
    paired: Paired,
    metric: str,
    column: int,
    group: str,
    opts: GateOptions,
    *,
    rng: np.random.Generator | None,
) -> Comparison:
    margin, confidence_level = opts.margin, opts.confidence_level
    b, a = paired.means(column)
    n = paired.n
    k, k_before, k_after = paired.k(), paired.k("before"), paired.k("after")
    mean_b, mean_a = float(b.mean()), float(a.mean())
    delta = float((a - b).mean())
    flags: list[str] = []
    if n < MIN_UNITS:
        return Comparison(metric, group, n, k, mean_b, mean_a, delta, None, None, "insufficient",
                          flags=(f"fewer than {MIN_UNITS} units",), k_before=k_before, k_after=k_after)
    res = paired_bootstrap(b, a, n_resamples=opts.n_resamples, confidence_level=confidence_level,
                           method=opts.method, rng=rng)
    low, high = res.confidence_interval
    noise = _noise_band(*paired.run_means(column), confidence_level)
    verdict = interval_verdict(low, high, margin)
    if noise is not None and abs(delta) <= noise:
        # Asymmetric on purpose: run-to-run noise can take back a claimed win, never a
        # regression. The interval's false-regression rate is already calibrated (<= 2.5 %),
        # and a floor from three base runs (t at 2 df = 4.3) would hide real collapses.
        if verdict == "moved":  # noise cannot prove flatness either: that takes the margin
            verdict = "flat" if -margin <= low and high <= margin else "inconclusive"
        flags.append("within noise")
    if np.ptp(a - b) == 0:
        constant = np.ptp(b) == 0 and np.ptp(a) == 0 and b[0] == a[0]
        flags.append("constant" if constant else "no variation")
    return Comparison(metric, group, n, k, mean_b, mean_a, delta, float(low), float(high), verdict,
                      mde=res.mde, p_less=res.p_less, noise=noise, flags=tuple(flags), k_before=k_before,
                      k_after=k_after)


def _apply_holm(comparisons: list[Comparison], alpha: float) -> list[Comparison]:
    """Holm across the category groups of one metric; "overall" keeps its own interval.

    Family one-sided alpha = 1 - confidence_level (3.5-5.0 % run-level false
    fails with three categories instead of 5.6-7.6 %).
    """
    tested = [i for i, c in enumerate(comparisons) if c.group != "overall" and c.p_less is not None]
    if not tested:
        return comparisons
    reject, adjusted = holm([float(comparisons[i].p_less or 0.0) for i in tested], alpha=alpha)  # all set
    out = list(comparisons)
    for i, rej, p_adj in zip(tested, reject, adjusted):
        c = out[i]
        changes: dict[str, Any] = {"p_adjusted": float(p_adj)}
        if c.verdict == "regressed" and not rej:
            changes["verdict"] = "inconclusive"
            out[i] = _with_flag(c, "not significant after Holm", **changes)
        elif rej and c.delta < 0 and c.verdict != "regressed":
            changes["verdict"] = "regressed"
            out[i] = _with_flag(c, "regressed by Holm", **changes)
        else:
            out[i] = replace(c, **changes)
    return out


def _rule(metrics: Sequence[str], opts: GateOptions, use_holm: bool, n_categories: int) -> str:
    confidence_level, method, max_drop = opts.confidence_level, opts.method, opts.max_drop
    level = f"{confidence_level:.0%}"
    test = (f"Holm-adjusted one-sided p < {1 - confidence_level:.2f} across {n_categories} categories"
            if use_holm else f"{level} {METHOD_NAMES[method]} upper bound < 0")
    parts = [f"fail if {', '.join(metrics)} regressed overall or in any category ({test})",
             "a category is on one side only"]
    if max_drop is not None:
        parts.append(f"a lower bound is below -{max_drop:.2f} (non-inferiority)")
    if opts.require_moved:
        parts.append("overall pass@1 did not move up")
    if opts.fail_on_inconclusive:
        parts.append("any verdict is inconclusive or insufficient")
    return "; or ".join(parts) + f"; flat = interval inside ±{opts.margin:.2f}"
