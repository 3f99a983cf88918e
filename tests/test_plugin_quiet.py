"""The installed plugin in a project that does not use it, and in a user's failing test.

Another project's ``pytest`` run must not see the plugin: no warning, no header line. The
plugin is served the way ``pip install -e .`` serves it (a meta-path finder, not a folder on
``sys.path``): pytest then cannot mark the package for assertion rewriting up front, which is
when a feature module imported by another one before its turn used to warn. A bad row file
or a regression in a user's test reads as its one line naming file:line, not rlgate's frames.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_rlgate

ROOT = Path(pytest_rlgate.__file__).resolve().parent.parent

#: pytest started with pytest_rlgate importable only through a meta-path finder, as an
#: editable install serves it; argv after the script goes to pytest
EDITABLE_LAUNCHER = f'''
import importlib.abc, importlib.util, os, sys

ROOT = {str(ROOT)!r}
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != ROOT]


class EditableFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "pytest_rlgate":
            return None
        package = os.path.join(ROOT, "pytest_rlgate")
        return importlib.util.spec_from_file_location(name, os.path.join(package, "__init__.py"),
                                                      submodule_search_locations=[package])


sys.meta_path.insert(0, EditableFinder())
import pytest

raise SystemExit(pytest.main(sys.argv[1:]))
'''

UNRELATED = "def test_one():\n    assert 1 + 1 == 2\n"


def _has_entry_point() -> bool:
    return any(ep.name == "rlgate" for ep in importlib.metadata.entry_points(group="pytest11"))


def _run(folder: Path, *args: str) -> tuple[int, str]:
    """Exit code and output (stdout, then stderr) of pytest in *folder*, without the rootdir line."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    proc = subprocess.run([sys.executable, "launch.py", "-p", "no:cacheprovider", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = (proc.stdout + proc.stderr).splitlines()
    return proc.returncode, "\n".join(line for line in lines if not line.startswith("rootdir:"))


@pytest.mark.skipif(not _has_entry_point(), reason="pytest-rlgate is not installed (no pytest11 entry point)")
def test_an_unrelated_project_sees_no_warning_and_no_rlgate_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=UNRELATED)
    (pytester.path / "launch.py").write_text(EDITABLE_LAUNCHER, encoding="utf-8")
    code, out = _run(pytester.path)
    assert code == 0, out
    assert "--rlgate-env" in _run(pytester.path, "--help")[1]  # the plugin was loaded
    assert "warning" not in out.lower() and "1 passed in" in out, out
    assert not [line for line in out.splitlines() if line.startswith("rlgate")], out
    code, strict = _run(pytester.path, "-W", "error", "-W", "error::pytest.PytestWarning")
    assert code == 0 and "warning" not in strict.lower(), strict


#: what the plugin may load in a session that never uses rlgate: its feature modules and the light
#: modules their options are declared in; nothing that computes (no numpy, no report, no reader)
QUIET_MODULES = {"pytest_rlgate", "pytest_rlgate._version", "pytest_rlgate.errors", "pytest_rlgate.options",
                 "pytest_rlgate._io", "pytest_rlgate._io.facade", "pytest_rlgate.gate", "pytest_rlgate.gate.options",
                 "pytest_rlgate.rewards", "pytest_rlgate.rewards.suffixes", "pytest_rlgate.plugin"}
HEAVY = ("numpy", "scipy", "tabulate", "yaml", "torch", "transformers", "hypothesis", "orjson", "matplotlib")


@pytest.mark.skipif(not _has_entry_point(), reason="pytest-rlgate is not installed (no pytest11 entry point)")
def test_a_whole_unrelated_session_imports_only_the_features(pytester: pytest.Pytester) -> None:
    """Start-up, collection, the session's end and the terminal summary of a one-test run load no heavy module."""
    pytester.makepyfile(test_one=UNRELATED)
    pytester.makeconftest("import sys\n\ndef pytest_unconfigure(config):\n"
                          "    open('modules.txt', 'w').write('\\n'.join(sorted(sys.modules)))\n")
    (pytester.path / "launch.py").write_text(EDITABLE_LAUNCHER, encoding="utf-8")

    def modules(*args: str) -> set[str]:
        code, out = _run(pytester.path, *args)
        assert code == 0, out
        return set((pytester.path / "modules.txt").read_text(encoding="utf-8").split())

    loaded, without = modules(), modules("-p", "no:rlgate")
    ours = {m for m in loaded if m.split(".")[0] == "pytest_rlgate"}
    assert "pytest_rlgate.plugin.gate" in ours  # the plugin ran
    assert {m for m in ours if not m.startswith("pytest_rlgate.plugin.")} <= QUIET_MODULES, sorted(ours)
    brought = sorted(m for m in loaded - without if m.split(".")[0] in HEAVY)  # other plugins load their own
    assert not brought, brought


