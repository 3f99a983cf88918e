"""Spend replies where they decide: sample more only for the categories the gate cannot call yet.

A category whose interval is already clear of zero (``regressed``, ``moved``) or inside the
margin (``flat``) at k = 4 replies learns little from 28 more; a middling one, whose interval
covers zero and is wider than the margin, is where replies buy power (reply noise usually
exceeds scenario noise in paired comparisons of language models). So the candidate is sampled
at a small k, gated against the before rows, and only the scenarios of categories still
``inconclusive`` get more replies, up to the next k of a planned schedule (k0, 2 k0, ... and
k_max; two looks, k0 and k_max, by default) or as far as the reply budget allows, until every
category is decided, the looks run out or the budget is spent.

Looking again after seeing the data is a multiple test: a gate that looks four times at the
full family level fails unchanged runs more often than the level says. The looks are planned
in advance (k0, 2 k0, ... k_max), so the family level is split between them by an
*alpha-spending* function (Lan and DeMets): look r is gated with ``compare(...,
family_level=levels[r])``, the levels summing to the gate's family level, and by the union
bound an unchanged run claims a regression at *any* look at most ``family_level`` of the
time. Inside each look the family control is the gate's own (scenario sign flips across
every category, ``overall`` and every guard). A category that was decided stops being sampled
but stays in every later look's family, with its rows as they were; a regression claimed at
any look fails the run, whatever a later look says. ``benchmarks/bench_until_decided.py``
measures the false-regress rate by simulation (the selection of which categories grow is
not covered by the union bound's argument, so the benchmark is the check) and compares the
spending functions with an anytime-valid betting confidence sequence.

The sampler is any ``draw(items, first, count)`` that returns graded rows for replies
``first .. first + count - 1`` of each item (:func:`pytest_rlgate.policy.sampling.sample_rows`
with ``first=``: reply j of a prompt is seeded by (seed, j, the chat), so extending a prompt
from k to k' replies samples only rollouts k .. k' - 1). With *out*, the rows go to
``<out>.partial`` piece by piece and ``<out>`` is published atomically at the end; its
header records the design (the k schedule, the level of each look, the gate's options and
the before rows' fingerprint) and the outcome, so a rerun continues an interrupted run and
``rlgate gate`` of the file says it was sampled adaptively.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..data.prompts import fingerprint
from ..data.resume import PartialRows
from ..data.rows import RowInput, Rows, load_rows
from ..errors import DataError, UsageError
from ..records import Header, PromptItem, Row
from .adapter import compare_adapter
from .options import FAMILY_LEVEL, GateOptions, parse_metric
from .release import as_release_policy
from .result import GateResult
from .sequential import Spending, SpendingKind
from .verdicts import ORDER

__all__ = ["ADAPTIVE_KEY", "DEFAULT_SPENDING", "K0", "K_MAX", "LOOKS", "SPENDING", "AdaptiveDesign", "AdaptiveResult",
           "CategoryOutcome", "Draw", "Judge", "LookOutcome", "LookRecord", "gate_look", "total_level",
           "until_decided"]

#: the header key that holds the design and the outcome of an adaptive sample
ADAPTIVE_KEY = "adaptive"
#: how the family level is split between the looks (:class:`~pytest_rlgate.gate.sequential.Spending`'s Lan-DeMets
#: functions of the information k / k_max): ``obf`` O'Brien-Fleming-like (little early, most at the last look),
#: ``pocock`` Pocock-like (about even in information), ``equal`` Bonferroni (the same share at every look)
SPENDING: tuple[SpendingKind, ...] = ("obf", "pocock", "equal")
#: benchmarks/bench_until_decided.py: at equal replies these decide the most categories, the false-regress
#: rate at or below the family level: two looks (every category at k = 4, then the undecided ones up to 32 or
#: the budget), the level split by Pocock-like spending (1 % then 4 % of 5 %). More looks split the level
#: thinner while the budget, not the schedule, bounds the replies the last look gets
DEFAULT_SPENDING: SpendingKind = "pocock"
K0, K_MAX, LOOKS = 4, 32, 2
#: verdicts that more replies can still change
_OPEN = frozenset({"inconclusive"})


def _levels(ks: Sequence[int], family_level: float, spending: SpendingKind) -> tuple[float, ...]:
    """Each look's share of *family_level*: the spending function's increments at information k / k_max."""
    if spending not in SPENDING:
        raise UsageError(f"spending {spending!r}: choose one of {', '.join(SPENDING)}")
    return Spending(family_level, planned=len(ks), kind=spending).increments([k / ks[-1] for k in ks])


@dataclass(frozen=True)
class AdaptiveDesign:
    """The planned looks: the k each look reaches, and the family level each may spend.

    Build it with :meth:`plan`; ``levels`` sum to ``family_level``, so a regression claimed at
    any look of an unchanged run happens at most ``family_level`` of the time (union bound).
    ``budget`` caps the candidate's replies over all looks (None: k_max for every prompt).
    """

    ks: tuple[int, ...]
    levels: tuple[float, ...]
    family_level: float
    spending: SpendingKind
    budget: int | None = None

    @classmethod
    def plan(cls, k0: int = K0, k_max: int = K_MAX, *, looks: int | None = LOOKS, family_level: float = FAMILY_LEVEL,
             spending: SpendingKind = DEFAULT_SPENDING, budget: int | None = None) -> AdaptiveDesign:
        """Looks at k0, 2 k0, 4 k0, ... and k_max (the first ``looks - 1`` of them and k_max; None: every
        doubling), each holding its share of *family_level*."""
        for name, value in (("k0", k0), ("k_max", k_max)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"{name} must be a whole number of replies of at least 1, got {value!r}")
        if k_max < k0:
            raise UsageError(f"k_max {k_max} is below the first look's k {k0}: raise k_max or lower k")
        if looks is not None and (not isinstance(looks, int) or isinstance(looks, bool) or looks < 1):
            raise UsageError(f"looks must be a whole number of looks of at least 1, got {looks!r}")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise UsageError(f"budget must be a whole number of replies, got {budget!r}")
        ks = [k0]
        while ks[-1] * 2 < k_max:
            ks.append(ks[-1] * 2)
        if ks[-1] != k_max:
            ks.append(k_max)
        if looks is not None and looks < len(ks):
            ks = ks[:looks - 1] + [k_max] if looks > 1 else [k0]
        return cls(tuple(ks), _levels(ks, family_level, spending), float(family_level), spending, budget)

    def at_level(self, family_level: float) -> AdaptiveDesign:
        """The same looks with *family_level* split the same way."""
        return AdaptiveDesign(self.ks, _levels(self.ks, family_level, self.spending), float(family_level),
                              self.spending, self.budget)

    def describe(self) -> str:
        """``4 looks at k 2, 4, 8, 16, spending 5% as 0.6%, 1.0%, 1.3%, 2.1% (pocock)``."""
        return (f"{len(self.ks)} look{'s' if len(self.ks) != 1 else ''} at k {', '.join(map(str, self.ks))}, "
                f"spending {self.family_level:.0%} as {', '.join(f'{v:.2%}' for v in self.levels)} ({self.spending})"
                + ("" if self.budget is None else f", at most {self.budget:,} replies"))

    def record(self) -> dict[str, object]:
        return {"ks": list(self.ks), "levels": list(self.levels), "family_level": self.family_level,
                "spending": self.spending, "budget": self.budget}


#: ``draw(items, first, count)``: graded rows for replies first .. first+count-1 of each item, item by item
Draw = Callable[[Sequence[PromptItem], int, int], Sequence[Row]]


@dataclass(frozen=True)
class LookOutcome:
    """What one look found: each category's verdicts (one per metric), whether it claimed a regression,
    whether the whole gate failed at it (a final look's judgement), and the gate's result."""

    verdicts: Mapping[str, tuple[str, ...]]
    regressed: bool
    failed: bool
    result: GateResult | None = None


class Judge(Protocol):
    """Gates one look: *before* against the candidate's *after* rows at ``options.family_level``."""

    def __call__(self, before: Rows, after: Rows, options: GateOptions) -> LookOutcome: ...


def gate_look(before: Rows, after: Rows, options: GateOptions) -> LookOutcome:
    """The gate's own judgement of one look (:func:`~pytest_rlgate.gate.adapter.compare_adapter`)."""
    result = compare_adapter(before, after, options)
    verdicts: dict[str, list[str]] = {}
    for c in result.comparisons:
        if c.group != "overall":
            verdicts.setdefault(c.group, []).append(c.verdict)
    regressed = any(c.failure is not None and c.failure.kind == "regressed" for c in result.comparisons)
    return LookOutcome({k: tuple(v) for k, v in verdicts.items()}, regressed, not result.passed, result)


@dataclass(frozen=True)
class CategoryOutcome:
    """One category's course: the verdict it ended with, the look that decided it, its k and its replies.

    ``decided_at`` is the 1-based look whose interval decided it (None: still undecided when
    it stopped, and ``stopped`` says why: ``last look``, ``budget``, or ``too few scenarios``,
    fewer than the gate needs, which no reply adds); ``regressed_at`` the first look
    that claimed a regression in it (a claim at any look counts).
    """

    category: str
    verdict: str
    decided_at: int | None
    k: int
    replies: int
    regressed_at: int | None = None
    stopped: str = ""

    def record(self) -> dict[str, object]:
        return {"verdict": self.verdict, "decided_at": self.decided_at, "k": self.k, "replies": self.replies,
                "regressed_at": self.regressed_at, "stopped": self.stopped}


@dataclass(frozen=True)
class LookRecord:
    """One look: its number, the k it reached, its family level, the categories sampled for it."""

    look: int
    k: int
    level: float
    sampled: tuple[str, ...]
    replies: int
    outcome: LookOutcome


@dataclass(frozen=True)
class AdaptiveResult:
    """What :func:`until_decided` did: per category its course, each look, the rows, the decision.

    ``passed`` is the run's decision: no look claimed a regression and the last look's gate
    passed (a release policy's ``max_drop`` or a critical tier's ``insufficient`` fails it
    too, as it fails ``rlgate gate``). ``result`` is the last look's
    :class:`~pytest_rlgate.gate.result.GateResult`.
    """

    design: AdaptiveDesign
    categories: tuple[CategoryOutcome, ...]
    looks: tuple[LookRecord, ...]
    rows: Rows
    replies: int
    #: replies kept from an interrupted run's ``<out>.partial`` (0: it started afresh)
    resumed: int = 0

    @property
    def passed(self) -> bool:
        return not any(look.outcome.regressed for look in self.looks) and not self.looks[-1].outcome.failed

    @property
    def result(self) -> GateResult | None:
        return self.looks[-1].outcome.result

    @property
    def decided(self) -> tuple[str, ...]:
        """The categories some look decided."""
        return tuple(c.category for c in self.categories if c.decided_at is not None)

    def category(self, name: str) -> CategoryOutcome:
        return next(c for c in self.categories if c.category == name)

    def record(self) -> dict[str, object]:
        """The outcome a published row file's header keeps beside the design."""
        return {"passed": self.passed, "replies": self.replies,
                "looks": [{"k": look.k, "level": look.level, "sampled": list(look.sampled), "replies": look.replies,
                           "regressed": look.outcome.regressed} for look in self.looks],
                "categories": {c.category: c.record() for c in self.categories}}

    def summary(self) -> str:
        """The per-category table and the decision line."""
        resumed = "" if not self.resumed else f" (resumed: {self.resumed:,} replies kept from an interrupted run)"
        lines = [f"until decided: {self.design.describe()}; {len(self.looks)} look{'s' if len(self.looks) != 1 else ''}"
                 f" run, {self.replies:,} replies{resumed}",
                 f"{'category':<24} {'verdict':<13} {'decided at':<21} {'k':>4} {'replies':>8}"]
        for c in self.categories:
            at = f"look {c.decided_at}" if c.decided_at is not None else f"no: {c.stopped}"
            verdict = c.verdict if c.regressed_at is None else f"regressed@{c.regressed_at}"
            lines.append(f"{c.category:<24} {verdict:<13} {at:<21} {c.k:>4} {c.replies:>8}")
        claimed = [look.look for look in self.looks if look.outcome.regressed]
        if claimed:
            lines.append(f"decision: FAILED, a regression was claimed at look {claimed[0]} "
                         "(a claim at any look counts)")
        elif not self.passed:
            last = self.result
            kinds = [] if last is None else sorted({c.failure.kind for c in last.comparisons if c.failure}) + (
                ["a side's categories"] if last.side_failures else [])
            lines.append(f"decision: FAILED at the last look ({len(self.looks)}): no look claimed a regression, but "
                         f"the gate failed its other rules ({', '.join(kinds) or 'see below'}; the failures are "
                         "listed below)")
        else:
            lines.append("decision: passed, no look claimed a regression")
        return "\n".join(lines)

    def report(self) -> str:
        """The summary, then the last look's gate report."""
        last = self.result
        return self.summary() + ("" if last is None else "\n\nthe last look:\n" + last.report())


def _category(verdicts: Sequence[str]) -> str:
    """A category's verdict over its metrics: the first in the gate's order (what fails first)."""
    return min(verdicts, key=lambda v: ORDER.get(v, len(ORDER)))


def _decided(verdicts: Sequence[str]) -> bool:
    """More replies cannot change the call: regressed somewhere, or nothing left inconclusive."""
    return "regressed" in verdicts or not any(v in _OPEN for v in verdicts)


def total_level(options: GateOptions) -> float:
    """The run-level family level in force: the gate's, or a release policy's when the gate's is its default."""
    release = as_release_policy(options.release_policy)
    level = options.family_level if release is None else release.family(
        options.family_level, given=options.is_given("family_level"))
    if level is None:
        raise UsageError("family_level none: sampling until decided holds one run-level false-regress rate across "
                         "its looks, so it needs a family level (default 0.05)")
    return level


class _Journal:
    """The rows sampled so far: reused from ``<out>.partial`` while a rerun replays, then drawn and kept."""

    def __init__(self, partial: PartialRows | None, draw: Draw, piece: int) -> None:
        self.partial, self.draw, self.piece = partial, draw, piece
        self.cursor = 0
        self.reused = 0  #: rows replayed from the partial file rather than drawn

    def take(self, items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        kept = self.partial.rows if self.partial is not None else []
        out: list[Row] = []
        done = 0
        while done < len(items) and self.cursor + count <= len(kept):
            chunk = kept[self.cursor:self.cursor + count]
            _check(chunk, items[done:done + 1], first, count, f"row {self.cursor + 1} of the partial file",
                   "the file was edited, or sampled by another pytest-rlgate; pass --restart (restart=True)")
            out += chunk
            self.cursor += count
            self.reused += count
            done += 1
        if self.partial is not None and self.cursor < len(kept) and done < len(items):
            self.partial.keep(self.cursor)  # the piece the interrupted run was writing
        for lo in range(done, len(items), self.piece):
            part = items[lo:lo + self.piece]
            rows = list(self.draw(part, first, count))
            _check(rows, part, first, count, "the sampler's rows", "draw(items, first, count) returns count rows "
                   "per item, in item order, with rollout_index first .. first+count-1")
            if self.partial is not None:
                self.partial.append(rows)
                self.cursor += len(rows)
            out += rows
        return out

    def finish(self) -> None:
        if self.partial is not None and self.cursor < len(self.partial.rows):
            self.partial.keep(self.cursor)


def _check(rows: Sequence[Row], items: Sequence[PromptItem], first: int, count: int, what: str, fix: str) -> None:
    if len(rows) != len(items) * count:
        raise DataError(f"{what}: {len(rows)} rows for {len(items)} prompt(s) x {count} replies; {fix}")
    for position, row in enumerate(rows):
        item = items[position // count]
        want = first + position % count
        if not isinstance(row, Mapping) or row.get("prompt") != item["prompt"] or row.get("rollout_index") != want:
            got = (row.get("prompt"), row.get("rollout_index")) if isinstance(row, Mapping) else type(row).__name__
            raise DataError(f"{what}: row {position + 1} should be reply {want} of prompt "
                            f"{str(item['prompt'])[:40]!r}, got {str(got)[:80]}; {fix}")


def until_decided(
    before: RowInput,
    draw: Draw,
    items: Sequence[PromptItem],
    *,
    design: AdaptiveDesign | None = None,
    options: GateOptions | None = None,
    out: str | os.PathLike[str] | None = None,
    header: Mapping[str, object] | None = None,
    restart: bool = False,
    piece: int = 32,
    judge: Judge = gate_look,
    **overrides: object,
) -> AdaptiveResult:
    """Sample the candidate on *items* through *draw*, gating against *before* after each look, until decided.

    Look 1 samples every item at ``design.ks[0]`` replies; each later look samples, for the
    scenarios of categories still ``inconclusive`` only, replies up to the next k of the
    schedule (fewer when ``design.budget`` has less left: what is left is shared evenly by the
    prompts still open), and gates again at that look's share of the family level (*options*
    and *overrides* are the gate's; ``family_level`` is the run's total, default 5 %). It
    stops when every category is decided, after the last look, or when the budget is spent.
    *out* makes it resumable (``<out>.partial``, published
    atomically with *header* plus the design and the outcome under ``"adaptive"``);
    *judge* gates one look (default: the gate itself).
    """
    opts = GateOptions.build(options, **overrides)
    level = total_level(opts)
    design = design if design is not None else AdaptiveDesign.plan(family_level=level)
    if not isinstance(design, AdaptiveDesign):
        raise UsageError(f"design must be an AdaptiveDesign (AdaptiveDesign.plan(k0, k_max)), got "
                         f"{type(design).__name__}")
    if not math.isclose(design.family_level, level):
        design = design.at_level(level)
    for metric in opts.metrics:
        _kind, big_k = parse_metric(metric)
        if big_k > design.ks[0]:
            raise UsageError(f"metric {metric} needs at least {big_k} replies per prompt, but the first look samples "
                             f"{design.ks[0]}: raise k to {big_k}")
    if not items:
        raise UsageError("no prompt items to sample")
    if not isinstance(piece, int) or piece < 1:
        raise UsageError(f"piece must be a whole number of prompts, got {piece!r}")
    if design.budget is not None and design.budget < len(items) * design.ks[0]:
        raise UsageError(f"budget {design.budget:,} replies is below the first look's {len(items) * design.ks[0]:,} "
                         f"({len(items)} prompts x k {design.ks[0]}): raise the budget or lower k")
    before_rows = load_rows(before)
    if isinstance(before, (str, os.PathLike)):  # each look's hints name the file (`rlgate plan runs/base.jsonl`)
        before_rows.label = os.fspath(before)
    base: Header = dict(header) if header is not None else {}
    plan: dict[str, object] = {}
    if base:  # what a published file (or a rerun continuing it) is bound to
        plan = {**design.record(), "before": fingerprint(before_rows),
                "gate": {k: v for k, v in opts.__record__().items() if k != "show_flips"}}
    partial = None
    if out is not None:
        if not base:
            raise UsageError("out= needs the rows' header (row_header(env, ...)): a published file says who sampled it")
        if opts.bootstrap_seed is None:
            raise UsageError("bootstrap_seed none: a resumable run replays its looks to continue, which needs a fixed "
                             "seed (default 0)")
        partial = PartialRows(out, {**base, ADAPTIVE_KEY: plan}, restart=restart)
    journal = _Journal(partial, draw, piece)
    in_loop = base or None  # the rows' own provenance, checked against the before side's at every look

    rows: list[Row] = journal.take(items, 0, design.ks[0])
    k_of = [design.ks[0]] * len(items)
    category_of = [_category_of(rows[i * design.ks[0]], i) for i in range(len(items))]
    looks: list[LookRecord] = []
    decided_at: dict[str, int] = {}
    regressed_at: dict[str, int] = {}
    last_verdicts: dict[str, tuple[str, ...]] = {}
    sampled: tuple[str, ...] = tuple(dict.fromkeys(category_of))
    look_replies = len(rows)
    k_open = design.ks[0]  # every category still open was open at every look before, so all share one k
    stopped = "last look"
    too_few: set[str] = set()
    for r, look_level in enumerate(design.levels, start=1):
        look_options = opts.replace(family_level=look_level)
        with warnings.catch_warnings():
            if r > 1:
                warnings.simplefilter("ignore")  # look 1 said it (a constant guard, a changed holdout)
            outcome = judge(before_rows, Rows(rows, header=in_loop), look_options)
        looks.append(LookRecord(r, k_open, look_level, sampled, look_replies, outcome))
        for category, verdicts in outcome.verdicts.items():
            last_verdicts[category] = verdicts
            if "regressed" in verdicts:
                regressed_at.setdefault(category, r)
            if category not in decided_at and category not in too_few and _decided(verdicts):
                if "insufficient" in verdicts and "regressed" not in verdicts:
                    too_few.add(category)  # more replies add no scenarios: stop, undecided
                else:
                    decided_at[category] = r
        open_ = {c for c in dict.fromkeys(category_of) if c not in decided_at and c not in too_few}
        if not open_ or r == len(design.levels):
            stopped = "last look" if open_ else ""
            break
        grow = [i for i, c in enumerate(category_of) if c in open_]
        step = design.ks[r] - k_open
        if design.budget is not None:  # what is left, shared evenly by the prompts still open
            step = min(step, (design.budget - len(rows)) // len(grow))
        if step < 1:
            stopped = "budget"  # this stop spends less level than the design allows, never more
            break
        new = journal.take([items[i] for i in grow], k_open, step)
        rows += new
        for i in grow:
            k_of[i] += step
        k_open += step
        sampled, look_replies = tuple(sorted(open_)), len(new)
    journal.finish()
    outcomes = []
    for category in dict.fromkeys(category_of):
        mine = [i for i, c in enumerate(category_of) if c == category]
        verdicts = last_verdicts.get(category, ("insufficient",))
        at = decided_at.get(category)
        final = _category(looks[at - 1].outcome.verdicts.get(category, verdicts)) if at is not None else \
            _category(verdicts)
        if category in regressed_at:
            final = "regressed"
        outcomes.append(CategoryOutcome(category, final, at, max(k_of[i] for i in mine), sum(k_of[i] for i in mine),
                                        regressed_at.get(category), "" if at is not None else
                                        "too few scenarios" if category in too_few else stopped))
    published = Rows(rows, header=in_loop)
    result = AdaptiveResult(design, tuple(outcomes), tuple(looks), published, len(rows), resumed=journal.reused)
    if base:
        kept: Header = {**base, ADAPTIVE_KEY: {**plan, "outcome": result.record()}}
        sampling = kept.get("sampling")
        if isinstance(sampling, Mapping):  # no one k: each scenario has its own (its rows per prompt)
            kept["sampling"] = {**sampling, "k": None}
        published.header = kept
        if partial is not None:
            partial.publish(kept)
    return result


def _category_of(row: Row, position: int) -> str:
    category = row.get("category") if isinstance(row, Mapping) else None
    if not isinstance(category, str) or not category:
        raise DataError(f"the sampler's rows: item {position + 1}'s first row has no 'category' string; graded rows "
                        "name their category")
    return category
