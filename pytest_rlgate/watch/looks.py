"""The gate looked at again and again: checkpoints tested against step 0, the error budget spent per look.

Gating every checkpoint of a run at the gate's usual level, and stopping at the first
regression, stops a run that changed nothing far more often than that: ten looks are ten
chances to be unlucky. :class:`SequentialGate` spends one budget, the *family level* (the
gate's: 5 % by default), over the whole run (:class:`~pytest_rlgate.gate.sequential.Spending`:
mostly on the late looks when the number of looks is planned, a never-exhausted series when
it is not), so the chance of ever stopping a run that did not regress stays at or below the
family level however it is watched.

Each look tests two families against step 0, per metric (pass@1 and each guard) and group
(overall and each category) that can fail the gate:

* the **checkpoint** family (``collapse_share`` of the look's level): this checkpoint alone,
  the paired sign-flip test; it catches a collapse at the checkpoint where it happens;
* the **window** family (the rest): the last ``window`` checkpoints together, which sees a
  drop that persists with a third of the after side's noise variance (each checkpoint is a fresh
  sample; step 0 is shared) and lets a small category reach small p-values.

Both are exact permutation tests at any number of scenarios, with ties broken so that the
level is used, and each family is Holm-adjusted with Tarone's rule for the tests that cannot
reach their level (:mod:`~pytest_rlgate.gate.sequential`). The house gate
(:func:`~pytest_rlgate.gate.adapter.compare_adapter`) also reports each look at its usual
level, for reading and for checkpoint selection. ``benchmarks/bench_watch.py`` measures the
stop rate and the power; ``tests/test_looks.py`` checks the statistics against references.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np

from ..environment.contract import EnvSpec, load_env
from ..errors import RlgateWarning, UsageError
from ..gate.adapter import compare_adapter
from ..gate.options import FAMILY_LEVEL, old_spelling
from ..gate.release import as_release_policy
from ..gate.result import GateResult
from ..gate.sequential import (
    BagTest,
    Spending,
    bag_test,
    betting_test,
    lattice,
    min_units,
    sign_flip_p,
    tarone_holm,
)
from ..records import Row

__all__ = ["COLLAPSE_SHARE", "METHODS", "WINDOW", "Look", "Reach", "SequentialGate", "Test", "Units",
           "bag_sums", "look_alpha", "sign_flip_p", "units_by_group"]

#: The stopping test's pass@1 metric (rows' ``reward``); guards are markers.
PASS = "pass@1"
#: Checkpoints pooled by the window test: a drop that lasts this long is seen with its noise halved.
WINDOW = 3
#: The share of each look's level given to the checkpoint-alone test: enough to stop a total
#: collapse at any look (its p-value is ~2^-n), small enough to leave the window its power.
COLLAPSE_SHARE = 0.1
#: ``exact``: permutation p-values (the default, the benchmark's winner); ``betting``: e-values.
METHODS = ("exact", "betting")
#: verdicts as numbers, for the trainer's logs (scalars only)
VERDICT_CODES = {"regressed": -1.0, "moved": 1.0}


def units_by_group(items: Iterable[Mapping[str, object]]) -> dict[str, int]:
    """Scenarios (else prompts) per category, and overall: the units the sequential test counts."""
    units = {(str(item["category"]), str(item.get("scenario_id") or item["prompt"])) for item in items}
    per = Counter(category for category, _unit in units)
    return {"overall": len(units), **dict(sorted(per.items()))}


def look_alpha(look: int, family_level: float = FAMILY_LEVEL, planned: int | None = None) -> float:
    """The error look *look* (1-based) may spend out of *family_level* (the default schedule)."""
    return Spending(family_level, planned=planned).level(look)


@dataclass(frozen=True)
class Units:
    """One side's rows reduced per unit (category, scenario else prompt): per prompt, its rows' metric values.

    Kept per prompt and in rollout order so that sides with different numbers of replies are
    compared on the replies they share (the first ``min`` of each prompt): the sides of a bag
    must be alike for the permutation test to be exact.
    """

    metrics: tuple[str, ...]
    #: unit -> prompt -> each row's metric values, in rollout order
    cells: Mapping[tuple[str, str], Mapping[str, tuple[tuple[float, ...], ...]]]
    #: unit -> the metrics summed over all its rows
    sums: Mapping[tuple[str, str], tuple[float, ...]]
    #: unit -> (prompt, rows) pairs, sorted: sides with equal shapes compare every row
    shapes: Mapping[tuple[str, str], tuple[tuple[str, int], ...]]

    @classmethod
    def of(cls, rows: Iterable[Row], metrics: Sequence[str]) -> Units:
        found: dict[tuple[str, str], dict[str, list[tuple[int, tuple[float, ...]]]]] = {}
        for row in rows:
            unit = (row["category"], row.get("scenario_id") or row["prompt"])
            markers = row.get("markers") or {}
            values = tuple(float(row["reward"]) if m == PASS else float(markers.get(m, 0.0)) for m in metrics)
            found.setdefault(unit, {}).setdefault(row["prompt"], []).append((int(row.get("rollout_index", 0)), values))
        cells = {unit: {prompt: tuple(v for _i, v in sorted(rs, key=lambda r: r[0])) for prompt, rs in prompts.items()}
                 for unit, prompts in found.items()}
        sums = {unit: tuple(map(math.fsum, zip(*(v for vs in prompts.values() for v in vs))))
                for unit, prompts in cells.items()}
        shapes = {unit: tuple(sorted((p, len(vs)) for p, vs in prompts.items())) for unit, prompts in cells.items()}
        return cls(metrics=tuple(metrics), cells=cells, sums=sums, shapes=shapes)

    @classmethod
    def from_sums(cls, sums: Mapping[tuple[str, str], Sequence[float]], rows: Mapping[tuple[str, str], int],
                  metrics: Sequence[str] = (PASS,)) -> Units:
        """A side from per-unit sums over *rows* rows each (unit = (category, scenario)): no row dicts.

        The rows themselves are not kept, so every side of a comparison built this way must
        have the same number of rows per unit (a simulation's sides do).
        """
        return cls(metrics=tuple(metrics), cells={}, sums={u: tuple(map(float, v)) for u, v in sums.items()},
                   shapes={u: (("", int(rows[u])),) for u in sums})

    def categories(self) -> set[str]:
        return {unit[0] for unit in self.sums}


def bag_sums(sides: Sequence[Units]) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray]:
    """Units present on every side, their sums over the rows all sides share (units x sides x metrics), and
    how many rows that is per unit."""
    units = sorted(set(sides[0].sums).intersection(*(s.sums for s in sides[1:])))
    shapes = [sides[0].shapes[unit] for unit in units]
    alike = [all(s.shapes[unit] == shape for s in sides[1:]) for unit, shape in zip(units, shapes)]
    out = np.array([[s.sums[unit] for s in sides] for unit in units], dtype=float).reshape(
        len(units), len(sides), len(sides[0].metrics))
    rows = np.array([sum(m for _p, m in shape) for shape in shapes], dtype=float)
    for u in (u for u, same in enumerate(alike) if not same):  # unlike sides: the rows they share
        unit = units[u]
        counts = [dict(s.shapes[unit]) for s in sides]
        common = {p: min(c.get(p, 0) for c in counts) for p in counts[0]}
        rows[u] = sum(common.values())
        for j, side in enumerate(sides):
            kept = [v for p, m in common.items() for v in side.cells[unit][p][:m]]
            out[u, j] = np.sum(kept, axis=0) if kept else 0.0
    keep = rows > 0
    return [unit for unit, k in zip(units, keep) if k], out[keep], rows[keep]


@dataclass(frozen=True)
class Test:
    """One metric in one group at one look: the window's mean delta and its exact p-value.

    ``kind`` is ``checkpoint`` (this checkpoint alone) or ``window`` (``steps`` together);
    ``level`` is what ``p`` had to reach, ``min_p`` the smallest p-value the units allowed.
    """

    metric: str
    group: str
    kind: str
    steps: tuple[int, ...]
    n_units: int
    delta: float
    p: float
    min_p: float
    level: float
    regressed: bool

    def to_dict(self) -> dict[str, object]:
        return {**self.__dict__, "steps": list(self.steps)}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Test:
        return cls(**{**record, "steps": tuple(record.get("steps") or ())})


@dataclass(frozen=True)
class Look:
    """One checkpoint tested against step 0: its level, both families' tests, and the house gate."""

    look: int
    step: int
    alpha: float
    tests: tuple[Test, ...]
    gate: GateResult | None = None

    @property
    def regressed(self) -> list[str]:
        """``metric/group`` of every test that regressed at this look's level (either family)."""
        seen: list[str] = []
        for t in self.tests:
            name = f"{t.metric}/{t.group}"
            if t.regressed and name not in seen:
                seen.append(name)
        return seen

    def failing(self) -> list[str]:
        """``metric/group what`` of every comparison the house gate failed at this look (the strip's words)."""
        if self.gate is None:
            return []
        out = [f"{c.metric.removeprefix('marker:')}/{c.group} "
               f"{'regressed' if c.failure.kind == 'regressed' else c.failure.flag or c.failure.kind}"
               for c in self.gate.comparisons if c.failure is not None]
        return out + (["a category missing from a side"] if self.gate.side_failures else [])

    def line(self, checkpoint: str) -> str:
        """This look as one log line, in the words the strip, ``selection.json`` and the report use.

        A look says two things, named apart everywhere: the house gate's judgement of the
        checkpoint (its verdicts, ``X`` on the strip where one regressed; a failed gate keeps
        it from being shipped) and whether the sequential test, which holds the run's error
        across the looks, stops the run here (``!`` on the strip).
        """
        stop = (f"STOP: the sequential test claims a regression in {', '.join(self.regressed)}" if self.regressed
                else "the sequential test does not stop the run")
        return f"look {self.look} ({checkpoint}, level {self.alpha:.2e}): {self.judgement()}; {stop}"

    def judgement(self) -> str:
        """The house gate's judgement of this checkpoint: ``gate passed`` or ``gate FAILED (what failed)``."""
        if self.gate is None:
            return "no house gate"
        return "gate passed" if self.gate.passed else f"gate FAILED ({', '.join(self.failing())})"

    def figures(self, prefix: str = "rlgate") -> dict[str, float]:
        """This look as scalars for a trainer's logs (W&B, TensorBoard, trackio ...).

        Per group and metric: the house gate's ``delta``, ``low`` and ``high`` (its interval at
        its usual level) and ``verdict`` (-1 regressed, +1 moved, 0 otherwise); the sequential
        test's smallest ``p`` and ``stop`` (1 when this look stops the run on it).
        """
        out: dict[str, float] = {}
        for c in () if self.gate is None else self.gate.comparisons:
            metric = c.metric.removeprefix("marker:")
            key = f"{prefix}/{c.group}/{metric}"
            out[f"{key}/delta"] = float(c.delta)
            if c.low is not None and c.high is not None:
                out[f"{key}/low"], out[f"{key}/high"] = float(c.low), float(c.high)
            out[f"{key}/verdict"] = VERDICT_CODES.get(c.verdict, 0.0)
        for t in self.tests:
            key = f"{prefix}/{t.group}/{t.metric}"
            out[f"{key}/p"] = min(out.get(f"{key}/p", 1.0), float(t.p))
            out[f"{key}/stop"] = max(out.get(f"{key}/stop", 0.0), float(t.regressed))
            if t.kind == "checkpoint":
                out.setdefault(f"{key}/delta", float(t.delta))
        out[f"{prefix}/level"] = float(self.alpha)
        out[f"{prefix}/stop"] = float(bool(self.regressed))
        return out

    def to_dict(self) -> dict[str, object]:
        return {"look": self.look, "step": self.step, "alpha": self.alpha, "regressed": self.regressed,
                "tests": [t.to_dict() for t in self.tests],
                "gate": None if self.gate is None else self.gate.to_dict()}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Look:
        gate = record.get("gate")
        return cls(look=int(record["look"]), step=int(record["step"]), alpha=float(record["alpha"]),
                   tests=tuple(Test.from_dict(t) for t in record.get("tests") or ()),
                   gate=None if gate is None else GateResult.from_dict(gate))


@dataclass(frozen=True)
class Reach:
    """When a group can stop the run at all: the looks at which its smallest p-value meets its best level."""

    group: str
    n_units: int
    first: int | None  #: the first look that can stop on it (None: none)
    last: int | None  #: the last one (None: open-ended and still reachable at the horizon checked)
    floor: float  #: the smallest p-value its units can give (the window's, at a full window)
    message: str

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class SequentialGate:
    """Test checkpoint after checkpoint against the same step-0 rows, spending *family_level* across the looks.

    *planned* is the number of looks the run will take (None: unknown, the open-ended
    schedule). *guards* are the markers tested besides pass@1 (default: *env*'s guards, none
    without an environment). *window* checkpoints are pooled by the window family, which
    gets ``1 - collapse_share`` of each look's level. *method* ``exact`` (permutation
    p-values) or ``betting`` (e-values; values must lie in [0, 1]). *report* also runs the
    house gate at each look (:func:`~pytest_rlgate.gate.adapter.compare_adapter`, at its
    usual level, with *options*; a ``release_policy`` there also takes its advisory comparisons out of
    the stopping family). ``alpha=`` is the old spelling of *family_level*.
    """

    family_level: float = FAMILY_LEVEL
    planned: int | None = None
    env: EnvSpec = None
    guards: Sequence[str] | None = None
    report: bool = True
    #: :func:`~pytest_rlgate.gate.adapter.compare_adapter` keywords for the house gate at each look
    options: Mapping[str, Any] = field(default_factory=dict)
    window: int = WINDOW
    collapse_share: float = COLLAPSE_SHARE
    method: str = "exact"
    horizon: int = 10
    looks: list[Look] = field(default_factory=list)
    alpha: InitVar[float | None] = None

    def __post_init__(self, alpha: float | None) -> None:
        if alpha is not None:
            self.family_level = old_spelling("alpha", alpha, "family_level")
        self.spending = Spending(self.family_level, planned=self.planned, horizon=self.horizon)
        if isinstance(self.window, bool) or not isinstance(self.window, int) or not 1 <= self.window <= 16:
            raise UsageError(f"window={self.window!r}: checkpoints pooled by the window test, an integer in 1..16")
        if not 0 < self.collapse_share <= 1:
            raise UsageError(f"collapse_share={self.collapse_share!r}: the checkpoint test's share of a look, "
                             "in (0, 1]")
        if self.method not in METHODS:
            raise UsageError(f"method={self.method!r}: one of {', '.join(METHODS)}")
        if self.guards is None:
            self.guards = tuple(load_env(self.env).guards) if self.env is not None else ()
        self._metrics = (PASS, *(self.guards or ()))
        self._base: tuple[object, Units] | None = None
        self._history: list[tuple[int, Units]] = []
        if "policy" in self.options:  # compare_adapter's old keyword
            kept = {k: v for k, v in self.options.items() if k != "policy"}
            self.options = {**kept, "release_policy": old_spelling("policy", self.options["policy"], "release_policy")}
        policy = self.options.get("release_policy")
        self._policy = as_release_policy(policy) if policy else None

    @property
    def metrics(self) -> tuple[str, ...]:
        return self._metrics

    # --- what can stop the run -----------------------------------------------------------
    def can_stop(self, metric: str, group: str) -> bool:
        """Whether a regression of *metric* in *group* can stop the run: every comparison that can fail
        the gate (so not an advisory one under the release policy in ``options``)."""
        if self._policy is None:
            return True
        name = metric if metric == PASS else f"marker:{metric}"
        return self._policy.decide(name, group, confidence_level=0.95, margin=0.1, max_drop=None).can_fail

    def family_levels(self, look: int) -> dict[str, float]:
        """The level each family has at look *look*: ``checkpoint`` and ``window`` (absent at the first look)."""
        level = self.spending.level(look)
        if look == 1 or self.window == 1:
            return {"checkpoint": level}
        return {"checkpoint": self.collapse_share * level, "window": (1 - self.collapse_share) * level}

    def _floors(self, look: int, n: int) -> dict[str, tuple[float, int]]:
        """Each family's smallest attainable p-value for *n* units at look *look*, and its bag size."""
        w = min(look, self.window)
        return {"checkpoint": (2.0 ** -n, 2), "window": ((w + 1.0) ** -n, w + 1)}

    def reach(self, units_by_group: Mapping[str, int], *, horizon: int | None = None) -> list[Reach]:
        """For each group of *units_by_group* (group -> scenarios), the looks at which it can stop the run.

        A group can stop a look only if its smallest attainable p-value (every unit at its
        worst: ``2 ** -n`` alone, ``(w + 1) ** -n`` pooled over a window of ``w``) reaches the
        level its family has at that look even when it is the only test that can. An
        open-ended run is checked up to *horizon* looks (default 100 times its half-way look).
        """
        last = self.planned or horizon or 100 * self.spending.horizon
        levels = [self.family_levels(j) for j in range(1, last + 1)]
        out = []
        for group, n in units_by_group.items():
            looks = [j for j, lv in enumerate(levels, 1)
                     if any(self._floors(j, n)[kind][0] <= level for kind, level in lv.items())]
            floor = self._floors(last, n)["window" if self.window > 1 else "checkpoint"][0]
            first, end = (looks[0], looks[-1]) if looks else (None, None)
            open_end = self.planned is None and end == last
            what = f"{group}: {n} scenario{'s' if n != 1 else ''}"
            if first is None:
                need = min(min_units(level, self._floors(j, n)[kind][1])
                           for j, lv in enumerate(levels, 1) for kind, level in lv.items())
                span = f"its {last} planned looks" if self.planned else f"its first {last} looks"
                message = (f"{what} — this run can never stop on {group} in {span} (its scenarios give p >= "
                           f"{floor:.1e} at best); add scenarios ({need} can; more replies per prompt sharpen the "
                           "test, not that floor)")
            elif first == 1 and (open_end or end == last):
                message = f"{what} — can stop the run at every look"
            else:
                parts = [] if first == 1 else [f"before look {first}"]
                if not open_end and end is not None and end < last:
                    parts.append(f"after look {end}")
                message = (f"{what} — this run cannot stop on {group} {' or '.join(parts)}; add scenarios to see it "
                           "at every look")
            out.append(Reach(group=group, n_units=n, first=first, last=None if open_end else end, floor=floor,
                             message=message))
        return out

    # --- one look ------------------------------------------------------------------------
    def _units(self, rows: Sequence[Row] | Units) -> Units:
        return rows if isinstance(rows, Units) else Units.of(rows, self._metrics)

    def _group_tests(self, sums: np.ndarray, rows: np.ndarray, parts: Sequence[np.ndarray]
                     ) -> tuple[list[BagTest], BagTest]:
        """The tests of one metric: each category (*parts*: its units' indices) and overall.

        *sums* (units x sides) are over *rows* rows per unit; the exact tests put every unit
        on one lattice (unit means of unequal row counts are scaled to a common one).
        """
        if self.method == "betting":
            deltas = (sums[:, 1:].mean(axis=1) - sums[:, 0]) / rows
            return [betting_test(deltas[idx]) for idx in parts], betting_test(deltas)
        if rows.size and bool(np.all(rows == rows[0])) and bool(np.all(sums == np.round(sums))):
            ints = sums.astype(np.int64)  # counts of 0/1 rows: already on the lattice
        else:
            ints, _scale = lattice(sums / rows[:, None])
        return [bag_test(ints[idx]) for idx in parts], bag_test(ints)

    def look(self, before: Sequence[Row] | Units, after: Sequence[Row] | Units, *, step: int = 0) -> Look:
        """Test *after* against *before* at the next look's level; the look is kept in ``looks``.

        *before* is the same step-0 side at every look (rows or :class:`Units`).
        """
        number = len(self.looks) + 1
        alpha = self.spending.level(number)
        if self._base is None or self._base[0] is not before:
            self._base = (before, self._units(before))
        base = self._base[1]
        now = self._units(after)
        self._history = [*self._history, (step, now)][-self.window:]
        levels = self.family_levels(number)
        sides = {"checkpoint": [(step, now)], "window": self._history}
        tests: list[Test] = []
        for kind, level in levels.items():
            steps = tuple(s for s, _u in sides[kind])
            units, sums, rows = bag_sums([base, *(u for _s, u in sides[kind])])
            categories = sorted({u[0] for u in units})
            parts = [np.array([i for i, u in enumerate(units) if u[0] == c], dtype=np.int64) for c in categories]
            found: list[tuple[str, str, np.ndarray, np.ndarray]] = []
            runs: list[BagTest] = []
            for m, metric in enumerate(self._metrics):
                per_category, overall = self._group_tests(sums[:, :, m], rows, parts)
                everything = np.arange(len(units))
                for group, idx, run in (("overall", everything, overall), *zip(categories, parts, per_category)):
                    if self.can_stop(metric, group):
                        found.append((metric, group, sums[idx, :, m], rows[idx]))
                        runs.append(run)
            reject, held = tarone_holm(runs, level) if runs else ([], [])
            for (metric, group, bag, n), run, r, bar in zip(found, runs, reject, held):
                delta = float(((bag[:, 1:].sum(axis=1) / (bag.shape[1] - 1) - bag[:, 0]) / n).sum() / n.size) \
                    if n.size else 0.0
                tests.append(Test(metric=metric, group=group, kind=kind, steps=steps, n_units=int(n.size),
                                  delta=delta, p=run.p, min_p=run.min_p, level=bar, regressed=bool(r)))
        gate = None
        if self.report and not isinstance(before, Units) and not isinstance(after, Units):
            with warnings.catch_warnings():  # a constant guard is said once per run, not once per look
                warnings.simplefilter("ignore", RlgateWarning)
                options = {"guards": tuple(self.guards or ()), **self.options}
                gate = compare_adapter(list(before), list(after), by="category", env=self.env, **options)
        done = Look(look=number, step=step, alpha=alpha, tests=tuple(tests), gate=gate)
        self.looks.append(done)
        return done

    def settings(self) -> dict[str, object]:
        """What decides every look: the schedule, the families, the method."""
        return {"family_level": self.family_level, "planned": self.planned, "horizon": self.horizon,
                "window": self.window,
                "collapse_share": self.collapse_share, "method": self.method, "metrics": list(self._metrics),
                "schedule": self.spending.describe()}
