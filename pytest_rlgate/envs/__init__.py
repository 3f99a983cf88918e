"""Environments: everything that knows one task (its cases, reward, categories, prompts, hacks).

The built-ins register themselves under the ``rlgate.envs`` entry-point group in
``pyproject.toml``; :data:`BUILTIN` names them too, so a source checkout that was never
installed still resolves them. This is the one place outside a task's own package that
names a task.
"""

from __future__ import annotations

__all__ = ["BUILTIN", "DEFAULT_ENV"]

#: name -> "module[:attr]" of the built-in environments
BUILTIN: dict[str, str] = {
    "refund": "pytest_rlgate.envs.refund",
    "refund_agent": "pytest_rlgate.envs.refund_agent",
    "arith": "pytest_rlgate.envs.arith",
    "reasoning_gym": "pytest_rlgate.envs.reasoning_gym:ReasoningGymEnv",
}
#: The environment every surface uses when none is named, so existing commands keep working.
DEFAULT_ENV = "refund"
