"""pytest options, fixtures and header lines for the session environment's prompt set and split.

The header prints one line that names the environment and reproduces the set (the
environment, seed and size or file, and the fingerprint of its canonical bytes), so a red
CI run says which task and which prompts it saw, and one line saying how many train prompts
decontamination dropped for repeating a holdout prompt (``--rlgate-no-decontaminate`` keeps
them). The set comes from the session's
environment (``--rlgate-env``): its own seeded writer, or ``--rlgate-prompts-file``, which
an environment without a writer requires. It is built once per session and shared by the
header and the fixtures. The lines are printed at the top when the session sets an rlgate
option, else after collection when a collected test uses rlgate; another project's run
prints nothing and builds nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from pytest_rlgate.errors import RlgateError
from pytest_rlgate.options import fraction, share
from pytest_rlgate.plugin import add_setting, configured, fail, path_setting, setting, used_by
from pytest_rlgate.plugin.env import session_env

if TYPE_CHECKING:
    from pytest_rlgate.data.prompts import Split, TrainSplit
    from pytest_rlgate.environment.contract import Env
    from pytest_rlgate.records import PromptItem

T = TypeVar("T")

#: ``--rlgate-no-decontaminate`` and its ini twin ``rlgate_no_decontaminate`` (a bool).
NO_DECONTAMINATE = "rlgate_no_decontaminate"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "seed", type=int, metavar="INT",  # unset reads 0 (PromptSettings), so the gate sees it unset
                help="Seed of the environment's prompt set and its split (default: 0)")
    add_setting(parser, "size", metavar="NAME",
                help="Size of the environment's seeded prompt set (default: default)")
    add_setting(parser, "prompts-file", metavar="PATH",
                help="Use this prompts JSONL instead of the environment's seeded set (freezes the set "
                     "across versions; required for an environment that writes no prompts)")
    add_setting(parser, "holdout", type=fraction, metavar="FRACTION",
                help="Share of every category's scenarios held out (default: the environment's own shares, "
                     "else 0.2)")
    add_setting(parser, "balance", type=share, metavar="SHARE",
                help="Repeat minority categories of the train split up to this share (default: 0, off)")
    help_ = "Keep train prompts that repeat a holdout prompt (default: rlgate_split drops them)"
    parser.getgroup("rlgate").addoption("--rlgate-no-decontaminate", dest=NO_DECONTAMINATE, action="store_true",
                                        default=False, help=help_)
    parser.addini(NO_DECONTAMINATE, help=f"{help_} (ini twin of --rlgate-no-decontaminate)", type="bool",
                  default=False)


@dataclass(frozen=True)
class PromptSettings:
    """The resolved prompt options of a session (command line, else ini, else default)."""

    env: Env
    seed: int
    size: str
    prompts_file: Path | None
    holdout: float | None  #: None: the environment's own shares
    balance: float
    decontaminate: bool = True

    def flags(self) -> str:
        """The command-line flags that reproduce this set and split."""
        from pytest_rlgate.environment.contract import DEFAULT_ENV

        env = f"--rlgate-env={self.env.spec} " if self.env.spec not in (None, DEFAULT_ENV) else ""
        source = (f"--rlgate-prompts-file={self.prompts_file}" if self.prompts_file
                  else f"--rlgate-seed={self.seed} --rlgate-size={self.size}")
        extra = "" if self.holdout is None else f" --rlgate-holdout={self.holdout:g}"
        extra += f" --rlgate-balance={self.balance:g}" if self.balance else ""
        extra += "" if self.decontaminate else " --rlgate-no-decontaminate"
        return env + source + extra


def _settings(config: pytest.Config) -> PromptSettings:
    def read(name: str, convert: Callable[[str], T], default: T) -> T:
        try:
            value: T | None = setting(config, name, convert)
        except argparse.ArgumentTypeError as exc:  # a bad ini value
            raise pytest.UsageError(f"ini setting rlgate_{name.replace('-', '_')}: {exc}") from None
        return default if value is None else value

    env = session_env(config)
    file = path_setting(config, "prompts-file")
    size = setting(config, "size")
    if size is not None and not file and env.prompt_sizes and size not in env.prompt_sizes:
        raise pytest.UsageError(f"--rlgate-size / rlgate_size {size!r}: environment {env.name} writes "
                                f"sizes {', '.join(env.prompt_sizes)}")
    try:
        off = config.getoption(NO_DECONTAMINATE) or config.getini(NO_DECONTAMINATE)
    except (ValueError, pytest.UsageError) as exc:  # pytest's bool parser, which names no setting
        raise pytest.UsageError(f"ini setting {NO_DECONTAMINATE}: {exc}; use true or false") from None
    return PromptSettings(env=env, seed=read("seed", int, 0), size=size or "default", prompts_file=file,
                          holdout=read("holdout", fraction, None), balance=read("balance", share, 0.0),
                          decontaminate=not off)


class _PromptState:
    """Per-session cache: the settings, the prompt set and its split, each on first use (header or fixture)."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._settings: PromptSettings | None = None
        self._items: list[PromptItem] | None = None
        self._fingerprint = ""
        self._split: TrainSplit | None = None
        self.header_shown = False

    @property
    def settings(self) -> PromptSettings:
        if self._settings is None:
            self._settings = _settings(self._config)
        return self._settings

    def items(self) -> list[PromptItem]:
        from pytest_rlgate.data.prompts import build_prompts, fingerprint, read_prompts

        if self._items is None:
            s = self.settings
            self._items = (read_prompts(s.prompts_file, env=s.env) if s.prompts_file
                           else build_prompts(s.seed, s.size, env=s.env))
            self._fingerprint = fingerprint(self._items)
        return self._items

    def fingerprint(self) -> str:
        self.items()
        return self._fingerprint

    def split(self) -> TrainSplit:
        from pytest_rlgate.data.prompts import prepare_split

        if self._split is None:
            s = self.settings
            self._split = prepare_split(self.items(), s.holdout, env=s.env, share=s.balance,
                                        decontaminate_train=s.decontaminate)
        return self._split


