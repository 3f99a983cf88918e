"""Watched runs: the gate looked at again and again, checkpoint by checkpoint, over one error budget.

Modules: ``looks`` (``SequentialGate``: each checkpoint against step 0, the run's family level
spent across the looks), ``select`` (the checkpoint to ship, and its confirmation on a fresh
sample), ``frame`` (``LookFrame``: what every callback that watches a run from inside does at a
look, sampled once per look), ``callback`` (``GateCallback``, the gate inside a user's trainer)
and ``folder`` (``rlgate watch``: the ``checkpoint-N`` folders a job writes). It sits above
``gate/`` (one comparison, and the statistics the looks spend) and ``policy/`` (the sampler), and
below ``train/`` (whose ``HackMonitor`` looks through the same frame). Importing this package is
cheap; numpy and transformers load with the modules that need them, and the public names are
resolved when first used (:mod:`pytest_rlgate._io.facade`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._io.facade import Facade

#: public name -> the module of this package that owns it
_EXPORTS: dict[str, str] = {
    "GateCallback": "callback",
    "SequentialGate": "looks",
    "LookFrame": "frame",
    "watch_checkpoints": "folder",
    "select_checkpoint": "select",
    "Selection": "select",
}

_FACADE = Facade(__name__, _EXPORTS)
__all__ = _FACADE.names()


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .callback import GateCallback as GateCallback
    from .folder import watch_checkpoints as watch_checkpoints
    from .frame import LookFrame as LookFrame
    from .looks import SequentialGate as SequentialGate
    from .select import Selection as Selection, select_checkpoint as select_checkpoint
