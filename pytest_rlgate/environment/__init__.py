"""The environment contract: what a task supplies (prompts, cases, a score, markers, hacks) and
how a spec names one (``load_env``). Generic code takes an :class:`Env` from here and never
names a task; the tasks themselves live in :mod:`pytest_rlgate.envs`.

The public names are resolved when first used (:mod:`pytest_rlgate._io.facade`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._io.facade import Facade

#: public name -> the module of this package that owns it
_EXPORTS: dict[str, str] = {
    "Env": "contract",
    "Environment": "contract",
    "EnvSpec": "contract",
    "load_env": "contract",
    "EnvMembers": "members",
    "Hack": "hack",
    "Episode": "episode",
    "ToolCall": "episode",
    "ToolCallRecord": "episode",
}

_FACADE = Facade(__name__, _EXPORTS)
__all__ = _FACADE.names()


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .contract import Env as Env, Environment as Environment, EnvSpec as EnvSpec, load_env as load_env
    from .episode import Episode as Episode, ToolCall as ToolCall, ToolCallRecord as ToolCallRecord
    from .hack import Hack as Hack
    from .members import EnvMembers as EnvMembers
