"""pytest options for an eval harness's output as a gate side: how its records become rows.

``--rlgate-baseline`` may be a committed harness log (any format :mod:`pytest_rlgate.data.readers`
reads) and ``--rlgate-candidate PATH`` makes ``rlgate_after_rows`` read the candidate's log
instead of training an adapter, so a suite gates a fine-tune evaluated elsewhere with no
model loaded. The shared read options (``--rlgate-format``, ``--rlgate-category-key``, ...,
each with its ini twin) are generated from :class:`~pytest_rlgate.options.ReadOptions`;
the options a reader declares for itself are ``--rlgate-read NAME=VALUE`` (repeatable; ini
``rlgate_read``, one per line), checked against the readers' declarations when the
session sets one, so pytest starts without loading a reader. They apply to every path the
session gates; a test's row-file paths handed to the ``rlgate`` fixture are read the same
way.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rlgate.errors import RlgateDeprecationWarning, RlgateError
from pytest_rlgate.options import ReadOptions
from pytest_rlgate.plugin import add_setting, path_setting, setting

if TYPE_CHECKING:
    from pytest_rlgate.data.readers import RowSource

_READ = "rlgate_read"
#: reader options that had a flag of their own before readers declared them (old spelling -> option)
_OLD_FLAGS = {"--rlgate-filter": "filter"}


def _dest(name: str) -> str:
    return "rlgate_" + name.replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "candidate", metavar="PATH",
                help="rlgate_after_rows reads this candidate's rows or eval-harness log (relative to where pytest "
                     "was started) instead of training an adapter")
    group = parser.getgroup("rlgate")
    for name, spec in ReadOptions.flags().items():
        help_ = f"harness logs: {spec.metadata['help']}"
        if spec.default is False:  # a switch, and a bool ini twin
            group.addoption(f"--rlgate-{name}", dest=_dest(name), action="store_true", default=False, help=help_)
            parser.addini(_dest(name), help=f"{help_} (ini twin of --rlgate-{name})", type="bool", default=False)
        else:
            old = spec.metadata["old"]
            add_setting(parser, name, metavar=spec.metadata["metavar"], help=help_,
                        type=float if spec.name == "pass_threshold" else str,
                        aliases=(old.replace("_", "-"),) if old else ())
    group.addoption("--rlgate-read", dest=_READ, action="append", default=None, metavar="NAME=VALUE",
                    help="harness logs: a read option a reader declares for itself (e.g. filter=strict-match for "
                         "lm-eval, findings=scans/ for Inspect); repeatable")
    parser.addini(_READ, help="harness logs: reader options NAME=VALUE, one per line (ini twin of --rlgate-read)",
                  type="linelist", default=[])
    for flag, name in _OLD_FLAGS.items():
        group.addoption(flag, dest=_dest(name), default=None, metavar="VALUE", help=f"deprecated: --rlgate-read "
                        f"{name}=VALUE")


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


def _own(config: pytest.Config) -> dict[str, str]:
    """The session's reader options (``--rlgate-read`` over the ini lines), checked against the declarations."""
    given: list[str] = [*config.getini(_READ), *(config.getoption(_READ, default=None) or [])]
    out: dict[str, str] = {}
    for flag, name in _OLD_FLAGS.items():
        value = config.getoption(_dest(name), default=None)
        if value is not None:
            warnings.warn(f"{flag} is now --rlgate-read {name}=VALUE; {flag} will be removed",
                          RlgateDeprecationWarning, stacklevel=2)
            out[name] = str(value)
    for item in given:
        name, sep, value = str(item).partition("=")
        if not sep or not name.strip() or not value:
            raise pytest.UsageError(f"--rlgate-read {item!r}: expected NAME=VALUE (e.g. filter=strict-match)")
        out[name.strip().replace("-", "_")] = value
    if out:
        from pytest_rlgate.data.readers import declared_options

        known = declared_options()
        unknown = sorted(set(out) - set(known))
        if unknown:
            raise pytest.UsageError(f"--rlgate-read {unknown[0]}: no reader declares it (known: "
                                    f"{', '.join(sorted(known))})")
    return out


def read_options(config: pytest.Config) -> dict[str, Any]:
    """:func:`~pytest_rlgate.data.readers.read_rows` keywords from the session's settings (checked)."""
    out: dict[str, Any] = {}
    for name, spec in ReadOptions.flags().items():
        if spec.default is False:
            out[spec.name] = bool(config.getoption(_dest(name), default=False) or config.getini(_dest(name)))
        else:
            out[spec.name] = setting(config, name, float if spec.name == "pass_threshold" else str)
    own = _own(config)
    ReadOptions(**out)
    return {**out, **own}




def read_side(config: pytest.Config, path: str | os.PathLike[str]) -> RowSource:
    """*path* as rows with the session's read options; a problem fails the test in one line."""
    from pytest_rlgate.data.readers import read_rows

    try:
        return read_rows(path, **read_options(config))
    except RlgateError as exc:
        pytest.fail(f"rlgate: {exc}", pytrace=False)


def candidate_rows(config: pytest.Config) -> RowSource | None:
    """``--rlgate-candidate``'s rows, or None when it is unset."""
    path = path_setting(config, "candidate")
    return None if path is None else read_side(config, path)
