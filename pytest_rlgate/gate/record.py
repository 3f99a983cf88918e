"""A gate's records as JSON and back, derived from their dataclass fields: each field declared once.

A gate result is written as JSON (``rlgate gate --json``, a run's ``gate.json``, the pytest
session report, what an xdist worker hands the controller) and read back by the reports. The
JSON shape is the dataclass itself: :func:`to_record` walks its fields (and the properties a
class lists in ``__record_properties__``, such as ``passed``), :func:`from_record` rebuilds
it from the field annotations, so a field added to a record is written and read everywhere
with no second declaration (the way ``attrs.asdict`` and ``cattrs.structure`` work).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Union

from ..errors import DataError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["Record", "from_record", "to_record"]

T = TypeVar("T", bound="DataclassInstance")
#: a record as JSON reads it back (a run's gate.json, a comparison in it): what the faces render
Record = Mapping[str, Any]


def to_record(value: object) -> Any:
    """*value* as JSON-ready data: dataclasses as objects of their fields (and listed properties).

    An object with a ``__record__()`` method is written as what it returns (the gate's options
    name their environment and policy file instead of holding the objects).
    """
    hook = getattr(value, "__record__", None)
    if hook is not None and not isinstance(value, type):
        return to_record(hook())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_record(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in getattr(type(value), "__record_properties__", ()):
            out[name] = to_record(getattr(value, name))
        return out
    if isinstance(value, (list, tuple)):
        return [to_record(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_record(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """Each field's annotation, evaluated in its module; a name only imported for type checking reads as Any."""
    module = vars(sys.modules[cls.__module__])
    out: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        try:
            out[spec.name] = eval(spec.type, module) if isinstance(spec.type, str) else spec.type
        except NameError:
            out[spec.name] = Any
    return out


#: the plain types a field may hold, and what a JSON value of each may be
_PLAIN: dict[Any, tuple[type, ...]] = {float: (int, float), int: (int,), str: (str,), bool: (bool,)}


def _build(kind: Any, value: Any) -> Any:
    if value is None or kind is Any:
        return value
    accepted = _PLAIN.get(kind)
    if accepted is not None:
        if isinstance(value, bool) and kind is not bool or not isinstance(value, accepted):
            raise ValueError(f"expected {kind.__name__}, got {value!r:.40}")
        return value
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        arms = [a for a in typing.get_args(kind) if a is not type(None)]
        for arm in arms:
            if isinstance(arm, type) and dataclasses.is_dataclass(arm) and isinstance(value, Mapping):
                return from_record(arm, value)
        tuple_arm = next((a for a in arms if typing.get_origin(a) is tuple), None)
        if tuple_arm is not None and isinstance(value, list):
            return _build(tuple_arm, value)
        return value
    if origin is tuple and isinstance(value, list):
        args = typing.get_args(kind)
        inner = args[0] if args else Any
        return tuple(_build(inner, v) for v in value)
    if dataclasses.is_dataclass(kind) and isinstance(kind, type) and isinstance(value, Mapping):
        return from_record(kind, value)
    return value


def from_record(cls: type[T], record: Mapping[str, Any]) -> T:
    """The *cls* instance :func:`to_record` wrote as *record* (unknown keys, such as properties, are skipped).

    :raises DataError: the record lacks a field that has no default, or holds a bad value.
    """
    if not isinstance(record, Mapping):
        raise DataError(f"not a {cls.__name__} record: expected an object, got {type(record).__name__}")
    hints = _hints(cls)
    values = {}
    for spec in dataclasses.fields(cls):
        if spec.name in record:
            try:
                values[spec.name] = _build(hints[spec.name], record[spec.name])
            except ValueError as exc:
                raise DataError(f"not a {cls.__name__} record: {spec.name!r}: {exc}") from None
        elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            raise DataError(f"not a {cls.__name__} record: it has no {spec.name!r}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise DataError(f"not a {cls.__name__} record: {exc}") from None
