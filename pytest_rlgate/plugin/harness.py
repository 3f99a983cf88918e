"""pytest options for an eval harness's output as a gate side: how its records become rows.

``--rlgate-baseline`` may be a committed harness log (an lm-eval ``--log_samples`` folder,
an Inspect ``.eval``, a promptfoo ``results.json``, ...) and ``--rlgate-candidate PATH`` makes
``rlgate_after_rows`` read the candidate's log instead of training an adapter, so a suite
gates a fine-tune evaluated elsewhere with no model loaded. ``--rlgate-format``,
``--rlgate-category-key``, ``--rlgate-unit-key``, ``--rlgate-metric``,
``--rlgate-pass-threshold``, ``--rlgate-filter`` and ``--rlgate-allow-prompt-change`` (each
with its ini twin) are :func:`pytest_rlgate.data.readers.read_rows`' options, applied to
every path the session gates; a test's row-file paths handed to the ``rlgate`` fixture are
read the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_rlgate.data.readers import RowSource, read_rows, reader_names
from pytest_rlgate.errors import RlgateError
from pytest_rlgate.plugin import add_setting, setting

ALLOW_PROMPT_CHANGE = "rlgate_allow_prompt_change"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "candidate", metavar="PATH",
                help="rlgate_after_rows reads this candidate's rows or eval-harness log (relative to the rootdir) "
                     "instead of training an adapter")
    add_setting(parser, "format", metavar="NAME",
                help=f"format of the gated files, one of {', '.join(reader_names())} (default: detected)")
    add_setting(parser, "category-key", metavar="KEY",
                help="dotted path to the category in a harness record (lm-eval: task, group or doc.FIELD; "
                     "Inspect: a metadata key)")
    add_setting(parser, "unit-key", metavar="KEY", help="dotted path to the unit in a harness record")
    add_setting(parser, "metric", metavar="NAME", help="the harness score to gate (metric, scorer, named score)")
    add_setting(parser, "pass-threshold", type=float, metavar="X", help="a non-binary score passes at >= X")
    add_setting(parser, "filter", metavar="NAME", help="lm-eval: the filter of tasks scored under several")
    help_ = "gate harness items whose prompt changed between the sides (another chat template)"
    parser.getgroup("rlgate").addoption("--rlgate-allow-prompt-change", dest=ALLOW_PROMPT_CHANGE, action="store_true",
                                        default=False, help=help_)
    parser.addini(ALLOW_PROMPT_CHANGE, help=f"{help_} (ini twin of --rlgate-allow-prompt-change)", type="bool",
                  default=False)


def pytest_configure(config: pytest.Config) -> None:
    name = setting(config, "format")
    if name and name not in reader_names():
        raise pytest.UsageError(f"--rlgate-format {name!r}: choose one of {', '.join(reader_names())}")


def read_options(config: pytest.Config) -> dict[str, Any]:
    """:func:`~pytest_rlgate.data.readers.read_rows` keywords from the session's settings."""
    allow = bool(config.getoption(ALLOW_PROMPT_CHANGE, default=False) or config.getini(ALLOW_PROMPT_CHANGE))
    return {"format": setting(config, "format"), "category": setting(config, "category-key"),
            "unit": setting(config, "unit-key"), "metric": setting(config, "metric"),
            "pass_threshold": setting(config, "pass-threshold", float), "filter": setting(config, "filter"),
            "allow_prompt_change": allow}


def rooted(config: pytest.Config, value: str | os.PathLike[str]) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else config.rootpath / path


def read_side(config: pytest.Config, path: str | os.PathLike[str]) -> RowSource:
    """*path* as rows with the session's read options; a problem fails the test in one line."""
    try:
        return read_rows(path, **read_options(config))
    except RlgateError as exc:
        pytest.fail(f"rlgate: {exc}", pytrace=False)


def candidate_rows(config: pytest.Config) -> RowSource | None:
    """``--rlgate-candidate``'s rows, or None when it is unset."""
    value = setting(config, "candidate")
    return None if not value else read_side(config, rooted(config, value))
