"""Option values shared by the pytest plugin and the ``rlgate`` CLI, parsed one way.

argparse turns the ``ArgumentTypeError`` these raise into a one-line usage error, in pytest
and in the CLI alike. Pure Python, so the plugin can import it at load time.
"""

from __future__ import annotations

import argparse

__all__ = ["add_env_argument", "fraction", "share"]


def fraction(text: str) -> float:
    """A holdout fraction, strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), got {text!r}")
    return value


def share(text: str) -> float:
    """A balance share in [0, 1); 0 switches balancing off."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), e.g. 0.25, got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), e.g. 0.25, got {text!r}")
    return value


def add_env_argument(parser: argparse.ArgumentParser, default: str = "refund") -> None:
    """The CLI's ``--env SPEC``, the same on every command that reads prompts, samples or trains."""
    parser.add_argument("--env", metavar="SPEC", default=None,
                        help="environment: a registered name (refund, arith, reasoning_gym[TASK,...]), "
                             f"'module:attr' or 'module' (default: {default})")
