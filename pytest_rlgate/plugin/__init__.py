"""The ``rlgate`` pytest plugin (``pytest11`` entry point).

Each feature's hooks and fixtures live in its own module of this package;
this module only names them, so ``-p no:rlgate`` switches every part off at once, and
offers the helpers they share: a ``--rlgate-<name>`` option with an ``rlgate_<name>``
ini twin where the command line wins, and :func:`fail`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Literal, NoReturn

import pytest

pytest_plugins = [
    "pytest_rlgate.plugin.env",
    "pytest_rlgate.plugin.specs",
    "pytest_rlgate.plugin.prompts",
    "pytest_rlgate.plugin.gate",
    "pytest_rlgate.plugin.training",
    "pytest_rlgate.plugin.baseline",
]

_UNSET = object()


def add_setting(
    parser: pytest.Parser,
    name: str,
    *,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
    metavar: str | None = None,
    ini_type: Literal["string", "paths", "pathlist", "args", "linelist", "bool", "int", "float"] = "string",
) -> None:
    """Register ``--rlgate-<name>`` and the ini setting ``rlgate_<name>``."""
    dest = "rlgate_" + name.replace("-", "_")
    group = parser.getgroup("rlgate", "pytest-rlgate: gate RL fine-tunes")
    group.addoption(f"--rlgate-{name}", dest=dest, type=type, default=None, metavar=metavar, help=help)
    parser.addini(dest, help=f"{help} (ini twin of --rlgate-{name})", type=ini_type,
                  default=None if default is None else str(default))


def setting(config: pytest.Config, name: str, type: Callable[[str], Any] = str) -> Any:
    """The value of a setting: the command line if given, else the ini file, else None."""
    dest = "rlgate_" + name.replace("-", "_")
    value = config.getoption(dest, default=None)
    if value is not None:
        return value
    raw = config.getini(dest)
    if raw in (None, "", []):
        return None
    try:
        return type(raw)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:  # the option parsers' own refusals too
        raise pytest.UsageError(f"ini setting {dest} = {raw!r}: {exc}") from None


def fail(message: str) -> NoReturn:
    """Fail the current test or fixture with *message* alone: no traceback, and (raised from
    None) not the error it replaces printed a second time under "During handling of the above
    exception"."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None
