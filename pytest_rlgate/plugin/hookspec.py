"""The ``pytest_rlgate_*`` hooks: where another plugin or a project's ``conftest.py`` changes or watches a gate.

pytest declares these when it loads the plugin (:func:`pytest_rlgate.plugin.pytest_addhooks`),
so an implementation is an ordinary hook function of that name, in a ``conftest.py`` or a
plugin module. The hooks about one test are called through the test's ``item.ihook``, so a
``conftest.py`` changes the gates of the tests in its own folder only, like pytest's own
per-folder hooks. They are the ``rlgate`` fixture's: a test that calls
:func:`pytest_rlgate.assert_no_regression` directly gates outside them.

A ``conftest.py`` that must also load without the plugin (``-p no:rlgate``) marks its
implementation ``@pytest.hookimpl(optionalhook=True)``, as for any plugin's hook.

Nothing here is imported by a session that never gates: the gate's types are named for the
type checker only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_rlgate.data.rows import Rows
    from pytest_rlgate.gate.options import GateOptions
    from pytest_rlgate.gate.recipe import RecipeGateResult
    from pytest_rlgate.gate.result import GateResult


@pytest.hookspec(firstresult=True)
def pytest_rlgate_gate_options(config: pytest.Config, item: pytest.Item, options: GateOptions) -> GateOptions | None:
    """Adjust the gate options of one test.

    Called once per test that asks for the ``rlgate`` fixture, when the fixture is made: after
    the session's settings (``--rlgate-*`` and their ini twins) and the test's
    ``@pytest.mark.rlgate(...)`` gate keywords are applied, before the test runs any gate.
    Keyword arguments the test passes to ``rlgate.assert_no_regression(...)`` still win over
    what this returns, as they win over the session's settings.

    :param config: the pytest config.
    :param item: the test.
    :param options: the test's :class:`~pytest_rlgate.GateOptions` as the session and marker made them.
    :return: the options to use instead (``options.replace(margin=0.05)``), or None to keep them.
        The first implementation that returns options wins (``tryfirst`` implementations are asked first).
    """


def pytest_rlgate_rows(config: pytest.Config, item: pytest.Item, side: str, rows: Rows,
                       seed: int | str | None) -> None:
    """Change one side's rows in place before the gate reads them: add rows, drop rows, set a field.

    Called for each side of each gate the ``rlgate`` fixture runs (``compare``,
    ``assert_no_regression``), and only when some plugin implements this hook: otherwise the
    sides stream from their files unread, as they always do. A typical use adds a marker the
    environment does not grade (``row["markers"]["no_secret"] = ...``) and gates it with
    ``guards=("no_secret",)``, or drops the rows of a category under maintenance.

    :param config: the pytest config.
    :param item: the test.
    :param side: ``"before"`` or ``"after"``.
    :param rows: the side's rows, a :class:`~pytest_rlgate.data.Rows` (a list of row dicts with the
        file's ``header``); change it in place, as ``pytest_collection_modifyitems`` changes
        ``items``. An eval harness's log is read through its reader first, once per reading,
        so the reader's notes and pairing checks still apply.
    :param seed: the training seed of a recipe's after side (``@pytest.mark.rlgate(seeds=...)``,
        a mapping seed -> rows); None for the before side and a single after side.
    :return: ignored. Every implementation is called, in pytest's hook order.
    """


def pytest_rlgate_gate_result(config: pytest.Config, item: pytest.Item,
                              result: GateResult | RecipeGateResult) -> None:
    """See each gate a test ran, with every verdict, where the test runs.

    Called after each gate of the ``rlgate`` fixture (``compare``, ``assert_no_regression``, and
    the last look of ``until_decided``), after the result is recorded on the test and before
    ``assert_no_regression`` raises for a failed gate. Under pytest-xdist it runs on the worker
    that ran the test; the controller sees every gate in :func:`pytest_rlgate_update_json`.
    Use it to send a verdict to an experiment tracker or to attach more ``user_properties``.

    :param config: the pytest config.
    :param item: the test.
    :param result: the gate's result: ``result.passed``, ``result.comparisons`` (each with its
        ``verdict``), ``result.to_dict()`` (the JSON record).
    :return: ignored.
    """


def pytest_rlgate_update_json(config: pytest.Config, output_json: dict[str, Any]) -> None:
    """Change the ``--rlgate-report`` JSON before it is written (pytest-benchmark's ``pytest_benchmark_update_json``).

    Called once at the end of the session, on the controller under pytest-xdist, and only when
    ``--rlgate-report PATH`` (ini ``rlgate_report``) is set. Add keys (a build id, the commit)
    or change entries in place; the file is written atomically afterwards.

    :param config: the pytest config.
    :param output_json: the report: ``format_version``, ``passed``, ``gates`` (each gate's record
        with its ``nodeid`` and ``seeds``) and ``prompts`` (the session's prompt set, when one was built).
    :return: ignored.
    """
