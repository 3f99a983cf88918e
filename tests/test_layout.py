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
            if dotted.startswith(("envs.", "pytest_rlgate.envs.")) or dotted in ("envs", "pytest_rlgate.envs"):
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
                      "import pytest_rlgate.envs.arith\nfrom .environment.contract import DEFAULT_ENV\n"
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


def _import_graph(root: Path, *, inside_functions: bool = False) -> dict[str, set[str]]:
    """Each module of the package under *root* -> the package modules it imports at import time
    or for the type checker; with *inside_functions*, the ones it imports inside a function too
    (a lazy import is an arrow all the same: it only runs later)."""
    modules = {_module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree) if inside_functions else _top_level_statements(tree.body):
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
    cycles = _cycles(_import_graph(PACKAGE, inside_functions=True))
    assert cycles == [], ("modules that import each other, at import time, for the type checker or inside a "
                          "function (move one import, split a module, render from a record, or name the type by a "
                          f"small Protocol): {cycles}")


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
    # counted with the lazy imports, b -> c (inside a function) closes c -> b -> c as well
    assert _import_graph(pkg, inside_functions=True)["pkg.sub.b"] == {"pkg", "pkg.c"}
    assert _cycles(_import_graph(pkg, inside_functions=True)) == [["pkg.c", "pkg.sub.b", "pkg.sub.d"]]
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
    "watch",
    "train envs",
    "report",
    "demo",
    "plugin cli",
))
#: Facades beside the package's own ``__init__``: modules that only re-export, for users, names the
#: floors below own (``pytest_rlgate.stats``). Like the package facade they stand on no floor, and no
#: module of the package imports one (it imports the owner).
FACADES = frozenset({"stats"})
#: Climbs the floors allow: none (the environment contract finds the built-in environments by
#: looking, naming their package as a string).
MAY_CLIMB: set[tuple[str, str]] = set()


