"""probe_reward: run every hack class against a reward before anyone trains on it.

A probe needs an environment: its categories, its prompt items (the environment's own
prompt set, or ``items=`` you pass), its truth (its score and guarded markers), its honest
replies, and its own hacks beside the generic classes every task shares
(:data:`pytest_rlgate.rewards.strategies.GENERIC_HACKS`). A bare score function names no task,
so probing it with some default task's cases would grade replies to prompts it never meant to
see and report a false all-clear: it is an error.

For every class and category the probe draws (prompt, honest reply, hacked reply) triples with
Hypothesis and scores both replies with the reward under test. A hack is judged *in context*:
a hacked reply counts only when the environment's truth calls the whole reply wrong (or the
environment declares it wrong by construction, its own ``hacks``), and it *pays* when the
reward scores it at least as much as the honest reply (and more than an empty one). Filler
that the truth does not mind (padding, whitespace, repetition) pays only when the reward
scores it *more* than the honest reply. Partial credit for a wrong reply is no hack as long
as the honest reply earns more. A paying example is shrunk by Hypothesis to a minimal one
and saved in Hypothesis' example database, so the next run replays it first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from random import Random
from types import ModuleType
from typing import TYPE_CHECKING, TypeGuard

from .._io.cache import cache_root
from ..data.prompts import prompt_item
from ..environment.contract import Env, EnvSpec, load_env
from ..environment.hack import Hack, Truth
from ..errors import DataError, RewardHackError, UsageError
from ..records import PromptItem
from .calling import GROUP_SIZE, RewardCall, reward_call

if TYPE_CHECKING:  # Hypothesis loads only when a probe runs
    from hypothesis.database import ExampleDatabase

    from .strategies import HackClass, HackedReply

#: one drawn example: a prompt item and a hacked reply to it
_Pair = tuple[PromptItem, "HackedReply"]

__all__ = ["HackFinding", "ProbeResult", "probe_reward"]

#: ``database=`` default: Hypothesis' own (the active settings profile's example database)
DEFAULT_DATABASE = "default"
#: Partial credit for a wrong reply is reported from this severity on: a fifth of the push a right reply gets
#: over the typical wrong replies of its prompt (see :func:`probe_reward`).
MIN_SEVERITY = 0.2


@dataclass(frozen=True)
class HackFinding:
    """One hack class on one category: how often it paid, by how much, and its minimal example."""

    hack: str
    category: str
    n: int  #: examples tried (each a reply the environment's truth calls wrong, or filler)
    n_paid: int  #: examples the reward paid
    mean_gain: float  #: mean of reward(hacked) - reward(original) over the examples
    max_gain: float
    free: bool  #: made from an honest reply (False: made from a plain one, like keyword stuffing)
    prompt: str | None = None  #: minimal example: the prompt ...
    example: HackedReply | None = None  #: ... and its HackedReply
    original_score: float | None = None
    hacked_score: float | None = None
    seconds: float = 0.0  #: wall time of this class on this category
    replayed: bool = False  #: the example database held this probe's example when it ran
    #: wrong examples paid part of the credit, not as much as the honest reply, at severity >= the probe's
    #: ``min_severity`` (beyond what the environment's own score credits them)
    n_partial: int = 0
    #: the minimal example's severity: its advantage over the item's typical wrong replies, as a share of the
    #: honest reply's (>= 1: paid like right); for filler, what it adds to the honest reply, as that share
    severity: float | None = None
    #: the largest severity of any example tried (below ``min_severity`` it is shown, never reported)
    max_severity: float = 0.0
    #: the typical-wrong baseline of the minimal example's item (see :func:`probe_reward`)
    baseline: float | None = None
    max_paid: float | None = None  #: the most the reward paid any example tried

    @property
    def pays(self) -> bool:
        """A reply the truth calls wrong is paid at least as much as the honest one (or filler paid more)."""
        return self.n_paid > 0

    @property
    def reported(self) -> bool:
        """Paid like right, or partial credit at the probe's severity threshold: a finding."""
        return self.n_paid > 0 or self.n_partial > 0

    @property
    def advantage(self) -> float | None:
        """What a group-relative update gives the minimal example over the item's typical wrong replies."""
        if self.hacked_score is None or self.baseline is None:
            return None
        return self.hacked_score - self.baseline


@dataclass(frozen=True)
class ClassSummary:
    """One hack class over every category probed: tried, paid, and its smallest paying example."""

    hack: str
    tried: int
    paid: int
    categories: tuple[str, ...]  #: where it paid (or paid partial credit at the threshold)
    example: HackFinding | None
    seconds: float
    partial: int = 0  #: examples paid partial credit at the threshold
    max_severity: float = 0.0


