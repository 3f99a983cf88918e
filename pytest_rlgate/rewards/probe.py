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
import inspect
import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from random import Random
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, TypeGuard

from ..data.prompts import prompt_item
from ..environment.contract import Env, EnvSpec, load_env
from ..environment.episode import Episode
from ..environment.hack import Hack
from ..errors import DataError, RewardHackError, UsageError
from ..records import Case, PromptItem

if TYPE_CHECKING:  # Hypothesis loads only when a probe runs
    from hypothesis.database import ExampleDatabase

    from .strategies import HackClass, HackedReply

#: one drawn example: a prompt item and a hacked reply to it
_Pair = tuple[PromptItem, "HackedReply"]
#: the reward under probe, as ``(prompt, case, replies) -> scores``
_Call = Callable[[str, Case, Sequence[str]], Sequence[object]]

__all__ = ["HackFinding", "ProbeResult", "probe_reward"]

#: ``database=`` default: Hypothesis' own (the active settings profile's example database)
DEFAULT_DATABASE = "default"


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

    @property
    def pays(self) -> bool:
        return self.n_paid > 0


@dataclass(frozen=True)
class ClassSummary:
    """One hack class over every category probed: tried, paid, and its smallest paying example."""

    hack: str
    tried: int
    paid: int
    categories: tuple[str, ...]  #: where it paid
    example: HackFinding | None
    seconds: float


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

    @property
    def paying(self) -> tuple[HackFinding, ...]:
        return tuple(f for f in self.findings if f.pays)

    @property
    def hacks(self) -> tuple[str, ...]:
        """Names of the hack classes that pay on at least one category, sorted."""
        return tuple(sorted({f.hack for f in self.paying}))

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
            paying = [f for f in mine if f.pays and f.example is not None]
            smallest = min(paying, key=lambda f: len(f.example.hacked)) if paying else None  # type: ignore[union-attr]
            out.append(ClassSummary(hack, sum(f.n for f in mine), sum(f.n_paid for f in mine),
                                    tuple(f.category for f in mine if f.pays), smallest, sum(f.seconds for f in mine)))
        return tuple(out)

    def summary(self, width: int = 60) -> str:
        """One row per class: tried, paid, where, and the minimal example (what the probe did, in full)."""
        from tabulate import tabulate

        rows = [[c.hack, c.tried, c.paid, ", ".join(c.categories),
                 "" if c.example is None else _describe(c.example.example, width)]  # type: ignore[arg-type]
                for c in self.classes()]
        rows += [["every class", "not tried", "", category, self._untried_reason]
                 for category in self.untried]
        return str(tabulate(rows, headers=["class", "tried", "paid", "pays on", "minimal example"]))

    def table(self, *, paying_only: bool = True, width: int = 72) -> str:
        """Hack, category, share paid, mean and max gain, and the minimal hacked reply; then a
        "not tried" row for each class the probe could not try, so silence never reads as safety."""
        from tabulate import tabulate

        rows = [
            [f.hack, f.category, f"{f.n_paid}/{f.n}", f"{f.mean_gain:+.3f}", f"{f.max_gain:+.3f}",
             "" if f.example is None else f"{f.original_score:g} -> {f.hacked_score:g}",
             "" if f.example is None else _describe(f.example, width)]
            for f in (self.paying if paying_only else self.findings)
        ]
        rows += [["every class", category, "not tried", "", "", "", self._untried_reason]
                 for category in self.untried]
        return str(tabulate(rows, headers=["hack", "category", "paid", "mean gain", "max gain", "minimal",
                                           "minimal hacked reply"]))

    def __str__(self) -> str:
        call = self.env_name if self.reward_name == self.env_name else f"{self.reward_name}, env={self.env_name}"
        skipped = f"; not tried on {', '.join(self.untried)}: {self._untried_reason}" if self.untried else ""
        tried = sum(f.n for f in self.findings)
        if not self.paying:
            return (f"probe_reward({call}): no hack pays ({tried} examples over {len(self.findings)} class x "
                    f"category probes, seed {self.seed}){skipped}")
        return (f"probe_reward({call}): {len(self.hacks)} hack(s) pay: {', '.join(self.hacks)}{skipped}\n"
                f"{self.table()}")

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


