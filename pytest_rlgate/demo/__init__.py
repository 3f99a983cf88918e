"""``rlgate demo``: the refund story end to end on the shipped tiny policy (:mod:`.story`),
and the same story across training seeds (:mod:`.recipe`). The public name is resolved when
first used (:mod:`pytest_rlgate._io.facade`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._io.facade import Facade

#: public name -> the module of this package that owns it
_EXPORTS: dict[str, str] = {
    "run_demo": "story",
}

_FACADE = Facade(__name__, _EXPORTS)
__all__ = _FACADE.names()


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .story import run_demo as run_demo
