"""pytest options for an eval harness's output as a gate side: how its records become rows.

``--rlgate-baseline`` may be a committed harness log (an lm-eval ``--log_samples`` folder,
an Inspect ``.eval``, a promptfoo ``results.json``, ...) and ``--rlgate-candidate PATH`` makes
``rlgate_after_rows`` read the candidate's log instead of training an adapter, so a suite
gates a fine-tune evaluated elsewhere with no model loaded. ``--rlgate-format``,
``--rlgate-category-key``, ``--rlgate-unit-key``, ``--rlgate-metric``,
``--rlgate-pass-threshold``, ``--rlgate-filter`` and ``--rlgate-allow-prompt-change`` (each
with its ini twin) are generated from :class:`~pytest_rlgate.options.ReadOptions`, the
options of :func:`pytest_rlgate.data.readers.read_rows`, and apply to every path the
session gates; a test's row-file paths handed to the ``rlgate`` fixture are read the same
way. The readers load only when a path is read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rlgate.errors import RlgateError
from pytest_rlgate.options import ReadOptions
from pytest_rlgate.plugin import add_setting, setting

if TYPE_CHECKING:
    from pytest_rlgate.data.readers import RowSource


def _dest(name: str) -> str:
    return "rlgate_" + name.replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "candidate", metavar="PATH",
                help="rlgate_after_rows reads this candidate's rows or eval-harness log (relative to the rootdir) "
                     "instead of training an adapter")
    for name, spec in ReadOptions.flags().items():
        help_ = f"harness logs: {spec.metadata['help']}"
        if spec.default is False:  # a switch, and a bool ini twin
            parser.getgroup("rlgate").addoption(f"--rlgate-{name}", dest=_dest(name), action="store_true",
                                                default=False, help=help_)
            parser.addini(_dest(name), help=f"{help_} (ini twin of --rlgate-{name})", type="bool", default=False)
        else:
            add_setting(parser, name, metavar=spec.metadata["metavar"], help=help_,
                        type=float if spec.name == "pass_threshold" else str)


def pytest_configure(config: pytest.Config) -> None:
    name = setting(config, "format")
    if name:
        from pytest_rlgate.data.readers import reader_names

        if name not in reader_names():
            raise pytest.UsageError(f"--rlgate-format {name!r}: choose one of {', '.join(reader_names())}")
    try:
        read_options(config)
    except RlgateError as exc:  # a bad value stops the session now, not in the first gate
        raise pytest.UsageError(f"rlgate: {exc}") from None


def read_options(config: pytest.Config) -> dict[str, Any]:
    """:func:`~pytest_rlgate.data.readers.read_rows` keywords from the session's settings (checked)."""
    out: dict[str, Any] = {}
    for name, spec in ReadOptions.flags().items():
        if spec.default is False:
            out[spec.name] = bool(config.getoption(_dest(name), default=False) or config.getini(_dest(name)))
        else:
            out[spec.name] = setting(config, name, float if spec.name == "pass_threshold" else str)
    ReadOptions(**out)
    return out


def rooted(config: pytest.Config, value: str | os.PathLike[str]) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else config.rootpath / path


def read_side(config: pytest.Config, path: str | os.PathLike[str]) -> RowSource:
    """*path* as rows with the session's read options; a problem fails the test in one line."""
    from pytest_rlgate.data.readers import read_rows

    try:
        return read_rows(path, **read_options(config))
    except RlgateError as exc:
        pytest.fail(f"rlgate: {exc}", pytrace=False)


def candidate_rows(config: pytest.Config) -> RowSource | None:
    """``--rlgate-candidate``'s rows, or None when it is unset."""
    value = setting(config, "candidate")
    return None if not value else read_side(config, rooted(config, value))
