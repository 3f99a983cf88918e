"""The gate: per-category paired comparisons of graded rows and the rule that fails a suite.

``compare(before, after)`` reduces each side to one value per *unit* (scenario, else
prompt) and per metric while it streams the rows, pairs the units, and runs
:func:`~pytest_rlgate.stats.paired_bootstrap` per (metric, group). The metrics are
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
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import DataError, RlgateWarning, UsageError
from .rows import iter_checked
from .stats import DEFAULT_METHOD, METHODS, holm, paired_bootstrap, t_ppf

__all__ = [
    "MIN_UNITS",
    "VERDICTS",
    "Comparison",
    "GateResult",
    "RegressionError",
    "assert_no_regression",
    "compare",
]

#: fewer paired units than this get the verdict "insufficient"
MIN_UNITS = 3
VERDICTS: tuple[str, ...] = ("regressed", "inconclusive", "insufficient", "flat", "moved")
#: Holm turns itself on from this many categories (stats.md 3.5: ~7 % run-level false
#: fails with three categories at 95 % each)
HOLM_FROM = 4
_METHOD_NAMES = {
    "expanded": "expanded-percentile bootstrap",
    "percentile": "percentile bootstrap",
    "basic": "basic bootstrap",
    "t": "paired t",
}


class RegressionError(AssertionError):
    """The gate failed; the message is the table of what failed and the rule."""

    def __init__(self, message: str, result: GateResult | None = None) -> None:
        super().__init__(message)
        self.result = result


RegressionError.__module__ = "pytest_rlgate"


@dataclass(frozen=True)
class Comparison:
    """One (metric, group) before/after comparison over paired units."""

    metric: str
    group: str
    n_units: int
    k: float
    before: float
    after: float
    delta: float
    low: float | None
    high: float | None
    verdict: str
    mde: float | None = None
    p_less: float | None = None
    p_adjusted: float | None = None
    noise: float | None = None
    flags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "group": self.group,
            "n_units": self.n_units,
            "k": self.k,
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "low": self.low,
            "high": self.high,
            "verdict": self.verdict,
            "mde": self.mde,
            "p_less": self.p_less,
            "p_adjusted": self.p_adjusted,
            "noise": self.noise,
            "flags": list(self.flags),
        }


@dataclass(frozen=True)
class GateResult:
    """Every comparison, what failed, and the rule that decided it."""

    comparisons: tuple[Comparison, ...]
    failures: tuple[str, ...]
    rule: str
    method: str
    confidence_level: float
    n_resamples: int
    seed: int | None
    margin: float
    holm: bool
    unit: str = "scenario"
    warnings: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.failures

    def __bool__(self) -> bool:
        return self.passed

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``rlgate gate --json`` (and ``--rlgate-report`` entries)."""
        return {
            "passed": self.passed,
            "rule": self.rule,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "failures": list(self.failures),
            "method": self.method,
            "confidence_level": self.confidence_level,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "margin": self.margin,
            "holm": self.holm,
            "warnings": list(self.warnings),
            "options": dict(self.options),
        }

    def settings_line(self) -> str:
        """How the intervals were made: enough to reproduce the run from the output alone."""
        from .gate_text import settings_line

        return settings_line(self)

    def table(self, *, verbose: bool = True) -> str:
        """The aligned table (every comparison, or only the failing/borderline ones)."""
        from .gate_text import render_table

        return render_table(self, verbose=verbose)

    def report(self, *, verbose: bool = True) -> str:
        """Header, table, rule and failures: what ``rlgate gate`` prints."""
        from .gate_text import render_report

        return render_report(self, verbose=verbose)

    def message(self) -> str:
        """The :class:`RegressionError` text: count, settings, failing rows, rule, remedy."""
        from .gate_text import render_failure

        return render_failure(self)


# -- reading both sides --------------------------------------------------------------------


class _Side:
    """Per-unit sums of each metric for one side, filled while rows stream past.

    ``units[(category, unit)] = [rows, sum reward, sum marker_1, ...]``; ``runs`` holds the
    same sums per (category, eval_run) for the noise floor. Rows themselves are not kept.
    """

    def __init__(self, source: Any, label: str, guards: Sequence[str]) -> None:
        self.label = label
        self.units: dict[tuple[str, str], list[float]] = {}
        self.runs: dict[tuple[str, Any], list[float]] = {}
        self.prompts: dict[str, int] = {}
        self.rows: dict[str, int] = {}
        width = 2 + len(guards)
        units, runs, rows, prompts = self.units, self.runs, self.rows, self.prompts
        for row, line, new_prompt in iter_checked(source, name=label):
            category = row["category"]
            markers = row["markers"]
            try:
                values = [row["reward"], *[markers[g] for g in guards]]
            except KeyError:
                missing = next(g for g in guards if g not in markers)
                raise DataError(
                    f"marker {missing!r} is missing but guarded (every row needs it; "
                    f"drop the guard or re-grade with an env that sets it)",
                    path=label, line=line,
                ) from None
            for table, key in ((units, (category, row.get("scenario_id") or row["prompt"])),
                               (runs, (category, row.get("eval_run")))):
                acc = table.get(key)
                if acc is None:
                    acc = table[key] = [0] * width
                acc[0] += 1
                for j in range(1, width):
                    acc[j] += values[j - 1]
            rows[category] = rows.get(category, 0) + 1
            if new_prompt:
                prompts[category] = prompts.get(category, 0) + 1

    def categories(self) -> set[str]:
        return {category for category, _ in self.units}

    def unit_counts(self, category: str) -> int:
        return sum(1 for c, _ in self.units if c == category)


