"""The ``rlgate`` pytest plugin (``pytest11`` entry point).

Each feature's hooks and fixtures live in its own module of this package;
this module only names them, so ``-p no:rlgate`` switches every part off at once, and
offers the helpers they share: a ``--rlgate-<name>`` option with an ``rlgate_<name>``
ini twin where the command line wins, whether a session uses rlgate at all, and :func:`fail`.

Every pytest run in an environment where the plugin is installed loads it, rlgate's
users or not. So the feature modules import only pure-Python parts of the package when
pytest starts; environments, prompts, training and the statistics load inside the hooks
and fixtures that need them, and a session that sets no rlgate option and collects no
test that uses rlgate prints nothing and loads none of it.

This module registers the feature modules itself when pytest registers it, rather than
naming them in ``pytest_plugins``: pytest looks each name in ``pytest_plugins`` up among the
``pytest11`` entry points of every installed distribution (a scan per name, in every run),
and warns ``PytestAssertRewriteWarning`` for a feature module that another one imported
before pytest reached it. They are marked for assertion rewriting before any of them is
imported, as pytest asks of a plugin made of several modules, so the order in which they
import one another does not matter.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Literal, NoReturn, TypeVar, overload

import pytest

from pytest_rlgate.errors import RlgateDeprecationWarning
from pytest_rlgate.plugin import hookspec

T = TypeVar("T")

FEATURES = (
    "pytest_rlgate.plugin.env",
    "pytest_rlgate.plugin.specs",
    "pytest_rlgate.plugin.harness",
    "pytest_rlgate.plugin.prompts",
    "pytest_rlgate.plugin.gate",
    "pytest_rlgate.plugin.training",
    "pytest_rlgate.plugin.baseline",
)
pytest.register_assert_rewrite(*FEATURES)

#: ``@pytest.mark.rlgate(...)``: a test's environment and training knobs
MARKER = "rlgate"
#: keywords of the marker that are the ``rlgate`` fixture's gate options, not training knobs (``policy`` is
#: the old spelling of ``release_policy``, read for one release)
GATE_KEYS = ("show_flips", "flips_in", "release_policy", "policy")
#: setting -> its older names, still read (hidden from --help, with a deprecation warning) for one release
_OLD_NAMES: dict[str, tuple[str, ...]] = {}


def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    """When pytest registers this plugin, register each feature module beside it (unless blocked,
    ``-p no:pytest_rlgate.plugin.gate``); ``-p no:rlgate`` blocks this module and so all of them."""
    if plugin is not sys.modules[__name__]:
        return
    for name in FEATURES:
        if not manager.is_blocked(name) and manager.get_plugin(name) is None:
            manager.register(importlib.import_module(name), name)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Declare the ``pytest_rlgate_*`` hooks (:mod:`pytest_rlgate.plugin.hookspec`) for plugins and conftest.py."""
    pluginmanager.add_hookspecs(hookspec)


def add_setting(
    parser: pytest.Parser,
    name: str,
    *,
    help: str,
    type: Callable[[str], object] = str,
    metavar: str | None = None,
    ini_type: Literal["string", "paths", "pathlist", "args", "linelist", "bool", "int", "float"] = "string",
    aliases: tuple[str, ...] = (),
) -> None:
    """Register ``--rlgate-<name>`` and the ini setting ``rlgate_<name>``.

    Both default to unset (None): the feature applies its own default, which *help* states,
    so :func:`configured` can tell a setting given from one left alone. *aliases* are older
    names of the setting: their flags are hidden from ``--help``, their ini keys say they are
    deprecated, and :func:`setting` reads them (with a warning) when the new name is unset.
    """
    dest = _dest(name)
    group = parser.getgroup("rlgate", "pytest-rlgate: gate RL fine-tunes")
    group.addoption(f"--rlgate-{name}", dest=dest, type=type, default=None, metavar=metavar, help=help)
    parser.addini(dest, help=f"{help} (ini twin of --rlgate-{name})", type=ini_type, default=None)
    for old in aliases:
        group.addoption(f"--rlgate-{old}", dest=_dest(old), type=type, default=None, metavar=metavar,
                        help=argparse.SUPPRESS)
        parser.addini(_dest(old), help=f"deprecated: {dest}", type=ini_type, default=None)
    _OLD_NAMES[name] = aliases


