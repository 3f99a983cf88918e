"""``module:attr`` names are code: the few callables no reward or ``case_for`` can mean.

A reward table's ``reward:``/``case_for:`` and ``rlgate train --reward`` import a module and
call a function of it with text from a table or a model: that is as trusted as any code in
the repository (docs/specs.md says so). What can never be meant is a callable that evaluates,
compiles, imports or opens the text it is handed - ``builtins:eval`` as a ``case_for`` would
run every prompt as Python. Those are refused by identity, wherever they are imported from.
This is no sandbox, only a guard against the names that turn data into code.
"""

from __future__ import annotations

import builtins
import importlib

__all__ = ["evaluates_text"]

_EVALUATORS = frozenset(
    id(fn) for fn in (builtins.eval, builtins.exec, builtins.compile, builtins.__import__, builtins.breakpoint,
                      builtins.input, builtins.open, importlib.import_module)
)


def evaluates_text(obj: object) -> bool:
    """True for ``eval``, ``exec``, ``compile``, ``__import__``, ``breakpoint``, ``input``, ``open``
    and ``importlib.import_module``, however they were reached."""
    return id(obj) in _EVALUATORS
