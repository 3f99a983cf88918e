"""The public API is fenced: about forty names at the top, the rest in the facade of their area.

Each facade is checked the way Hypothesis checks ``hypothesis.strategies`` (its
``_check_exports``): every name it lists resolves, and every public name it binds is listed,
so a name is public because a list says so, not because an import happened to leave it there.
The top level's list is also the one agreed here (:data:`TOP`), so a change to the first screen
of the API is a visible change to this file.

**Adding a public name.** Define it in the module that owns it, then:

1. add ``"name": "owning_module"`` to ``_EXPORTS`` in the facade of its area
   (``pytest_rlgate/<area>/__init__.py``: ``data``, ``environment``, ``gate``, ``policy``,
   ``rewards``, ``train``, ``watch``, ``demo``; an eager facade such as ``pytest_rlgate/stats.py``,
   ``errors.py``, ``records.py`` or ``report/__init__.py`` imports it and lists it in ``__all__``);
2. for a lazy facade, add the same name to its ``if TYPE_CHECKING:`` block at the end (what type
   checkers read; :func:`test_the_type_checking_mirror_is_the_lazy_exports` holds the two together);
3. only when the first test, the ``rlgate`` command's pipeline as functions or a user's own
   trainer needs it at hand, also add it to the top level's ``_EXPORTS`` in
   ``pytest_rlgate/__init__.py`` (and its ``TYPE_CHECKING`` block) and to :data:`TOP` below.
   The top level stays at about forty names: Hypothesis has 20, Inspect AI 26.

**Moving a name off the top level.** Add it to ``_MOVED`` in ``pytest_rlgate/__init__.py`` with
the facade that holds it: ``pytest_rlgate.<name>`` then keeps working for one release, with an
:class:`~pytest_rlgate.errors.RlgateDeprecationWarning` naming the new home.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import pytest_rlgate
from pytest_rlgate.errors import RlgateDeprecationWarning

#: The top level, agreed: the first test, the pipeline ``rlgate`` runs (prompts, sample, grade,
#: rows, train) as functions, errors, records, environments, options and results, a user's own
#: trainer (the reward and the callbacks) and a reward's hacks.
TOP = (
    # the first test
    "assert_no_regression", "compare", "RegressionError",
    # the pipeline, as functions
    "build_prompts", "stratified_split", "load_policy", "sample", "sample_rows", "VllmSampler", "ServedModel",
    "grade_replies",
    "grade_file", "read_rows", "write_rows", "load_rows", "train_grpo", "train_dpo",
    # errors
    "RlgateError", "SpecError", "DataError", "UsageError", "RlgateWarning", "RewardHackError",
    # records
    "Row", "PromptItem", "Case",
    # environments
    "Env", "Environment", "load_env",
    # options and results
    "GateOptions", "GateResult", "SampleOptions", "ReadOptions", "GRPOKnobs", "DPOKnobs",
    # your own trainer
    "env_reward", "GateCallback", "HackMonitor",
    # a reward's hacks
    "probe_reward", "hack_scan",
)

#: Facades that bind nothing but what they export (besides their submodules and typing plumbing).
FACADES = ("pytest_rlgate", "pytest_rlgate.stats", "pytest_rlgate.data", "pytest_rlgate.environment",
           "pytest_rlgate.gate", "pytest_rlgate.policy", "pytest_rlgate.rewards", "pytest_rlgate.train",
           "pytest_rlgate.watch", "pytest_rlgate.demo")
#: Public modules that define what they export (and import helpers besides).
HOMES = ("pytest_rlgate.errors", "pytest_rlgate.records", "pytest_rlgate.report", "pytest_rlgate.data.readers")
#: The facades whose names resolve when first used (PEP 562): importing them loads nothing heavy.
LAZY = tuple(name for name in FACADES if name != "pytest_rlgate.stats")

#: Every name the top level exported before the fence: each stays reachable, at the top or from its new home.
BEFORE_THE_FENCE = frozenset("""
AdaptiveDesign AdaptiveResult BASE_RUN_SEEDS Case CategoryPlan Comparison ConfidenceInterval DPOKnobs DataError Env
EnvSpec Environment Episode FamilyMember FamilyTest GRPOKnobs GateCallback GateOptions GateResult Hack HackFinding
HackMonitor HackScanDiff HackScanResult HackedReply Markers Pair PairedBootstrapResult Plan ProbeResult PromptItem
ReadOptions RecipeComparison RecipeGateResult RecipeInterval RecipeResult RegressionError ReleasePolicy
RewardHackError RewardMismatch RewardRow RewardValueError RlgateError RlgateWarning Row RowSource Rows RunFolder
RunKnobs RunWriter SAMPLE_SEED SAMPLE_TEMPERATURE SAMPLE_TOP_P SampleOptions ScanFeature SeedComparison Selection
SequentialGate SpecError Split TINY_POLICY ToolCall ToolCallRecord Turn UsageError VllmSampler assert_no_regression
balance build_pairs build_prompts cache_key cached_dir compare compare_recipe count_by_category decontaminate
detect_format env_reward family_test fingerprint grade_episode grade_episodes grade_file grade_replies hack_scan
hack_scan_diff holm keep_prompts load_env load_policy load_release_policy load_reward_table load_rows
minimum_detectable_effect paired_bootstrap plain_split plan policy_draw probe_reward read_header read_pairs
read_prompts read_rows reader_names recipe_interval regrade_rows report_text row_header run_demo run_rows sample
sample_episodes sample_rows save_baseline select_checkpoint stratified_split tiny_policy_dir train_dpo train_grpo
train_seeds until_decided validate_row watch_checkpoints write_index write_prompts write_report write_rows
""".split())

#: what a module may bind besides its exports: typing helpers and the lazy-facade machinery
_PLUMBING_MODULES = {"typing", "__future__", "pytest_rlgate._io.facade"}


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _resolved(module: types.ModuleType) -> dict[str, object]:
    """Every exported name's value (resolving the lazy ones), then the module's whole namespace."""
    for name in module.__all__:
        getattr(module, name)
    return dict(vars(module))


def _is_plumbing(name: str, value: object) -> bool:
    if name == "TYPE_CHECKING" or isinstance(value, types.ModuleType):
        return True
    return type(value).__module__ == "__future__" or getattr(value, "__module__", None) in _PLUMBING_MODULES


def _check_exports(module: types.ModuleType) -> None:
    """Hypothesis's check: the public names the facade binds are exactly the ones it lists."""
    listed = set(module.__all__)
    public = {name for name, value in _resolved(module).items()
              if not name.startswith("_") and (name in listed or not _is_plumbing(name, value))}
    assert public == listed - {"__version__"}, (
        f"{module.__name__}: bound but not in __all__ {sorted(public - listed)}; listed but not bound "
        f"{sorted(listed - public - {'__version__'})} (see this file's docstring: how to add a name)")


