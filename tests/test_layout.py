"""The layout shows the architecture: task knowledge lives in its environment's package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_rlgate

PACKAGE = Path(pytest_rlgate.__file__).parent
#: the demo tells the refund story by name; every other module takes an environment
MAY_NAME_A_TASK = {"demo.py", "commands/demo.py"}


def _task_imports(path: Path) -> list[str]:
    """Imports in *path* that reach into a task's own package (``envs.<task>``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [alias.name for alias in node.names]
            dotted = module.lstrip(".")
            if dotted.startswith(("envs.", "pytest_rlgate.envs.")) or (
                dotted in ("envs", "pytest_rlgate.envs") and set(names) - {"BUILTIN", "DEFAULT_ENV"}
            ):
                found.append(f"line {node.lineno}: from {module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("pytest_rlgate.envs.")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith("pytest_rlgate.envs."):
            found.append(f"line {node.lineno}: names {node.value!r}")
    return found


def test_no_generic_module_reaches_into_a_task() -> None:
    leaks = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("envs/") or relative in MAY_NAME_A_TASK:
            continue
        found = _task_imports(path)
        if found:
            leaks[relative] = found
    assert leaks == {}, f"generic modules import a task's package (take an Env instead): {leaks}"


def test_the_detector_sees_each_import_shape(tmp_path: Path) -> None:
    sample = tmp_path / "leaky.py"
    sample.write_text("from .envs import refund\nfrom ..envs.refund import score\n"
                      "import pytest_rlgate.envs.arith\nfrom .envs import DEFAULT_ENV\n"
                      "X = 'pytest_rlgate.envs.refund:score'\n", encoding="utf-8")
    assert [line.split(":")[0] for line in _task_imports(sample)] == ["line 1", "line 2", "line 3", "line 5"]