def _label(source: Any, side: str) -> str:
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"<{side} rows>"


# -- the comparison ------------------------------------------------------------------------


def _unit_means(side: _Side, categories: Iterable[str], column: int) -> dict[str, tuple[float, float]]:
    """unit -> (rows, sum) over the given categories (a scenario may span categories)."""
    wanted = set(categories)
    out: dict[str, list[float]] = {}
    for (category, unit), acc in side.units.items():
        if category in wanted:
            slot = out.setdefault(unit, [0.0, 0.0])
            slot[0] += acc[0]
            slot[1] += acc[column]
    return {unit: (n, s) for unit, (n, s) in out.items()}


def _run_means(side: _Side, categories: Iterable[str], column: int) -> list[float]:
    wanted = set(categories)
    out: dict[Any, list[float]] = {}
    for (category, run), acc in side.runs.items():
        if category in wanted:
            slot = out.setdefault(run, [0.0, 0.0])
            slot[0] += acc[0]
            slot[1] += acc[column]
    return [s / n for n, s in out.values()]


def _noise_band(before_runs: list[float], after_runs: list[float], confidence_level: float) -> float | None:
    """q · run_std · sqrt(1/n_a + 1/n_b), run_std pooled over the eval runs of each side.

    Needs at least two eval runs on one side (DESIGN section 6: 3 base re-runs at sample
    seeds 17, 18, 19); otherwise there is no floor and None is returned.
    """
    df = sum(len(r) - 1 for r in (before_runs, after_runs) if len(r) > 1)
    if df < 1:
        return None
    ss = sum(float(np.sum((np.asarray(r) - np.mean(r)) ** 2)) for r in (before_runs, after_runs) if len(r) > 1)
    run_std = math.sqrt(ss / df)
    q = t_ppf(0.5 + confidence_level / 2.0, df)
    return q * run_std * math.sqrt(1.0 / len(before_runs) + 1.0 / len(after_runs))


def _interval_verdict(low: float, high: float, margin: float) -> str:
    if high < 0:
        return "regressed"
    if low > 0:
        return "moved"
    if -margin <= low and high <= margin:
        return "flat"
    return "inconclusive"


def _k(before: _Side, after: _Side, categories: Iterable[str]) -> float:
    cats = list(categories)
    rows = sum(s.rows.get(c, 0) for s in (before, after) for c in cats)
    prompts = sum(s.prompts.get(c, 0) for s in (before, after) for c in cats)
    if not prompts:
        return 0
    k = rows / prompts
    return int(k) if float(k).is_integer() else round(k, 2)


def _check_pairing(before: _Side, after: _Side, categories: Sequence[str]) -> None:
    """Units of a shared category must appear on both sides: name the first missing ones."""
    problems = []
    shared = set(categories)
    for here, there in ((before, after), (after, before)):
        lost = [(c, u) for (c, u) in here.units if c in shared and (c, u) not in there.units]
        if lost:
            shown = ", ".join(f"{u!r} ({c})" for c, u in sorted(lost)[:5])
            more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
            problems.append(f"{len(lost)} unit(s) of {here.label} missing from {there.label}: {shown}{more}")
    if problems:
        raise DataError(
            "before and after rows do not pair: " + "; ".join(problems)
            + " (units are scenario_id, else prompt; sample the same holdout on both sides)"
        )