def test_the_top_level_is_the_agreed_list() -> None:
    assert len(TOP) == len(set(TOP)) <= 45
    assert pytest_rlgate.__all__ == sorted([*TOP, "__version__"]), (
        "the top level changed: add or drop the name in TOP too (tests/test_api.py, 'Adding a public name')")
    assert dir(pytest_rlgate) == pytest_rlgate.__all__  # the moved names are not advertised


@pytest.mark.parametrize("name", FACADES)
def test_a_facade_binds_exactly_what_it_lists(name: str) -> None:
    module = _module(name)
    assert len(module.__all__) == len(set(module.__all__))
    _check_exports(module)


@pytest.mark.parametrize("name", HOMES)
def test_a_home_lists_every_public_class_and_function_it_defines(name: str) -> None:
    module = _module(name)
    namespace = _resolved(module)
    defined = {attr for attr, value in namespace.items() if not attr.startswith("_")
               and (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ == name}
    unlisted = defined - set(module.__all__)
    assert not unlisted, f"{name} defines public names it does not list: {sorted(unlisted)}"
    assert len(module.__all__) == len(set(module.__all__))


def _lazy_exports(name: str) -> dict[str, str]:
    module = _module(name)
    return dict(module._EXPORTS)


@pytest.mark.parametrize("name", LAZY)
def test_each_lazy_name_is_its_owners_object(name: str) -> None:
    module = _module(name)
    for attr, owner in _lazy_exports(name).items():
        home = importlib.import_module(owner if owner.startswith(".") else f".{owner}", name)
        assert getattr(module, attr) is getattr(home, attr), (name, attr)


@pytest.mark.parametrize("name", LAZY)
def test_the_type_checking_mirror_is_the_lazy_exports(name: str) -> None:
    """What a type checker reads (the ``if TYPE_CHECKING:`` imports) is what ``__getattr__`` resolves."""
    module = _module(name)
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    guarded = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"]
    static = {}
    for block in guarded:
        for node in block.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.asname == alias.name:  # ``X as X``: a re-export (the other imports only annotate)
                        module_ = node.module or ""
                        static[alias.name] = module_ if node.level == 1 else "." * node.level + module_
    assert static == _lazy_exports(name), f"{name}: the TYPE_CHECKING block and _EXPORTS differ"


@pytest.mark.parametrize("name", LAZY)
def test_no_facade_exports_the_name_of_one_of_its_modules(name: str) -> None:
    """``import package.x`` sets the attribute ``x`` of the package: an export named ``x`` would be replaced."""
    folder = Path(_module(name).__file__ or "").parent
    modules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir()
                                                        if (p / "__init__.py").is_file()}
    assert not set(_module(name).__all__) & modules


