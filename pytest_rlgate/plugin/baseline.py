"""pytest options for stored baselines: ``--rlgate-baseline PATH`` and ``--rlgate-update-baseline``.

``--rlgate-baseline PATH`` (ini ``rlgate_baseline``; a relative path on the command line is
resolved against the folder pytest was started from, one in the ini file against the ini
file's folder, :func:`~pytest_rlgate.plugin.path_setting`) makes ``rlgate_before_rows``
read the stored rows: no model is loaded for the before side. ``--rlgate-update-baseline``
writes a candidate's rows (a test's ``rlgate_after_rows``) to that path, snapshot style (as
pytest-regressions' ``--force-regen`` or syrupy's ``--snapshot-update``), and only when the
test passed and every gate it ran passed: a failed gate leaves the baseline untouched and
the terminal summary says so. A missing baseline is an error, except while updating, when
the base is sampled this once and the passing candidate becomes the baseline.

Each test's update note travels in ``report.user_properties`` (like gate results), so the
summary lists them under pytest-xdist too; run updates without ``-n``, one candidate per
baseline.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rlgate.errors import RlgateError
from pytest_rlgate.plugin import add_setting, fail, path_setting, shown_path
from pytest_rlgate.plugin.gate import PROPERTY as GATE_PROPERTY
from pytest_rlgate.plugin.harness import read_options

if TYPE_CHECKING:
    from pytest_rlgate.data.readers import RowSource
    from pytest_rlgate.data.rows import Rows

PROPERTY = "rlgate_baseline"
CANDIDATE = "rlgate_after_rows"
_ROWS = pytest.StashKey["Rows | RowSource"]()
_WRITER = pytest.StashKey[str]()
_CALLING = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "baseline", metavar="PATH",
                help="gate against these stored rows (.jsonl or .jsonl.gz, or an eval harness's log: an lm-eval "
                     "output folder, an Inspect .eval, ...; relative to where pytest was started, or in the ini "
                     "file to its folder): rlgate_before_rows reads them instead of sampling the base")
    parser.getgroup("rlgate").addoption(
        "--rlgate-update-baseline", action="store_true", default=False, dest="rlgate_update_baseline",
        help="write the candidate's rows (rlgate_after_rows) to --rlgate-baseline when its test and gate passed")


def baseline_path(config: pytest.Config) -> Path | None:
    """``--rlgate-baseline`` / ``rlgate_baseline``, resolved where it was given; None when unset."""
    return path_setting(config, "baseline")


def _updating(config: pytest.Config) -> bool:
    return bool(config.getoption("rlgate_update_baseline", default=False))


def _harness_output(folder: Path) -> bool:
    """Whether *folder* is an eval harness's output that a reader reads (an lm-eval folder, ...)."""
    from pytest_rlgate.data.readers import detect_format

    try:
        detect_format(folder)
    except RlgateError:
        return False
    return True


def pytest_configure(config: pytest.Config) -> None:
    if _updating(config) and baseline_path(config) is None:
        raise pytest.UsageError("--rlgate-update-baseline needs --rlgate-baseline PATH (or the rlgate_baseline ini "
                                "setting): the file to write the candidate's rows to")
    path = baseline_path(config)
    if path is not None and path.is_dir() and (_updating(config) or not _harness_output(path)):
        # neither read nor written as a row file (a harness's output folder is read): say so before any test runs
        raise pytest.UsageError(f"--rlgate-baseline {_shown(config, path)}: is a directory; name the baseline "
                                f"file inside it, e.g. {_shown(config, path / 'baseline.jsonl.gz')}")
    if path is not None:
        config.pluginmanager.register(_BaselineLog(config), "rlgate-baseline-log")


def pytest_report_header(config: pytest.Config) -> str | None:
    path = baseline_path(config)
    if path is None:
        return None
    state = "found" if path.exists() else "missing"
    update = " --rlgate-update-baseline (a passing candidate replaces it)" if _updating(config) else ""
    return f"rlgate: baseline={_shown(config, path)} ({state}){update}"


def _shown(config: pytest.Config, path: Path) -> str:
    return shown_path(config, path, "baseline")


def _missing(config: pytest.Config, path: Path) -> str:
    """Why a baseline that does not exist cannot be read, with the fix that applies to its name."""
    where = f"no such file or folder {path}"
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return (f"{where}; create it with --rlgate-update-baseline, or `rlgate baseline save RUN_DIR --out "
                f"{_shown(config, path)}` from a finished run")
    return (f"{where} (a relative path is read from the folder pytest was started from, "
            f"{config.invocation_params.dir}); point it at a row file or an eval harness's output")


