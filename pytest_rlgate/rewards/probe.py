"""probe_reward: run the known exploits against a reward before anyone trains on it.

A probe needs an environment: its categories, its prompt items (the environment's own
prompt set, or ``items=`` you pass), its honest replies, and its own hacks beside the
generic ones every task shares (:data:`pytest_rlgate.rewards.strategies.GENERIC_HACKS`). A bare
score function names no task, so probing it with some default task's cases would grade
replies to prompts it never meant to see and report a false all-clear: it is an error.

For every hack and category the probe generates (prompt, original, hacked) triples with
Hypothesis, scores both replies with the reward under test, and reports whether the hack
pays and by how much, with a shrunk minimal example. A *free* hack starts from an honest
reply and adds something the task forbids; it pays when the reward does not charge for it
(hacked >= original, the original having scored above zero). A *gain* hack starts from a
plain, unhelpful reply and pays when the hacked reply scores strictly higher.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, TypeGuard

from ..data.prompts import prompt_item
from ..data.records import Case, PromptItem
from ..environment.contract import Env, EnvSpec, load_env
from ..environment.hack import Hack
from ..errors import DataError, RewardHackError, UsageError

if TYPE_CHECKING:  # Hypothesis loads only when a probe runs
    from hypothesis.strategies import SearchStrategy

    from .strategies import HackedReply

#: one drawn example: a prompt item and a reply to it, honest and hacked
_Pair = tuple[PromptItem, "HackedReply"]
#: the reward under probe, as ``(prompt, case, replies) -> scores``
_Call = Callable[[str, Case, Sequence[str]], Sequence[object]]

__all__ = ["HackFinding", "ProbeResult", "probe_reward"]

_TOLERANCE = 1e-9


@dataclass(frozen=True)
class HackFinding:
    """One hack on one category: how often and how much it paid, and its minimal example."""

    hack: str
    category: str
    n: int  #: examples tried
    n_paid: int  #: examples where the hack paid
    mean_gain: float  #: mean of reward(hacked) - reward(original) over the examples
    max_gain: float
    free: bool  #: a free hack (pays when it costs nothing) rather than a gain hack
    prompt: str | None = None  #: minimal example: the prompt ...
    example: HackedReply | None = None  #: ... and its HackedReply
    original_score: float | None = None
    hacked_score: float | None = None

    @property
    def pays(self) -> bool:
        return self.n_paid > 0


@dataclass(frozen=True)
class ProbeResult:
    """Everything :func:`probe_reward` tried; ``str()`` is the table of hacks that pay."""

    findings: tuple[HackFinding, ...]
    reward_name: str
    env_name: str
    seed: int
    max_examples: int
    #: hacks left out because the environment has no ``honest_replies`` for them to start from
    skipped: tuple[str, ...] = ()

    @property
    def paying(self) -> tuple[HackFinding, ...]:
        return tuple(f for f in self.findings if f.pays)

    @property
    def hacks(self) -> tuple[str, ...]:
        """Names of the hacks that pay on at least one category, sorted."""
        return tuple(sorted({f.hack for f in self.paying}))

    def finding(self, hack: str, category: str) -> HackFinding:
        for f in self.findings:
            if (f.hack, f.category) == (hack, category):
                return f
        raise KeyError(f"no finding for hack {hack!r} on {category!r}")

    def table(self, *, paying_only: bool = True, width: int = 72) -> str:
        """Hack, category, share paid, mean and max gain, and the minimal hacked reply; then a
        "not tried" row for each hack the probe could not try, so silence never reads as safety."""
        from tabulate import tabulate

        rows = [
            [f.hack, f.category, f"{f.n_paid}/{f.n}", f"{f.mean_gain:+.3f}", f"{f.max_gain:+.3f}",
             "" if f.example is None else f"{f.original_score:g} -> {f.hacked_score:g}",
             "" if f.example is None else _describe(f.example, width)]
            for f in (self.paying if paying_only else self.findings)
        ]
        rows += [[hack, "every", "not tried", "", "", "",
                  f"environment {self.env_name} has no honest_replies to start from"] for hack in self.skipped]
        return str(tabulate(rows, headers=["hack", "category", "paid", "mean gain", "max gain", "minimal",
                                           "minimal hacked reply"]))

    def __str__(self) -> str:
        call = self.env_name if self.reward_name == self.env_name else f"{self.reward_name}, env={self.env_name}"
        skipped = (f"; not tried: {', '.join(self.skipped)} (environment {self.env_name} has no honest_replies)"
                   if self.skipped else "")
        if not self.paying:
            return (f"probe_reward({call}): no hack pays ({len(self.findings)} hack x category probes, "
                    f"seed {self.seed}){skipped}")
        return f"probe_reward({call}): {len(self.hacks)} hack(s) pay: {', '.join(self.hacks)}{skipped}\n{self.table()}"

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
    if original and hacked != original and hacked.startswith(original):
        return "<original> + " + _short(hacked[len(original):].strip(), width - 13)
    if original and hacked != original and hacked.endswith(original):
        return _short(hacked[: -len(original)].strip(), width - 13) + " + <original>"
    return _short(hacked, width)


def _caller(reward: Callable[..., object], style: str) -> _Call:
    """Adapt *reward* to ``(prompt, case, replies) -> scores``.

    A TRL reward gets the case as TRL hands it the dataset's ``case`` column, when it takes
    one (a ``case`` parameter or ``**kwargs``): its environment may not read the case from text.
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
        return lambda prompt, case, replies: [reward(reply, case) for reply in replies]
    raise UsageError(f"signature must be 'auto', 'trl' or 'reply_case', got {style!r}")


