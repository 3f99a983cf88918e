"""The package surface: the entry point, the CLI, and a light plugin load (the public API: test_api.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import pytest_rlgate


def test_exported_errors_read_as_public_names() -> None:
    assert pytest_rlgate.RlgateError.__module__ == "pytest_rlgate"
    err = pytest_rlgate.DataError("reward must be 0 or 1", path="rows.jsonl", line=3)
    assert str(err) == "rows.jsonl:3: reward must be 0 or 1"
    assert (err.path, err.line, err.reason) == ("rows.jsonl", 3, "reward must be 0 or 1")


def test_plugin_load_imports_nothing_heavy() -> None:
    code = (
        "import sys, pytest_rlgate.plugin as p\n"
        "for m in p.FEATURES: __import__(m)\n"
        "heavy = sorted({'torch', 'transformers', 'trl', 'peft', 'hypothesis', 'scipy'} & set(sys.modules))\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_entry_point_is_installed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*pytest-rlgate*"])
    disabled = pytester.runpytest_subprocess("-p", "no:rlgate", "--help")
    assert "pytest-rlgate" not in disabled.stdout.str()


def test_cli_version_and_unknown_command() -> None:
    cli = importlib.import_module("pytest_rlgate.cli")
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2