@pytest.fixture(scope="session")
def rlgate_baseline_rows(pytestconfig: pytest.Config) -> Rows | RowSource | None:
    """The stored baseline's rows (``--rlgate-baseline``), read once a session; None without one.

    ``rlgate_before_rows`` returns them when set. While updating, a baseline that does not
    exist yet is None too: the base is sampled and the passing candidate is written.
    """
    from pytest_rlgate.data.readers import read_rows
    from pytest_rlgate.data.rows import load_rows

    path = baseline_path(pytestconfig)
    if path is None or (_updating(pytestconfig) and not path.exists()):
        return None
    rows = pytestconfig.stash.get(_ROWS, None)
    if rows is None:
        if not path.exists():
            pytest.fail(f"rlgate: --rlgate-baseline {_shown(pytestconfig, path)}: {_missing(pytestconfig, path)}",
                        pytrace=False)
        try:
            source = read_rows(path, **read_options(pytestconfig))  # a harness's log streams; rlgate rows load once
            rows = pytestconfig.stash[_ROWS] = load_rows(path) if source.format == "rlgate" else source
        except RlgateError as exc:
            fail(f"rlgate: --rlgate-baseline: {exc}")
    return rows


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Mark the test's call phase: a report made inside it is a subtest's (pytest >= 9), not the test's."""
    item.stash[_CALLING] = True
    try:
        return (yield)
    finally:
        item.stash[_CALLING] = False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None],
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if (call.when == "call" and _updating(item.config) and CANDIDATE in getattr(item, "funcargs", {})
            and not item.stash.get(_CALLING, False)):
        note = _update(item, report)
        report.user_properties.append((PROPERTY, json.dumps(note)))
    return report


def _update(item: pytest.Item, report: pytest.TestReport) -> dict[str, object]:
    """Write the test's candidate rows over the baseline if it earned it; say what happened."""
    config = item.config
    path = baseline_path(config)
    assert path is not None  # pytest_configure refused --rlgate-update-baseline without a path
    shown = _shown(config, path)
    gates = [json.loads(str(value)) for name, value in item.user_properties if name == GATE_PROPERTY]
    failed = sum(not g["passed"] for g in gates)
    if report.outcome != "passed":
        why = f"the test {report.outcome}"
        if failed:
            why += f" and {failed} of its {len(gates)} gate(s) failed"
        return {"updated": False, "path": shown, "why": why}
    if failed:
        return {"updated": False, "path": shown, "why": f"{failed} of its {len(gates)} gate(s) failed"}
    writer = config.stash.get(_WRITER, None)
    if writer is not None:
        return {"updated": False, "path": shown,
                "why": f"{writer} already wrote it this session (one candidate per baseline: select one with -k)"}
    rows = item.funcargs[CANDIDATE]  # type: ignore[attr-defined]
    if isinstance(rows, dict):  # @pytest.mark.rlgate(seeds=...): one set of rows per training seed
        return {"updated": False, "path": shown,
                "why": "a recipe test has one set of after rows per training seed, and a baseline is one "
                       "policy's rows (select a single-seed test with -k)"}
    from pytest_rlgate.data.rows import load_rows, write_rows

    try:
        if not isinstance(rows, list):  # --rlgate-candidate's file or log, read as a row source: counted once read
            rows = load_rows(rows)
        write_rows(path, rows)
    except RlgateError as exc:
        return {"updated": False, "path": shown, "why": f"the rows could not be written: {exc}"}
    config.stash[_WRITER] = item.nodeid
    header = getattr(rows, "header", None) or {}
    return {"updated": True, "path": shown, "rows": len(rows), "env": header.get("env"),
            "env_fingerprint": header.get("env_fingerprint")}


class _BaselineLog:
    """Collects the update notes from test reports (the controller's view under xdist)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.notes: list[tuple[str, dict[str, Any]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY:
                self.notes.append((report.nodeid, json.loads(value)))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if hasattr(self.config, "workerinput"):
            return
        if not self.notes:
            if _updating(self.config):
                terminalreporter.write_sep("=", "rlgate: baseline")
                terminalreporter.write_line("baseline not updated: no test that requested rlgate_after_rows ran",
                                            yellow=True)
            return
        terminalreporter.write_sep("=", "rlgate: baseline")
        for nodeid, note in self.notes:
            if note["updated"]:
                terminalreporter.write_line(
                    f"baseline {note['path']} updated with {note['rows']} rows of {nodeid} "
                    f"(env {note['env']} {str(note['env_fingerprint'])[:15]})", green=True)
            else:
                terminalreporter.write_line(f"baseline {note['path']} left untouched: {nodeid}: {note['why']}",
                                            red=True)