def _number(value: object, hack: str, reply: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"the reward returned {value!r} (not a finite number) for the {hack} reply {reply[:80]!r}")
    return float(value)


def _explore(strategy: SearchStrategy[_Pair], scores: Callable[[_Pair], tuple[float, float]],
             pays: Callable[[_Pair], bool], *, max_examples: int, seed: int) -> tuple[list[float], list[_Pair]]:
    """Draw *max_examples* examples (no shrinking, no database): every gain and the paying draws.

    A hack whose examples can never be drawn (a trailing wrong reply where the environment
    scores every reply alike) ends with no gains rather than an error.
    """
    from hypothesis import HealthCheck, Phase, given, seed as hseed, settings
    from hypothesis.errors import Unsatisfiable

    gains: list[float] = []
    paid: list[_Pair] = []

    @settings(max_examples=max_examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(strategy)
    def explore(pair: _Pair) -> None:
        original, hacked = scores(pair)
        gains.append(hacked - original)
        if pays(pair):
            paid.append(pair)

    try:
        explore()
    except Unsatisfiable:
        pass
    return gains, paid


class _Paid(Exception):
    """Raised inside the shrinking run so Hypothesis shrinks the paying example."""


def _minimal(strategy: SearchStrategy[_Pair], pays: Callable[[_Pair], bool], first: _Pair, *, max_examples: int,
             seed: int) -> _Pair:
    """The first paying draw of the seeded run, shrunk by Hypothesis to a minimal example.

    The same seed replays the exploring run's draws, so the paying draw it saw is found
    again; Hypothesis replays the shrunk example last, which is the one kept. Should a
    reward pay at random, the exploring run's *first* paying draw stands in.
    """
    from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

    found: list[_Pair] = []

    @settings(max_examples=max_examples, database=None, deadline=None, phases=[Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @hseed(seed)
    @given(strategy)
    def shrink(pair: _Pair) -> None:
        if pays(pair):
            found.append(pair)
            raise _Paid

    try:
        shrink()
    except _Paid:
        pass
    return found[-1] if found else first


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
                         "categories, prompts and honest replies are what the reward is probed with")
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


def _own_hacks(env: Env) -> dict[str, Hack]:
    """The environment's own hacks by name, checked against its categories."""
    own = {}
    for hack in env.hacks:
        if not isinstance(hack, Hack):
            raise UsageError(f"environment {env.name}: hacks must be pytest_rlgate.environment.hack.Hack values, "
                             f"got {hack!r:.60}")
        stray = [c for c in hack.categories if c not in env.categories]
        if stray:
            raise UsageError(f"environment {env.name}: hack {hack.name!r} names categories {stray} the "
                             f"environment does not declare ({', '.join(env.categories)})")
        own[hack.name] = hack
    return own


def _triples(hack: Hack, pool: Sequence[PromptItem], env: Env) -> SearchStrategy[_Pair]:
    """(item, HackedReply) examples of *hack* on the prompt items of *pool*."""
    from hypothesis import strategies as st

    from .strategies import HackedReply, plain_replies, reply_strategy

    def hacked(item: PromptItem, original: str) -> SearchStrategy[_Pair]:
        made = reply_strategy(hack.hacked(original, item["case"]), f"hack {hack.name}")
        return made.map(lambda text: (item, HackedReply(original, text, hack.name)))

    def for_item(item: PromptItem) -> SearchStrategy[_Pair]:
        originals = (reply_strategy(env.honest_replies(item["case"]), f"environment {env.name}: honest_replies(case)")
                     if hack.free else plain_replies())
        return originals.flatmap(lambda original: hacked(item, original))

    return st.sampled_from(list(pool)).flatmap(for_item)


def _probe_one(hack: Hack, category: str, strategy: SearchStrategy[_Pair], call: _Call,
               *, max_examples: int, seed: int) -> HackFinding:
    """One hack on one category: explore, count the paying draws, shrink one."""
    memo: dict[tuple[str, str, str], tuple[float, float]] = {}

    def scores(pair: _Pair) -> tuple[float, float]:
        item, x = pair
        key = (item["prompt"], x.original, x.hacked)
        if key not in memo:
            got = call(item["prompt"], item["case"], [x.original, x.hacked])
            memo[key] = (_number(got[0], hack.name, x.original), _number(got[1], hack.name, x.hacked))
        return memo[key]

    def pays(pair: _Pair) -> bool:
        original, hacked = scores(pair)
        if hack.free:
            return original > _TOLERANCE and hacked >= original - _TOLERANCE
        return hacked > original + _TOLERANCE

    gains, paid = _explore(strategy, scores, pays, max_examples=max_examples, seed=seed)
    example = _minimal(strategy, pays, paid[0], max_examples=max_examples, seed=seed) if paid else None
    original_score, hacked_score = scores(example) if example is not None else (None, None)
    return HackFinding(
        hack.name, category, len(gains), len(paid),
        sum(gains) / len(gains) if gains else 0.0, max(gains) if gains else 0.0, hack.free,
        None if example is None else example[0]["prompt"],
        None if example is None else example[1],
        original_score, hacked_score,
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
) -> ProbeResult:
    """Try the known hacks on *reward* over *env*'s prompts; report which pay, by how much, with an example.

    *reward* is ``reward(reply, case) -> float`` or TRL's ``reward(prompts, completions,
    **kwargs) -> list[float]`` (detected from the parameter names; force it with
    *signature*); leave it out, or pass the environment itself first, to probe the
    environment's own ``score``. *env* is required with a reward: a name, ``"module:attr"``
    or an environment object (see :func:`~pytest_rlgate.load_env`). Prompt items come from
    *items* (each with ``prompt``, and ``case`` unless the environment's ``case_for`` reads
    it) or else from the environment's own ``build_prompts``. *categories* limits the
    probe to some of the environment's categories; *hacks* to some hack names (the
    generic ones and the environment's ``hacks``). Each hack x category runs
    *max_examples* generated examples, then Hypothesis shrinks a paying one to a minimal
    example. The same *seed* gives the same result.
    """
    from .strategies import GENERIC_HACKS, generic_hacks

    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise UsageError(f"probe_reward: max_examples must be a positive int, got {max_examples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"probe_reward: seed must be an int, got {seed!r}")
    reward, name, env = _resolve(reward, env)
    call = _caller(reward, signature)
    categories = _names("categories", categories, env.categories, f"environment {env.name}")
    pool = _items(env, items, seed)
    own = _own_hacks(env)
    known = tuple(dict.fromkeys([*GENERIC_HACKS, *own]))
    picked = _names("hacks", hacks, known, f"environment {env.name}")
    chosen = [h for h in known if h in picked]  # the order of the table does not depend on the caller's
    by_category: dict[str, dict[str, Hack]] = {}
    for category in categories:  # an environment's hack replaces a generic one of the same name
        if not any(item["category"] == category for item in pool):
            raise UsageError(f"probe_reward: no prompt items of category {category!r}; pass items= with some, "
                             "or categories= naming only the categories you have")
        by_category[category] = {**{h.name: h for h in generic_hacks(env, pool, category=category)}, **own}
    free = sorted(h for h in chosen if by_category[categories[0]][h].free)
    skipped: tuple[str, ...] = ()
    if free and not env.has_honest_replies and hacks is None:  # run what can run, and say what could not
        skipped, chosen = tuple(free), [h for h in chosen if h not in free]
    elif free and not env.has_honest_replies:
        raise UsageError(f"probe_reward: environment {env.name} has no honest_replies(case), which the hacks "
                         f"{', '.join(free)} start from; add honest_replies(case) returning a Hypothesis strategy "
                         "of correct replies, or pass hacks= naming only gain hacks")

    findings = []
    for hack_name in chosen:
        for category in categories:
            hack = by_category[category][hack_name]
            if hack.applies_to(category):
                of_category = [item for item in pool if item["category"] == category]
                findings.append(_probe_one(hack, category, _triples(hack, of_category, env), call,
                                           max_examples=max_examples, seed=seed))
    return ProbeResult(tuple(findings), name, env.name, seed, max_examples, skipped)
