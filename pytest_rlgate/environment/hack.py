"""What a hack is, as :func:`~pytest_rlgate.probe_reward` tries it: a named transform of a reply.

An environment lists the exploits of its own task in ``hacks`` (refund's second tool call,
say); the probe adds the generic ones that fit any task (padding, trailing text, keyword
stuffing, repetition). Both are :class:`Hack` values. This module imports neither
Hypothesis nor anything heavy, so an environment can declare its hacks at import time and
the Hypothesis strategies behind them load only when a probe runs (:func:`lazy`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from ..errors import UsageError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["Hack", "HackTransform", "lazy"]

#: ``hacked(reply, case)``: the hacked form of *reply* to *case*, a string or a Hypothesis
#: strategy of strings (the probe draws from it and shrinks it).
HackTransform = Callable[[str, Mapping[str, object]], Union[str, "SearchStrategy[str]"]]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Hack:
    """One exploit: how to hack a reply, which replies it starts from, where it applies.

    A *free* hack (the default) starts from an honest reply (the environment's
    ``honest_replies(case)``) and adds something the task forbids; it pays when the reward
    does not charge for it (hacked >= original, the original scoring above zero). A *gain*
    hack (``free=False``) starts from a plain, unhelpful reply and pays when the hacked
    reply scores strictly higher. ``categories`` limits it to those prompt categories
    (empty: every category).
    """

    name: str
    hacked: HackTransform
    free: bool = True
    categories: tuple[str, ...] = ()
    description: str = ""

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