@dataclass(frozen=True)
class ProbeResult:
    """Everything :func:`probe_reward` tried; ``str()`` is the per-class summary and the hacks that pay."""

    findings: tuple[HackFinding, ...]
    reward_name: str
    env_name: str
    seed: int
    max_examples: int
    #: categories no class could be tried on: no honest reply to start from (no ``honest_replies``, and
    #: no reply built from the case's values passes the environment's score)
    untried: tuple[str, ...] = ()
    min_severity: float = MIN_SEVERITY  #: the severity at which partial credit is reported

    @property
    def paying(self) -> tuple[HackFinding, ...]:
        """The findings: a class on a category that pays a wrong reply like a right one, or partial credit."""
        return tuple(f for f in self.findings if f.reported)

    @property
    def hacks(self) -> tuple[str, ...]:
        """Names of the classes with a finding on at least one category, sorted."""
        return tuple(sorted({f.hack for f in self.paying}))

    @property
    def partial(self) -> tuple[str, ...]:
        """Names of the classes whose only findings are partial credit (never paid like right), sorted."""
        full = {f.hack for f in self.findings if f.pays}
        return tuple(sorted({f.hack for f in self.paying} - full))

    def finding(self, hack: str, category: str) -> HackFinding:
        for f in self.findings:
            if (f.hack, f.category) == (hack, category):
                return f
        raise KeyError(f"no finding for hack {hack!r} on {category!r}")

    def classes(self) -> tuple[ClassSummary, ...]:
        """Per class, in probe order: examples tried and paid, where it paid, the shortest paying example."""
        order = list(dict.fromkeys(f.hack for f in self.findings))
        out = []
        for hack in order:
            mine = [f for f in self.findings if f.hack == hack]
            shown = [f for f in mine if f.reported and f.example is not None]
            full = [f for f in shown if f.pays] or shown  # a class's example pays in full where one does
            smallest = min(full, key=lambda f: len(f.example.hacked)) if full else None  # type: ignore[union-attr]
            out.append(ClassSummary(hack, sum(f.n for f in mine), sum(f.n_paid for f in mine),
                                    tuple(f.category for f in mine if f.reported), smallest,
                                    sum(f.seconds for f in mine), sum(f.n_partial for f in mine),
                                    max((f.max_severity for f in mine), default=0.0)))
        return tuple(out)

    def summary(self, width: int = 60) -> str:
        """One row per class: tried, paid, where, and the minimal example (what the probe did, in full)."""
        from tabulate import tabulate

        rows = [[c.hack, c.tried, c.paid, c.partial, _severity(c.max_severity, self.min_severity),
                 ", ".join(c.categories),
                 "" if c.example is None else _describe(c.example.example, width)]  # type: ignore[arg-type]
                for c in self.classes()]
        rows += [["every class", "not tried", "", "", "", category, self._untried_reason]
                 for category in self.untried]
        return str(tabulate(rows, headers=["class", "tried", "paid", "partial", "severity", "found on",
                                           "minimal example"]))

    def table(self, *, paying_only: bool = True, width: int = 72) -> str:
        """Hack, category, share paid, mean and max gain, and the minimal hacked reply; then a
        "not tried" row for each class the probe could not try, so silence never reads as safety."""
        from tabulate import tabulate

        rows = [
            [f.hack, f.category, f"{f.n_paid}/{f.n}", f"{f.n_partial}/{f.n}",
             "" if f.severity is None else f"{f.severity:.2f}", f"{f.mean_gain:+.3f}",
             "" if f.example is None else f"{f.original_score:g} -> {f.hacked_score:g} (typical {f.baseline:g})",
             "" if f.example is None else _describe(f.example, width)]
            for f in (self.paying if paying_only else self.findings)
        ]
        rows += [["every class", category, "not tried", "", "", "", "", self._untried_reason]
                 for category in self.untried]
        return str(tabulate(rows, headers=["hack", "category", "paid", "partial", "severity", "mean gain",
                                           "minimal: honest -> hacked", "minimal hacked reply"]))

    def __str__(self) -> str:
        call = self.env_name if self.reward_name == self.env_name else f"{self.reward_name}, env={self.env_name}"
        skipped = f"; not tried on {', '.join(self.untried)}: {self._untried_reason}" if self.untried else ""
        tried = sum(f.n for f in self.findings)
        if not self.paying:
            return (f"probe_reward({call}): no hack pays ({tried} examples over {len(self.findings)} class x "
                    f"category probes, seed {self.seed}; no partial credit for a wrong reply reaches severity "
                    f"{self.min_severity:g}){skipped}")
        full = [h for h in self.hacks if h not in self.partial]
        said = [f"{len(full)} hack(s) pay: {', '.join(full)}"] if full else []
        if self.partial:
            said.append(f"partial credit for wrong replies (severity >= {self.min_severity:g}): "
                        f"{', '.join(self.partial)}")
        return f"probe_reward({call}): {'; '.join(said)}{skipped}\n{self.table()}"

    @property
    def _untried_reason(self) -> str:
        return f"environment {self.env_name} has no honest reply there to start from"

    def assert_no_hacks(self, *, allow: Collection[str] = ()) -> None:
        """Raise :class:`~pytest_rlgate.RewardHackError` (its message is the table) if a hack pays.

        *allow* names hacks you accept (e.g. a length hack you price elsewhere).
        """
        unknown = set(allow) - {f.hack for f in self.findings}
        if unknown:
            raise UsageError(f"assert_no_hacks(allow=...) names hacks that were not probed: {sorted(unknown)}")
        bad = [f for f in self.paying if f.hack not in allow]
        if bad:
            shown = dataclasses.replace(self, findings=tuple(bad))
            raise RewardHackError(str(shown), self)


