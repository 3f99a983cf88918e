"""The exceptions and warnings every part of pytest-rlgate raises for user mistakes.

One hierarchy so the plugin and the CLI can turn any *user* mistake into a one-line
message (a collection error, exit code 2) and leave real bugs as tracebacks. The failures
a test reports (a regression, a reward hack, a reward table row that pays the wrong value)
are ``AssertionError`` subclasses instead, so pytest counts them as failed tests, not errors.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pytest

__all__ = ["DataError", "EndpointError", "GateOutcome", "HackReport", "RankError", "RegressionError", "RewardHackError",
           "RewardMismatch", "RewardValueError", "RlgateDeprecationWarning", "RlgateError", "RlgateWarning",
           "SpecError", "UsageError", "hide_user_errors"]


class GateOutcome(Protocol):
    """What a :class:`RegressionError` carries: a gate's result (a ``GateResult`` or a
    ``RecipeGateResult``). Named by its shape, so this ground-floor module imports nothing
    above it, not even for the type checker."""

    @property
    def passed(self) -> bool: ...

    def message(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class HackReport(Protocol):
    """What a :class:`RewardHackError` carries: a probe's or a scan's result (``ProbeResult``,
    ``HackScanResult``), whose table lists what paid."""

    def table(self) -> str: ...


class RlgateError(Exception):
    """A mistake in what the user handed us; the message says where and how to fix it."""

    def __init__(self, message: str, *, path: str | PathLike[str] | None = None, line: int | None = None) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.reason = message
        where = self.path if line is None or self.path is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}" if where else message)


#: Longest message a ``SpecError`` carries (besides the file and line): a table's mistake is
#: told in one short line whatever the table holds; a 4 MB value never becomes a 4 MB message.
MAX_SPEC_MESSAGE = 300


class SpecError(RlgateError):
    """A reward table that cannot be read: names the file, the line and the fix, in one bounded line."""

    def __init__(self, message: str, *, path: str | PathLike[str] | None = None, line: int | None = None) -> None:
        text = " ".join(message.split())
        if len(text) > MAX_SPEC_MESSAGE:
            text = text[:MAX_SPEC_MESSAGE - 3] + "..."
        super().__init__(text, path=path, line=line)


class DataError(RlgateError):
    """A prompt, row or run file that cannot be used as it is."""


class UsageError(RlgateError):
    """An option or argument that makes no sense (unknown loss type, bad balance, ...)."""


class EndpointError(RlgateError):
    """A model server that cannot answer as asked: unreachable, refusing a prompt, out of retries,
    its engine dead, or answering in a shape the API does not have. The message names the URL,
    the prompt or the setting, and what to change; like a usage error, never a traceback."""


class RankError(RlgateError):
    """Another process of a torchrun / accelerate job failed: every rank raises the same one.

    *internal* is True when the failing rank hit a bug rather than a user mistake (the CLI
    then exits 3 on every rank, else 2); *rank* is the first rank that failed.
    """

    def __init__(self, message: str, *, rank: int, internal: bool = False) -> None:
        self.rank, self.internal = rank, internal
        super().__init__(message)


class RlgateWarning(UserWarning):
    """Something the user should look at but that does not fail a gate.

    A plain ``UserWarning`` subclass so the statistics work without pytest; filter it with
    ``-W ignore::pytest_rlgate.RlgateWarning``.
    """


class RlgateDeprecationWarning(RlgateWarning, FutureWarning):
    """An old spelling (a flag, a keyword, an ini key) still accepted for one release.

    A ``FutureWarning`` as well as an :class:`RlgateWarning`: Python shows it by default (a
    plain ``DeprecationWarning`` raised inside the library would be hidden from the person who
    typed the flag), ``pytest.deprecated_call()`` catches it, and ``-W
    ignore::pytest_rlgate.RlgateWarning`` silences it with the rest.
    """


class RegressionError(AssertionError):
    """The gate failed; the message is the table of what failed and the rule, ``result`` the whole result."""

    def __init__(self, message: str, result: GateOutcome | None = None) -> None:
        super().__init__(message)
        self.result = result


class RewardHackError(AssertionError):
    """A reward pays for something it should not; ``str()`` is the findings table.

    An ``AssertionError`` so pytest reports it as a test failure (not an error) and shows the
    table as the failure message, like :class:`RegressionError`.
    """

    def __init__(self, message: str, result: HackReport | None = None) -> None:
        super().__init__(message)
        self.result = result


class RewardMismatch(AssertionError):
    """A reward table row's reward paid something other than the row's expected value."""

    def __init__(self, actual: float) -> None:
        super().__init__(f"actual {actual}")
        self.actual = actual


class RewardValueError(TypeError):
    """A reward returned something that is not a number (a failed row, not a bad table)."""


def hide_user_errors(excinfo: pytest.ExceptionInfo[BaseException] | None) -> bool:
    """pytest's ``__tracebackhide__`` of the modules a user's test calls into: their frames are
    hidden when the failure is the user's (an :class:`RlgateError`, a :class:`RegressionError`),
    so it reads as its one line naming file:line; a bug in rlgate keeps its whole traceback."""
    return excinfo is not None and bool(excinfo.errisinstance((RlgateError, RegressionError)))


#: the errors the top level exports read as its names (``pytest_rlgate.RegressionError: ...`` in a failure,
#: ``-W ignore::pytest_rlgate.RlgateWarning``); the others keep this module's (``tests/test_api.py`` holds both)
for _cls in (RlgateError, SpecError, DataError, UsageError, RlgateWarning, RegressionError, RewardHackError):
    _cls.__module__ = "pytest_rlgate"
