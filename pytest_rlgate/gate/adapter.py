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
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import numpy as np

from ..data.rows import RowInput
from ..environment.contract import Env
from ..errors import DataError, hide_user_errors
from .flips import Flip, flips_for
from .options import GateOptions
from .release import Decision, ReleasePolicy, as_release_policy
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


def compare_adapter(before_rows: RowInput, after_rows: RowInput, options: GateOptions | None = None,
                    **overrides: object) -> GateResult:
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

    ``show_flips`` (default 3; 0 for none) names, for every failing comparison (every one
    with ``flips_in="all"``), the scenarios that lost the most, with before -> after counts
    and one reply from each side (:mod:`~pytest_rlgate.gate.flips`), read in the same pass.
    ``policy`` is a release policy (a YAML/TOML path or a
    :class:`~pytest_rlgate.gate.release.ReleasePolicy`): per category or guard a tier, its
    own confidence and margin, drop limits, ``required`` and ``min_units``; every
    comparison then names the policy line that decided it.
    """
    opts = GateOptions.build(options, **overrides)
    release = as_release_policy(opts.policy)
    with ExitStack() as stack:
        before_reader = stack.enter_context(open_side(before_rows, "before"))
        after_reader = stack.enter_context(open_side(after_rows, "after"))
        sides = read_sides(before_reader, [after_reader], opts, _pair_adapter, replies=opts.show_flips > 0)
    before, (after,) = sides.before, sides.afters
    notes, shared = sides.notes, sides.shared
    for note in notes:  # what the caller let through: in the result, and loud in pytest too
        warn_caller(note)
    if not shared:
        raise DataError(f"{before.label} and {after.label} share no category; nothing to compare")

    use_holm = len(shared) >= HOLM_FROM if opts.holm is None else bool(opts.holm)
    metrics = ["pass@1", *(f"marker:{g}" for g in sides.guards)]
    max_drop = opts.max_drop
    decisions: dict[tuple[str, str], Decision] = {}
    if release is not None:
        release.check_names(before.categories() | after.categories(), sides.guards)
        decisions = {(m, g): release.decide(m, g, confidence_level=opts.confidence_level, margin=opts.margin,
                                            max_drop=max_drop) for m in metrics for g, _ in groups(shared)}
    comparisons = _comparisons(before, after, metrics, shared, notes, opts, use_holm=use_holm, decisions=decisions)
    if release is None:
        failures = sides.failures + _verdict_failures(comparisons, opts)
        failing = {(c.metric, c.group) for c in comparisons
                   if c.verdict == "regressed" or max_drop is not None and c.low is not None and c.low < -max_drop}
        if max_drop is not None:
            comparisons = [
                _with_flag(c, "below -max_drop") if c.low is not None and c.low < -max_drop else c
                for c in comparisons
            ]
    else:
        judged, failing = _policy_failures(comparisons, decisions, opts)
        failures = sides.failures + _required_failures(release, before, after) + judged
    if opts.show_flips > 0:
        comparisons = _with_flips(comparisons, before, after, metrics, failing, opts, sides.declared)
    rule = _rule(metrics, opts, use_holm, len(shared))
    if release is not None:
        rule = (f"{release.summary()} (advisory never fails; critical also fails when insufficient; overall is "
                f"advisory unless named); in the other tiers: {rule}")

    return GateResult(
        comparisons=tuple(comparisons),
        failures=tuple(failures),
        rule=rule,
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
                 "dropped_units": {"before": before.dropped, "after": after.dropped},
                 "show_flips": opts.show_flips, "flips_in": opts.flips_in,
                 "policy": None if release is None else release.source},
    )


def _required_failures(release: ReleasePolicy, before: Side, after: Side) -> list[str]:
    """A ``required`` category missing from both sides (one side only already fails the gate)."""
    present = before.categories() | after.categories()
    out = []
    for rule in release.required():
        if not any(rule.matches(c) for c in present):
            out.append(f"required category {rule.selector!r} is missing from both sides "
                       f"[{release.source}:{rule.line} {rule.selector}]")
    return out


def _policy_failures(
    comparisons: Sequence[Comparison], decisions: Mapping[tuple[str, str], Decision], opts: GateOptions,
) -> tuple[list[str], set[tuple[str, str]]]:
    """The failures under a release policy, each naming the line that decided it, and the failing keys."""
    failures: list[str] = []
    failing: set[tuple[str, str]] = set()
    for c in comparisons:
        d = decisions[(c.metric, c.group)]
        tag = f" [{d.label()}]"
        failure = None
        if d.tier == "advisory":
            continue
        if c.verdict == "regressed":
            failure = (f"{c.metric} regressed in {c.group}: {c.before:.3f} -> {c.after:.3f}, delta {c.delta:+.3f} "
                       f"[{c.low:+.3f}, {c.high:+.3f}], {c.size}")
        elif d.max_drop is not None and c.low is not None and c.low < -d.max_drop:
            failure = (f"{c.metric} in {c.group} may have dropped more than max_drop {d.max_drop:.3f}: "
                       f"lower bound {c.low:+.3f} (delta {c.delta:+.3f}, {c.size})")
        elif d.max_relative_drop is not None and c.low is not None and c.low < -d.max_relative_drop * c.before:
            failure = (f"{c.metric} in {c.group} may have dropped more than max_relative_drop "
                       f"{d.max_relative_drop:.0%} of {c.before:.3f}: lower bound {c.low:+.3f} ({c.size})")
        elif c.verdict == "insufficient" and d.tier == "critical":
            failure = f"{c.metric} in {c.group} is insufficient for a critical tier: {c.size} ({', '.join(c.flags)})"
        elif opts.fail_on_inconclusive and c.verdict in ("inconclusive", "insufficient"):
            failure = f"{c.metric} in {c.group} is {c.verdict}: delta {c.delta:+.3f}, {c.size} (fail_on_inconclusive)"
        if failure is not None:
            failures.append(failure + tag)
            failing.add((c.metric, c.group))
    if opts.require_moved:
        head = comparisons[0]
        if head.verdict != "moved":
            failures.append(f"headline pass@1 overall did not move: {head.verdict}, delta {head.delta:+.3f} "
                            "(require_moved)")
    return failures, failing


def _with_flips(
    comparisons: Sequence[Comparison], before: Side, after: Side, metrics: Sequence[str],
    failing: set[tuple[str, str]], opts: GateOptions, env: Env | None,
) -> list[Comparison]:
    """Each failing comparison (every one with ``flips_in="all"``) with the units that lost the most.

    ``overall`` gets flips only when no category of its metric failed (else they repeat).
    """
    limit, flips_in = opts.show_flips, opts.flips_in
    columns = {metric: column for column, metric in enumerate(metrics, 2)}
    failing_categories = {m for m, g in failing if g != "overall"}
    out = []
    for c in comparisons:
        wanted = flips_in == "all" or (c.metric, c.group) in failing
        if c.group == "overall":
            wanted = wanted and flips_in != "all" and c.metric not in failing_categories
        if not wanted:
            out.append(c)
            continue
        cats = sorted(before.units) if c.group == "overall" else [c.group]
        found: list[Flip] = []
        for category in cats:
            found += flips_for(category, columns[c.metric], before.units.get(category, {}),
                               after.units.get(category, {}), before.book, after.book, env, limit)
        found.sort(key=lambda f: (-f.loss, f.unit))
        out.append(replace(c, flips=tuple(found[:limit])))
    return out

def _comparisons(
    before: Side, after: Side, metrics: Sequence[str], shared: list[str], notes: list[str], opts: GateOptions, *,
    use_holm: bool, decisions: Mapping[tuple[str, str], Decision] | None = None,
) -> list[Comparison]:
    """Every (metric, group) comparison, metric by metric, Holm-adjusted across categories when on.

    A guard constant on both sides cannot fail the gate: that is warned (to the caller of
    :func:`compare_adapter`) and added to *notes*. With release-policy *decisions*, each
    comparison takes its tier's confidence, margin and ``min_units`` and names the line
    that decided it.
    """
    grouped = groups(shared)
    comparisons: list[Comparison] = []
    index = 0
    paired = {group: Paired.of(before, after, cats) for group, cats in grouped}
    for column, metric in enumerate(metrics, 2):
        per_metric: list[Comparison] = []
        alphas: list[float] = []
        for group, _cats in grouped:
            index += 1
            decision = decisions.get((metric, group)) if decisions else None
            own = opts if decision is None else opts.replace(confidence_level=decision.confidence_level,
                                                             margin=decision.margin)
            one = _one(paired[group], metric, column, group, own, rng=resample_stream(opts.bootstrap_seed, index),
                       min_units=None if decision is None else decision.min_units)
            if decision is not None:
                extra = [f"{own.confidence_level:.0%} CI"] if own.confidence_level != opts.confidence_level else []
                extra += [f"margin {own.margin:.2f}"] if own.margin != opts.margin else []
                one = replace(one, tier=decision.tier, decided_by=decision.where, flags=(*one.flags, *extra))
            per_metric.append(one)
            alphas.append(1.0 - own.confidence_level)
        if use_holm:
            per_metric = _apply_holm(per_metric, alphas)
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
    min_units: int | None = None,
) -> Comparison:
    margin, confidence_level = opts.margin, opts.confidence_level
    b, a = paired.means(column)
    n = paired.n
    k, k_before, k_after = paired.k(), paired.k("before"), paired.k("after")
    mean_b, mean_a = float(b.mean()), float(a.mean())
    delta = float((a - b).mean())
    flags: list[str] = []
    floor = max(MIN_UNITS, min_units or 0)
    if n < floor:
        why = f"fewer than {MIN_UNITS} units" if n < MIN_UNITS else f"fewer than min_units {floor}"
        return Comparison(metric, group, n, k, mean_b, mean_a, delta, None, None, "insufficient",
                          flags=(why,), k_before=k_before, k_after=k_after)
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


def _apply_holm(comparisons: list[Comparison], alpha: float | Sequence[float]) -> list[Comparison]:
    """Holm across the category groups of one metric; "overall" keeps its own interval.

    Family one-sided alpha = 1 - confidence_level (3.5-5.0 % run-level false
    fails with three categories instead of 5.6-7.6 %). *alpha* may be one per comparison
    (a release policy's tiers): each adjusted p-value is then held to its own.
    """
    alphas = [float(alpha)] * len(comparisons) if isinstance(alpha, (int, float)) else [float(a) for a in alpha]
    tested = [i for i, c in enumerate(comparisons) if c.group != "overall" and c.p_less is not None]
    if not tested:
        return comparisons
    # the adjusted p-values do not depend on alpha (only holm's own reject does): each is held to its own
    _, adjusted = holm([float(comparisons[i].p_less or 0.0) for i in tested])
    reject = [p <= alphas[i] for i, p in zip(tested, adjusted)]
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