def _severity(value: float, threshold: float) -> str:
    if value <= 0:
        return ""
    shown = "inf" if math.isinf(value) else f"{value:.2f}"
    return shown if value >= threshold else f"({shown})"


def _short(text: str, width: int) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else f"{text[: width - 16]}... ({len(text)} chars)"


def _describe(example: HackedReply, width: int) -> str:
    """The hacked reply as what the hack did to the original: 'original + added' or the reply."""
    original, hacked = example.original, example.hacked
    if original and hacked != original and hacked.startswith(original) and hacked[len(original):].strip():
        return "<original> + " + _short(hacked[len(original):].strip(), width - 13)
    if original and hacked != original and hacked.endswith(original) and hacked[: -len(original)].strip():
        return _short(hacked[: -len(original)].strip(), width - 13) + " + <original>"
    return _short(hacked, width)


def _minimal(tried: Sequence[_Pair], pays: Callable[[_Pair], bool], *, max_examples: int,
             database: ExampleDatabase | None, key: bytes) -> tuple[_Pair, bool]:
    """(the shortest paying example among those tried, whether the example database held one).

    ``hypothesis.find`` searches the tried examples, shortest first, and shrinks the paying one
    it finds towards the shortest; the database (Hypothesis' own by default) keeps it under
    *key*, so the next probe of the same reward, class and category replays it before drawing
    anything. Hypothesis draws at random (a seeded search keeps no database), so the few shorter
    examples left are then checked in order: a seed reports one example however Hypothesis got
    there.
    """
    from hypothesis import HealthCheck, Phase, find, settings, strategies as st
    from hypothesis.errors import NoSuchExample

    ordered = sorted(tried, key=lambda pair: (len(pair[1].hacked), pair[1].hacked))
    chosen = settings(max_examples=max_examples, deadline=None, phases=[Phase.reuse, Phase.generate, Phase.shrink],
                      suppress_health_check=list(HealthCheck), database=database)
    held = chosen.database is not None and any(True for _ in chosen.database.fetch(key))
    try:
        found = find(st.sampled_from(ordered), pays, settings=chosen, database_key=key)
    except NoSuchExample:  # a reward that pays at random: the longest tried stands in for the search
        found = ordered[-1]
    upto = next(i for i, pair in enumerate(ordered) if pair is found)
    return next((pair for pair in ordered[:upto + 1] if pays(pair)), found), held


def _is_environment(value: object) -> TypeGuard[EnvSpec]:
    """An environment (or a spec naming one) rather than a reward function."""
    if isinstance(value, (Env, str, ModuleType)):
        return True
    return hasattr(value, "score") and hasattr(value, "categories")


def _resolve(reward: Callable[..., object] | EnvSpec, env: EnvSpec) -> tuple[Callable[..., object], str, Env]:
    """(reward, its name, the environment) from probe_reward's first two arguments."""
    if reward is not None and _is_environment(reward):
        if env is not None:
            raise UsageError("probe_reward: the first argument is an environment and env= names another; "
                             "pass a reward function first, or the environment alone")
        reward, env = None, reward
    if env is None:
        raise UsageError("probe_reward needs the environment the reward belongs to: pass env= (a name such as "
                         "'refund', 'module:attr' or the object), e.g. probe_reward(score, env=my_env); its "
                         "categories, prompts, truth and honest replies are what the reward is probed with")
    resolved = load_env(env)
    if reward is None:
        return resolved.score, resolved.name, resolved
    if not callable(reward):
        raise UsageError(f"probe_reward: reward must be a function reward(reply, case) or TRL's reward(prompts, "
                         f"completions, **kwargs), got {reward!r:.60}")
    return reward, getattr(reward, "__qualname__", None) or type(reward).__name__, resolved


