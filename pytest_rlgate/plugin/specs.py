"""pytest hooks for reward tables: every row of a table under ``reward_specs/`` is a test.

Which files: ``*.yaml``, ``*.yml`` and ``*.jsonl`` inside a directory named
``reward_specs`` (at any depth below the rootdir), or below a path listed in the ini
setting ``rlgate_spec_paths``. pytest still has to walk there, so name the folder in
``testpaths`` or on the command line.

A row without a case reads it from its prompt with the table's ``env:`` or, failing that,
the session's environment (``--rlgate-env``).

A table that cannot be read does not stop the session: it becomes one ``ERROR`` item,
``<file>::spec-error``, whose message names ``file:line`` and the fix, while the rows of
every other table still run (pytest would otherwise abort the whole run on a collection
error, hiding the tables that do work).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rlgate.errors import RewardMismatch, RewardValueError, SpecError
from pytest_rlgate.plugin import add_setting, setting
from pytest_rlgate.plugin.env import session_env
from pytest_rlgate.rewards.suffixes import SPEC_SUFFIXES

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from pytest_rlgate.rewards.tables import RewardRow

_SPEC_DIR = "reward_specs"
_MAX_SHOWN = 500


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "reward-function", metavar="MODULE:ATTR",
                help="Reward used by reward tables that name none, e.g. mypkg.rewards:score")
    parser.addini("rlgate_spec_paths", type="paths", default=[],
                  help="Extra files or folders whose *.yaml/*.yml/*.jsonl are reward tables "
                       "(folders named reward_specs always are)")


def _is_spec_file(file_path: Path, config: pytest.Config) -> bool:
    if file_path.suffix not in SPEC_SUFFIXES:
        return False
    try:
        parts = file_path.relative_to(config.rootpath).parts[:-1]
    except ValueError:
        parts = file_path.parts[:-1]
    if _SPEC_DIR in parts:
        return True
    return any(file_path == base or base in file_path.parents for base in config.getini("rlgate_spec_paths"))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect reward tables (see the module docstring for which files)."""
    if _is_spec_file(file_path, parent.config):
        return RewardSpecFile.from_parent(parent, path=file_path)
    return None


def _shown_path(path: Path, config: pytest.Config) -> str:
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return str(path)


class RewardSpecFile(pytest.File):
    """One reward table; its rows are the items."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_rlgate.rewards.tables import load_reward_table  # yaml: only for a project with tables

        try:
            rows = load_reward_table(self.path, default_reward=setting(self.config, "reward-function"),
                                     default_env=session_env(self.config),
                                     display_path=_shown_path(self.path, self.config))
        except SpecError as exc:
            yield SpecErrorItem.from_parent(self, name="spec-error", error=str(exc), line=exc.line)
            return
        except Exception as exc:
            error = SpecError(f"reading the table raised {type(exc).__name__}: {exc} (a bug in pytest-rlgate or "
                              "in code the table names)", path=_shown_path(self.path, self.config))
            yield SpecErrorItem.from_parent(self, name="spec-error", error=str(error), line=None)
            return
        for row in rows:
            yield RewardRowItem.from_parent(self, name=row.id, row=row)


class SpecErrorItem(pytest.Item):
    """Stands for a table that could not be read: errors at setup with the spec error."""

    def __init__(self, *, error: str, line: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error
        self.line = line

    def setup(self) -> None:
        pytest.fail(f"bad reward table: {self.error}", pytrace=False)

    def runtest(self) -> None:  # pragma: no cover - setup always fails first
        raise AssertionError(self.error)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None if self.line is None else self.line - 1, f"bad reward table {self.path.name}"


def _show(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=repr)
    shown = repr(text) if isinstance(value, str) else text
    if len(shown) > _MAX_SHOWN:
        shown = f"{shown[:_MAX_SHOWN]}... ({len(text)} characters)"
    return shown


class RewardRowItem(pytest.Item):
    """One row of a reward table: passes when the reward pays the expected value."""

    def __init__(self, *, row: RewardRow, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.row = row
        if row.category:
            self.extra_keyword_matches.add(row.category)  # `-k <category>` selects a category
            self.user_properties.append(("rlgate.category", row.category))

    def runtest(self) -> None:
        row = self.row
        actual = row.evaluate()
        if not math.isclose(actual, row.expected, rel_tol=0.0, abs_tol=row.tolerance):
            raise RewardMismatch(actual)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: TracebackStyle | None = None) -> str | TerminalRepr:
        row = self.row
        if isinstance(excinfo.value, RewardMismatch):
            headline = (f"{row.location}: reward mismatch for row {row.id!r}: {row.reward_path} paid "
                        f"{excinfo.value.actual}, the table expects {row.expected}")
        elif isinstance(excinfo.value, RewardValueError):
            headline = f"{row.location}: row {row.id!r}: {excinfo.value}"
        else:
            return super().repr_failure(excinfo, style=style)
        lines = [headline]
        if row.category:
            lines.append(f"  category:  {row.category}")
        if row.prompt is not None:
            lines.append(f"  prompt:    {_show(row.prompt)}")
        lines.append(f"  case:      {_show(row.case)}")
        lines.append(f"  reply:     {_show(row.reply)}")
        if row.steps is not None:
            lines.append(f"  steps:     {_show(row.steps)}")
        if isinstance(excinfo.value, RewardMismatch):
            lines.append(f"  expected:  {row.expected} (tolerance {row.tolerance:g})")
            lines.append(f"  actual:    {excinfo.value.actual}")
        if row.note:
            lines.append(f"  note:      {row.note}")
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        category = f" [{self.row.category}]" if self.row.category else ""
        return self.path, self.row.line - 1, f"reward row {self.row.id}{category}"