def test_importing_the_lazy_facades_loads_nothing_heavy() -> None:
    code = ("import sys\n" + "".join(f"import {name}\n" for name in LAZY) +
            "heavy = {'numpy', 'torch', 'transformers', 'trl', 'yaml', 'hypothesis', 'scipy'} & set(sys.modules)\n"
            "print(','.join(sorted(heavy)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("name", sorted(pytest_rlgate._MOVED))
def test_a_moved_name_still_resolves_from_its_new_home_with_a_warning(name: str) -> None:
    home = f"pytest_rlgate.{pytest_rlgate._MOVED[name]}"
    assert name in _module(home).__all__, f"{name} moved to {home}, which does not export it"
    with pytest.warns(RlgateDeprecationWarning, match=rf"pytest_rlgate\.{name} moved to {home}\.{name}; import it "
                                                      rf"from {home}"):
        value = getattr(pytest_rlgate, name)
    assert value is getattr(_module(home), name)


def test_every_name_of_the_old_top_level_is_still_reachable() -> None:
    assert BEFORE_THE_FENCE <= set(pytest_rlgate._EXPORTS) | set(pytest_rlgate._MOVED)


#: where the project itself uses the API: none of it reads a moved name from the top level
_OWN_USES = ("README.md", "docs/*.md", "examples/**/*.py", "examples/**/*.md", "benchmarks/*.py", "tests/**/*.py",
             "pytest_rlgate/**/*.py", "conftest.py")
_FROM_TOP = re.compile(r"from pytest_rlgate import \(([^)]*)\)|from pytest_rlgate import ([^\n]+)")


def _top_level_uses(text: str) -> set[str]:
    """The names *text* reads from the top level: ``from pytest_rlgate import X``, ``pytest_rlgate.X``,
    ``rg.X`` (any alias of ``import pytest_rlgate as rg``), in code and in prose."""
    names = {name for match in _FROM_TOP.finditer(text)
             for name in re.findall(r"\b\w+\b", (match.group(1) or match.group(2)).split("#")[0])}
    for alias in {"pytest_rlgate", *re.findall(r"import pytest_rlgate as (\w+)", text)}:
        names |= set(re.findall(rf"(?<![\w.]){alias}\.(\w+)\b(?!\.\w)", text))  # not a submodule's name
    return names


def test_the_project_reads_no_moved_name_from_the_top_level() -> None:
    """Docs, examples, benchmarks and tests show each name where it lives now (this file aside)."""
    assert _top_level_uses("import pytest_rlgate as rg\nrg.holm(x)\nfrom pytest_rlgate import (plan,\n compare)\n"
                           "a `pytest_rlgate.Hack`, not pytest_rlgate.data.Rows") == {"holm", "plan", "compare", "Hack"}
    root = Path(pytest_rlgate.__file__).resolve().parents[1]
    found = {}
    for pattern in _OWN_USES:
        for path in sorted(root.glob(pattern)):
            if path.resolve() in (Path(__file__).resolve(), Path(pytest_rlgate.__file__).resolve()):
                continue
            moved = _top_level_uses(path.read_text(encoding="utf-8")) & set(pytest_rlgate._MOVED)
            if moved:
                found[str(path.relative_to(root))] = {n: f"pytest_rlgate.{pytest_rlgate._MOVED[n]}" for n in moved}
    assert found == {}, f"import these names from their new homes: {found}"


def test_the_moved_names_warn_where_the_user_reads_them() -> None:
    with pytest.warns(RlgateDeprecationWarning) as caught:
        from pytest_rlgate import holm  # noqa: F401
    assert caught[0].filename == __file__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        pytest_rlgate.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_thing"):
        _module("pytest_rlgate.data").no_such_thing  # noqa: B018
    # a submodule is still a submodule, not an export
    from pytest_rlgate.data import rows

    assert rows.__name__ == "pytest_rlgate.data.rows"


def test_the_errors_the_top_level_exports_read_as_its_names() -> None:
    """``pytest_rlgate.RegressionError: ...`` in a failure, ``-W ignore::pytest_rlgate.RlgateWarning``."""
    errors = _module("pytest_rlgate.errors")
    relabelled = {name for name in errors.__all__ if getattr(errors, name).__module__ == "pytest_rlgate"}
    exported = {name for name in TOP if inspect.isclass(getattr(pytest_rlgate, name))
                and issubclass(getattr(pytest_rlgate, name), (Exception, Warning))}
    assert relabelled == exported