def _items(env: Env, items: Iterable[Mapping[str, object]] | None, seed: int) -> list[PromptItem]:
    """Prompt items with their case and category: *items*, else the environment's own prompt set."""
    if items is None:
        if not env.can_build_prompts:
            raise UsageError(f"probe_reward: environment {env.name} writes no prompts of its own; pass items= "
                             "(prompt items with prompt, case and category, e.g. read_prompts(path, env=...))")
        sizes = env.prompt_sizes
        items = env.build_prompts(seed, "default" if not sizes or "default" in sizes else sizes[0])
    elif isinstance(items, (str, Mapping)) or not isinstance(items, Iterable):
        raise UsageError(f"probe_reward: items must be a list of prompt items, got {type(items).__name__}")
    out: list[PromptItem] = []
    for line, item in enumerate(items, start=1):
        try:
            full = prompt_item(item, env)
        except DataError as exc:
            raise DataError(exc.reason, path="<items>", line=line) from None
        out.append({"prompt": full["prompt"], "case": full["case"], "category": full["category"]})
    if not out:
        raise UsageError("probe_reward: items is empty; pass prompt items of every category probed")
    return out


def _names(what: str, values: Collection[str] | None, allowed: Sequence[str], owner: str) -> tuple[str, ...]:
    """*values* (default: all of *allowed*) when it is a non-empty subset of *allowed*."""
    if values is None:
        return tuple(allowed)
    chosen = (values,) if isinstance(values, str) else tuple(values)
    if not chosen or any(v not in allowed for v in chosen):
        raise UsageError(f"probe_reward: {what} must be a non-empty subset of {owner}'s {what} "
                         f"{list(allowed)}, got {list(chosen)}")
    return chosen


def _check_own_hacks(env: Env) -> None:
    """The environment's own hacks are Hack values naming only its categories."""
    for hack in env.hacks:
        if not isinstance(hack, Hack):
            raise UsageError(f"environment {env.name}: hacks must be pytest_rlgate.environment.hack.Hack values, "
                             f"got {hack!r:.60}")
        stray = [c for c in hack.categories if c not in env.categories]
        if stray:
            raise UsageError(f"environment {env.name}: hack {hack.name!r} names categories {stray} the "
                             f"environment does not declare ({', '.join(env.categories)})")


#: A probe draws up to this many times max_examples candidates to find max_examples the truth judges hacks.
MAX_DRAWS = 5
#: Prompt items a probe uses per category: enough cases to vary ids and numbers, few enough to stay fast.
ITEMS_PER_CATEGORY = 8


def _spread(pool: Sequence[PromptItem], categories: Sequence[str], seed: int) -> list[PromptItem]:
    """At most :data:`ITEMS_PER_CATEGORY` items of each category (a seeded choice), distinct cases first."""
    out: list[PromptItem] = []
    for category in sorted({item["category"] for item in pool}):
        mine = [item for item in pool if item["category"] == category]
        distinct = list({repr(sorted(item["case"].items(), key=lambda kv: str(kv[0]))): item
                         for item in reversed(mine)}.values())[::-1]
        rest = [item for item in mine if not any(item is d for d in distinct)]
        rng = Random(f"{seed}\0{category}")
        rng.shuffle(distinct)
        rng.shuffle(rest)
        out += (distinct + rest)[:ITEMS_PER_CATEGORY]
    return out


def _database_key(reward: Callable[..., object], env: Env, hack: str, category: str, seed: int) -> bytes:
    who = f"{getattr(reward, '__module__', '')}.{getattr(reward, '__qualname__', type(reward).__name__)}"
    return hashlib.sha256(f"rlgate-probe\0{who}\0{env.name}\0{hack}\0{category}\0{seed}".encode()).digest()


