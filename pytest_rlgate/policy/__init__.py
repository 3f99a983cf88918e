"""Policies, the models that are sampled: loading a base (hub id, folder or a shipped tiny
policy, :mod:`.load`), LoRA adapters (:mod:`.lora`), seeded sampling into graded rows
(:mod:`.sampling`, how replies are drawn declared once in :class:`~.generate.SampleOptions`),
the tiny-policy builder (:mod:`.tiny`) with its built weights (``shipped/``), and a registry model's
warm start for an environment (:mod:`.warm`, trained by :mod:`.warm_train`). torch and
transformers load only when a model does; the public names are resolved when first used
(:mod:`pytest_rlgate._io.facade`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._io.facade import Facade

#: public name -> the module of this package that owns it
_EXPORTS: dict[str, str] = {
    "load_policy": "load",
    "tiny_policy_dir": "load",
    "TINY_POLICY": "tiny.spec",
    "sample": "sampling",
    "sample_rows": "sampling",
    "sample_episodes": "episode",
    "policy_draw": "adaptive",
    "SampleOptions": "generate",
    "VllmSampler": "generate",
    "ServedModel": "served",
    "SAMPLE_TEMPERATURE": "generate",
    "SAMPLE_TOP_P": "generate",
    "SAMPLE_SEED": "generate",
    "BASE_RUN_SEEDS": "generate",
    "WarmStart": "warm",
    "warm_start": "warm_train",
}

_FACADE = Facade(__name__, _EXPORTS)
__all__ = _FACADE.names()


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .adaptive import policy_draw as policy_draw
    from .episode import sample_episodes as sample_episodes
    from .generate import (
        BASE_RUN_SEEDS as BASE_RUN_SEEDS,
        SAMPLE_SEED as SAMPLE_SEED,
        SAMPLE_TEMPERATURE as SAMPLE_TEMPERATURE,
        SAMPLE_TOP_P as SAMPLE_TOP_P,
        SampleOptions as SampleOptions,
        VllmSampler as VllmSampler,
    )
    from .load import load_policy as load_policy, tiny_policy_dir as tiny_policy_dir
    from .sampling import sample as sample, sample_rows as sample_rows
    from .served import ServedModel as ServedModel
    from .tiny.spec import TINY_POLICY as TINY_POLICY
    from .warm import WarmStart as WarmStart
    from .warm_train import warm_start as warm_start