def _floor(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in FACADES:
        return None  # the package facade, or another facade
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
    assert folders == set().union(*FLOORS, FACADES), "a new folder needs its floor in FLOORS (and a line in the README)"


def test_no_module_imports_a_facade() -> None:
    """The facades are for users: inside the package a name is imported from the module that owns it, so
    a facade can re-export anything without closing a circle."""
    facades = {"pytest_rlgate", *(f"pytest_rlgate.{name}" for name in FACADES)}
    graph = _import_graph(PACKAGE, inside_functions=True)
    found = sorted(f"{module} -> {target}" for module, targets in graph.items() if module not in facades
                   for target in targets & facades)
    assert found == [], f"import the name from the module that owns it, not from a facade: {found}"


def test_no_folder_imports_one_on_its_own_floor_or_above() -> None:
    assert _climbs(_import_graph(PACKAGE)) == [], "move the shared code down a floor, or import it lazily"


def test_the_floor_check_sees_a_climb() -> None:
    graph = {"pytest_rlgate.data.rows": {"pytest_rlgate.gate.stats", "pytest_rlgate.errors"},
             "pytest_rlgate.gate.stats": {"pytest_rlgate.rewards.scan", "pytest_rlgate.gate.verdicts"},
             "pytest_rlgate.cli.gate": {"pytest_rlgate.gate.adapter"}}
    assert _climbs(graph) == ["pytest_rlgate.data.rows -> pytest_rlgate.gate.stats",
                              "pytest_rlgate.gate.stats -> pytest_rlgate.rewards.scan"]


#: Commands that train nothing, and import nothing of train/ (not even through another module):
#: ``rlgate sample`` samples any checkpoint with policy/'s sampler, on data/'s holdout.
TRAINS_NOTHING = ("pytest_rlgate.cli.sample",)


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += sorted(graph.get(module, ()))
    return seen


def test_a_command_that_trains_nothing_imports_nothing_of_train() -> None:
    graph = _import_graph(PACKAGE)
    reached = {command: sorted(m for m in _reach(graph, command) if m.startswith("pytest_rlgate.train"))
               for command in TRAINS_NOTHING}
    assert reached == {command: [] for command in TRAINS_NOTHING}, \
        "a sampling command reaches into train/ (move what it needs down to policy/ or data/)"


#: Where an environment spec may be resolved (``load_env``): the doors, each with why it is one.
#: Everything inside takes the resolved ``Env``; a new call elsewhere resolves a spec its caller
#: had resolved already (pass the ``Env`` down instead), or it is a new door to add here.
ENV_DOORS: dict[tuple[str, str], str] = {
    ("cli/__init__.py", "_resolve_env"): "the CLI's --env, before the command runs",
    ("plugin/env.py", "_resolved"): "the plugin's --rlgate-env / rlgate_env / marker env=",
    ("data/episodes.py", "grade_episode"): "public (pytest_rlgate.data.grade_episode)",
    ("data/episodes.py", "grade_episodes"): "public (pytest_rlgate.data.grade_episodes)",
    ("data/hygiene.py", "keep_prompts"): "public (pytest_rlgate.data.keep_prompts)",
    ("data/prompts.py", "build_prompts"): "public (rg.build_prompts)",
    ("data/prompts.py", "read_prompts"): "public (pytest_rlgate.data.read_prompts)",
    ("data/prompts.py", "stratified_split"): "public (rg.stratified_split)",
    ("data/replies.py", "grade_file"): "public (rg.grade_file)",
    ("data/rows.py", "grade_replies"): "public (rg.grade_replies)",
    ("data/rows.py", "regrade_rows"): "public (pytest_rlgate.data.regrade_rows)",
    ("data/provenance.py", "header_env"): "a rows file's header names its environment (registered names only)",
    ("demo/story.py", "run_demo"): "public (pytest_rlgate.demo.run_demo)",
    ("demo/recipe.py", "run_recipe_demo"): "rlgate demo --seeds hands it the flag as given",
    ("watch/looks.py", "SequentialGate.__post_init__"): "public (pytest_rlgate.watch.SequentialGate(env=...))",
    ("gate/sides.py", "read_sides"): "GateOptions.env, where both gates (adapter, recipe) read their sides",
    ("policy/adaptive.py", "policy_draw"): "public (pytest_rlgate.policy.policy_draw)",
    ("policy/load.py", "build_tiny_policy"): "public (docs/policy.md: policy.build_tiny_policy(env, out))",
    ("policy/sampling.py", "sample"): "public (rg.sample)",
    ("policy/sampling.py", "sample_rows"): "public (rg.sample_rows)",
    ("rewards/probe.py", "_resolve"): "public: probe_reward's first two arguments",
    ("rewards/scan.py", "hack_scan"): "public (rg.hack_scan)",
    ("rewards/strategies.py", "_truth"): "public: near_miss_replies / lenient_replies env=",
    ("rewards/strategies.py", "hack_replies"): "public (docs/hacks.md: hack_replies(env, item))",
    ("rewards/tables.py", "_env"): "a reward table's env: field",
    ("policy/warm_train.py", "warm_start"): "public (pytest_rlgate.policy.warm_start(model, env=...))",
    ("policy/warm.py", "warm_model_dir"): "a warm-start name (smollm2-135m+refund) names its environment",
    ("watch/callback.py", "GateCallback.__init__"): "public (rg.GateCallback(env=...))",
    ("train/config.py", "RunKnobs.environment"): "the env knob of a run's configuration",
    ("train/monitor.py", "HackMonitor.__init__"): "public (rg.HackMonitor(env=...))",
    ("train/pairs.py", "build_pairs"): "public (pytest_rlgate.train.build_pairs)",
    ("train/reward.py", "env_reward"): "public (rg.env_reward)",
    ("train/run.py", "RunFolder.environment"): "a run folder's config.json names its environment (or --env)",
    ("watch/folder.py", "watch_checkpoints"): "public (pytest_rlgate.watch.watch_checkpoints)",
    ("watch/folder.py", "confirm_in_folder"): "a watch folder's settings name its environment",
}


def _load_env_calls(source: str) -> list[tuple[str, int]]:
    """(qualified function name, line) of every ``load_env(...)`` call in *source*, aliases included."""
    tree = ast.parse(source)
    names = {"load_env"} | {alias.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                            for alias in node.names if alias.name == "load_env" and alias.asname}
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, chain: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = chain + (child.name,) if isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else chain
            if isinstance(child, ast.Call):
                func = child.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) \
                    else None
                if called in names:
                    found.append((".".join(chain) or "<module>", child.lineno))
            visit(child, inner)

    visit(tree, ())
    return found


def test_environments_are_resolved_only_at_the_doors() -> None:
    seen: set[tuple[str, str]] = set()
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "environment/contract.py":  # where load_env lives
            continue
        for function, line in _load_env_calls(path.read_text(encoding="utf-8")):
            if (relative, function) in ENV_DOORS:
                seen.add((relative, function))
            else:
                strays.append(f"{relative}:{line} in {function}")
    assert not strays, ("load_env called outside a door (a CLI command, a fixture/hook, a public function): "
                        f"{strays}; take an `env: Env` and let the caller pass the one it resolved, or, for a "
                        "new door, add it to ENV_DOORS in tests/test_layout.py with why it is one")
    stale = sorted(set(ENV_DOORS) - seen)
    assert not stale, f"ENV_DOORS names doors that no longer resolve an environment (drop them): {stale}"


def test_the_door_check_sees_a_call_inside(tmp_path: Path) -> None:
    source = ("from .contract import load_env, load_env as resolve\n"
              "def door(env=None):\n    return helper(load_env(env))\n"
              "class Thing:\n    def method(self, spec):\n        return resolve(spec)\n"
              "def inner(env):\n    return contract.load_env(env).name\n")
    assert _load_env_calls(source) == [("door", 3), ("Thing.method", 6), ("inner", 8)]
