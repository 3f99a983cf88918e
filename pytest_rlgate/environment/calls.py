"""The one place rlgate calls a user's code: an environment's import, class, members and rewards.

Whatever a user's environment does (raise, ``sys.exit`` on import, return ``"0.5"`` or a
marker that is not a number), it is the user's mistake, so it must read as one: a
:class:`~pytest_rlgate.errors.UsageError` naming the environment, the member and the first
line of the user's error, which the CLI prints as one line (exit 2) and the plugin as a
usage error. Never a traceback that says "internal error, please report it", never a pytest
INTERNALERROR, and never a ``SystemExit`` that ends a command with exit 0 and nothing
written. ``KeyboardInterrupt`` still stops the run; rlgate's own errors pass through as they are.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

from ..errors import RlgateError, UsageError, hide_user_errors

__all__ = ["USER_CODE_ERRORS", "call", "first_line", "number", "numbers_of", "scorer", "user_error"]

#: a user's test whose environment misbehaves fails with the one line, not these frames
__tracebackhide__ = hide_user_errors

#: What user code may raise and still be the user's error: all of it, ``SystemExit`` included.
USER_CODE_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit)
#: The longest piece of a user's error message a UsageError quotes.
_QUOTED = 200

T = TypeVar("T")
P = ParamSpec("P")


def first_line(exc: BaseException) -> str:
    """``TypeName: first line of the message``, cut to a short line (``SystemExit: 3`` for an exit)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    if len(line) > _QUOTED:
        line = line[:_QUOTED - 3] + "..."
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def user_error(who: str, member: str, exc: BaseException) -> UsageError:
    """The one-line error for user code *who* (``environment calc``) whose *member* raised *exc*."""
    error = UsageError(f"{who}: {member} raised {first_line(exc)} (the error is in that code; run it alone "
                       "to see the traceback)")
    error.original = exc  # type: ignore[attr-defined]  # for whoever debugs it in Python
    return error


def call(who: str, member: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)``, its errors (but rlgate's own) turned into :func:`user_error`."""
    try:
        return fn(*args, **kwargs)
    except RlgateError:
        raise
    except USER_CODE_ERRORS as exc:
        raise user_error(who, member, exc) from None


def number(who: str, member: str, value: object, *, what: str = "a number") -> float:
    """*value*, returned by user code, as a finite float; a string, a bool or NaN is refused.

    ``"0.5"`` is not coerced: a reward that returns text has a bug the gate must not hide
    (a reward table refuses it the same way). numpy's numbers are numbers.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageError(f"{who}: {member} returned {_shown(value)} ({type(value).__name__}); it must return "
                         f"{what} (an int or a float, not text)")
    try:
        result = float(value)
    except (OverflowError, TypeError, ValueError):
        result = math.nan
    if not math.isfinite(result):
        raise UsageError(f"{who}: {member} returned {_shown(value)}; it must return a finite {what.split()[-1]}")
    return result


def scorer(who: str, member: str, fn: object) -> Callable[..., float]:
    """A user's ``score(reply, case)`` (a reward variant, ``--reward module:attr``) that is always
    called through :func:`call` and always returns a finite float, or says which it did not."""
    if not callable(fn):
        raise UsageError(f"{who}: {member} must be a function score(reply, case), got {_shown(fn)}")

    @functools.wraps(fn)
    def checked(*args: object, **kwargs: object) -> float:
        return number(who, f"{member}()", call(who, f"{member}()", fn, *args, **kwargs))

    return checked


def numbers_of(who: str, member: str, found: object) -> dict[str, float]:
    """A ``{name: number}`` mapping returned by user code (``markers``, ``features``), checked."""
    if not isinstance(found, Mapping):
        raise UsageError(f"{who}: {member} returned {_shown(found)} ({type(found).__name__}); it must return "
                         "a mapping {name: number}")
    return {str(key): number(who, f"{member}[{str(key)[:40]!r}]", value) for key, value in found.items()}


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except USER_CODE_ERRORS:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