def test_every_feature_is_registered_and_each_can_be_switched_off(pytester: pytest.Pytester) -> None:
    from pytest_rlgate import plugin

    pytester.makepyfile(test_x="def test_x(request):\n"
                               "    names = {request.config.pluginmanager.get_name(p) for p in "
                               "request.config.pluginmanager.get_plugins()}\n"
                               f"    print('FEATURES', sorted(names & {set(plugin.FEATURES)!r}))\n")
    every = pytester.runpytest("-s", "-p", "no:cacheprovider")
    assert f"FEATURES {sorted(plugin.FEATURES)!r}" in every.stdout.str()
    without_gate = pytester.runpytest("-s", "-p", "no:cacheprovider", "-p", "no:pytest_rlgate.plugin.gate")
    assert f"FEATURES {sorted(set(plugin.FEATURES) - {'pytest_rlgate.plugin.gate'})!r}" in without_gate.stdout.str()
    assert "--rlgate-resamples" not in pytester.runpytest("-p", "no:pytest_rlgate.plugin.gate", "--help").stdout.str()


BROKEN_TESTS = """
import pytest_rlgate
import pytest_rlgate.data

def test_api():
    pytest_rlgate.assert_no_regression("broken.jsonl", "good.jsonl")

def test_fixture(rlgate):
    rlgate.assert_no_regression("broken.jsonl", "good.jsonl")

def test_reader():
    pytest_rlgate.load_rows("broken.jsonl")

def test_not_json():
    pytest_rlgate.compare("not_json.jsonl", "good.jsonl")

def test_missing():
    pytest_rlgate.data.read_header("missing.jsonl")

def test_bad_env():
    pytest_rlgate.load_env("no_such_environment")
"""


def test_a_bad_row_file_in_a_users_test_reads_as_one_line_naming_file_and_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "broken.jsonl").write_text('{"prompt": "x", "category": "no_id"}\n', encoding="utf-8")
    (pytester.path / "not_json.jsonl").write_text('{"prompt": \n', encoding="utf-8")
    (pytester.path / "good.jsonl").write_text("", encoding="utf-8")
    pytester.makepyfile(test_broken=BROKEN_TESTS)
    # in a process of its own: a run in this one would import the package's modules afresh and
    # drop them after, leaving the names the package cached pointing at the dropped copies
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=6)
    out = result.stdout.str()
    errors = [line for line in out.splitlines() if line.startswith("E ")]
    assert len(errors) == 6, out
    assert sum("pytest_rlgate.DataError: broken.jsonl:1: " in line for line in errors) == 3, errors
    assert any("pytest_rlgate.DataError: not_json.jsonl:1: " in line for line in errors), errors
    assert any("missing.jsonl: no such row file" in line for line in errors), errors
    assert any("no_such_environment" in line for line in errors), errors
    assert "pytest_rlgate/" not in out and "pytest_rlgate" + os.sep not in out, out  # no frame of the library
    lines = out.splitlines()
    for name in ("test_api", "test_fixture", "test_reader", "test_not_json", "test_missing", "test_bad_env"):
        start = next(i for i, line in enumerate(lines) if line.startswith("_") and f" {name} " in line)
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("_", "=")))
        assert len([line for line in lines[start + 1:end] if line.strip()]) <= 5, lines[start:end]


REGRESSION_TEST = """
import pytest_rlgate
from test_gate import NO_ID_COLLAPSE, seed_tables

def test_gate():
    before, after = seed_tables(NO_ID_COLLAPSE)
    pytest_rlgate.assert_no_regression(before, after, env="refund", n_resamples=500)
"""


def test_a_regression_in_a_users_test_shows_the_table_not_the_library(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_regress=REGRESSION_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore::pytest_rlgate.RlgateWarning",
                                           "-o", f"pythonpath={Path(__file__).parent}")  # test_gate's tables
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["E *RegressionError: 1 of * comparisons regressed: pass@1 in no_id*"])
    assert "pytest_rlgate/" not in out, out


def test_loading_the_plugin_loads_no_heavy_part_of_the_package() -> None:
    code = ("import sys, importlib, pytest, pytest_rlgate.plugin as p\n"
            "for name in p.FEATURES: importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'yaml', 'tabulate', 'torch') "
            "or m.startswith(('pytest_rlgate.data', 'pytest_rlgate.environment', 'pytest_rlgate.envs', "
            "'pytest_rlgate.train', 'pytest_rlgate.policy', 'pytest_rlgate.gate.stats', 'pytest_rlgate.rewards.')) "
            "and m != 'pytest_rlgate.rewards.suffixes'))")  # which files are reward tables: one constant
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