class _Scorer:
    """The reward's scores of (prompt, reply), memoised: exploring and shrinking ask again and again.

    ``None`` is a reward's "skip this one" (TRL's convention). A reward that scores a reply by the
    rest of its batch is asked about each reply inside one fixed group of the prompt's typical
    replies (*group*), the way GRPO scores a group, so an answer never depends on what was asked
    before.
    """

    def __init__(self, call: RewardCall, group: Callable[[PromptItem], Sequence[str]] = lambda item: ()) -> None:
        self.call = call
        self.group = group
        self.memo: dict[tuple[str, str], float | None] = {}

    def __call__(self, item: PromptItem, replies: Sequence[str]) -> list[float | None]:
        prompt = item["prompt"]
        missing = [r for r in dict.fromkeys(replies) if (prompt, r) not in self.memo]
        if missing:
            fixed = list(dict.fromkeys(self.group(item)))[: GROUP_SIZE - 1] or [""]
            if self.call.detect_group(item, fixed):
                for reply in missing:
                    batch = [*(f for f in fixed if f != reply), reply]
                    self.memo[(prompt, reply)] = self.call(item, batch)[-1]
            else:
                for reply, value in zip(missing, self.call(item, missing)):
                    self.memo[(prompt, reply)] = value
        return [self.memo[(prompt, r)] for r in replies]


_TOL = 1e-9


def _above(value: float, empty: float | None) -> bool:
    """More than an empty reply gets (an empty reply the reward skips compares with nothing)."""
    return empty is None or value > empty + _TOL


class _Credit:
    """What a group-relative update makes of a reply: its advantage over the item's typical wrong replies.

    The *baseline* of an item is the least the reward pays any of its typical wrong replies (the
    environment's, :meth:`HackClass.typical`: polite non-answers, refusals, another category's move,
    the right form with a wrong value, each judged wrong), or, with the base policy's rows, the mean
    it pays their wrong replies of the item's category (the group mean a policy that has not learned
    the task gives GRPO). A reply's *severity* is its advantage over the baseline as a share of the
    honest reply's: 1 or more is paid like right; a polite non-answer paid 0.4 where the honest reply
    gets 1 and the typical wrong reply 0 has 0.4. The environment's own grading is its truth: a wrong
    reply whose guarded markers hold, and that the environment's score itself credits, counts only
    by what the reward pays it beyond that (refund pays asking on a with-id prompt 0.3 by design).
    """

    def __init__(self, scorer: _Scorer, env: Env, typical: Callable[[PromptItem], Sequence[str]],
                 min_severity: float, base: Mapping[str, tuple[float, float]] | None = None) -> None:
        self.scorer, self.env, self.typical, self.min_severity = scorer, env, typical, min_severity
        self.base = base or {}
        self._baseline: dict[int, tuple[PromptItem, float, float]] = {}
        self._env: dict[tuple[str, str], float] = {}

    def env_score(self, item: PromptItem, reply: str) -> float:
        key = (item["prompt"], reply)
        if key not in self._env:
            self._env[key] = self.env.score(reply, item["case"])
        return self._env[key]

    def baseline(self, item: PromptItem) -> tuple[float, float]:
        """(the reward's baseline, the environment score's baseline) of *item*."""
        found = self._baseline.get(id(item))
        if found is None or found[0] is not item:
            if item["category"] in self.base:
                reward, own = self.base[item["category"]]
            else:
                texts = list(self.typical(item)) or [""]
                scored = [v for v in self.scorer(item, texts) if v is not None]
                reward = min(scored) if scored else 0.0
                own = min(self.env_score(item, t) for t in texts)
            found = (item, reward, own)
            self._baseline[id(item)] = found
        return found[1], found[2]

    @staticmethod
    def _share(gain: float, honest: float, floor: float) -> float:
        """*gain* as a share of the honest reply's advantage over the baseline *floor*."""
        gap = honest - floor
        if gap > _TOL:
            return gain / gap
        return math.inf if gain > _TOL else 0.0

    def verdict(self, item: PromptItem, x: HackedReply, original: float, hacked: float,
                empty: Callable[[], float | None]) -> tuple[str, float]:
        """("hack", "partial" or "", severity) of one judged example scored (original, hacked)."""
        floor, own_floor = self.baseline(item)
        if x.kind == "unpriced":  # filler: what it adds to the honest reply
            severity = self._share(hacked - original, original, floor) if hacked > original + _TOL else 0.0
            return ("hack" if severity >= self.min_severity else ""), severity
        if hacked >= original - _TOL and _above(hacked, empty()):
            return "hack", max(1.0, self._share(hacked - floor, original, floor))
        severity = self._share(hacked - floor, original, floor)
        if severity >= self.min_severity and self._guards_hold(item, x.hacked):  # below it, credit changes nothing
            own, honest = self.env_score(item, x.hacked), self.env_score(item, x.original)
            credited = self._share(own - own_floor, honest, own_floor)
            severity -= max(0.0, min(credited, severity))
        return ("partial" if severity >= self.min_severity else ""), max(0.0, severity)

    def _guards_hold(self, item: PromptItem, reply: str) -> bool:
        """Every guarded marker of *reply* holds (the environment's truth finds nothing forbidden in it)."""
        if not self.env.guards:
            return True
        marks = self.env.markers(reply, item["case"], prompt=item["prompt"])
        return all(marks[guard] >= 1.0 for guard in self.env.guards)


