"""The gate of one adapter: per-category paired comparisons of graded rows, judged as one family.

``compare_adapter(before, after)``, what :func:`pytest_rlgate.compare` runs for one after
side, reduces each side to one value per *unit* (scenario, else prompt) and per metric
while it streams the rows (:mod:`.sides`), pairs the units, and compares each (metric,
group): ``pass@1`` (the mean ``reward``), any ``pass^K`` / ``pass@K`` asked for, and
``marker:<name>`` for each guard; the groups are ``overall`` and each category.

Every comparison that can fail the gate is held together with the others (:mod:`.family`):
each is tested at the one-sided level that keeps an unchanged run from failing the whole
gate more than ``family_level`` (5 %), and its interval is made at that level, so the
verdict it earns (:func:`~.verdicts.interval_verdict`) is what the interval shows:

* ``moved``: the interval lies above 0;
* ``regressed``: the interval lies below 0;
* ``flat``: the interval lies inside ±margin;
* ``inconclusive``: it covers 0 but is wider than the margin (too few units to tell);
* ``insufficient``: fewer than 3 units.

Then :func:`~.verdicts.judge` decides, per comparison, whether it fails the gate, under the
release policy's decision for it (without a policy file, the default decision: every
comparison supporting, at the gate's own margin and ``max_drop``). The gate also fails on a
category present on one side only (or a declared or required one missing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace

import numpy as np

from ..data.rows import RowInput
from ..environment.contract import Env
from ..errors import DataError, hide_user_errors
from .baseruns import with_base_runs
from .family import FamilyMember, FamilyTest, family_test
from .flips import Flip, flips_for
from .options import METHOD_NAMES, GateOptions
from .release import Decision, ReleasePolicy, as_release_policy
from .result import Comparison, GateResult, GateSides
from .sees import blind_categories
from .sides import Paired, Side, groups, metric_columns, open_side, pair_units, read_sides, resample_stream, warn_caller
from .stats import paired_bootstrap, t_ppf
from .verdicts import MIN_UNITS, Evidence, Failure, interval_verdict, judge, rule_text

__all__ = ["compare_adapter"]

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
    guarded or declared: foreign rows do not say which task graded them. ``metrics`` adds
    ``pass^K`` (every one of K replies of a prompt passes) or ``pass@K`` per category.

    ``family_level`` (default 0.05) is the run-level false-fail: every comparison that can
    fail is tested at the one level that keeps an unchanged run from failing the gate more
    often than that (:mod:`~pytest_rlgate.gate.family`); ``None`` tests each comparison on its
    own at ``confidence_level``. ``bootstrap_seed`` fixes the sign flips and resamples.

    Sides whose headers name different environment fingerprints or prompt sets are a
    :class:`DataError` unless ``allow_env_change``; units on one side only are one unless
    ``shared_units_only`` (which drops them and says how many). Either way the result's
    warnings say what was let through.

    ``show_flips`` (default 3; 0 for none) names, for every failing comparison (every one
    with ``flips_in="all"``), the scenarios that lost the most, with before -> after counts
    and one reply from each side (:mod:`~pytest_rlgate.gate.flips`), read in the same pass.
    ``release_policy`` is a release policy file (a YAML/TOML path or a
    :class:`~pytest_rlgate.gate.release.ReleasePolicy`): per category or guard a tier, its
    own confidence and margin, drop limits, ``required``, ``min_units`` and ``severe_flips``;
    every comparison then names the policy line that decided it.
    """
    opts = GateOptions.build(options, **overrides)
    release = as_release_policy(opts.release_policy)
    if opts.base_runs:
        before_rows = with_base_runs(before_rows, opts.base_runs)
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

    metrics = metric_columns(opts.metrics, sides.guards)
    level = opts.family_level if release is None else release.family(opts.family_level,
                                                                      given=opts.is_given("family_level"))
    if release is not None:
        release.check_names(before.categories() | after.categories(), sides.guards)
    decisions = {(m, g): _decide(release, m, g, opts) for m in metrics for g, _ in groups(shared)}
    comparisons, family = _comparisons(before, after, metrics, shared, notes, opts, decisions, level)
    comparisons = [_judged(c, judge(_evidence(c), decisions[(c.metric, c.group)], opts)) for c in comparisons]
    blind = blind_categories(before, after, comparisons, decisions, opts)
    side_failures = sides.failures + ([] if release is None else _required_failures(release, before, after))
    side_failures += [b.text(before.label) for b in blind if b.fails]
    if opts.show_flips > 0:
        comparisons = _with_flips(comparisons, before, after, metrics, opts, sides.declared)
    judged = [m for m in metrics if any(decisions[(m, g)].can_fail for g, _ in groups(shared))]  # advisory: none
    rule = _rule(judged or metrics, opts, family)
    if release is not None:
        rule = (f"{release.summary()} (advisory never fails; critical also fails when insufficient; overall is "
                f"advisory unless named); in the other tiers: {rule}")
    return GateResult(
        comparisons=tuple(comparisons), rule=rule, options=opts, family=family, side_failures=tuple(side_failures),
        warnings=tuple(notes), blind=blind,
        sides=GateSides(before=before.label, after=(after.label,),
                        env=None if sides.declared is None else sides.declared.name, guards=tuple(sides.guards),
                        categories=tuple(sides.categories or ()),
                        headers={"before": sides.before_header, "after": sides.after_headers[0]},
                        dropped_units={"before": before.dropped, "after": after.dropped}),
    )


