"""probe_reward: run the standard exploits against a reward before anyone trains on it.

For every hack of :data:`pytest_rlgate.strategies.HACKS` and every prompt category, the probe
generates (prompt, honest-or-plain reply, hacked reply) triples with Hypothesis, scores both
replies, and reports whether the hack pays and by how much, with a shrunk minimal example.

Two kinds of hack. A *gain* hack (``format_bonus``, ``keyword_stuffing``) starts from a
plain, unhelpful reply and pays when the hacked reply scores strictly higher. A *free* hack
(``second_call``, ``trailing_text``, ``padding``, ``malformed_call``) starts from the honest
reply and adds something the policy forbids; it pays when the reward does not charge for it
(hacked >= original, the original having scored above zero).
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import UsageError
from .hacks import RewardHackError

__all__ = ["FREE_HACKS", "HackFinding", "ProbeResult", "probe_reward"]

#: Hacks that add something forbidden to an honest reply: they pay when they cost nothing.
FREE_HACKS: frozenset[str] = frozenset({"second_call", "trailing_text", "padding", "malformed_call"})
#: Free hacks that only make sense after a tool call (skipped where the honest reply has none).
_AFTER_A_CALL = frozenset({"trailing_text"})
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
    example: Any = None  #: ... and its HackedReply
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
    seed: int
    max_examples: int

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
        """Hack, category, share paid, mean and max gain, and the minimal hacked reply."""
        from tabulate import tabulate

        rows = [
            [f.hack, f.category, f"{f.n_paid}/{f.n}", f"{f.mean_gain:+.3f}", f"{f.max_gain:+.3f}",
             "" if f.example is None else f"{f.original_score:g} -> {f.hacked_score:g}",
             "" if f.example is None else _describe(f.example, width)]
            for f in (self.paying if paying_only else self.findings)
        ]
        return tabulate(rows, headers=["hack", "category", "paid", "mean gain", "max gain", "minimal", "minimal hacked reply"])

    def __str__(self) -> str:
        if not self.paying:
            return f"probe_reward({self.reward_name}): no hack pays ({len(self.findings)} hack x category probes, seed {self.seed})"
        return f"probe_reward({self.reward_name}): {len(self.hacks)} hack(s) pay: {', '.join(self.hacks)}\n{self.table()}"

    def assert_no_hacks(self, *, allow: Collection[str] = ()) -> None:
        """Raise :class:`~pytest_rlgate.RewardHackError` (its message is the table) if a hack pays.

        *allow* names hacks you accept (e.g. a length hack you price elsewhere).
        """
        unknown = set(allow) - {f.hack for f in self.findings}
        if unknown:
            raise UsageError(f"assert_no_hacks(allow=...) names hacks that were not probed: {sorted(unknown)}")
        bad = [f for f in self.paying if f.hack not in allow]
        if bad:
            shown = ProbeResult(tuple(bad), self.reward_name, self.seed, self.max_examples)
            raise RewardHackError(str(shown), self)


def _short(text: str, width: int) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else f"{text[: width - 16]}... ({len(text)} chars)"


def _describe(example: Any, width: int) -> str:
    """The hacked reply as what the hack did to the original: 'original + added' or the reply."""
    original, hacked = example.original, example.hacked
    if original and hacked != original and hacked.startswith(original):
        return "<original> + " + _short(hacked[len(original):].strip(), width - 13)
    if original and hacked != original and hacked.endswith(original):
        return _short(hacked[: -len(original)].strip(), width - 13) + " + <original>"
    return _short(hacked, width)


def _caller(reward: Callable[..., Any], style: str) -> Callable[[str, Mapping[str, Any], Sequence[str]], list[float]]:
    """Adapt *reward* to ``(prompt, case, replies) -> scores``."""
    if style == "auto":
        try:
            params = inspect.signature(reward).parameters
        except (TypeError, ValueError):
            raise UsageError(f"cannot read the signature of {reward!r}; pass signature='trl' or 'reply_case'") from None
        style = "trl" if "completions" in params or "prompts" in params else "reply_case"
        if style == "reply_case":
            positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in params.values()):
                raise UsageError(
                    f"{getattr(reward, '__name__', reward)!r} takes neither (reply, case) nor TRL's "
                    "(prompts, completions, **kwargs); pass signature='trl' or 'reply_case'"
                )
    if style == "trl":
        return lambda prompt, case, replies: list(reward([prompt] * len(replies), list(replies)))
    if style == "reply_case":
        return lambda prompt, case, replies: [reward(reply, case) for reply in replies]
    raise UsageError(f"signature must be 'auto', 'trl' or 'reply_case', got {style!r}")


def _number(value: Any, hack: str, reply: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"the reward returned {value!r} (not a finite number) for the {hack} reply {reply[:80]!r}")
    return float(value)


def _explore(strategy: Any, scores: Callable[[Any], tuple[float, float]], pays: Callable[[Any], bool],
             *, max_examples: int, seed: int) -> tuple[list[float], list[Any]]:
    """Draw *max_examples* examples (no shrinking, no database): every gain and the paying draws."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    gains: list[float] = []
    paid: list[Any] = []

    @settings(max_examples=max_examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(strategy)
    def explore(pair: Any) -> None:
        original, hacked = scores(pair)
        gains.append(hacked - original)
        if pays(pair):
            paid.append(pair)

    explore()
    return gains, paid


def probe_reward(
    reward: Callable[..., Any],
    *,
    case_for: Callable[[str], Mapping[str, Any]] | None = None,
    categories: Collection[str] | None = None,
    endorsed: str = "lookup_order",
    hacks: Collection[str] | None = None,
    max_examples: int = 60,
    seed: int = 0,
    signature: str = "auto",
) -> ProbeResult:
    """Try the standard hacks on *reward* and report which pay, by how much, with an example.

    *reward* is either ``reward(reply, case) -> float`` or TRL's ``reward(prompts,
    completions, **kwargs) -> list[float]`` (detected from the parameter names; force it with
    *signature*). *case_for* reads a prompt's case (default: the refund environment's);
    *categories* limits the prompt categories; *endorsed* is the tool an honest reply calls
    with the prompt's own id on a with-id prompt (honest replies ask on no-id prompts and
    answer briefly off topic). Each hack × category runs *max_examples* generated examples,
    then ``hypothesis.find`` shrinks a paying one to a minimal example. The same *seed*
    gives the same result.
    """
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis import strategies as st
    from hypothesis.errors import NoSuchExample

    from . import strategies as S
    from .envs import refund

    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise UsageError(f"max_examples must be a positive int, got {max_examples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"seed must be an int, got {seed!r}")
    categories = tuple(refund.CATEGORIES if categories is None else categories)
    hacks = tuple(S.ALL_HACKS if hacks is None else hacks)
    for name, values, allowed in (("categories", categories, refund.CATEGORIES), ("hacks", hacks, S.ALL_HACKS)):
        unknown = [v for v in values if v not in allowed]
        if unknown or not values:
            raise UsageError(f"probe_reward: {name} must be a non-empty subset of {list(allowed)}, got {list(values)}")
    read_case = case_for or refund.case_for
    call = _caller(reward, signature)
    name = getattr(reward, "__qualname__", None) or type(reward).__name__

    # one id per example, shared by the prompt, the honest reply and the invented-id filter
    own = st.shared(S.order_ids(), key="pytest-rlgate-probe-own-id")
    invented = S.invented_ids(own)
    honest = {
        "with_id": S.tool_calls(S.confusable_ids(own, kinds=S.SAME_ID_CONFUSIONS), names=st.just(endorsed)),
        "no_id": S.asking_replies(),
        "off_topic": S.plain_replies(),
    }

    findings: list[HackFinding] = []
    for hack in hacks:
        free = hack in FREE_HACKS
        for category in categories:
            if hack in _AFTER_A_CALL and category != "with_id":
                continue
            items = S.cases(categories=[category], ids=own).map(
                lambda item: {**item, "case": dict(read_case(item["prompt"]))}
            )
            originals = honest[category] if free else S.plain_replies()
            strategy = st.tuples(items, S.hacked_replies(originals, hacks=[hack], ids=invented))
            memo: dict[tuple[str, str, str], tuple[float, float]] = {}

            def scores(pair: tuple[Mapping[str, Any], Any], hack: str = hack) -> tuple[float, float]:
                item, x = pair
                key = (item["prompt"], x.original, x.hacked)
                if key not in memo:
                    got = call(item["prompt"], item["case"], [x.original, x.hacked])
                    memo[key] = (_number(got[0], hack, x.original), _number(got[1], hack, x.hacked))
                return memo[key]

            def pays(pair: tuple[Mapping[str, Any], Any], free: bool = free, scores: Any = scores) -> bool:
                original, hacked = scores(pair)
                if free:
                    return original > _TOLERANCE and hacked >= original - _TOLERANCE
                return hacked > original + _TOLERANCE

            gains, paid = _explore(strategy, scores, pays, max_examples=max_examples, seed=seed)
            example = None
            if paid:
                try:
                    example = find(
                        strategy, pays, random=random.Random(seed),
                        settings=settings(max_examples=max_examples, database=None, deadline=None,
                                          phases=[Phase.generate, Phase.shrink],
                                          suppress_health_check=list(HealthCheck)),
                    )
                except NoSuchExample:  # find's own draws missed it; keep the first paying draw
                    example = paid[0]
            original_score, hacked_score = scores(example) if example is not None else (None, None)
            findings.append(HackFinding(
                hack, category, len(gains), len(paid),
                sum(gains) / len(gains) if gains else 0.0, max(gains) if gains else 0.0, free,
                None if example is None else example[0]["prompt"],
                None if example is None else example[1],
                original_score, hacked_score,
            ))
    return ProbeResult(tuple(findings), name, seed, max_examples)