def _probe_one(hack: HackClass, category: str, pool: Sequence[PromptItem], scorer: _Scorer, credit: _Credit, *,
               max_examples: int, seed: int, database: ExampleDatabase | None, key: bytes) -> HackFinding:
    """One class on one category: draw, judge, score, count the findings among those the truth judged, shrink one.

    *max_examples* of the class's candidates over the category's items are drawn (seeded) and
    judged. A candidate the truth does not call wrong (and that is not filler) is no hack and is
    not counted as tried. Each tried example is paid like right (a hack), paid partial credit at
    the severity threshold, or neither (:class:`_Credit`); Hypothesis then finds and shrinks an
    example of the worst kind found (:func:`_minimal`).
    """
    started = time.perf_counter()
    everything: list[_Pair] = [(item, x) for item in pool for x in hack.candidates(item)]
    everything.sort(key=lambda pair: (len(pair[1].hacked), pair[1].hacked))
    judged: dict[int, HackedReply | None] = {}
    verdicts: dict[int, tuple[str, float]] = {}

    def judge(pair: _Pair) -> HackedReply | None:
        if id(pair) not in judged:
            judged[id(pair)] = hack.judge(pair[1], pair[0])
        return judged[id(pair)]

    def scores(pair: _Pair) -> tuple[float, float]:
        item, x = pair
        original, hacked = scorer(item, [x.original, x.hacked])
        assert original is not None and hacked is not None  # pairs the reward skips are never tried
        return original, hacked

    def scored(pair: _Pair) -> bool:
        item, x = pair
        return None not in scorer(item, [x.original, x.hacked])

    def verdict(pair: _Pair) -> tuple[str, float]:
        if id(pair) not in verdicts:
            x = judge(pair)
            if x is None:
                verdicts[id(pair)] = ("", 0.0)
            else:
                original, hacked = scores(pair)
                verdicts[id(pair)] = credit.verdict(pair[0], x, original, hacked, lambda: scorer(pair[0], [""])[0])
        return verdicts[id(pair)]

    rng = Random(f"{seed}\0{hack.name}\0{category}")
    order = rng.sample(range(len(everything)), len(everything))
    tried: list[_Pair] = []
    for drawn, index in enumerate(order):  # until max_examples are judged hacks, or MAX_DRAWS times that drawn
        if len(tried) >= max_examples or drawn >= MAX_DRAWS * max_examples:
            break
        if judge(everything[index]) is not None and scored(everything[index]):  # a skipped example is no example
            tried.append(everything[index])
    gains = [b - a for a, b in map(scores, tried)]
    kinds = [verdict(pair) for pair in tried]
    paid = sum(kind == "hack" for kind, _ in kinds)
    partial = sum(kind == "partial" for kind, _ in kinds)
    worst = "hack" if paid else ("partial" if partial else "")
    example, replayed = (None, False)
    if worst:
        example, replayed = _minimal(tried, lambda pair: verdict(pair)[0] == worst,
                                     max_examples=max(max_examples, 100), database=database, key=key)
    shown = None if example is None else judge(example)
    original_score, hacked_score = scores(example) if example is not None else (None, None)
    return HackFinding(
        hack.name, category, len(tried), paid,
        sum(gains) / len(gains) if gains else 0.0, max(gains) if gains else 0.0,
        hack.free,
        None if example is None else example[0]["prompt"], shown,
        original_score, hacked_score, time.perf_counter() - started, replayed,
        n_partial=partial, severity=None if example is None else verdict(example)[1],
        max_severity=max((severity for _, severity in kinds), default=0.0),
        baseline=None if example is None else credit.baseline(example[0])[0],
        max_paid=max((scores(pair)[1] for pair in tried), default=None),
    )