def _decide(release: ReleasePolicy | None, metric: str, group: str, opts: GateOptions) -> Decision:
    if release is None:
        return Decision.default(confidence_level=opts.confidence_level, margin=opts.margin, max_drop=opts.max_drop)
    return release.decide(metric, group, confidence_level=opts.confidence_level, margin=opts.margin,
                          max_drop=opts.max_drop)


def _evidence(c: Comparison) -> Evidence:
    return Evidence(c.metric, c.group, c.verdict, c.before, c.after, c.delta, c.low, c.high, c.size, c.flags,
                    severe=c.severe)


def _judged(c: Comparison, failure: Failure | None) -> Comparison:
    """*c* with its judgement, and the flag that says why where its verdict does not."""
    flag = None if failure is None else failure.flag
    return replace(c, failure=failure, flags=(*c.flags, flag) if flag else c.flags)


def _rule(metrics: Sequence[str], opts: GateOptions, family: FamilyTest | None) -> str:
    if family is None:
        test = f"{opts.confidence_level:.0%} {METHOD_NAMES[opts.method]} upper bound < 0"
    else:
        test = f"{METHOD_NAMES[opts.method]} upper bound < 0"
    return rule_text(metrics, opts, family, test=test)


def _required_failures(release: ReleasePolicy, before: Side, after: Side) -> list[str]:
    """A ``required`` category missing from both sides (one side only already fails the gate)."""
    present = before.categories() | after.categories()
    out = []
    for rule in release.required():
        if not any(rule.matches(c) for c in present):
            out.append(f"required category {rule.selector!r} is missing from both sides "
                       f"[{release.source}:{rule.line} {rule.selector}]")
    return out