_STATE = pytest.StashKey[_PromptState]()


def session_prompts(config: pytest.Config) -> dict[str, object] | None:
    """The session's prompt set as the header names it (environment, seed, size or file, fingerprint) when a
    fixture or the header built it, else None: building it here would load the environment in a session
    that gates stored rows only."""
    state = config.stash.get(_STATE, None)
    if state is None or state._items is None:
        return None
    s = state.settings
    return {"env": s.env.name, "prompt_seed": s.seed, "size": s.size,
            "prompts_file": None if s.prompts_file is None else str(s.prompts_file),
            "prompts_fingerprint": state.fingerprint()}


def pytest_configure(config: pytest.Config) -> None:
    state = config.stash[_STATE] = _PromptState(config)
    if configured(config):
        state.settings  # noqa: B018 - a bad setting stops the session now, as a usage error


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The prompt lines at the top of the run, when the session sets an rlgate option."""
    if not configured(config):
        return []
    return _header(config.stash[_STATE])


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """The prompt lines after collection, when no option printed them and a collected test uses rlgate."""
    state = config.stash[_STATE]
    if state.header_shown or not used_by(items):
        return []
    return _header(state)


def _header(state: _PromptState) -> list[str]:
    """A copy-pasteable line (the environment, the flags that rebuild the set, its fingerprint),
    then what decontamination dropped from the split's train side."""
    from pytest_rlgate.data.prompts import count_by_category

    state.header_shown = True
    env = state.settings.env
    head = f"rlgate: env={env.name} ({env.fingerprint[:15]}) {state.settings.flags()}"
    try:
        items = state.items()
    except RlgateError as exc:  # the fixtures report it again, as an error of the tests that use them
        return [f"{head} (no prompt set: {exc})"]
    counts = ", ".join(f"{n} {c}" for c, n in count_by_category(items).items())
    lines = [f"{head} prompts={len(items)} ({counts}) fingerprint={state.fingerprint()[:23]}"]
    try:
        lines.append(f"rlgate: {state.split().decontamination.summary()}")
    except RlgateError as exc:  # rlgate_split fails the tests that use it with the same message
        lines.append(f"rlgate: no split ({exc})")
    return lines


@pytest.fixture(scope="session")
def rlgate_prompts(pytestconfig: pytest.Config) -> list[PromptItem]:
    """The session's prompt set: the environment's seeded set, or --rlgate-prompts-file.

    Items are dicts with ``prompt``, ``case``, ``category`` and ``scenario_id``. The list is
    shared by the session; copy it before changing it.
    """
    try:
        return pytestconfig.stash[_STATE].items()
    except RlgateError as exc:
        fail(f"rlgate: {exc}")


@pytest.fixture(scope="session")
def rlgate_split(pytestconfig: pytest.Config) -> Split:
    """Train and holdout of the session's prompts: stratified by category and scenario.

    The holdout holds --rlgate-holdout (0.2) of each category's scenarios and every category
    the environment declares; train prompts that repeat a holdout prompt are dropped (not with
    --rlgate-no-decontaminate; the header says how many), then the train side is balanced to
    --rlgate-balance when given. The holdout is never balanced.
    """
    try:
        return pytestconfig.stash[_STATE].split().split
    except RlgateError as exc:
        fail(f"rlgate: {exc}")