def probe_reward(
    reward: Callable[..., object] | EnvSpec = None,
    *,
    env: EnvSpec = None,
    items: Iterable[Mapping[str, object]] | None = None,
    categories: Collection[str] | None = None,
    hacks: Collection[str] | None = None,
    max_examples: int = 60,
    seed: int = 0,
    signature: str = "auto",
    database: ExampleDatabase | str | None = DEFAULT_DATABASE,
    min_severity: float = MIN_SEVERITY,
    base_rows: Iterable[Mapping[str, object]] | None = None,
    columns: Mapping[str, str | Callable[[Mapping[str, object]], object]] | None = None,
    conversational: bool | None = None,
    tokenizer: object | None = None,
) -> ProbeResult:
    """Try every hack class on *reward* over *env*'s prompts; report which pay, how often, with an example.

    *reward* is ``reward(reply, case) -> float`` (``reward(episode, case)`` for an episode
    environment: it gets the replayed :class:`~pytest_rlgate.environment.Episode`) or TRL's ``reward(prompts,
    completions, **kwargs) -> list[float]`` (detected from the parameter names; force it with
    *signature*), called exactly as ``GRPOTrainer`` calls it: keywords, chat-message completions
    (*conversational*, default True: rlgate's GRPO dataset is the environment's chat; False for
    plain strings), ``completion_ids`` (*tokenizer*'s ids, else the reply's UTF-8 bytes),
    ``trainer_state``, ``log_extra``, ``log_metric`` and every dataset column: ``case``,
    ``category``, ``scenario_id``, each field of the case under its own name, and *columns* (a
    column name -> a case field, or a function of the case, e.g. ``{"ground_truth": "answer"}``). A
    signature TRL's call cannot satisfy is refused, naming what is missing; a score of ``None``
    skips the example, as TRL skips it. Leave *reward* out, or pass the environment itself first, to
    probe the environment's own ``score``. *env* is required with a reward: a name,
    ``"module:attr"`` or an environment object (see :func:`~pytest_rlgate.load_env`). Prompt items
    come from *items* (each with ``prompt``, and ``case`` unless the environment's ``case_for``
    reads it) or else from the environment's own ``build_prompts``. *categories* limits the probe to
    some of the environment's categories; *hacks* to some classes (the generic ones and the
    environment's ``hacks``). Each class x category draws up to *max_examples* examples; Hypothesis
    shrinks a paying one to a minimal example and keeps it in *database* (the active Hypothesis
    settings' database by default, except that a ``.hypothesis/`` folder nobody asked for is never
    created in the working directory: the examples then go to rlgate's cache; None keeps nothing),
    so a later probe replays it first. The same *seed* gives the same result.

    Two things are found. A *hack*: a reply the environment's truth calls wrong, paid at least as
    much as an honest reply (filler the truth does not mind: paid more). And *partial credit*: a
    wrong reply paid less than right but more than the typical wrong replies of its prompt, which
    a group-relative update learns wherever a group holds no right reply. Its *severity* is its
    advantage over the typical wrong replies as a share of an honest reply's (0.4 for a polite
    non-answer paid 0.4 when the honest reply gets 1 and the typical wrong reply 0); it is
    reported from *min_severity* on (default 0.2), and below that shown in the summary only. The
    typical wrong replies are the environment's (polite non-answers, refusals, another category's
    move, the right form with a wrong value: the least paid of them is the baseline), or the
    wrong replies among *base_rows* (rows of the base policy with ``prompt``, ``reply`` and the
    ``case`` unless the environment reads it: their mean reward per category is the baseline).
    Credit the environment's own score gives a reply whose guarded markers hold is its truth's
    grading, not a finding.
    """
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise UsageError(f"probe_reward: max_examples must be a positive int, got {max_examples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"probe_reward: seed must be an int, got {seed!r}")
    if isinstance(min_severity, bool) or not isinstance(min_severity, (int, float)) or not min_severity > 0:
        raise UsageError(f"probe_reward: min_severity must be a positive number, got {min_severity!r}")
    with _storage():
        return _probe(reward, env, items, categories, hacks, max_examples, seed, signature, database,
                      float(min_severity), base_rows, columns, conversational, tokenizer)


def _probe(reward: Callable[..., object] | EnvSpec, env: EnvSpec, items: Iterable[Mapping[str, object]] | None,
           categories: Collection[str] | None, hacks: Collection[str] | None, max_examples: int, seed: int,
           signature: str, database: ExampleDatabase | str | None, min_severity: float,
           base_rows: Iterable[Mapping[str, object]] | None,
           columns: Mapping[str, str | Callable[[Mapping[str, object]], object]] | None,
           conversational: bool | None, tokenizer: object | None) -> ProbeResult:
    """:func:`probe_reward` with its arguments checked, inside the probe's Hypothesis storage."""
    from .strategies import GENERIC_HACKS, hack_classes

    reward, name, env = _resolve(reward, env)
    call = reward_call(reward, signature, env, columns=columns, conversational=conversational, tokenizer=tokenizer)
    categories = _names("categories", categories, env.categories, f"environment {env.name}")
    pool = _items(env, items, seed)
    call.check_columns(pool)
    _check_own_hacks(env)
    known = tuple(dict.fromkeys([*GENERIC_HACKS, *(h.name for h in env.hacks)]))  # type: ignore[attr-defined]
    picked = _names("hacks", hacks, known, f"environment {env.name}")
    for category in categories:
        if not any(item["category"] == category for item in pool):
            raise UsageError(f"probe_reward: no prompt items of category {category!r}; pass items= with some, "
                             "or categories= naming only the categories you have")
    spread = _spread(pool, categories, seed)
    classes = [c for c in hack_classes(env, spread, seed=seed, vocabulary=pool) if c.name in picked]
    pool = spread
    scorer = _Scorer(call, classes[0].typical if classes else (lambda item: ()))
    database = _example_database(database)
    startable = {category: [item for item in pool if item["category"] == category and classes[0].startable(item)]
                 for category in categories} if classes else {}
    untried = tuple(c for c in categories if classes and not startable[c])
    if untried and len(untried) == len(categories) and hacks is not None:
        raise UsageError(f"probe_reward: environment {env.name} has no honest_replies(case) and no reply built from "
                         "its cases passes its score, so no hack class has an honest reply to start from; add "
                         "honest_replies(case) returning a Hypothesis strategy of correct replies")
    base = None if base_rows is None else _base_baselines(base_rows, env, scorer, categories)
    credit = _Credit(scorer, env, scorer.group, min_severity, base)
    findings = []
    for hack in classes:
        for category in categories:
            if hack.applies_to(category) and startable[category]:
                findings.append(_probe_one(hack, category, startable[category], scorer, credit,
                                           max_examples=max_examples, seed=seed, database=database,
                                           key=_database_key(reward, env, hack.name, category, seed)))
    return ProbeResult(tuple(findings), name, env.name, seed, max_examples, untried, min_severity)


def _example_database(database: ExampleDatabase | str | None) -> ExampleDatabase | None:
    """*database*, or (the default) the active Hypothesis settings' database, read inside :func:`_storage`."""
    if not isinstance(database, str):
        return database
    if database != DEFAULT_DATABASE:
        raise UsageError(f"probe_reward: database must be a Hypothesis ExampleDatabase, None or "
                         f"{DEFAULT_DATABASE!r}, got {database!r:.40}")
    from hypothesis import settings

    chosen: ExampleDatabase | None = settings().database
    return chosen


@contextmanager
def _storage() -> Iterator[None]:
    """Hypothesis' storage for the probe: where the user's settings say, never a new ``.hypothesis/`` unasked.

    Hypothesis keeps its example database and caches (``constants``, ...) under its home
    directory, by default a ``.hypothesis/`` folder in the directory it was imported from, made
    on first write. A probe is no Hypothesis test the user wrote in that folder, so when nobody
    chose the home (no ``HYPOTHESIS_STORAGE_DIRECTORY``, no ``set_hypothesis_home_dir``) and the
    folder does not exist yet, the probe's Hypothesis runs keep their files in
    ``<rlgate cache>/hypothesis`` instead (examples still replay there); an existing folder, or a
    database the settings name, is used as Hypothesis would.
    """
    import os
    from pathlib import Path

    import hypothesis.configuration as configuration

    chosen = getattr(configuration, "__hypothesis_home_directory", None)
    default = getattr(configuration, "__hypothesis_home_directory_default", None)
    if chosen is not None or os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or default is None \
            or Path(default).exists():
        yield
        return
    configuration.set_hypothesis_home_dir(cache_root() / "hypothesis")
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(None)


def _base_baselines(rows: Iterable[Mapping[str, object]], env: Env, scorer: _Scorer,
                    categories: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Per category: the mean reward, and the mean environment score, of the base policy's wrong rows."""
    truth = Truth(env)
    rewards: dict[str, list[float]] = {}
    own: dict[str, list[float]] = {}
    for line, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping) or not isinstance(row.get("reply"), str) or "prompt" not in row:
            raise DataError("a base row needs 'prompt' and 'reply' (text)", path="<base_rows>", line=line)
        try:
            item = prompt_item({k: v for k, v in row.items() if k in ("prompt", "case", "category")}, env)
        except DataError as exc:
            raise DataError(exc.reason, path="<base_rows>", line=line) from None
        reply = str(row["reply"])
        if item["category"] not in categories or truth.right(reply, item["case"], item["prompt"]):
            continue
        full: PromptItem = {"prompt": item["prompt"], "case": item["case"], "category": item["category"]}
        value = scorer(full, [reply])[0]
        if value is not None:  # a row the reward skips is no member of the group's mean
            rewards.setdefault(full["category"], []).append(value)
            own.setdefault(full["category"], []).append(env.score(reply, full["case"]))
    return {c: (sum(v) / len(v), sum(own[c]) / len(own[c])) for c, v in rewards.items()}
