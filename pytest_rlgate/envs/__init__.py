"""Environments: everything that knows one task (its cases, reward, categories, prompts, hacks).

Each module here is a built-in environment, found by looking
(:data:`~pytest_rlgate.environment.contract.BUILTIN_PACKAGE`): a new one is a new module or
package, named as it is registered, which is its environment or names the one it holds in
``ENVIRONMENT``. Other packages register theirs under the ``rlgate.envs`` entry-point group.
"""
