"""What a failure while one row is graded says: which row.

A user's score or markers that fail while a row is graded (a NaN, ``10**400``, text, an
exception) are a :class:`~pytest_rlgate.errors.UsageError` naming the environment, the member
and the value (:mod:`pytest_rlgate.environment.calls`); here it also names the row, by its
prompt, scenario and rollout, or by its file and line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import UsageError

__all__ = ["naming_the_row"]


def _short(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[: width - 1] + "…")


@contextlib.contextmanager
def naming_the_row(prompt: str, scenario: object, index: int, *, path: str | None = None,
                   line: int | None = None) -> Iterator[None]:
    """A user's score or markers that fail while one row is graded (a NaN, ``10**400``, text, an
    exception) say which row: its prompt, scenario and rollout, or its file and line."""
    try:
        yield
    except UsageError as exc:
        if path is not None:
            named = UsageError(exc.reason, path=path, line=line)
        else:
            where = f"scenario {scenario!r:.60}, " if scenario is not None else ""
            named = UsageError(f"{exc} (grading rollout {index} of {where}prompt {_short(prompt)})")
        named.original = getattr(exc, "original", exc)  # type: ignore[attr-defined]  # for whoever debugs it
        raise named from None
