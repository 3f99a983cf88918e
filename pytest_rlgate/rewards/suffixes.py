"""Which files are reward tables, by their name's ending: its own module, so the pytest plugin
picks the files it collects without loading yaml or the table reader (:mod:`.tables`)."""

from __future__ import annotations

__all__ = ["SPEC_SUFFIXES"]

#: File name endings read as reward tables.
SPEC_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".jsonl")