def _validate_options(
    by: str, margin: float, confidence_level: float, n_resamples: int, method: str, max_drop: float | None
) -> None:
    if by != "category":
        raise UsageError(f"by={by!r} is not supported; rows are grouped by 'category'")
    if not (isinstance(margin, (int, float)) and 0 <= margin < 1):
        raise UsageError(f"margin must be in [0, 1), got {margin!r}")
    if not (isinstance(confidence_level, (int, float)) and 0 < confidence_level < 1):
        raise UsageError(f"confidence level must be in (0, 1), got {confidence_level!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
        raise UsageError(f"resamples must be an integer >= 100, got {n_resamples!r}")
    if method not in METHODS:
        raise UsageError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if max_drop is not None and not (isinstance(max_drop, (int, float)) and 0 <= max_drop < 1):
        raise UsageError(f"max_drop must be in [0, 1), got {max_drop!r}")


def compare(
    before_rows: Any,
    after_rows: Any,
    *,
    by: str = "category",
    guards: Sequence[str] = ("well_formed",),
    margin: float = 0.10,
    confidence_level: float = 0.95,
    n_resamples: int = 10_000,
    method: str = DEFAULT_METHOD,
    seed: int | None = 0,
    max_drop: float | None = None,
    require_moved: bool = False,
    fail_on_inconclusive: bool = False,
    holm: bool | None = None,
    categories: Sequence[str] | None = None,
) -> GateResult:
    """Compare AFTER against BEFORE graded rows, per category, and apply the gate's rule.

    *before_rows*/*after_rows* are row-file paths (streamed, never held) or iterables of
    row dicts. *guards* are marker names that must not regress (higher is better).
    *categories* declares categories that must appear on both sides. *holm* adjusts the
    regression test across categories (family one-sided alpha = 1 - confidence_level); by
    default on from four categories. *seed* fixes the resamples (each comparison draws
    from its own stream derived from it).
    """
    guards = tuple(dict.fromkeys(guards))
    _validate_options(by, margin, confidence_level, n_resamples, method, max_drop)
    before = _Side(before_rows, _label(before_rows, "before"), guards)
    after = _Side(after_rows, _label(after_rows, "after"), guards)

    failures: list[str] = []
    cats_b, cats_a = before.categories(), after.categories()
    for category in sorted(cats_b ^ cats_a):
        has, lacks = (before, after) if category in cats_b else (after, before)
        failures.append(
            f"category {category!r} has {has.unit_counts(category)} unit(s) in {has.label} but none in {lacks.label}"
        )
    for category in categories or ():
        absent = [s.label for s in (before, after) if category not in s.categories()]
        if len(absent) == 2:
            failures.append(f"declared category {category!r} is missing from both sides")
        elif absent and category not in cats_b ^ cats_a:
            failures.append(f"declared category {category!r} is missing from {absent[0]}")
    shared = sorted(cats_b & cats_a)
    _check_pairing(before, after, shared)
    if not shared:
        raise DataError(f"{before.label} and {after.label} share no category; nothing to compare")

    use_holm = len(shared) >= HOLM_FROM if holm is None else bool(holm)
    metrics = ["pass@1", *(f"marker:{g}" for g in guards)]
    groups: list[tuple[str, list[str]]] = [("overall", shared), *((c, [c]) for c in shared)]
    alpha = 1.0 - confidence_level
    comparisons: list[Comparison] = []
    notes: list[str] = []
    index = 0
    for column, metric in enumerate(metrics, 1):
        per_metric: list[Comparison] = []
        for group, cats in groups:
            index += 1
            per_metric.append(_one(
                before, after, metric, column, group, cats, margin=margin, confidence_level=confidence_level,
                n_resamples=n_resamples, method=method,
                rng=None if seed is None else np.random.default_rng([seed, index]),
            ))
        if use_holm:
            per_metric = _apply_holm(per_metric, alpha)
        if metric != "pass@1":
            overall = per_metric[0]
            if "constant" in overall.flags:
                note = (f"guard {metric[7:]!r} is constant ({overall.before:.3f}) on both sides: it cannot "
                        "fail this gate (pick a marker that varies, or drop the guard)")
                warnings.warn(note, RlgateWarning, stacklevel=2)
                notes.append(note)
        comparisons.extend(per_metric)

    for c in comparisons:
        if c.verdict == "regressed":
            failures.append(
                f"{c.metric} regressed in {c.group}: {c.before:.3f} -> {c.after:.3f}, "
                f"delta {c.delta:+.3f} [{c.low:+.3f}, {c.high:+.3f}], {c.n_units} units x {c.k}"
            )
        elif max_drop is not None and c.low is not None and c.low < -max_drop:
            failures.append(
                f"{c.metric} in {c.group} may have dropped more than max_drop {max_drop:.3f}: "
                f"lower bound {c.low:+.3f} (delta {c.delta:+.3f}, {c.n_units} units x {c.k})"
            )
        elif fail_on_inconclusive and c.verdict in ("inconclusive", "insufficient"):
            failures.append(f"{c.metric} in {c.group} is {c.verdict}: delta {c.delta:+.3f}, "
                            f"{c.n_units} units x {c.k} (fail_on_inconclusive)")
    if require_moved:
        head = comparisons[0]
        if head.verdict != "moved":
            failures.append(f"headline pass@1 overall did not move: {head.verdict}, delta {head.delta:+.3f} "
                            "(require_moved)")
    if max_drop is not None:
        comparisons = [
            _with_flag(c, "below -max_drop") if c.low is not None and c.low < -max_drop else c for c in comparisons
        ]

    rule = _rule(metrics, confidence_level, method, use_holm, len(shared), margin, max_drop, require_moved,
                 fail_on_inconclusive)
    return GateResult(
        comparisons=tuple(comparisons),
        failures=tuple(failures),
        rule=rule,
        method=method,
        confidence_level=float(confidence_level),
        n_resamples=0 if method == "t" else int(n_resamples),
        seed=seed,
        margin=float(margin),
        holm=use_holm,
        unit="scenario",
        warnings=tuple(notes),
        options={"guards": list(guards), "max_drop": max_drop, "require_moved": require_moved,
                 "fail_on_inconclusive": fail_on_inconclusive, "categories": list(categories or ()),
                 "before": before.label, "after": after.label},
    )


def _with_flag(c: Comparison, flag: str, **changes: Any) -> Comparison:
    from dataclasses import replace

    return replace(c, flags=(*c.flags, flag), **changes)


def _one(
    before: _Side,
    after: _Side,
    metric: str,
    column: int,
    group: str,
    categories: list[str],
    *,
    margin: float,
    confidence_level: float,
    n_resamples: int,
    method: str,
    rng: np.random.Generator | None,
) -> Comparison:
    b_units, a_units = _unit_means(before, categories, column), _unit_means(after, categories, column)
    units = sorted(b_units)
    b = np.array([b_units[u][1] / b_units[u][0] for u in units])
    a = np.array([a_units[u][1] / a_units[u][0] for u in units])
    n = len(units)
    k = _k(before, after, categories)
    mean_b, mean_a = float(b.mean()), float(a.mean())
    delta = float((a - b).mean())
    flags: list[str] = []
    if n < MIN_UNITS:
        return Comparison(metric, group, n, k, mean_b, mean_a, delta, None, None, "insufficient",
                          flags=(f"fewer than {MIN_UNITS} units",))
    res = paired_bootstrap(b, a, n_resamples=n_resamples, confidence_level=confidence_level, method=method, rng=rng)
    low, high = res.confidence_interval
    noise = _noise_band(_run_means(before, categories, column), _run_means(after, categories, column),
                        confidence_level)
    verdict = _interval_verdict(low, high, margin)
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
                      mde=res.mde, p_less=res.p_less, noise=noise, flags=tuple(flags))


