"""The gate: per-category paired comparisons of graded rows and the rule that fails a suite.

``compare(before, after)`` reduces each side to one value per *unit* (scenario, else
prompt) and per metric while it streams the rows, pairs the units, and runs
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
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.provenance import Provenance, check_graded_by, header_env
from ..data.rows import NEW, SAME, header_of, iter_checked
from ..environment.contract import Env, EnvSpec, load_env
from ..errors import DataError, RlgateWarning, UsageError
from .flips import DEFAULT_SHOW_FLIPS, FLIPS_IN, Flip, ReplyBook, flips_for
from .release import Decision, ReleasePolicy, as_release_policy
from .stats import DEFAULT_METHOD, METHOD_NAMES, METHODS, Method, holm, paired_bootstrap, t_ppf
from .text import render_failure, render_report, render_table, settings_line
from .verdicts import MIN_UNITS, VERDICTS, interval_verdict

__all__ = [
    "MIN_UNITS",
    "VERDICTS",
    "Comparison",
    "GateResult",
    "RegressionError",
    "assert_no_regression",
    "compare",
]

#: Holm turns itself on from this many categories (~7 % run-level false
#: fails with three categories at 95 % each)
HOLM_FROM = 4


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
    #: rows per prompt on each side; ``k`` pools both (they differ when a k = 8 candidate
    #: is gated against a k = 4 baseline)
    k_before: float | None = None
    k_after: float | None = None
    #: the scenarios that lost the most, when the comparison failed (or every one was asked for)
    flips: tuple[Flip, ...] = ()
    #: the release policy's tier and the line that decided it (None without a policy)
    tier: str | None = None
    decided_by: str | None = None

    @property
    def size(self) -> str:
        """``"15 units x 4"``, or ``"15 units x 4 (before) / 8 (after)"`` when the sides' k differ."""
        if self.k_before is None or self.k_before == self.k_after:
            return f"{self.n_units} units x {self.k}"
        return f"{self.n_units} units x {self.k_before} (before) / {self.k_after} (after)"

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
            "k_before": self.k_before,
            "k_after": self.k_after,
            "flips": [f.to_dict() for f in self.flips],
            "tier": self.tier,
            "decided_by": self.decided_by,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Comparison:
        """The inverse of :meth:`to_dict` (a row of a run's gate.json)."""
        return cls(**{**record, "flags": tuple(record.get("flags") or ()),
                      "flips": tuple(Flip.from_dict(f) for f in record.get("flips") or ())})


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

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> GateResult:
        """The inverse of :meth:`to_dict`: a run's gate.json as the result the run printed.

        :raises DataError: the record is not ``GateResult.to_dict()``'s shape.
        """
        try:
            return cls(comparisons=tuple(Comparison.from_dict(c) for c in record["comparisons"]),
                       failures=tuple(record["failures"]), rule=record["rule"], method=record["method"],
                       confidence_level=record["confidence_level"], n_resamples=record["n_resamples"],
                       seed=record["seed"], margin=record["margin"], holm=record["holm"],
                       warnings=tuple(record.get("warnings") or ()), options=dict(record.get("options") or {}))
        except (KeyError, TypeError) as exc:
            raise DataError(f"not a gate result (GateResult.to_dict()): {exc}") from None

    def settings_line(self) -> str:
        """How the intervals were made: enough to reproduce the run from the output alone."""
        return settings_line(self)

    def table(self, *, verbose: bool = True) -> str:
        """The aligned table (every comparison, or only the failing/borderline ones)."""
        return render_table(self, verbose=verbose)

    def report(self, *, verbose: bool = True) -> str:
        """Header, table, rule and failures: what ``rlgate gate`` prints."""
        return render_report(self, verbose=verbose)

    def message(self) -> str:
        """The :class:`RegressionError` text: count, settings, failing rows, rule, remedy."""
        return render_failure(self)


# -- reading both sides --------------------------------------------------------------------


