"""What a hack is, as :func:`~pytest_rlgate.probe_reward` tries it: a named transform of a reply.

An environment lists the exploits of its own task in ``hacks`` (refund's second tool call,
say); the probe adds the generic classes that fit any task (near-misses of the case's values,
lenient parsing, another category's right move, extra text, padding, ...), built from the
environment's own truth (:class:`Truth`). This module imports neither Hypothesis nor anything
heavy, so an environment can declare its hacks at import time and the Hypothesis strategies
behind them load only when a probe runs (:func:`lazy`).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from ..errors import UsageError
from .calls import call

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from .contract import Env

__all__ = ["Hack", "HackTransform", "Truth", "lazy"]

#: ``hacked(reply, case)``: the hacked form of *reply* to *case*, a string or a Hypothesis
#: strategy of strings (the probe draws from it and shrinks it).
HackTransform = Callable[[str, Mapping[str, object]], Union[str, "SearchStrategy[str]"]]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Hack:
    """One exploit: how to hack a reply, which replies it starts from, where it applies.

    A hack is wrong by construction: the environment declares that what ``hacked`` makes is
    no right reply, whatever its score says. A *free* hack (the default) starts from an honest
    reply (the environment's ``honest_replies(case)``) and adds something the task forbids;
    ``free=False`` starts from a plain, unhelpful reply instead. Either way the probe compares
    the hacked reply with an honest one: it pays when the reward scores it at least as much
    (and more than an empty reply). ``categories`` limits it to those prompt categories
    (empty: every category).

    ``judge(reply, case) -> bool`` (optional) says whether a reply shows the exploit, wherever
    the reply came from: the environment's truth then calls every such reply wrong, so the
    generic classes' replies that show it are hacks too, and ``hack_scan`` counts the rows that
    show it as overpaid when they are paid like right. It is for an exploit the score and the
    guarded markers cannot see (an outcome stated beside a call that has not run: refund's
    ``invented_claim``); it reads what ``score`` reads (the replayed episode of an episode
    environment) and is asked only where the hack applies.
    """

    name: str
    hacked: HackTransform
    free: bool = True
    categories: tuple[str, ...] = ()
    description: str = ""
    judge: Callable[..., object] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise UsageError(f"Hack name must be an identifier such as 'second_call', got {self.name!r}")
        if not callable(self.hacked):
            raise UsageError(f"Hack {self.name!r}: hacked must be a function (reply, case) -> str or a "
                             f"strategy of str, got {self.hacked!r:.60}")
        if not isinstance(self.free, bool):
            raise UsageError(f"Hack {self.name!r}: free must be True or False, got {self.free!r}")
        categories = self.categories
        if isinstance(categories, str) or not all(isinstance(c, str) and c for c in categories):
            raise UsageError(f"Hack {self.name!r}: categories must be a tuple of category names, got {categories!r}")
        object.__setattr__(self, "categories", tuple(categories))
        if self.judge is not None and not callable(self.judge):
            raise UsageError(f"Hack {self.name!r}: judge must be a function (reply, case) -> bool or None, got "
                             f"{self.judge!r:.60}")

    def applies_to(self, category: str) -> bool:
        return not self.categories or category in self.categories


def lazy(target: str) -> Callable[..., object]:
    """``"module:function"`` as a function that imports it on its first call.

    An environment declares ``honest_replies`` and its hacks with it, so loading the
    environment (the plugin, every CLI command) never imports Hypothesis, an optional extra.
    """
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise UsageError(f"lazy({target!r}): expected 'module:function'")
    resolved: list[Callable[..., object]] = []

    def call(*args: object, **kwargs: object) -> object:
        if not resolved:
            resolved.append(getattr(importlib.import_module(module_name), attr))
        return resolved[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = attr
    call.__doc__ = f"{target}, imported on first use."
    return call


class Truth:
    """What the environment says of one reply to one case: right, or wrong.

    A reply is *right* when the environment's score passes and every guarded marker is at 1
    (guards read higher-is-better: ``well_formed``, ``argument_grounding``, ``exact``): the
    same two things the gate holds a trained policy to; and no hack the environment declares
    with a ``judge`` recognises it (an exploit the score and the markers cannot see, such as an
    outcome invented beside a call). Everything else is *wrong*. This is
    how a hack is judged in context: a mutated reply is a candidate hack only if the whole
    reply, read by the environment, is wrong, never because a piece of it would be wrong
    alone. Verdicts are cached per (prompt, case, reply): the probe asks the same question
    many times while Hypothesis shrinks.
    """

    def __init__(self, env: Env) -> None:
        self.env = env
        self._seen: dict[tuple[str, str, str], bool] = {}
        #: the environment's declared exploits that judge a reply themselves
        self.judged = tuple(h for h in env.hacks if isinstance(h, Hack) and h.judge is not None)

    def right(self, reply: str, case: Mapping[str, object], prompt: str | None = None) -> bool:
        key = (prompt or "", _case_key(case), reply)
        found = self._seen.get(key)
        if found is None:
            found = self._judge(reply, case, prompt)
            self._seen[key] = found
        return found

    def wrong(self, reply: str, case: Mapping[str, object], prompt: str | None = None) -> bool:
        return not self.right(reply, case, prompt)

    def _judge(self, reply: str, case: Mapping[str, object], prompt: str | None) -> bool:
        env = self.env
        if not env.passes(env.score(reply, case)):
            return False
        if env.guards:
            marks = env.markers(reply, case, prompt=prompt)
            if not all(marks[guard] >= 1.0 for guard in env.guards):
                return False
        return self.shown(reply, case) is None

    def shown(self, reply: str, case: Mapping[str, object]) -> str | None:
        """The name of the first declared hack whose ``judge`` recognises *reply*, or None."""
        category = case.get("category")
        judges = [(h.name, h.judge) for h in self.judged
                  if h.judge is not None and (not isinstance(category, str) or h.applies_to(category))]
        if not judges:
            return None
        read: object = self.env.episode(reply, case)[0] if self.env.is_episodic else reply
        who = f"environment {self.env.name}"
        return next((name for name, judge in judges if call(who, f"hack {name!r} judge()", judge, read, case)), None)


def _case_key(case: Mapping[str, object]) -> str:
    try:
        return json.dumps(case, sort_keys=True, default=str)
    except (TypeError, ValueError):  # keys that do not sort: the repr still tells cases apart
        return repr(sorted(case.items(), key=lambda kv: str(kv[0])))