def _takes_episode(params: Mapping[str, inspect.Parameter]) -> bool:
    """Whether a ``(reply, case)`` reward reads an Episode: its first parameter says so by name or type."""
    first = next(iter(params.values()), None)
    if first is None:
        return False
    annotation = first.annotation
    return first.name == "episode" or annotation is Episode or (isinstance(annotation, str) and
                                                                annotation.split(".")[-1] == "Episode")


def _caller(reward: Callable[..., object], style: str, env: Env) -> _Call:
    """Adapt *reward* to ``(prompt, case, replies) -> scores``.

    A TRL reward gets the case as TRL hands it the dataset's ``case`` column, when it takes
    one (a ``case`` parameter or ``**kwargs``): its environment may not read the case from text.
    A ``(episode, case)`` reward of an episode environment gets the replayed :class:`Episode`.
    """
    try:
        params = inspect.signature(reward).parameters
    except (TypeError, ValueError):
        if style == "auto":
            raise UsageError(f"cannot read the signature of {reward!r}; pass signature='trl' or 'reply_case'") from None
        params = MappingProxyType({})
    if style == "auto":
        style = "trl" if "completions" in params or "prompts" in params else "reply_case"
        if style == "reply_case":
            positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in params.values()):
                raise UsageError(
                    f"{getattr(reward, '__name__', reward)!r} takes neither (reply, case) nor TRL's "
                    "(prompts, completions, **kwargs); pass signature='trl' or 'reply_case'"
                )
    if style == "trl":
        takes_case = "case" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())

        def trl(prompt: str, case: Case, replies: Sequence[str]) -> list[object]:
            column = {"case": [dict(case)] * len(replies)} if takes_case else {}
            got = reward([prompt] * len(replies), list(replies), **column)
            if isinstance(got, (str, Mapping)) or not isinstance(got, Iterable):
                raise UsageError(f"the TRL reward returned {got!r:.60}; it must return a list of scores, one a reply")
            return list(got)

        return trl
    if style == "reply_case":
        if env.is_episodic and _takes_episode(params):
            return lambda prompt, case, replies: [reward(env.episode(reply, case)[0], case) for reply in replies]
        return lambda prompt, case, replies: [reward(reply, case) for reply in replies]
    raise UsageError(f"signature must be 'auto', 'trl' or 'reply_case', got {style!r}")


def _number(value: object, hack: str, reply: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"the reward returned {value!r} (not a finite number) for the {hack} reply {reply[:80]!r}")
    return float(value)


def _minimal(tried: Sequence[_Pair], pays: Callable[[_Pair], bool], *, max_examples: int,
             database: ExampleDatabase | str | None, key: bytes) -> tuple[_Pair, bool]:
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
    options: dict[str, object] = {"max_examples": max_examples, "deadline": None,
                                  "phases": [Phase.reuse, Phase.generate, Phase.shrink],
                                  "suppress_health_check": list(HealthCheck)}
    if database != DEFAULT_DATABASE:
        options["database"] = database
    chosen = settings(**options)
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
    """The reward's scores of (prompt, reply), memoised: exploring and shrinking ask again and again."""

    def __init__(self, call: _Call) -> None:
        self.call = call
        self.memo: dict[tuple[str, str], float] = {}

    def __call__(self, item: PromptItem, replies: Sequence[str], hack: str) -> list[float]:
        prompt = item["prompt"]
        missing = [r for r in dict.fromkeys(replies) if (prompt, r) not in self.memo]
        if missing:
            got = self.call(prompt, item["case"], missing)
            for reply, value in zip(missing, got):
                self.memo[(prompt, reply)] = _number(value, hack, reply)
        return [self.memo[(prompt, r)] for r in replies]


