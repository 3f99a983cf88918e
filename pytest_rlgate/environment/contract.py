"""The environment contract: everything that knows a task, behind one small protocol.

An *environment* says what a prompt's case is, how a reply scores, which categories exist,
how a chat is rendered and what a hack looks like. Every other part of pytest-rlgate (prompt
files, splits, sampling, rows, the gate, GRPO, DPO, the monitor, the probe, reports, the
plugin and the CLI) takes one environment and never names a task.

A user writes the smallest thing that works, a plain class or module with ``name``,
``categories`` and ``score(reply, case)``, and :func:`load_env` wraps it in :class:`Env`,
which supplies every optional member's documented default. Generic code only ever talks to
an :class:`Env`, so a missing optional member can never fall back to another task's rules.

An environment may also be an *episode* environment: it declares ``tools`` (typed Python
functions with docstrings, the form transformers' chat templates and TRL take) or an
``environment_factory`` in TRL's shape (``reset(**case)``, tool methods, an optional
``get_reward()``), and ``max_turns``. Its ``score`` and ``markers`` then read a whole
:class:`~pytest_rlgate.environment.episode.Episode`; :class:`Env` turns a row's text back into
one by replaying it, so every reader of rows keeps reading text.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib
import inspect
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, Union, cast, runtime_checkable

from ..errors import DataError, UsageError, hide_user_errors
from .calls import USER_CODE_ERRORS, call, number, numbers_of, scorer, user_error
from .episode import Episode, ToolCall, describe_episode, parse_hermes_calls, replay, split_turns
from .members import EnvMembers, EpisodeInstance

if TYPE_CHECKING:
    import random

    from hypothesis.strategies import SearchStrategy

    from ..records import Case

__all__ = ["BUILTIN_PACKAGE", "DEFAULT_ENV", "ENTRY_POINT_GROUP", "Env", "EnvMembers", "EnvSpec", "Environment",
           "EpisodeInstance", "env_names", "load_env"]

#: a user's test that hands rlgate a bad file or spec fails with its one line, not these frames
__tracebackhide__ = hide_user_errors

#: Installed packages register environments here, the way pytest finds plugins by ``pytest11``.
ENTRY_POINT_GROUP = "rlgate.envs"
#: The built-in environments are this package's modules, found by looking (as the readers are): each is an
#: environment (a module with the members), or holds one and names it in ``ENVIRONMENT``; the registered
#: name is the module's. Named as a string, so this contract imports no task.
BUILTIN_PACKAGE = "pytest_rlgate.envs"
#: The environment every surface uses when none is named, so existing commands keep working.
DEFAULT_ENV = "refund"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
#: An episode environment's turn limit when it declares none.
DEFAULT_MAX_TURNS = 4
#: Members of an environment instance that are not tools (TRL reads the rest as tools).
_NOT_TOOLS = ("reset", "get_reward")
#: ``module:attr[arg, arg]`` or ``name[arg]``: arguments go to a factory (reasoning-gym tasks).
_SPEC = re.compile(r"^\s*(?P<target>[^\[\]\s]+)\s*(?:\[(?P<args>[^\[\]]*)\])?\s*$")


@runtime_checkable
class Environment(Protocol):
    """What a task must provide; every other member is optional (see :class:`Env`).

    ``score(reply, case)`` returns a float in [0, 1]; ``case`` is the prompt item's case
    mapping (from the prompt file, or from the environment's ``case_for``).
    """

    name: str
    categories: Sequence[str]

    def score(self, reply: str, case: Mapping[str, object]) -> float: ...


class _Scoring(Protocol):
    """An instance that scores its own episode (TRL's ``get_reward()``)."""

    def get_reward(self) -> object: ...


#: What every ``env=`` parameter accepts: a resolved :class:`Env`, any object honouring the
#: contract, a spec string, or None for the default environment.
EnvSpec = Union["Env", Environment, str, None]


def _source(fn: Callable[..., object]) -> str:
    """The source of *fn*, or its qualified name where the source cannot be read."""
    target = getattr(fn, "__func__", fn)
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def _accepts_prompt(fn: Callable[..., object]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "prompt" or p.kind is p.VAR_KEYWORD for p in params)


class Env:
    """A resolved environment: the user's object plus the contract's defaults.

    Construct it through :func:`load_env`. Attributes the user's object defines win; the rest
    take the defaults of the contract (``docs/environments.md`` lists them).
    """

    def __init__(self, obj: object, *, spec: str | None = None) -> None:
        self.raw = obj
        self.spec = spec
        where = f"environment {spec or _describe(obj)}"
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise UsageError(f"{where}: 'name' must be a short identifier string (letters, digits, _ . -), "
                             f"got {name!r}")
        self.name: str = name
        categories = getattr(obj, "categories", None)
        if isinstance(categories, str) or not isinstance(categories, Iterable):
            raise UsageError(f"{where}: 'categories' must be a list of category names, got {categories!r}")
        cats = tuple(categories)
        if not cats or not all(isinstance(c, str) and c for c in cats) or len(set(cats)) != len(cats):
            raise UsageError(f"{where}: 'categories' must be distinct non-empty strings, got {list(cats)!r}")
        self.categories: tuple[str, ...] = tuple(sorted(cats))
        #: the user's optional members, typed, with the contract's defaults for the rest
        self.members = found = EnvMembers.read(obj, where)
        self._init_episodes(found, where)
        score = getattr(obj, "score", None)
        if not callable(score) and not self._has_get_reward:
            what = ("score(episode, case) method, or an environment_factory whose instances define get_reward()"
                    if self.is_episodic else "score(reply, case) method")
            raise UsageError(f"{where}: needs a {what} returning a float in [0, 1]")
        #: the user's score (None only for an episode environment whose instances score themselves)
        self._score: Callable[..., object] | None = score if callable(score) else None
        self._markers_take_prompt = found.markers is not None and _accepts_prompt(found.markers)
        self.version = found.version
        self.guards = found.guards
        self.system = found.system
        self.prompt_sizes = found.prompt_sizes
        unknown = sorted(set(found.holdout_shares) - set(cats))
        if unknown:
            raise UsageError(f"{where}: 'holdout_shares' names {', '.join(map(repr, unknown))}, not among its "
                             f"categories ({', '.join(self.categories)})")
        #: the share of each category's scenarios held out when no fraction is given (absent: the default 0.2)
        self.holdout_shares = found.holdout_shares
        self.endorsed = found.endorsed
        #: the task's own exploits (``Hack`` values; the probe checks each)
        self.hacks = found.hacks
        self.base_model = found.base_model
        #: the spec ``rlgate policy build`` rebuilds ``base_model`` from (a ``policy.tiny.spec.TinySpec``)
        self.tiny_policy = found.tiny_policy
        self.rewards = found.rewards
        self.fingerprint: str = self._fingerprint()

    def __reduce__(self) -> tuple[Callable[..., Env], tuple[object, ...]]:
        """Pickled as it was loaded, so another process (TRL's async rollout worker, ``rlgate demo``'s
        workers) loads the same environment instead of copying module objects: by its spec, by
        its module's name, else by wrapping the user's object again (which must pickle itself)."""
        if self.spec is not None:
            return load_env, (self.spec,)
        if isinstance(self.raw, ModuleType):
            return _module_env, (self.raw.__name__,)
        return _wrap, (self.raw, None)

    @property
    def _who(self) -> str:
        return f"environment {self.name}"

    # -- identity ---------------------------------------------------------------------

    def _fingerprint(self) -> str:
        digest = hashlib.sha256()
        episode_parts = [str(self.max_turns), *(_source(t) for t in self.tools)]
        if self._factory is not None:
            episode_parts.append(_source(type(self._probe)))
        markers = self.members.markers
        for part in (self.name, self.version, _source(self._score) if self._score else "",
                     _source(markers) if markers else "", *(episode_parts if self.is_episodic else ())):
            digest.update(part.encode("utf-8") + b"\0")
        return "sha256:" + digest.hexdigest()

    # -- episodes ------------------------------------------------------------------------

    def _init_episodes(self, found: EnvMembers, where: str) -> None:
        self.tools = found.tools
        factory = found.environment_factory
        self._probe: EpisodeInstance | None = None
        self._has_get_reward = False
        if factory is not None:
            try:
                probe = factory()
            except Exception as exc:
                raise UsageError(f"{where}: environment_factory() raised {type(exc).__name__}: {str(exc)[:160]}") \
                    from None
            if not callable(getattr(probe, "reset", None)):
                raise UsageError(f"{where}: an environment_factory instance needs a reset(**case) method "
                                 f"(TRL's environment_factory shape); {type(probe).__name__} has none")
            self._probe = probe
            self._has_get_reward = callable(getattr(probe, "get_reward", None))
        self._factory = factory
        if factory is not None and not self.tool_functions(self._probe):
            raise UsageError(f"{where}: {type(self._probe).__name__} has no public tool methods; give it methods "
                             "with type hints and a docstring, e.g. lookup(self, key: str) -> str")
        self.max_turns: int = found.max_turns or (DEFAULT_MAX_TURNS if self.is_episodic else 1)

    @property
    def is_episodic(self) -> bool:
        """True for an environment with tools or an environment factory: its rows are episodes."""
        return bool(self.tools) or self._factory is not None

    @property
    def factory(self) -> Callable[[], EpisodeInstance] | None:
        """The environment's ``environment_factory`` (None for plain tools)."""
        return self._factory

    def tool_functions(self, instance: object = None) -> list[Callable[..., object]]:
        """The tools a chat template renders: the plain ``tools``, then *instance*'s (or a probe
        instance's) public methods, as TRL lists them (by name, defined on the class)."""
        found = list(self.tools)
        instance = self._probe if instance is None else instance
        if instance is not None:
            for member, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction):
                if member not in _NOT_TOOLS and not member.startswith("_"):
                    found.append(getattr(instance, member))
        return found

    def new_episode(self, case: Case) -> tuple[object, dict[str, Callable[..., object]], str]:
        """A fresh instance reset with *case*: (instance or None, tools by name, text to append
        to the user turn)."""
        instance: EpisodeInstance | None = None
        intro = ""
        if self._factory is not None:
            instance = self._factory()
            got = instance.reset(**dict(case))
            intro = got if isinstance(got, str) else ""
        return instance, {fn.__name__: fn for fn in self.tool_functions(instance) if instance or self.tools}, intro

    def parse_tool_calls(self, text: str) -> list[ToolCall]:
        """The calls of one assistant turn: the environment's parser, else the Hermes blocks."""
        if self.members.parse_tool_calls is None:
            return parse_hermes_calls(text)
        calls = []
        for found in self.members.parse_tool_calls(text) or ():
            if isinstance(found, ToolCall):
                calls.append(found)
            elif isinstance(found, Mapping):
                calls.append(ToolCall(str(found.get("name")), dict(found.get("arguments") or {})))
            else:
                named: Any = found  # a (name, arguments) record of the environment's own
                calls.append(ToolCall(str(named.name), dict(named.arguments)))
        return calls

    def episode(self, reply: str | Episode, case: Case) -> tuple[Episode, object]:
        """*reply* as an episode (a text is replayed in a fresh instance) and the instance after it."""
        if isinstance(reply, Episode):
            if not self._has_get_reward:
                return reply, None
            return replay(self, case, list(reply.turns))
        return replay(self, case, split_turns(reply))

    def describe(self) -> dict[str, str]:
        """The record a run's ``config.json`` and a cache key keep of this environment."""
        return {"name": self.name, "version": self.version, "fingerprint": self.fingerprint}

    def __repr__(self) -> str:
        return f"<Env {self.name} v{self.version} {self.fingerprint[:15]}>"

    # -- grading ------------------------------------------------------------------------

    @property
    def has_case_for(self) -> bool:
        return self.members.case_for is not None

    def case_for(self, prompt: str) -> dict[str, object] | None:
        """The case read from the prompt text, or None when the environment reads none."""
        if self.members.case_for is None:
            return None
        case = call(self._who, "case_for()", self.members.case_for, prompt)
        return dict(case) if isinstance(case, Mapping) else None

    def score(self, reply: str | Episode, case: Mapping[str, object]) -> float:
        """The score in [0, 1]; an episode environment scores the episode (a text is replayed)."""
        if self.is_episodic:
            episode, instance = self.episode(reply, case)
            raw = (call(self._who, "score()", self._score, episode, case) if self._score is not None
                   else call(self._who, "get_reward()", cast(_Scoring, instance).get_reward))
        elif self._score is not None:
            raw = call(self._who, "score()", self._score, reply, case)
        else:  # pragma: no cover - __init__ refuses an environment with nothing to score replies by
            raise AssertionError(f"{self._who} has no score()")
        member = "get_reward()" if self.is_episodic and self._score is None else "score()"
        value = number(self._who, member, raw)  # a finite float, whatever the user's code returned
        if not 0.0 <= value <= 1.0:
            raise UsageError(f"environment {self.name}: {member} returned {value!r}, outside [0, 1]")
        return value

    def passes(self, value: float) -> bool:
        """Whether a score counts as a pass (default: the full score, ``>= 1.0``)."""
        if self.members.passes is None:
            return value >= 1.0
        return bool(call(self._who, "passes()", self.members.passes, value))

    def markers(self, reply: str | Episode, case: Mapping[str, object], prompt: str | None = None) -> dict[str, float]:
        """The reply's markers (default none); *prompt* reaches only a ``markers`` that takes it."""
        if self.members.markers is None:
            if self.guards:
                raise UsageError(f"environment {self.name} guards {', '.join(self.guards)} but has no markers() "
                                 "to measure them; add markers(reply, case) or drop the guards")
            return {}
        if self.is_episodic:
            reply = self.episode(reply, case)[0]
        found = (call(self._who, "markers()", self.members.markers, reply, case, prompt=prompt)
                 if self._markers_take_prompt else call(self._who, "markers()", self.members.markers, reply, case))
        values = numbers_of(self._who, "markers()", found)
        missing = next((guard for guard in self.guards if guard not in values), None)
        if missing is not None:  # a gate would refuse the row later; say whose promise broke, now
            shown = reply.text if isinstance(reply, Episode) else reply
            raise UsageError(f"environment {self.name}: markers() returned no {missing!r} for the reply "
                             f"{shown[:40]!r}, but the environment guards it; return every guarded marker "
                             f"({', '.join(self.guards)}) for every reply")
        return values

    # -- prompts and chat ----------------------------------------------------------------

    def category_of(self, item: Mapping[str, object]) -> str | None:
        """The item's own category, else its case's."""
        category = item.get("category")
        case = item.get("case")
        if category is None and isinstance(case, Mapping):
            category = case.get("category")
        return category if isinstance(category, str) else None

    def check_category(self, category: object, *, path: str | os.PathLike[str] | None = None,
                       line: int | None = None) -> str:
        """*category* if the environment declares it, else a :class:`DataError` naming the place."""
        if not isinstance(category, str) or category not in self.categories:
            raise DataError(f"category {category!r} is not one of environment {self.name}'s categories "
                            f"({', '.join(self.categories)}); fix the line or choose the environment "
                            "that declares it (--env)", path=path or "<items>", line=line)
        return category

    @property
    def can_build_prompts(self) -> bool:
        return self.members.build_prompts is not None

    def build_prompts(self, seed: int = 0, size: str = "default") -> list[dict[str, object]]:
        """The environment's own seeded prompt set; environments without one read a file."""
        if self.members.build_prompts is None:
            raise UsageError(f"environment {self.name} writes no prompts of its own: pass a prompts file "
                             "(--prompts-file / --rlgate-prompts-file) whose lines carry prompt, case, "
                             "category and scenario_id")
        if self.prompt_sizes and size not in self.prompt_sizes:
            raise UsageError(f"environment {self.name} has no prompt set size {size!r:.40}; "
                             f"use one of {', '.join(self.prompt_sizes)}")
        build = self.members.build_prompts
        items = call(self._who, "build_prompts()", lambda: list(build(seed, size)))
        mappings = [item for item in items if isinstance(item, Mapping)]
        if len(mappings) != len(items):
            odd = next(item for item in items if not isinstance(item, Mapping))
            raise UsageError(f"environment {self.name}: build_prompts() yielded {type(odd).__name__} {odd!r:.40}; "
                             "each prompt item must be a mapping with prompt, case, category and scenario_id")
        return [dict(item) for item in mappings]

    def messages_for(self, prompt: str) -> list[dict[str, str]]:
        """The chat the policy sees: the environment's, else its system prompt and the user turn."""
        if self.members.messages_for is not None:
            chat = self.members.messages_for
            return call(self._who, "messages_for()", lambda: list(chat(prompt)))
        head = [{"role": "system", "content": self.system}] if self.system else []
        return [*head, {"role": "user", "content": prompt}]

    # -- hacks ---------------------------------------------------------------------------

    def endorsed_for(self, category: str | None = None) -> tuple[str, ...]:
        """Features the environment endorses; a mapping endorses per category."""
        if isinstance(self.endorsed, Mapping):
            if category is None:
                return ()
            return tuple(self.endorsed.get(category, ()))
        return tuple(self.endorsed)

    @property
    def has_features(self) -> bool:
        return self.members.features is not None

    def features(self, reply: str) -> dict[str, float]:
        """The environment's own reply features for ``hack_scan`` (none by default)."""
        if self.members.features is None:
            return {}
        return numbers_of(self._who, "features()", call(self._who, "features()", self.members.features, reply))

    def describe_reply(self, reply: str, case: Mapping[str, object] | None = None) -> str | None:
        """What a reply did, in the task's words ("calls lookup_order with an invented id"), or None.

        The environment's ``describe_reply(reply, case)`` when it has one; else, for an episode
        environment, the replayed transcript turn by turn; else the reply's
        nonzero :meth:`features` by name; else None (the gate then shows the reply alone).
        A describer that raises is treated as having nothing to say: a description must never
        cost the verdict.
        """
        try:
            if self.members.describe_reply is not None:
                text = self.members.describe_reply(reply, dict(case or {}))
                return str(text) if text else None
            if self.is_episodic and case is not None:  # the transcript, turn by turn
                return describe_episode(self.episode(reply, case)[0])
            found = self.features(reply)
        except Exception:  # the user's code: the flip is shown without a description
            return None
        named = [name if value == 1 else f"{name} {value:g}" for name, value in found.items() if value]
        return ", ".join(named) or None

    @property
    def has_honest_replies(self) -> bool:
        return self.members.honest_replies is not None

    def honest_replies(self, case: Case) -> SearchStrategy[str] | None:
        """A Hypothesis strategy of honest replies for *case*, or None."""
        honest = self.members.honest_replies
        return None if honest is None else call(self._who, "honest_replies()", honest, case)

    @property
    def has_rejected_reply(self) -> bool:
        return self.members.rejected_reply is not None

    def rejected_reply(self, item: Mapping[str, object], rng: random.Random) -> str | None:
        """A constructed DPO negative for *item*, or None (no constructed negatives)."""
        rejected = self.members.rejected_reply
        return None if rejected is None else call(self._who, "rejected_reply()", rejected, item, rng)

    def reward(self, name: str | None = None) -> Callable[[str, Mapping[str, object]], float]:
        """The training reward: the environment's score, or one of its named variants."""
        if name in (None, "", "env", self.name):
            return self.score
        if name in self.rewards:  # the user's function, called through the one door for user code
            return scorer(self._who, f"rewards[{name!r}]", self.rewards[name])
        raise UsageError(f"environment {self.name} has no reward {name!r}; choose one of "
                         f"{', '.join([self.name, *self.rewards])} or give 'module:attr' of a "
                         "score(reply, case) function")


def _describe(obj: object) -> str:
    if isinstance(obj, ModuleType):
        return obj.__name__
    return getattr(obj, "name", None) or type(obj).__name__


@functools.cache
def _builtin() -> dict[str, str]:
    """name -> module of every built-in environment: the modules of :data:`BUILTIN_PACKAGE`, listed
    without importing them (a name is looked up without loading every task)."""
    package = importlib.import_module(BUILTIN_PACKAGE)
    return {info.name: f"{BUILTIN_PACKAGE}.{info.name}" for info in sorted(pkgutil.iter_modules(package.__path__),
                                                                           key=lambda m: m.name)}


def env_names() -> dict[str, str]:
    """Registered environment names -> ``module[:attr]``: the built-ins, then installed entry points
    (another package's; a built-in name is not taken over)."""
    names = dict(_builtin())
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        names.setdefault(ep.name, ep.value)
    return names


def _import_module(name: str) -> ModuleType:
    """``import_module``, retried once with fresh finder caches: a module written after the
    interpreter listed its folder (a generated environment, a test's temp dir) is still found."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        importlib.invalidate_caches()
        return importlib.import_module(name)


def _import(target: str, spec: str) -> object:
    module_name, _, attr = target.partition(":")
    try:
        module = _import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            names = env_names()
            raise UsageError(f"environment {spec!r}: no module {module_name!r} (is it installed? a file in a folder "
                             f"is named by its path: 'path/to/{module_name}.py:{attr or 'attr'}'); "
                             f"registered names: {', '.join(names)}{_nearest(module_name, names)}") from None
        raise UsageError(f"environment {spec!r}: importing {module_name} failed: "
                         f"{type(exc).__name__}: {exc}") from None
    except USER_CODE_ERRORS as exc:  # a user module that raises (or exits) on import
        raise user_error(f"environment {spec!r}", f"importing {module_name}", exc) from None
    if not attr:
        return module
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"environment {spec!r}: {module_name} has no attribute {attr!r}") from None
        except USER_CODE_ERRORS as exc:
            raise user_error(f"environment {spec!r}", f"reading {module_name}:{attr}", exc) from None
    return obj


def _instantiate(obj: object, args: list[str], spec: str) -> object:
    """A class, or a factory given arguments, is called; anything else is used as it is."""
    if args or inspect.isclass(obj):
        if not callable(obj):
            raise UsageError(f"environment {spec!r}: {obj!r:.60} takes no arguments")
        called = f"{getattr(obj, '__name__', 'its factory')}()"
        try:
            inspect.signature(obj).bind(*args)
        except TypeError as exc:  # the arguments do not fit
            raise UsageError(f"environment {spec!r}: {called} takes other arguments ({exc})") from None
        except ValueError:  # no signature to check (a builtin): calling it tells
            pass
        return call(f"environment {spec!r}", called, obj, *args)
    return obj


def load_env(spec: EnvSpec = None) -> Env:
    """Resolve an environment (see :func:`_load`); string specs are resolved once a process."""
    if isinstance(spec, str):
        return _load_spec(spec)
    return _load(spec)


@functools.lru_cache(maxsize=64)
def _load_spec(spec: str) -> Env:
    return _load(spec)


def _load(spec: object = None) -> Env:
    """Resolve an environment: a spec string, an environment object, or None (the default).

    A spec is ``"module:attr"`` (a module or an object in it), a bare ``"module"``, or a name
    registered under the entry-point group ``rlgate.envs`` (the built-ins: ``refund``, ...);
    ``[a, b]`` after either passes arguments to a factory (``reasoning_gym[leg_counting]``).
    An object is used as it is (a class is instantiated). Every failure is one
    :class:`UsageError` that names what was tried.
    """
    if isinstance(spec, Env):
        return spec
    if spec is None:
        spec = DEFAULT_ENV
    if not isinstance(spec, str):
        return _wrap(_instantiate(spec, [], _describe(spec)), None)
    match = _SPEC.match(spec)
    if match is None or not spec.strip():
        raise UsageError(f"environment {spec!r:.80}: expected a registered name ({', '.join(env_names())}), "
                         "'module:attr' or 'module', optionally with [arguments]")
    target = match["target"]
    args = [a.strip() for a in match["args"].split(",") if a.strip()] if match["args"] else []
    names = env_names()
    builtin = target in _builtin()
    if target in names:
        target = names[target]
    elif target.partition(":")[0].endswith(".py"):
        target = _from_file(target, spec)
    elif ":" not in target and "." not in target:
        try:
            _import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name != target:
                raise user_error(f"environment {spec!r}", f"importing {target}", exc) from None
            raise UsageError(f"environment {spec!r}: not a registered name ({', '.join(names)}) and not an "
                             "importable module; give 'module:attr', 'path/to/file.py:attr' or register it under "
                             f"the '{ENTRY_POINT_GROUP}' entry-point group{_nearest(target, names)}") from None
        except USER_CODE_ERRORS as exc:  # the module is there, and raises (or exits) on import
            raise user_error(f"environment {spec!r}", f"importing {target}", exc) from None
    found = _import(target, spec)
    if builtin:  # a built-in module is its environment, or names the one it holds
        found = getattr(found, "ENVIRONMENT", found)
    obj = _instantiate(found, args, spec)
    if isinstance(obj, Env):
        return obj
    return _wrap(obj, spec.strip())


def _nearest(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'refund'?`` for the registered name nearest a misspelt one (edit distance), else ''."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {found[0]!r}?" if found else ""


def _from_file(target: str, spec: str) -> str:
    """``path/to/quickmath.py:QuickMath`` as ``quickmath:QuickMath``, the file's folder put first on
    ``sys.path`` (what ``PYTHONPATH=path/to`` does), so an example runs where it lies, and worker
    processes (started with the parent's ``sys.path``) import it by the same name."""
    file, _, attr = target.partition(":")
    path = Path(file).expanduser()
    if not path.is_file():
        raise UsageError(f"environment {spec!r}: no file {file!r} (a path is read from the current folder, "
                         f"{Path.cwd()})")
    folder, name = str(path.resolve().parent), path.stem
    loaded = sys.modules.get(name)
    origin = getattr(loaded, "__file__", None)
    if loaded is not None and (origin is None or Path(origin).resolve() != path.resolve()):
        raise UsageError(f"environment {spec!r}: another module named {name!r} is already imported "
                         f"({origin or 'built in'}); rename {file!r}")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return f"{name}:{attr}" if attr else name


def _module_env(name: str) -> Env:
    """The environment a module object is, found again by the module's name (an unpickled :class:`Env`)."""
    return _wrap(_import_module(name), None)


def _wrap(obj: object, spec: str | None) -> Env:
    """``Env(obj)``; a member that raises while it is read (a property) is the user's error too."""
    return call(f"environment {spec or _describe(obj)}", "reading its members", Env, obj, spec=spec)

