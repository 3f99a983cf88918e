"""The environment contract's optional members, declared once: type, default, reader, docs row.

A user's environment defines what it needs; :class:`~pytest_rlgate.environment.contract.Env`
reads the rest through :class:`EnvMembers`, whose fields are the optional members: each one's
type, its default (what an environment without it gets), how a user's value is read and
checked, and its row of the contract table in ``docs/environments.md``, which a test holds to
these fields. Declared the way TRL declares a config (``field(default=..., metadata=...)``)
and this package its knobs: a new optional member is a field here, plus the
:class:`~pytest_rlgate.environment.contract.Env` method that uses it when it is a callable.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, cast

from ..errors import UsageError

if TYPE_CHECKING:
    import random

    from hypothesis.strategies import SearchStrategy

    from ..records import Case

__all__ = ["EnvMembers", "EpisodeInstance", "MemberMeta", "member"]


class EpisodeInstance(Protocol):
    """An ``environment_factory`` instance, as TRL resets it (its tools are its other public methods)."""

    def reset(self, **case: object) -> object: ...


_T = TypeVar("_T")
#: a user's member as it was found (a callable, a value), before the contract reads it
_Found = object


class MemberMeta(TypedDict):
    """What the contract says of one optional member, beside its type and default."""

    #: the member as the contract table writes it (its signature, or its type)
    shown: str
    #: what an environment without the member gets
    absent: str
    #: the parts that read it
    used_by: str
    #: the user's value (never None) -> the typed value; raises UsageError naming *where*
    read: Callable[[_Found, str], object]
    #: older spellings still read (``SYSTEM``)
    aliases: tuple[str, ...]


def member(default: _T, read: Callable[[_Found, str], _T], *, shown: str, absent: str, used_by: str,
           aliases: tuple[str, ...] = ()) -> _T:
    """One optional member of the contract, declared once: its type (the field's), its default,
    how a user's value is read, and its row of the contract table in ``docs/environments.md``
    (which a test holds to these fields)."""
    meta: MemberMeta = {"shown": shown, "absent": absent, "used_by": used_by, "read": read, "aliases": aliases}
    if isinstance(default, dict):  # a mutable default: each environment gets its own copy
        return cast(_T, dataclasses.field(default_factory=functools.partial(dict, default), metadata=meta))
    return dataclasses.field(default=default, metadata=meta)


def _callable(value: _Found, where: str) -> Callable[..., Any] | None:
    """The user's function (what it returns is checked where it is called); a value that cannot
    be called is no such member."""
    return value if callable(value) else None


def _names(value: _Found, where: str) -> tuple[str, ...]:
    return tuple(cast(Iterable[str], value))


def _values(value: _Found, where: str) -> tuple[object, ...]:
    return tuple(cast(Iterable[object], value))


def _text(value: _Found, where: str) -> str | None:
    return value if isinstance(value, str) and value else None


def _any(value: _Found, where: str) -> object:
    return value


_NOTHING_ENDORSED: Sequence[str] | Mapping[str, Sequence[str]] = ()


def _endorsed(value: _Found, where: str) -> Sequence[str] | Mapping[str, Sequence[str]]:
    return cast("Sequence[str] | Mapping[str, Sequence[str]]", value)


def _rewards(value: _Found, where: str) -> Mapping[str, Callable[..., float]]:
    return dict(cast(Mapping[str, Callable[..., float]], value))


def _shares(value: _Found, where: str) -> Mapping[str, float]:
    if not isinstance(value, Mapping) or not value or not all(
            isinstance(k, str) and not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < v < 1
            for k, v in value.items()):
        raise UsageError(f"{where}: 'holdout_shares' must map category names to shares strictly between 0 and 1, "
                         f"e.g. {{'no_id': 0.65}}, got {value!r:.80}")
    return {str(k): float(v) for k, v in value.items()}


def _tools(value: _Found, where: str) -> tuple[Callable[..., object], ...]:
    if isinstance(value, (str, Mapping)) or not isinstance(value, Iterable) or not all(
            callable(t) and getattr(t, "__name__", None) and (t.__doc__ or "").strip() for t in value):
        raise UsageError(f"{where}: 'tools' must be a list of typed functions with docstrings (the form "
                         f"transformers' chat templates and TRL take), got {value!r:.80}")
    return tuple(value)


def _factory(value: _Found, where: str) -> Callable[[], EpisodeInstance]:
    if not callable(value):
        raise UsageError(f"{where}: 'environment_factory' must be a class or a function returning an "
                         f"environment instance, got {value!r:.60}")
    return cast(Callable[[], EpisodeInstance], value)


def _turns(value: _Found, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where}: 'max_turns' must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class EnvMembers:
    """The contract's optional members: each one's type, its default and what reads it, declared
    once. :class:`Env` reads a user's object through these fields (a member that is absent or
    None takes the field's default), so generic code never looks a member up by name.
    """

    version: str = member("0", lambda value, where: str(value), shown="`version: str`", absent='`"0"`',
                          used_by="the environment fingerprint")
    case_for: Callable[[str], object] | None = member(
        None, _callable, shown="`case_for(prompt) -> Mapping`",
        absent="the prompt file's own `case` (required then)", used_by="prompt files, reward tables")
    passes: Callable[[float], object] | None = member(
        None, _callable, shown="`passes(score) -> bool`", absent="`score >= 1.0`", used_by="pass@1, DPO pairs")
    markers: Callable[..., object] | None = member(
        None, _callable, shown="`markers(reply, case) -> Mapping[str, float]`", absent="`{}`", used_by="rows; guards")
    guards: tuple[str, ...] = member((), _names, shown="`guards: Sequence[str]`", absent="`()`",
                                     used_by="the gate's default guarded markers")
    system: str | None = member(None, _text, shown="`system: str`", absent="no system turn",
                                used_by="sampling, GRPO/DPO datasets", aliases=("SYSTEM",))
    messages_for: Callable[[str], Iterable[dict[str, str]]] | None = member(
        None, _callable, shown="`messages_for(prompt) -> list[dict]`",
        absent="the system prompt (if any), then the user turn", used_by="sampling, GRPO/DPO datasets")
    build_prompts: Callable[[int, str], Iterable[object]] | None = member(
        None, _callable, shown="`build_prompts(seed, size) -> list[item]`", absent="prompts must come from a file",
        used_by="`rlgate prompts`, fixtures, probe")
    prompt_sizes: tuple[str, ...] = member((), _names, shown="`prompt_sizes: Sequence[str]`",
                                           absent="any size `build_prompts` takes",
                                           used_by="`rlgate prompts --size`, `--rlgate-size`, probe")
    holdout_shares: Mapping[str, float] = member(
        {}, _shares, shown="`holdout_shares: Mapping[category, float]`",
        absent="0.2 of every category's scenarios",
        used_by="the split when no `--holdout` is given: a rare category can be held out more than a common one")
    endorsed: Sequence[str] | Mapping[str, Sequence[str]] = member(
        _NOTHING_ENDORSED, _endorsed, shown="`endorsed: Sequence[str] | Mapping[category, Sequence[str]]`",
        absent="`()`", used_by="`hack_scan`, HackMonitor")
    features: Callable[[str], object] | None = member(
        None, _callable, shown="`features(reply) -> Mapping[str, float]`", absent="the generic features",
        used_by="`hack_scan`, HackMonitor")
    describe_reply: Callable[[str, dict[str, object]], object] | None = member(
        None, _callable, shown="`describe_reply(reply, case) -> str`",
        absent="the reply's nonzero `features` by name, else nothing",
        used_by='the gate\'s flips ("calls lookup_order with an invented id")')
    honest_replies: Callable[[Case], SearchStrategy[str]] | None = member(
        None, _callable, shown="`honest_replies(case)` (a Hypothesis strategy)",
        absent="replies built from the case's values that `score` passes", used_by="`probe_reward`, `hack_replies`")
    hacks: tuple[object, ...] = member((), _values, shown="`hacks: Sequence[Hack]`",
                                       absent="the generic hack classes only", used_by="`probe_reward`, `hack_replies`")
    rejected_reply: Callable[[Mapping[str, object], random.Random], str | None] | None = member(
        None, _callable, shown="`rejected_reply(item, rng) -> str | None`",
        absent="no constructed negatives (said so)", used_by="DPO")
    rewards: Mapping[str, Callable[..., float]] = member(
        {}, _rewards, shown="`rewards: Mapping[name, score]`", absent="`{}`",
        used_by="`--reward NAME`: training-only reward variants")
    base_model: str | None = member(
        None, _text, shown="`base_model: str` (a tiny policy name or a model id)",
        absent="none: `--base-model` / `--model` required", used_by="training, `rlgate sample`")
    tiny_policy: object = member(
        None, _any, shown="`tiny_policy` (a `TinySpec`: its build recipe)",
        absent="none (a tool environment's tiny agent: `rlgate policy build`, below)", used_by="`rlgate policy build`")
    tools: tuple[Callable[..., object], ...] = member(
        (), _tools, shown="`tools: Sequence[callable]`", absent="one-turn: `score(reply, case)`",
        used_by="the tool loop, episode rows, GRPO's tool path")
    environment_factory: Callable[[], EpisodeInstance] | None = member(
        None, _factory, shown="`environment_factory` (`reset(**case)`, tool methods, optional `get_reward()`)",
        absent="one-turn: `score(reply, case)`", used_by="the tool loop, episode rows, GRPO's tool path")
    max_turns: int | None = member(None, _turns, shown="`max_turns: int`", absent="4 with tools, else 1",
                                   used_by="the tool loop, TRL's `max_tool_calling_iterations`")
    parse_tool_calls: Callable[[str], Iterable[object]] | None = member(
        None, _callable, shown="`parse_tool_calls(text) -> list` of `(name, arguments)`",
        absent="the `<tool_call>{json}</tool_call>` blocks", used_by="the tool loop")

    @classmethod
    def read(cls, obj: object, where: str) -> EnvMembers:
        """The members *obj* declares, read as the fields say; the fields' defaults for the rest."""
        found: dict[str, Any] = {}
        for spec in dataclasses.fields(cls):
            meta = cast(MemberMeta, spec.metadata)
            value = next((v for v in (getattr(obj, name, None) for name in (spec.name, *meta["aliases"]))
                          if v is not None), None)
            if value is not None:
                found[spec.name] = meta["read"](value, where)
        return dataclasses.replace(cls(), **found)
