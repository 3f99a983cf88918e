"""The layout shows the architecture: task knowledge lives in its environment's package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_rlgate

PACKAGE = Path(pytest_rlgate.__file__).parent
#: the demo tells the refund story by name; every other module takes an environment
MAY_NAME_A_TASK = {"demo/story.py", "cli/demo.py"}


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


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run at import time, and those the type checker reads as if they did
    (``if TYPE_CHECKING:`` blocks): not function bodies. A type-only import is an arrow of the
    architecture too, so a circle through one is a circle."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If):
            found += _top_level_statements(node.body) + _top_level_statements(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found += _top_level_statements(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            found += _top_level_statements(node.body)
        else:
            found.append(node)
    return found


def _import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package under *root* -> the package modules it imports at import time
    or for the type checker (not inside a function)."""
    modules = {_module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _top_level_statements(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_the_package_imports_have_no_cycle() -> None:
    cycles = _cycles(_import_graph(PACKAGE))
    assert cycles == [], ("modules that import each other, at import time or for the type checker (move one "
                          f"import, split a module, or name the type by a small Protocol): {cycles}")


def test_the_cycle_detector_sees_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n")  # inside a function: not an edge
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import d\n"
                              "try:\n    from .sub.b import f\nexcept ImportError:\n    pass\n")
    (pkg / "sub" / "d.py").write_text("from ..c import f\n")
    graph = _import_graph(pkg)
    assert graph == {"pkg": set(), "pkg.a": {"pkg.sub", "pkg.sub.b"}, "pkg.c": {"pkg.sub", "pkg.sub.b", "pkg.sub.d"},
                     "pkg.sub": set(), "pkg.sub.b": set(), "pkg.sub.d": {"pkg.c"}}
    # the type-only import closes a circle: c -> d (for the type checker) -> c
    assert _cycles(graph) == [["pkg.c", "pkg.sub.d"]]
    (pkg / "c.py").write_text("try:\n    from .sub.b import f\nexcept ImportError:\n    pass\n")
    assert _cycles(_import_graph(pkg)) == []
    (pkg / "sub" / "b.py").write_text("from pkg.sub import d\n")
    assert _cycles(_import_graph(pkg)) == [["pkg.c", "pkg.sub.b", "pkg.sub.d"]]


#: The floors of the house, lowest first: a folder imports (at import time or for the type checker) only
#: folders on a lower floor. ``__init__`` is the public facade (it resolves names lazily), ``cli`` and
#: ``plugin`` are the two faces at the top.
FLOORS: tuple[frozenset[str], ...] = tuple(frozenset(f.split()) for f in (
    "errors _version records",
    "options",
    "_io",
    "environment",
    "data",
    "gate rewards policy",
    "train envs",
    "report",
    "demo",
    "plugin cli",
))
#: The one documented climb: the environment contract reads the registry of built-in
#: environments (``pytest_rlgate.envs`` itself names them as strings and imports no task).
MAY_CLIMB = {("pytest_rlgate.environment.contract", "pytest_rlgate.envs")}


def _floor(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) == 1:
        return None  # the package facade
    return next(i for i, floor in enumerate(FLOORS) if parts[1] in floor)


def _climbs(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        low = _floor(module)
        for target in sorted(targets):
            high = _floor(target)
            same_folder = module.split(".")[:2] == target.split(".")[:2]
            if low is None or high is None or same_folder or (module, target) in MAY_CLIMB:
                continue
            if high >= low:
                found.append(f"{module} -> {target}")
    return found


def test_every_folder_has_a_floor() -> None:
    folders = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
               if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").is_file())}
    assert folders == set().union(*FLOORS), "a new folder needs its floor in FLOORS (and a line in the README)"


def test_no_folder_imports_one_on_its_own_floor_or_above() -> None:
    assert _climbs(_import_graph(PACKAGE)) == [], "move the shared code down a floor, or import it lazily"


def test_the_floor_check_sees_a_climb() -> None:
    graph = {"pytest_rlgate.data.rows": {"pytest_rlgate.gate.stats", "pytest_rlgate.errors"},
             "pytest_rlgate.gate.stats": {"pytest_rlgate.rewards.scan", "pytest_rlgate.gate.verdicts"},
             "pytest_rlgate.cli.gate": {"pytest_rlgate.gate.adapter"}}
    assert _climbs(graph) == ["pytest_rlgate.data.rows -> pytest_rlgate.gate.stats",
                              "pytest_rlgate.gate.stats -> pytest_rlgate.rewards.scan"]