class _Side:
    """Per-cell sums of each metric for one side, filled while rows stream past.

    A cell is (category, unit, eval_run); ``cells[key] = [rows, prompts, sum reward, sum
    marker_1, ...]``. Per-unit sums (the bootstrap's input) and per-run sums (the noise
    floor) are both derived from the cells once the rows are read, so each row touches one
    list; and while the reader says a row has the previous row's (scenario, prompt,
    eval_run) and category, its cell is the previous one too. Rows themselves are not kept.
    """

    def __init__(self, source: Any, label: str, guards: Sequence[str], *, replies: bool = False) -> None:
        self.label = label
        self.dropped = 0
        #: example replies per unit (for flips), kept in the same pass when asked for
        self.book = ReplyBook(guards) if replies else None
        book = self.book
        cells: dict[tuple[str, str, Any], list[float]] = {}
        width = 3 + len(guards)
        columns = tuple(enumerate(guards, 3))
        category: str | None = None
        acc: list[float] = []
        for row, line, state in iter_checked(source, name=label):
            if state != SAME or row["category"] != category:
                category = row["category"]
                key = (category, row.get("scenario_id") or row["prompt"], row.get("eval_run"))
                acc = cells.get(key)  # type: ignore[assignment]
                if acc is None:
                    acc = cells[key] = [0] * width
                if state == NEW:
                    acc[1] += 1
            if book is not None:
                book.add(row["category"], key[1], row)
            acc[0] += 1
            acc[2] += row["reward"]
            if columns:
                markers = row["markers"]
                try:
                    for column, guard in columns:
                        acc[column] += markers[guard]
                except KeyError:
                    missing = next(g for g in guards if g not in markers)
                    raise DataError(
                        f"marker {missing!r} is missing but guarded (every row needs it; "
                        f"drop the guard or re-grade with an env that sets it)",
                        path=label, line=line,
                    ) from None
        self.cells = cells
        self._tables()

    def _tables(self) -> None:
        """``units[category][unit]`` and ``runs[category][eval_run]``: the cells summed."""
        self.units: dict[str, dict[str, list[float]]] = {}
        self.runs: dict[str, dict[Any, list[float]]] = {}
        for (category, unit, run), acc in self.cells.items():
            for table, key in ((self.units, unit), (self.runs, run)):
                inner = table.get(category)
                if inner is None:
                    inner = table[category] = {}
                total = inner.get(key)
                if total is None:
                    inner[key] = list(acc)
                else:
                    for column, value in enumerate(acc):
                        total[column] += value

    def drop_units(self, lost: Mapping[str, set[str]]) -> None:
        """Drop the units *lost* names per category (``--shared-units-only``); count them."""
        self.dropped = sum(len(units) for units in lost.values())
        self.cells = {key: acc for key, acc in self.cells.items() if key[1] not in lost.get(key[0], ())}
        self._tables()

    def categories(self) -> set[str]:
        return set(self.units)

    def unit_counts(self, category: str) -> int:
        return len(self.units.get(category, ()))


def _label(source: Any, side: str) -> str:
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"<{side} rows>"


# -- the comparison ------------------------------------------------------------------------


def _sums(table: Mapping[str, dict[Any, list[float]]], categories: Sequence[str]) -> dict[Any, list[float]]:
    """key -> column sums over *categories* (a scenario may span categories)."""
    if len(categories) == 1:
        return table.get(categories[0], {})
    out: dict[Any, list[float]] = {}
    for category in categories:
        for key, acc in table.get(category, {}).items():
            slot = out.get(key)
            out[key] = acc if slot is None else [x + y for x, y in zip(slot, acc)]
    return out


def _ratio_k(rows: float, prompts: float) -> float:
    if not prompts:
        return 0
    k = rows / prompts
    return int(k) if float(k).is_integer() else round(k, 2)


