"""Users' own episode environments, importable by spec from a spawned process (the tests folder is on
``sys.path``, and a spawned process inherits it): one with plain tool functions, one with an
``environment_factory`` class. ``tests/test_spawned.py`` pickles what rlgate hands TRL for them.
"""

from __future__ import annotations

from typing import Any

from pytest_rlgate.environment.episode import Episode

PRICES = {"apple": 3, "pear": 5}


def price(item: str) -> int:
    """Look up the price of an item.

    Args:
        item: the item's name, e.g. apple.
    """
    return PRICES.get(item, 0)


class ShopEnv:
    """Plain tools: the reply must look the price up, then state it."""

    name = "shop"
    categories = ("known", "unknown")
    tools = (price,)
    max_turns = 2

    def score(self, episode: Episode, case: dict[str, Any]) -> float:
        looked = any(call.name == "price" for call in episode.calls())
        return float(looked and str(case["price"]) in episode.turns[-1])


class Counter:
    """One counter per rollout: the factory shape TRL takes."""

    def reset(self, **case: Any) -> str:
        self.count = int(case.get("start", 0))
        return f"The counter starts at {self.count}."

    def tick(self, by: int) -> int:
        """Add to the counter and return it.

        Args:
            by: how much to add.
        """
        self.count += by
        return self.count


class CounterEnv:
    """An environment factory: the episode must bring the counter to the case's target."""

    name = "counter"
    categories = ("small", "large")
    environment_factory = Counter
    max_turns = 3

    def score(self, episode: Episode, case: dict[str, Any]) -> float:
        results = [call.result for call in episode.calls()]
        return float(bool(results) and str(case["target"]) == str(results[-1]))
