"""pytest option, fixture and header for the session's environment (``--rlgate-env``).

Every other hook module asks :func:`session_env` for the environment, so one option (or its
ini twin ``rlgate_env``) switches prompts, rows, training and the gate to another task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_rlgate.errors import RlgateError
from pytest_rlgate.plugin import add_setting, configured, setting

if TYPE_CHECKING:
    from pytest_rlgate.environment.contract import Env, EnvSpec


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "env", metavar="SPEC",
                help="Environment of the session: a registered name (refund, arith, ...), "
                     "'module:attr' or 'module' (default: refund)")


_ENV = pytest.StashKey["Env"]()


def session_env(config: pytest.Config) -> Env:
    """The session's environment, resolved once; a bad spec is a usage error naming it."""
    env = config.stash.get(_ENV, None)
    if env is None:
        try:
            env = _resolved(setting(config, "env"))
        except RlgateError as exc:
            raise pytest.UsageError(f"--rlgate-env / rlgate_env: {exc}") from None
        config.stash[_ENV] = env
    return env


def marker_env(config: pytest.Config, spec: EnvSpec) -> Env:
    """The environment a ``@pytest.mark.rlgate(env=...)`` names, else the session's."""
    return session_env(config) if spec is None else _resolved(spec)


def _resolved(spec: EnvSpec) -> Env:
    """The plugin's one door for environments (an option, an ini value, a marker); the contract
    is imported when an environment is first needed, so an unrelated session never loads it."""
    from pytest_rlgate.environment.contract import load_env

    return load_env(spec)


def pytest_configure(config: pytest.Config) -> None:
    if configured(config):  # a bad --rlgate-env stops the session now; unset, the default loads on first use
        session_env(config)


@pytest.fixture(scope="session")
def rlgate_env(pytestconfig: pytest.Config) -> Env:
    """The session's environment (``--rlgate-env``): score, categories, markers, chat."""
    return session_env(pytestconfig)