@dataclass(frozen=True)
class _Paired:
    """One group's paired units: per-unit column sums of each side, row for row.

    Built once per group and shared by every metric (a column of the same sums), so a
    gate over 50,000 units walks its tables a handful of times, not once per comparison.
    """

    before: np.ndarray  #: [units, columns]: rows, prompts, sum reward, sum marker...
    after: np.ndarray
    before_runs: np.ndarray  #: [eval runs, columns]
    after_runs: np.ndarray

    @classmethod
    def of(cls, before: _Side, after: _Side, categories: Sequence[str]) -> _Paired:
        b, a = _sums(before.units, categories), _sums(after.units, categories)
        units = sorted(b)
        width = len(next(iter(b.values())))

        def matrix(rows: Iterable[list[float]]) -> np.ndarray:
            return np.array(list(rows), dtype=float).reshape(-1, width)

        return cls(matrix(b[u] for u in units), matrix(a[u] for u in units),
                   matrix(_sums(before.runs, categories).values()), matrix(_sums(after.runs, categories).values()))

    @property
    def n(self) -> int:
        return len(self.before)

    def k(self, side: str | None = None) -> float:
        """Rows per prompt (per eval run): of one side, or pooled over both."""
        sides = [self.before, self.after] if side is None else [getattr(self, side)]
        return _ratio_k(sum(float(m[:, 0].sum()) for m in sides), sum(float(m[:, 1].sum()) for m in sides))

    def means(self, column: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-unit means of a column, before and after."""
        return self.before[:, column] / self.before[:, 0], self.after[:, column] / self.after[:, 0]

    def run_means(self, column: int) -> tuple[list[float], list[float]]:
        """Per-eval-run means of a column, before and after (the noise floor's input)."""
        return ([float(v) for v in self.before_runs[:, column] / self.before_runs[:, 0]],
                [float(v) for v in self.after_runs[:, column] / self.after_runs[:, 0]])


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


def _pair(before: _Side, after: _Side, categories: Sequence[str], shared_units_only: bool) -> str | None:
    """Units of a shared category must appear on both sides: name the first missing ones.

    With *shared_units_only* (a holdout that changed between the sides) the unpaired units
    are dropped instead, and the returned note says how many from each side.
    """
    lost = {side.label: {c: side.units[c].keys() - other.units[c].keys() for c in categories}
            for side, other in ((before, after), (after, before))}
    if not any(units for side in lost.values() for units in side.values()):
        return None
    if shared_units_only:
        for side in (before, after):
            side.drop_units(lost[side.label])
        return (f"--shared-units-only: dropped {before.dropped} unit(s) of {before.label} and {after.dropped} of "
                f"{after.label} that the other side lacks")
    problems = []
    for here, there in ((before, after), (after, before)):
        missing = sorted((c, u) for c, units in lost[here.label].items() for u in units)
        if missing:
            shown = ", ".join(f"{u!r} ({c})" for c, u in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            problems.append(f"{len(missing)} unit(s) of {here.label} missing from {there.label}: {shown}{more}")
    raise DataError(
        "before and after rows do not pair: " + "; ".join(problems)
        + " (units are scenario_id, else prompt; sample the same holdout on both sides, or pass "
        "--shared-units-only to gate the units both share)"
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


#: How a gate checks its sides' categories and pairs their units, given the before side,
#: the after sides, the declared categories and ``shared_units_only``: (failures, the
#: categories every side has, the note on dropped units or None).
_PairFn = Callable[[_Side, Sequence[_Side], Sequence[str], bool], tuple[list[str], list[str], str | None]]


@dataclass
class _Sides:
    """Every side of one gate, read and paired, and what the options resolved to."""

    before: _Side
    afters: list[_Side]
    before_header: dict[str, Any] | None
    after_headers: list[dict[str, Any] | None]
    declared: Env | None  #: the environment *env* names, or None
    guards: tuple[str, ...]
    categories: Sequence[str] | None  #: the declared categories
    notes: list[str]  #: what the caller let through (changed environment, dropped units)
    failures: list[str]  #: categories missing from a side
    shared: list[str]  #: categories on every side


def _read_sides(
    before_rows: Any,
    sources: Sequence[Any],
    after_labels: Sequence[str],
    *,
    guards: Sequence[str] | None,
    categories: Sequence[str] | None,
    env: EnvSpec,
    allow_env_change: bool,
    shared_units_only: bool,
    pair: _PairFn,
    replies: bool = False,
) -> _Sides:
    """Check the headers, resolve guards and declared categories, read every side, pair them.

    The one-adapter gate and the recipe gate (one after side per training seed) both read
    through here, so they refuse, guard and pair rows alike; *pair* is the part that differs
    (how a missing category or unit is worded for two sides or for many).
    """
    before_label = _label(before_rows, "before")
    before_header = header_of(before_rows)
    after_headers = [header_of(source) for source in sources]
    notes: list[str] = []
    for header, label in zip(after_headers, after_labels):
        notes += Provenance(before_header, header, before_label, label).check(
            allow_env_change=allow_env_change, shared_units_only=shared_units_only)
    notes = list(dict.fromkeys(notes))
    declared = load_env(env) if env is not None else None
    if declared is not None:
        notes += check_graded_by(declared, [(before_label, before_header), *zip(after_labels, after_headers)],
                                 allow_env_change=allow_env_change)
    if guards is None:
        guarding = declared if declared is not None else header_env(
            [h for h in (before_header, *after_headers) if h is not None])
        guards = guarding.guards if guarding is not None else ()
    if categories is None and declared is not None:
        categories = declared.categories
    guards = tuple(dict.fromkeys(guards))
    before = _Side(before_rows, before_label, guards, replies=replies)
    afters = [_Side(source, label, guards, replies=replies) for source, label in zip(sources, after_labels)]
    failures, shared, dropped = pair(before, afters, categories or (), shared_units_only)
    if dropped:
        notes.append(dropped)
    return _Sides(before, afters, before_header, after_headers, declared, guards, categories, notes, failures,
                  shared)


def _pair_adapter(
    before: _Side, afters: Sequence[_Side], categories: Sequence[str], shared_units_only: bool
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
    return failures, shared, _pair(before, after, shared, shared_units_only)


def compare(
    before_rows: Any,
    after_rows: Any,
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
    show_flips: int = DEFAULT_SHOW_FLIPS,
    flips_in: str = "failing",
    policy: ReleasePolicy | str | os.PathLike[str] | None = None,
) -> GateResult:
    """Compare AFTER against BEFORE graded rows, per category, and apply the gate's rule.

    *before_rows*/*after_rows* are row-file paths (streamed, never held) or iterables of
    row dicts. *guards* are marker names that must not regress (higher is better).
    *categories* declares categories that must appear on both sides. Both default to what
    *env*, the environment that graded the rows, declares (``env.guards``,
    ``env.categories``). Without *env*, guards default to those of the registered
    environment the rows' headers name (:mod:`~pytest_rlgate.data.provenance`), else nothing is
    guarded or declared: foreign rows do not say which task graded them. *holm* adjusts
    the regression test across categories (family one-sided alpha = 1 - confidence_level);
    by default on from four categories. *seed* fixes the resamples (each comparison draws
    from its own stream derived from it).

    Sides whose headers name different environment fingerprints or prompt sets are a
    :class:`DataError` unless *allow_env_change*; units on one side only are one unless
    *shared_units_only* (which drops them and says how many). Either way the result's
    warnings say what was let through.

    *show_flips* (default 3; 0 for none) names, for every failing comparison (every one
    with ``flips_in="all"``), the scenarios that lost the most, with before -> after counts
    and one reply from each side (:mod:`~pytest_rlgate.gate.flips`), read in the same pass.
    *policy* is a release policy (a YAML/TOML path or a
    :class:`~pytest_rlgate.gate.release.ReleasePolicy`): per category or guard a tier,
    its own confidence and margin, drop limits, ``required`` and ``min_units``; every
    comparison then names the policy line that decided it.
    """
    _validate_options(by, margin, confidence_level, n_resamples, method, max_drop)
    _validate_flips(show_flips, flips_in)
    release = as_release_policy(policy)
    sides = _read_sides(before_rows, [after_rows], [_label(after_rows, "after")], guards=guards,
                        categories=categories, env=env, allow_env_change=allow_env_change,
                        shared_units_only=shared_units_only, pair=_pair_adapter, replies=show_flips > 0)
    before, (after,) = sides.before, sides.afters
    notes, shared = sides.notes, sides.shared
    for note in notes:  # what the caller let through: in the result, and loud in pytest too
        warnings.warn(note, RlgateWarning, stacklevel=2)
    if not shared:
        raise DataError(f"{before.label} and {after.label} share no category; nothing to compare")

    use_holm = len(shared) >= HOLM_FROM if holm is None else bool(holm)
    metrics = ["pass@1", *(f"marker:{g}" for g in sides.guards)]
    decisions: dict[tuple[str, str], Decision] = {}
    policy_failures: list[str] = []
    if release is not None:
        release.check_names(before.categories() | after.categories(), sides.guards)
        decisions = {(m, g): release.decide(m, g, confidence_level=confidence_level, margin=margin,
                                            max_drop=max_drop) for m in metrics for g, _ in _groups(shared)}
        policy_failures = _required_failures(release, before, after)
    comparisons = _comparisons(before, after, metrics, shared, notes, margin=margin,
                               confidence_level=confidence_level, n_resamples=n_resamples, method=method,
                               seed=seed, use_holm=use_holm, decisions=decisions)
    if release is None:
        failures = sides.failures + _verdict_failures(comparisons, max_drop, fail_on_inconclusive, require_moved)
        failing = {(c.metric, c.group) for c in comparisons
                   if c.verdict == "regressed" or max_drop is not None and c.low is not None and c.low < -max_drop}
        if max_drop is not None:
            comparisons = [
                _with_flag(c, "below -max_drop") if c.low is not None and c.low < -max_drop else c
                for c in comparisons
            ]
    else:
        judged, failing = _policy_failures(comparisons, decisions, fail_on_inconclusive, require_moved)
        failures = sides.failures + policy_failures + judged
    if show_flips > 0:
        comparisons = _with_flips(comparisons, before, after, metrics, failing, show_flips, flips_in, sides.declared)

    rule = _rule(metrics, confidence_level, method, use_holm, len(shared), margin, max_drop, require_moved,
                 fail_on_inconclusive)
    if release is not None:
        rule += "; " + release.summary()
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
        options={"env": None if sides.declared is None else sides.declared.name, "guards": list(sides.guards),
                 "max_drop": max_drop, "require_moved": require_moved,
                 "fail_on_inconclusive": fail_on_inconclusive, "categories": list(sides.categories or ()),
                 "before": before.label, "after": after.label,
                 "headers": {"before": sides.before_header, "after": sides.after_headers[0]},
                 "allow_env_change": allow_env_change, "shared_units_only": shared_units_only,
                 "dropped_units": {"before": before.dropped, "after": after.dropped},
                 "show_flips": show_flips, "flips_in": flips_in,
                 "policy": None if release is None else release.source},
    )


def _validate_flips(show_flips: int, flips_in: str) -> None:
    if isinstance(show_flips, bool) or not isinstance(show_flips, int) or not 0 <= show_flips <= 1000:
        raise UsageError(f"show_flips must be an integer in [0, 1000], got {show_flips!r}")
    if flips_in not in FLIPS_IN:
        raise UsageError(f"flips_in must be one of {', '.join(FLIPS_IN)}, got {flips_in!r}")


def _required_failures(release: ReleasePolicy, before: _Side, after: _Side) -> list[str]:
    """A ``required`` category missing from both sides (one side only already fails the gate)."""
    present = before.categories() | after.categories()
    out = []
    for rule in release.required():
        if not any(rule.matches(c) for c in present):
            out.append(f"required category {rule.selector!r} is missing from both sides "
                       f"[{release.source}:{rule.line} {rule.selector}]")
    return out


def _policy_failures(
    comparisons: Sequence[Comparison], decisions: Mapping[tuple[str, str], Decision], fail_on_inconclusive: bool,
    require_moved: bool,
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
        elif fail_on_inconclusive and c.verdict in ("inconclusive", "insufficient"):
            failure = f"{c.metric} in {c.group} is {c.verdict}: delta {c.delta:+.3f}, {c.size} (fail_on_inconclusive)"
        if failure is not None:
            failures.append(failure + tag)
            failing.add((c.metric, c.group))
    if require_moved:
        head = comparisons[0]
        if head.verdict != "moved":
            failures.append(f"headline pass@1 overall did not move: {head.verdict}, delta {head.delta:+.3f} "
                            "(require_moved)")
    return failures, failing


def _with_flips(
    comparisons: Sequence[Comparison], before: _Side, after: _Side, metrics: Sequence[str],
    failing: set[tuple[str, str]], limit: int, flips_in: str, env: Env | None,
) -> list[Comparison]:
    """Each failing comparison (every one with ``flips_in="all"``) with the units that lost the most.

    ``overall`` gets flips only when no category of its metric failed (else they repeat).
    """
    from dataclasses import replace

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

def _groups(shared: list[str]) -> list[tuple[str, list[str]]]:
    """The groups a gate compares: ``overall`` (every shared category), then each category."""
    return [("overall", shared), *((c, [c]) for c in shared)]


def _stream(seed: int | None, index: int) -> np.random.Generator | None:
    """The resample stream of the *index*-th comparison (1-based): its own, derived from *seed*."""
    return None if seed is None else np.random.default_rng([seed, index])


def _comparisons(
    before: _Side, after: _Side, metrics: Sequence[str], shared: list[str], notes: list[str], *,
    margin: float, confidence_level: float, n_resamples: int, method: Method, seed: int | None, use_holm: bool,
    decisions: Mapping[tuple[str, str], Decision] | None = None,
) -> list[Comparison]:
    """Every (metric, group) comparison, metric by metric, Holm-adjusted across categories when on.

    A guard constant on both sides cannot fail the gate: that is warned (to the caller of
    :func:`compare`) and added to *notes*. With release-policy *decisions*, each comparison
    takes its tier's confidence, margin and ``min_units`` and names the line that decided it.
    """
    groups = _groups(shared)
    comparisons: list[Comparison] = []
    index = 0
    paired = {group: _Paired.of(before, after, cats) for group, cats in groups}
    for column, metric in enumerate(metrics, 2):
        per_metric: list[Comparison] = []
        alphas: list[float] = []
        for group, _cats in groups:
            index += 1
            decision = None if not decisions else decisions[(metric, group)]
            level = confidence_level if decision is None else decision.confidence_level
            one = _one(
                paired[group], metric, column, group, margin=margin if decision is None else decision.margin,
                confidence_level=level, n_resamples=n_resamples, method=method, rng=_stream(seed, index),
                min_units=None if decision is None else decision.min_units,
            )
            if decision is not None:
                from dataclasses import replace

                one = replace(one, tier=decision.tier, decided_by=decision.where)
            per_metric.append(one)
            alphas.append(1.0 - level)
        if use_holm:
            per_metric = _apply_holm(per_metric, alphas)
        if metric != "pass@1":
            overall = per_metric[0]
            if "constant" in overall.flags:
                note = (f"guard {metric[7:]!r} is constant ({overall.before:.3f}) on both sides: it cannot "
                        "fail this gate (pick a marker that varies, or drop the guard)")
                warnings.warn(note, RlgateWarning, stacklevel=3)
                notes.append(note)
        comparisons.extend(per_metric)
    return comparisons


def _verdict_failures(
    comparisons: Sequence[Comparison], max_drop: float | None, fail_on_inconclusive: bool, require_moved: bool
) -> list[str]:
    """The failures the comparisons' verdicts and bounds add under the rule's options."""
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
        elif fail_on_inconclusive and c.verdict in ("inconclusive", "insufficient"):
            failures.append(f"{c.metric} in {c.group} is {c.verdict}: delta {c.delta:+.3f}, "
                            f"{c.size} (fail_on_inconclusive)")
    if require_moved:
        head = comparisons[0]
        if head.verdict != "moved":
            failures.append(f"headline pass@1 overall did not move: {head.verdict}, delta {head.delta:+.3f} "
                            "(require_moved)")
    return failures


def _with_flag(c: Comparison, flag: str, **changes: Any) -> Comparison:
    from dataclasses import replace

    return replace(c, flags=(*c.flags, flag), **changes)


def _one(
    paired: _Paired,
    metric: str,
    column: int,
    group: str,
    *,
    margin: float,
    confidence_level: float,
    n_resamples: int,
    method: Method,
    rng: np.random.Generator | None,
    min_units: int | None = None,
) -> Comparison:
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
    res = paired_bootstrap(b, a, n_resamples=n_resamples, confidence_level=confidence_level, method=method, rng=rng)
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
    _, adjusted = holm([float(comparisons[i].p_less or 0.0) for i in tested], alpha=0.5)  # all set
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
            from dataclasses import replace

            out[i] = replace(c, **changes)
    return out


def _rule(
    metrics: Sequence[str],
    confidence_level: float,
    method: Method,
    use_holm: bool,
    n_categories: int,
    margin: float,
    max_drop: float | None,
    require_moved: bool,
    fail_on_inconclusive: bool,
) -> str:
    level = f"{confidence_level:.0%}"
    test = (f"Holm-adjusted one-sided p < {1 - confidence_level:.2f} across {n_categories} categories"
            if use_holm else f"{level} {METHOD_NAMES[method]} upper bound < 0")
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