def _dest(name: str) -> str:
    return "rlgate_" + name.replace("-", "_")


def _given(config: pytest.Config, name: str, type: Callable[[str], object]) -> object:
    """The value of the setting *name* itself (no older name): the command line's, else the ini file's."""
    dest = _dest(name)
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


@overload
def setting(config: pytest.Config, name: str) -> str | None: ...


@overload
def setting(config: pytest.Config, name: str, type: Callable[[str], T]) -> T | None: ...


def setting(config: pytest.Config, name: str, type: Callable[[str], object] = str) -> object:
    """The value of a setting: the command line if given, else the ini file, else None.

    An older name of the setting (:func:`add_setting`'s *aliases*) is read when the new one is
    unset, with a deprecation warning. The command line's value was read by the *type* the setting was added with
    (:func:`add_setting`); the ini file's text is read by *type* here, which is that same one,
    so both come back as the same kind of value.
    """
    value = _given(config, name, type)
    for old in _OLD_NAMES.get(name, ()) if value is None else ():
        value = _given(config, old, type)
        if value is not None:
            warnings.warn(f"--rlgate-{old} / {_dest(old)} is now --rlgate-{name} / {_dest(name)}; the old name will "
                          "be removed", RlgateDeprecationWarning, stacklevel=2)
            break
    return value


def path_setting(config: pytest.Config, name: str) -> Path | None:
    """A setting whose value is a path, resolved where its user meant it; None when unset.

    A command-line value is relative to the folder pytest was started from
    (``config.invocation_params.dir``), as the shell that completed it was: pytest may put the
    rootdir elsewhere (above the folder, when the value looks like a path argument). An ini
    value is relative to the ini file's folder, as pytest's own path settings are (the
    rootdir without an ini file).
    """
    value = setting(config, name)
    if not value:
        return None
    path = Path(value).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else _path_base(config, name) / path))


def _path_base(config: pytest.Config, name: str) -> Path:
    """What a relative value of setting *name* is relative to: where pytest was started, or the ini file's folder."""
    if any(config.getoption(_dest(given), default=None) is not None for given in (name, *_OLD_NAMES.get(name, ()))):
        return config.invocation_params.dir
    return config.inipath.parent if config.inipath is not None else config.rootpath


def shown_path(config: pytest.Config, path: Path, name: str) -> str:
    """*path*, a value of setting *name* (or a path beside it), spelled from where its user wrote it: relative
    to the folder pytest was started from for a command-line value, to the ini file's folder for an ini one."""
    try:
        return os.path.relpath(path, _path_base(config, name))
    except ValueError:  # another drive
        return str(path)


def configured(config: pytest.Config) -> bool:
    """Whether the session sets any rlgate option, on the command line or in the ini file.

    A session that sets none and collects no test that uses rlgate (:func:`used_by`) is
    some other project's: the plugin then prints nothing and loads nothing.
    """
    for dest, value in vars(config.option).items():
        if not dest.startswith("rlgate_"):
            continue
        if value not in (None, False):
            return True
        try:
            raw = config.getini(dest)
        except (ValueError, pytest.UsageError) as exc:  # no ini twin, or a value pytest cannot read: set
            if str(exc).startswith("unknown configuration value"):
                continue
            return True
        if raw not in (None, "", [], False):
            return True
    return False


def used_by(items: list[pytest.Item]) -> bool:
    """Whether any collected test is rlgate's (a reward table row), asks for an ``rlgate*`` fixture
    or carries ``@pytest.mark.rlgate``."""
    for item in items:
        if type(item).__module__.startswith("pytest_rlgate."):
            return True
        if item.get_closest_marker(MARKER) is not None:
            return True
        if any(name.startswith("rlgate") for name in getattr(item, "fixturenames", ())):
            return True
    return False


def fail(message: str) -> NoReturn:
    """Fail the current test or fixture with *message* alone: no traceback, and (raised from
    None) not the error it replaces printed a second time under "During handling of the above
    exception"."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None
