"""GateOptions: each gate option declared once and read by every door; each row file read once, header first."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from test_gate import table_rows

from pytest_rlgate import GateOptions, RlgateWarning, UsageError, compare, load_env, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data import row_header, rows as rows_module
from pytest_rlgate.gate import options as gate_options
from pytest_rlgate.gate.options import N_RESAMPLES, shown_default
from pytest_rlgate.gate.recipe_stats import compare_recipe
from pytest_rlgate.gate.stats import paired_bootstrap


def _sides() -> tuple[list[dict], list[dict]]:
    return (table_rows("no_id", [0, 1, 0, 1, 0, 0]) + table_rows("with_id", [0, 0, 1, 0, 0, 0]),
            table_rows("no_id", [0, 1, 1, 1, 0, 0]) + table_rows("with_id", [0, 0, 1, 0, 1, 0]))


def test_every_field_has_a_help_a_default_and_a_flag() -> None:
    assert {f.name for f in dataclasses.fields(GateOptions)} - set(GateOptions.names()) == {"given"}  # not an option
    for spec in map(GateOptions.field, GateOptions.names()):
        assert spec.metadata["help"], spec.name
        assert spec.metadata["flag"] and spec.metadata["flag"].startswith("--"), spec.name
        assert spec.default is not dataclasses.MISSING, spec.name
    assert GateOptions().n_resamples == N_RESAMPLES == 10_000
    assert set(GateOptions.settings()) == {"margin", "confidence", "resamples", "method", "bootstrap-seed",
                                           "show-flips", "family-level", "sees-drop"}


def test_an_options_object_and_keywords_give_the_same_gate() -> None:
    before, after = _sides()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RlgateWarning)
        by_keywords = compare(before, after, margin=0.05, n_resamples=2000, seed=3, guards=())
        by_object = compare(before, after, GateOptions(margin=0.05, n_resamples=2000, bootstrap_seed=3, guards=()))
        overridden = compare(before, after, GateOptions(margin=0.2), margin=0.05, n_resamples=2000,
                             bootstrap_seed=3, guards=())
    assert by_keywords.to_dict() == by_object.to_dict() == overridden.to_dict()
    assert by_object.seed == 3 and by_object.n_resamples == 2000 and by_object.margin == 0.05


def test_options_are_frozen_and_checked_when_built() -> None:
    options = GateOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.margin = 0.5  # type: ignore[misc]
    assert options.replace(margin=0.2).margin == 0.2 and options.margin == gate_options.MARGIN
    with pytest.raises(UsageError, match="margin must be a number in"):
        options.replace(margin=2.0)
    with pytest.raises(UsageError, match="pass bootstrap_seed= or its old spelling seed=, not both"):
        GateOptions.build(seed=1, bootstrap_seed=2)


def test_the_cli_flags_and_plugin_settings_are_the_fields(capsys: pytest.CaptureFixture[str],
                                                          pytester: pytest.Pytester) -> None:
    with pytest.raises(SystemExit):
        main(["gate", "--help"])
    cli = " ".join(capsys.readouterr().out.split())
    plugin = " ".join(pytester.runpytest("--help").stdout.str().split())
    for spec in map(GateOptions.field, GateOptions.names()):
        assert spec.metadata["flag"] in cli
        assert " ".join(spec.metadata["help"].split()[:4]) in cli
        if spec.metadata["setting"]:
            assert f"--rlgate-{spec.metadata['setting']}" in plugin
            assert f"(default {shown_default(spec)})" in plugin
    assert f"--resamples B draws: the scenario sign flips that set the family's level (the default t), or a " \
           f"bootstrap method's resamples (default {N_RESAMPLES})" in cli


def test_each_row_file_is_opened_once_and_its_header_checked_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    header = row_header(load_env("refund"))
    before, after = _sides()
    paths = [str(write_rows(tmp_path / "before.jsonl", before, header=header))]
    paths += [str(write_rows(tmp_path / f"after{i}.jsonl", after, header=header)) for i in range(3)]
    opened: list[str] = []
    checked: list[str | None] = []
    real_open, real_check = rows_module.iter_checked_lines, rows_module.check_header
    monkeypatch.setattr(rows_module, "iter_checked_lines",
                        lambda path, **kw: opened.append(str(path)) or real_open(path, **kw))
    monkeypatch.setattr(rows_module, "check_header",
                        lambda obj, **where: checked.append(where.get("path")) or real_check(obj, **where))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RlgateWarning)
        assert compare(paths[0], paths[1], n_resamples=500).passed is not None
        assert sorted(opened) == sorted(checked) == sorted(paths[:2])
        opened.clear()
        checked.clear()
        recipe = compare(paths[0], paths[1:], n_resamples=500)
    assert recipe.to_dict()["kind"] == "recipe"
    assert sorted(opened) == sorted(checked) == sorted(paths)


def test_the_options_and_the_dispatch_load_no_numpy() -> None:
    code = ("import sys, pytest_rlgate.gate, pytest_rlgate.gate.options; "
            "print(sorted(m for m in ('numpy', 'yaml', 'tabulate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_statistics_take_their_defaults_from_the_options() -> None:
    import inspect


    for fn in (paired_bootstrap, compare_recipe):
        parameters = inspect.signature(fn).parameters
        assert parameters["n_resamples"].default == GateOptions().n_resamples
        assert parameters["confidence_level"].default == GateOptions().confidence_level
        # the gate's interval is the family's paired t; the bootstrap on its own is Hesterberg's expanded percentile
        wanted = gate_options.BOOTSTRAP_METHOD if fn is paired_bootstrap else GateOptions().method
        assert parameters["method"].default == wanted
    source = "".join(p.read_text(encoding="utf-8") for p in Path(gate_options.__file__).parent.glob("*.py")
                     if p.name != "options.py")
    assert "10_000" not in source and "10000" not in source
