"""The training methods by name: ``grpo`` today, ``dpo`` added by one line.

The CLI (``rlgate train <method>``), the fixtures (``@pytest.mark.rlgate(method=...)``) and
the cache key look methods up here, so a new method needs a knobs class (a ``RunKnobs``
subclass) and a ``train_<method>(knobs, **overrides) -> RunFolder`` function, nothing else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from .config import RunKnobs
    from .run import RunFolder

__all__ = ["METHODS", "knobs_class", "trainer"]

#: method -> (module, knobs class, train function)
METHODS: dict[str, tuple[str, str, str]] = {
    "grpo": ("pytest_rlgate.train.config", "GRPOKnobs", "pytest_rlgate.train.grpo:train_grpo"),
    "dpo": ("pytest_rlgate.train.dpo_config", "DPOKnobs", "pytest_rlgate.train.dpo:train_dpo"),
}


def _check(method: str) -> tuple[str, str, str]:
    if method not in METHODS:
        raise UsageError(f"method={method!r}: unknown training method; use one of {', '.join(METHODS)}")
    return METHODS[method]


def knobs_class(method: str) -> type[RunKnobs]:
    """The knobs dataclass of *method* (a ``RunKnobs`` subclass)."""
    module, name, _ = _check(method)
    cls: type[RunKnobs] = getattr(importlib.import_module(module), name)
    return cls


def trainer(method: str) -> Callable[..., RunFolder]:
    """``train_<method>(knobs=None, **overrides) -> RunFolder``."""
    module, _, target = _check(method)
    mod, func = target.split(":")
    train: Callable[..., RunFolder] = getattr(importlib.import_module(mod), func)
    return train


def make_knobs(method: str, **values: Any) -> RunKnobs:
    """Knobs of *method* from keyword values, resolved and validated (unknown names rejected)."""
    return knobs_class(method)().with_overrides(**values)
