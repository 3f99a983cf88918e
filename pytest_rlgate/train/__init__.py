"""Training: GRPO (and DPO) with TRL + PEFT LoRA into run folders, watched by HackMonitor.

A run watched from outside (``GateCallback``, ``rlgate watch``) is :mod:`pytest_rlgate.watch`'s.

Modules: ``config`` (every knob with its default and reason), ``reward`` (any environment's
score as TRL's reward), ``grpo`` (the GRPO run), ``dpo`` and ``pairs`` (DPO rounds),
``monitor`` (``HackMonitor``), ``run`` (the run folder), ``pipeline`` (steps every method
shares), ``adapters`` (load, check, merge), ``cached`` (train once per configuration, in the
content-addressed cache whose ``cached_dir`` and ``cache_key`` are public here), ``methods``
(method registry), ``evaluate`` (re-sample a finished run), ``seeds`` (a recipe across training
seeds), ``baseline`` (a run's rows kept as a stored baseline). Importing this package is cheap;
torch, transformers and TRL load when a function needs them, and the public names are resolved
when first used (:mod:`pytest_rlgate._io.facade`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._io.facade import Facade

#: public name -> the module that owns it (relative to this package; ``.._io.cache`` is the shared cache)
_EXPORTS: dict[str, str] = {
    "train_grpo": "grpo",
    "GRPOKnobs": "config",
    "RunKnobs": "config",
    "train_dpo": "dpo",
    "DPOKnobs": "dpo_config",
    "build_pairs": "pairs",
    "Pair": "pairs",
    "read_pairs": "pairs",
    "train_seeds": "seeds",
    "env_reward": "reward",
    "HackMonitor": "monitor",
    "RunFolder": "run",
    "RunWriter": "run",
    "run_rows": "baseline",
    "save_baseline": "baseline",
    "cached_dir": ".._io.cache",
    "cache_key": ".._io.cache",
}

_FACADE = Facade(__name__, _EXPORTS)
__all__ = _FACADE.names()


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .._io.cache import cache_key as cache_key, cached_dir as cached_dir
    from .baseline import run_rows as run_rows, save_baseline as save_baseline
    from .config import GRPOKnobs as GRPOKnobs, RunKnobs as RunKnobs
    from .dpo import train_dpo as train_dpo
    from .dpo_config import DPOKnobs as DPOKnobs
    from .grpo import train_grpo as train_grpo
    from .monitor import HackMonitor as HackMonitor
    from .pairs import Pair as Pair, build_pairs as build_pairs, read_pairs as read_pairs
    from .reward import env_reward as env_reward
    from .run import RunFolder as RunFolder, RunWriter as RunWriter
    from .seeds import train_seeds as train_seeds