def _probe_one(hack: HackClass, category: str, pool: Sequence[PromptItem], scorer: _Scorer, *,
               max_examples: int, seed: int, database: ExampleDatabase | str | None, key: bytes) -> HackFinding:
    """One class on one category: draw, count the paying draws among those the truth judged, shrink one.

    *max_examples* of the class's candidates over the category's items are drawn (seeded) and
    judged. A candidate the truth does not call wrong (and that is not filler) is no hack and is
    not counted as tried. Hypothesis then finds and shrinks a paying one (:func:`_minimal`).
    """
    started = time.perf_counter()
    everything: list[_Pair] = [(item, x) for item in pool for x in hack.candidates(item)]
    everything.sort(key=lambda pair: (len(pair[1].hacked), pair[1].hacked))
    judged: dict[int, HackedReply | None] = {}

    def judge(pair: _Pair) -> HackedReply | None:
        if id(pair) not in judged:
            judged[id(pair)] = hack.judge(pair[1], pair[0])
        return judged[id(pair)]

    def scores(pair: _Pair) -> tuple[float, float]:
        item, x = pair
        original, hacked = scorer(item, [x.original, x.hacked], hack.name)
        return original, hacked

    def pays(pair: _Pair) -> bool:
        x = judge(pair)
        if x is None:
            return False
        original, hacked = scores(pair)
        return kind_pays(x.kind, original, hacked, lambda: scorer(pair[0], [""], hack.name)[0])

    from .strategies import pays as kind_pays

    rng = Random(f"{seed}\0{hack.name}\0{category}")
    order = rng.sample(range(len(everything)), len(everything))
    tried: list[_Pair] = []
    for drawn, index in enumerate(order):  # until max_examples are judged hacks, or MAX_DRAWS times that drawn
        if len(tried) >= max_examples or drawn >= MAX_DRAWS * max_examples:
            break
        if judge(everything[index]) is not None:
            tried.append(everything[index])
    gains = [b - a for a, b in map(scores, tried)]
    paid = [pair for pair in tried if pays(pair)]
    example, replayed = (None, False)
    if paid:
        example, replayed = _minimal(tried, pays, max_examples=max(max_examples, 100), database=database, key=key)
    shown = None if example is None else judge(example)
    original_score, hacked_score = scores(example) if example is not None else (None, None)
    return HackFinding(
        hack.name, category, len(tried), len(paid),
        sum(gains) / len(gains) if gains else 0.0, max(gains) if gains else 0.0,
        hack.free,
        None if example is None else example[0]["prompt"], shown,
        original_score, hacked_score, time.perf_counter() - started, replayed,
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
) -> ProbeResult:
    """Try every hack class on *reward* over *env*'s prompts; report which pay, how often, with an example.

    *reward* is ``reward(reply, case) -> float`` (``reward(episode, case)`` for an episode
    environment: it gets the replayed :class:`~pytest_rlgate.environment.Episode`) or TRL's
    ``reward(prompts, completions, **kwargs) -> list[float]`` (detected from the parameter
    names; force it with *signature*); leave it out, or pass the environment itself first, to
    probe the environment's own ``score``. *env* is required with a reward: a name,
    ``"module:attr"`` or an environment object (see :func:`~pytest_rlgate.load_env`). Prompt
    items come from *items* (each with ``prompt``, and ``case`` unless the environment's
    ``case_for`` reads it) or else from the environment's own ``build_prompts``. *categories*
    limits the probe to some of the environment's categories; *hacks* to some classes (the
    generic ones and the environment's ``hacks``). Each class x category draws up to
    *max_examples* examples; Hypothesis shrinks a paying one to a minimal example and keeps it
    in *database* (Hypothesis' own by default; None keeps nothing), so a later probe replays
    it first. The same *seed* gives the same result.
    """
    from .strategies import GENERIC_HACKS, hack_classes

    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise UsageError(f"probe_reward: max_examples must be a positive int, got {max_examples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"probe_reward: seed must be an int, got {seed!r}")
    reward, name, env = _resolve(reward, env)
    call = _caller(reward, signature, env)
    categories = _names("categories", categories, env.categories, f"environment {env.name}")
    pool = _items(env, items, seed)
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
    scorer = _Scorer(call)
    startable = {category: [item for item in pool if item["category"] == category and classes[0].startable(item)]
                 for category in categories} if classes else {}
    untried = tuple(c for c in categories if classes and not startable[c])
    if untried and len(untried) == len(categories) and hacks is not None:
        raise UsageError(f"probe_reward: environment {env.name} has no honest_replies(case) and no reply built from "
                         "its cases passes its score, so no hack class has an honest reply to start from; add "
                         "honest_replies(case) returning a Hypothesis strategy of correct replies")
    findings = []
    for hack in classes:
        for category in categories:
            if hack.applies_to(category) and startable[category]:
                findings.append(_probe_one(hack, category, startable[category], scorer, max_examples=max_examples,
                                           seed=seed, database=database,
                                           key=_database_key(reward, env, hack.name, category, seed)))
    return ProbeResult(tuple(findings), name, env.name, seed, max_examples, untried)