def _with_flips(comparisons: Sequence[Comparison], before: Side, after: Side, metrics: Sequence[str],
                opts: GateOptions, env: Env | None) -> list[Comparison]:
    """Each failing comparison (every one with ``flips_in="all"``) with the units that lost the most.

    ``overall`` gets flips only when no category of its metric failed (else they repeat).
    """
    limit, flips_in = opts.show_flips, opts.flips_in
    columns = {metric: column for column, metric in enumerate(metrics, 2)}
    failing_categories = {c.metric for c in comparisons if c.failed and c.group != "overall"}
    out = []
    for c in comparisons:
        wanted = flips_in == "all" or c.failed
        if c.group == "overall":
            wanted = wanted and flips_in != "all" and c.metric not in failing_categories
        if not wanted:
            out.append(c)
            continue
        cats = sorted(before.units) if c.group == "overall" else [c.group]
        found: list[Flip] = []
        for category in cats:
            found += flips_for(category, columns[c.metric], before.units.get(category, {}),
                               after.units.get(category, {}), before.book, after.book, env, None,
                               replies=2 if c.metric.startswith("pass") else None)
        found.sort(key=lambda f: (-f.loss, f.unit))
        shown = found[:limit]
        tied = sum(1 for f in found[limit:] if shown and f.loss == shown[-1].loss)
        out.append(replace(c, flips=tuple(shown), lost=len(found), tied=tied))
    return out


def _comparisons(
    before: Side, after: Side, metrics: Sequence[str], shared: list[str], notes: list[str], opts: GateOptions,
    decisions: Mapping[tuple[str, str], Decision], level: float | None,
) -> tuple[list[Comparison], FamilyTest | None]:
    """Every (metric, group) comparison, each at the level the family test sets (or its own, with no family).

    A guard constant on both sides cannot fail the gate: that is warned (to the caller of
    :func:`compare_adapter`) and added to *notes*. Each comparison takes its decision's
    margin and ``min_units``, and under a release policy names the line that decided it.
    """
    grouped = groups(shared)
    paired = {group: Paired.of(before, after, cats) for group, cats in grouped}
    index = {unit: i for i, unit in enumerate(paired["overall"].units)}
    cells = []  # (metric, column, group, decision, before means, after means)
    for column, metric in enumerate(metrics, 2):
        for group, _cats in grouped:
            b, a = paired[group].means(column)
            cells.append((metric, column, group, decisions[(metric, group)], b, a))
    family = None
    tested = [decision.can_fail and b.size >= max(MIN_UNITS, decision.min_units or 0)
              for _m, _c, _g, decision, b, _a in cells]
    members = [FamilyMember(a - b, np.fromiter((index[u] for u in paired[group].units), dtype=np.intp),
                            reply_noise(paired[group], b, a), decision.weight, tested=test)
               for (_m, _c, group, decision, b, a), test in zip(cells, tested)]
    if level is not None:
        family = family_test(members, n_units=len(index), level=level, draws=opts.n_resamples,
                             rng=resample_stream(opts.bootstrap_seed, 0))
    comparisons: list[Comparison] = []
    for at, (metric, column, group, decision, b, a) in enumerate(cells):
        one = _one(paired[group], metric, column, group, b, a, opts, decision,
                   None if family is None else (family, at, members[at]),
                   rng=resample_stream(opts.bootstrap_seed, at + 1))
        if family is not None and tested[at]:
            one = replace(one, p_adjusted=family.adjusted[at])
        if decision.where:
            extra = [] if decision.confidence_level == opts.confidence_level else [
                f"{decision.confidence_level:.0%} CI" if family is None else f"weight {decision.weight:g} "
                                                                            f"({decision.confidence_level:.0%} tier)"]
            extra += [f"margin {decision.margin:.2f}"] if decision.margin != opts.margin else []
            one = replace(one, tier=decision.tier, decided_by=decision.where, flags=(*one.flags, *extra))
        comparisons.append(one)
    for metric in metrics[1:]:
        overall = next(c for c in comparisons if c.metric == metric and c.group == "overall")
        if metric.startswith("marker:") and "constant" in overall.flags:
            note = (f"guard {metric[7:]!r} is constant ({overall.before:.3f}) on both sides: it cannot "
                    "fail this gate (pick a marker that varies, or drop the guard)")
            warn_caller(note)
            notes.append(note)
    return comparisons, family


