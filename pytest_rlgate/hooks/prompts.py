"""pytest options, fixtures and header line for the seeded prompt set and its split.

The header prints one line that reproduces the set (seed, size or file, and the
fingerprint of its canonical bytes), so a red CI run says which prompts it saw. The set is
built once per session and shared by the header and the fixtures; building the default
set takes a few tens of milliseconds, so the header costs every run almost nothing.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rlgate.options import SIZES, fraction, share
from pytest_rlgate.plugin import add_setting, setting

if TYPE_CHECKING:
    from pytest_rlgate.prompts import Split



def _size(text: str) -> str:
    if text not in SIZES:
        raise argparse.ArgumentTypeError(f"unknown size {text!r}; use one of {', '.join(SIZES)}")
    return text


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "seed", type=int, default=0, metavar="INT",
                help="Seed of the template prompt set and its split (default: 0)")
    add_setting(parser, "size", type=_size, default="default", metavar="|".join(SIZES),
                help="Size of the template prompt set (default: default, 119 prompts)")
    add_setting(parser, "prompts-file", metavar="PATH",
                help="Use this prompts JSONL instead of the template set (freezes the set across versions)")
    add_setting(parser, "holdout", type=fraction, default=0.2, metavar="FRACTION",
                help="Share of each category's scenarios held out (default: 0.2)")
    add_setting(parser, "balance", type=share, default=0.0, metavar="SHARE",
                help="Repeat minority categories of the train split up to this share (default: 0, off)")


@dataclass(frozen=True)
class PromptSettings:
    """The resolved prompt options of a session (command line, else ini, else default)."""

    seed: int
    size: str
    prompts_file: Path | None
    holdout: float
    balance: float

    def flags(self) -> str:
        """The command-line flags that reproduce this set and split."""
        source = (f"--rlgate-prompts-file={self.prompts_file}" if self.prompts_file
                  else f"--rlgate-seed={self.seed} --rlgate-size={self.size}")
        extra = "" if self.holdout == 0.2 else f" --rlgate-holdout={self.holdout:g}"
        extra += f" --rlgate-balance={self.balance:g}" if self.balance else ""
        return source + extra


def _settings(config: pytest.Config) -> PromptSettings:
    def read(name: str, convert: Any, default: Any) -> Any:
        try:
            value = setting(config, name, convert)
        except argparse.ArgumentTypeError as exc:  # a bad ini value
            raise pytest.UsageError(f"ini setting rlgate_{name.replace('-', '_')}: {exc}") from None
        return default if value is None else value

    file = setting(config, "prompts-file")
    if file:
        file = Path(file).expanduser()
        if not file.is_absolute():
            from_ini = not config.getoption("rlgate_prompts_file") and config.inipath is not None
            base = config.inipath.parent if from_ini else config.invocation_params.dir
            file = base / file
    return PromptSettings(seed=read("seed", int, 0), size=read("size", _size, "default"),
                          prompts_file=file or None, holdout=read("holdout", fraction, 0.2),
                          balance=read("balance", share, 0.0))


class _PromptState:
    """Per-session cache: settings now, the prompt set on first use (header or fixture)."""

    def __init__(self, settings: PromptSettings) -> None:
        self.settings = settings
        self._items: list[dict[str, Any]] | None = None
        self._fingerprint = ""

    def items(self) -> list[dict[str, Any]]:
        if self._items is None:
            from pytest_rlgate.prompts import build_prompts, fingerprint, read_prompts

            s = self.settings
            self._items = read_prompts(s.prompts_file) if s.prompts_file else build_prompts(s.seed, s.size)
            self._fingerprint = fingerprint(self._items)
        return self._items

    def fingerprint(self) -> str:
        self.items()
        return self._fingerprint


_STATE = pytest.StashKey[_PromptState]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = _PromptState(_settings(config))


def pytest_report_header(config: pytest.Config) -> str:
    """One copy-pasteable line: the flags that rebuild the prompt set, and its fingerprint."""
    from pytest_rlgate.errors import RlgateError
    from pytest_rlgate.prompts import count_by_category

    state = config.stash[_STATE]
    try:
        items = state.items()
    except RlgateError as exc:  # the fixtures report it again, as an error of the tests that use them
        return f"rlgate: {state.settings.flags()} (unreadable: {exc})"
    counts = ", ".join(f"{n} {c}" for c, n in count_by_category(items).items())
    return f"rlgate: {state.settings.flags()} prompts={len(items)} ({counts}) fingerprint={state.fingerprint()[:23]}"


@pytest.fixture(scope="session")
def rlgate_prompts(pytestconfig: pytest.Config) -> list[dict[str, Any]]:
    """The session's prompt set: the seeded template set, or --rlgate-prompts-file.

    Items are dicts with ``prompt``, ``case``, ``category`` and ``scenario_id``. The list is
    shared by the session; copy it before changing it.
    """
    from pytest_rlgate.errors import RlgateError

    try:
        return pytestconfig.stash[_STATE].items()
    except RlgateError as exc:
        pytest.fail(f"rlgate: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def rlgate_split(pytestconfig: pytest.Config, rlgate_prompts: list[dict[str, Any]]) -> Split:
    """Train and holdout of the session's prompts: stratified by category and scenario.

    The holdout holds --rlgate-holdout (0.2) of each category's scenarios; the train side is
    balanced to --rlgate-balance when given. The holdout is never balanced.
    """
    from pytest_rlgate.errors import RlgateError
    from pytest_rlgate.prompts import Split, balance, stratified_split

    settings = pytestconfig.stash[_STATE].settings
    try:
        split = stratified_split(rlgate_prompts, settings.holdout)
    except RlgateError as exc:
        pytest.fail(f"rlgate: {exc}", pytrace=False)
    return Split(balance(split.train, settings.balance), split.holdout)