def _apply_holm(comparisons: list[Comparison], alpha: float) -> list[Comparison]:
    """Holm across the category groups of one metric; "overall" keeps its own interval.

    Family one-sided alpha = 1 - confidence_level (stats.md 3.5: 3.5-5.0 % run-level false
    fails with three categories instead of 5.6-7.6 %).
    """
    tested = [i for i, c in enumerate(comparisons) if c.group != "overall" and c.p_less is not None]
    if not tested:
        return comparisons
    reject, adjusted = holm([comparisons[i].p_less for i in tested], alpha=alpha)
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
            from dataclasses import replace

            out[i] = replace(c, **changes)
    return out


def _rule(
    metrics: Sequence[str],
    confidence_level: float,
    method: str,
    use_holm: bool,
    n_categories: int,
    margin: float,
    max_drop: float | None,
    require_moved: bool,
    fail_on_inconclusive: bool,
) -> str:
    level = f"{confidence_level:.0%}"
    test = (f"Holm-adjusted one-sided p < {1 - confidence_level:.2f} across {n_categories} categories"
            if use_holm else f"{level} {_METHOD_NAMES[method]} upper bound < 0")
    parts = [f"fail if {', '.join(metrics)} regressed overall or in any category ({test})",
             "a category is on one side only"]
    if max_drop is not None:
        parts.append(f"a lower bound is below -{max_drop:.2f} (non-inferiority)")
    if require_moved:
        parts.append("overall pass@1 did not move up")
    if fail_on_inconclusive:
        parts.append("any verdict is inconclusive or insufficient")
    return "; or ".join(parts) + f"; flat = interval inside ±{margin:.2f}"


def assert_no_regression(before: Any, after: Any, **options: Any) -> GateResult:
    """Run :func:`compare` and raise :class:`RegressionError` (an AssertionError) on failure.

    *before*/*after* are row lists or row-file paths; *options* are :func:`compare`'s.
    Returns the result when the gate passes.
    """
    __tracebackhide__ = True
    result = compare(before, after, **options)
    if not result.passed:
        raise RegressionError(result.message(), result)
    return result