def reply_noise(paired: Paired, b: np.ndarray, a: np.ndarray) -> float:
    """The mean variance of a unit's delta from its replies alone: each side's mean over its r rows
    varies by p(1 - p) / r, with half a pass of smoothing so that 4/4 is not a certainty."""
    rows_b, rows_a = paired.before[:, 0], paired.after[:, 0]
    smooth_b = np.clip((b * rows_b + 0.5) / (rows_b + 1.0), 0.0, 1.0)
    smooth_a = np.clip((a * rows_a + 0.5) / (rows_a + 1.0), 0.0, 1.0)
    return float(np.mean(smooth_b * (1 - smooth_b) / rows_b + smooth_a * (1 - smooth_a) / rows_a))


def _one(paired: Paired, metric: str, column: int, group: str, b: np.ndarray, a: np.ndarray, opts: GateOptions,
         decision: Decision, family: tuple[FamilyTest, int, FamilyMember] | None, *,
         rng: np.random.Generator | None) -> Comparison:
    """One comparison: its interval at its level, the verdict the interval earns, and what it says besides.

    In a family the paired t interval takes the critical value the sign flips set for this
    comparison (a bootstrap method, the family's marginal level); alone, each interval is at
    the decision's own confidence.
    """
    margin = decision.margin
    n = paired.n
    k, k_before, k_after = paired.k(), paired.k("before"), paired.k("after")
    mean_b, mean_a = float(b.mean()), float(a.mean())
    d = a - b
    delta = float(d.mean())
    severe = int(np.count_nonzero((b == 1.0) & (a == 0.0)))
    floor = max(MIN_UNITS, decision.min_units or 0)
    if n < floor:
        why = f"fewer than {MIN_UNITS} units" if n < MIN_UNITS else f"fewer than min_units {floor}"
        return Comparison(metric, group, n, k, mean_b, mean_a, delta, None, None, "insufficient",
                          flags=(why,), k_before=k_before, k_after=k_after, severe=severe)
    flags: list[str] = []
    if family is None:
        level = (1.0 - decision.confidence_level) / 2.0
    else:
        test, at, member = family
        level = min(0.25, max(test.marginal * decision.weight, 1e-12))
    res = paired_bootstrap(b, a, n_resamples=opts.n_resamples, confidence_level=1.0 - 2.0 * level,
                           method=opts.method, rng=rng)
    interval = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    mde: float | None = res.mde
    if family is not None and np.any(d) and opts.method == "t":
        se, critical = member.standard_error(), test.critical[at]
        interval = (delta - critical * se, delta + critical * se)
        mde = (critical + t_ppf(0.80, n - 1)) * se
    # no delta lies beyond the metric's own range (a t interval would: [-1.17, -0.50] for a total collapse)
    span = max(1.0, float(b.max()), float(a.max())) - min(0.0, float(b.min()), float(a.min()))
    low, high = max(interval[0], -span), min(interval[1], span)
    verdict = interval_verdict(low, high, margin)
    noise = _noise_band(*paired.run_means(column), 1.0 - 2.0 * level)
    if noise is not None and abs(delta) <= noise:
        # Asymmetric on purpose: run-to-run noise can take back a claimed win, never a
        # regression. The family already holds the false-regression rate, and a floor from
        # three base runs (t at 2 df = 4.3) would hide real collapses.
        if verdict == "moved":  # noise cannot prove flatness either: that takes the margin
            verdict = "flat" if -margin <= low and high <= margin else "inconclusive"
        flags.append("within noise")
    if np.ptp(d) == 0:
        constant = np.ptp(b) == 0 and np.ptp(a) == 0 and b[0] == a[0]
        flags.append("constant" if constant else "no variation")
    return Comparison(metric, group, n, k, mean_b, mean_a, delta, low, high, verdict,
                      mde=mde, p_less=res.p_less, noise=noise, flags=tuple(flags), k_before=k_before,
                      k_after=k_after, level=level, severe=severe)
