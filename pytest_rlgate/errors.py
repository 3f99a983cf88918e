"""The exceptions and warnings every part of pytest-rlgate raises for user mistakes.

One hierarchy so the plugin and the CLI can turn any *user* mistake into a one-line
message (a collection error, exit code 2) and leave real bugs as tracebacks.
"""

from __future__ import annotations

from os import PathLike

__all__ = ["DataError", "RankError", "RlgateError", "RlgateWarning", "SpecError", "UsageError"]


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


for _cls in (RlgateError, SpecError, DataError, UsageError, RlgateWarning):
    _cls.__module__ = "pytest_rlgate"
