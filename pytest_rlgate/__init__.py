"""pytest-rlgate: RL fine-tuning that passes or fails like any other test suite.

The public API lives here. Names are resolved lazily (PEP 562) so that loading the pytest
plugin, which imports this package, costs no numpy, torch or Hypothesis import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that owns it
_EXPORTS: dict[str, str] = {
    # errors
    "RlgateError": "errors",
    "SpecError": "errors",
    "DataError": "errors",
    "UsageError": "errors",
    "RlgateWarning": "errors",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_rlgate' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"pytest_rlgate.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover
    from .errors import DataError, RlgateError, RlgateWarning, SpecError, UsageError
