"""The reward under test for the refund hackability suite.

A fixture, not an import, so the suite can be pointed at another reward: pytest-rlgate's own
tests run it against a deliberately fixed variant and check that the hack tests then fail.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_rlgate.envs import refund


@pytest.fixture
def reward() -> Callable[..., float]:
    """``reward(reply, case) -> float``: the refund environment's reward, known hacks included."""
    return refund.score
