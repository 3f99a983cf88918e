"""Hash-derived choices for seeded prompt writers: the same seed, the same bytes, everywhere.

A gate compares *the same* holdout before and after training, and the reference run lost that
property twice (thread timing, then CPython 3.12 changing float ``sum``). So a writer never
asks ``random``, ``hash()`` or a float sum: every choice comes from SHA-256 of
``(seed, *parts)`` and integer arithmetic, which give the same answer on every Python from
3.10 up, in every process, whatever ``PYTHONHASHSEED`` says. Any environment's
``build_prompts`` may use these helpers; nothing here knows a task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

__all__ = ["dedupe", "draw", "prompt_key", "ranked", "weighted"]

T = TypeVar("T")
M = TypeVar("M", bound=Mapping[str, object])


def draw(seed: int, *parts: object) -> int:
    """A 64-bit integer from SHA-256 of ``(seed, *parts)``: the only source of choice."""
    text = "\x1f".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def weighted(value: int, options: Sequence[tuple[T, int]]) -> T:
    """The option *value* lands on when each ``(option, weight)`` owns ``weight`` slots."""
    point = value % sum(weight for _, weight in options)
    for option, weight in options:
        if point < weight:
            return option
        point -= weight
    raise AssertionError("unreachable")  # pragma: no cover


def ranked(seed: int, keys: Iterable[T], *axis: object) -> list[T]:
    """*keys* in a seeded order along *axis* (ties, which SHA-256 makes absurd, by text)."""
    return sorted(keys, key=lambda key: (draw(seed, *axis, key), str(key)))


def prompt_key(prompt: str) -> str:
    """The prompt with case and runs of whitespace folded: two prompts alike here are one."""
    return " ".join(prompt.lower().split())


def dedupe(items: Iterable[M]) -> list[M]:
    """*items* without later duplicates of a prompt (by :func:`prompt_key`), order kept."""
    seen: set[str] = set()
    kept: list[M] = []
    for item in items:
        key = prompt_key(str(item["prompt"]))
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept
