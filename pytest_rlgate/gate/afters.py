"""Which after sides a gate was handed: one adapter's rows, or one row source per training seed.

Kept apart from the recipe gate's statistics so :func:`pytest_rlgate.compare` and the
pytest plugin can tell the two cases apart without loading numpy.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TypeGuard

from ..data.provenance import sampled_with
from ..data.readers import RowSource, as_side
from ..data.rows import RowInput, RowReader
from ..errors import DataError, UsageError

__all__ = ["is_seed_sources", "open_afters", "seed_labels"]


#: the after sides of a recipe: one row source per training seed, by seed (or label), or in order
SeedSources = Mapping[int, RowInput] | Mapping[str, RowInput] | Sequence[RowInput]


def is_seed_sources(after: object) -> TypeGuard[SeedSources]:
    """True when *after* is several row sources (one per training seed), not one.

    A mapping (seed -> rows) always is; so is a list or tuple whose items are row files or
    row lists. A list of row dicts (or :class:`~pytest_rlgate.data.Rows`) is one side.
    """
    if isinstance(after, Mapping):
        return True
    if not isinstance(after, (list, tuple)) or not after:
        return False
    return all(isinstance(item, (str, os.PathLike)) or isinstance(item, Iterable) and not isinstance(item, Mapping)
               for item in after)


def seed_labels(sources: Sequence[RowInput], headers: Sequence[Mapping[str, object] | None] | None = None,
                ) -> list[int | str]:
    """Labels for a list of per-seed row sources, in this order of preference.

    The sampling seeds their headers name (a run's after rows are sampled at its trainer
    seed), when every source has a distinct one; else the run folder names of files that
    share a file name (``runs/a-seed17/holdout_after.jsonl`` -> ``a-seed17``), else the file
    names; else ``#1``, ``#2``, ... *headers* are the sources' headers when the caller has
    read them already (else each source's is read here).
    """
    if headers is None:
        headers = [_header(s) for s in sources]
    seeds: list[int | str] = [seed for h in headers if isinstance(seed := sampled_with(h, "seed"), int)]
    if len(seeds) == len(headers) and len(set(seeds)) == len(seeds):
        return seeds
    paths = [Path(s) for s in sources if isinstance(s, (str, os.PathLike))]
    if len(paths) == len(sources):
        for names in ([p.parent.name for p in paths], [p.name for p in paths], [str(p) for p in paths]):
            if all(names) and len(set(names)) == len(names):
                return list(names)
    return [f"#{i}" for i in range(1, len(sources) + 1)]


def _header(source: RowInput) -> Mapping[str, object] | None:
    with RowReader(source) as reader:
        return reader.header


def open_afters(after: SeedSources, stack: ExitStack) -> tuple[list[int | str], list[RowReader]]:
    """The seed labels and every after side opened (headers read), in the order given.

    An eval harness's output is read by its reader (:func:`~pytest_rlgate.data.readers.as_side`).
    """
    if isinstance(after, Mapping):
        if not after:
            raise DataError("after has no training seeds: pass one row source per seed (seed -> rows)")
        labels: list[int | str] = [*after]
        sources = [as_side(s) for s in after.values()]
        readers = [stack.enter_context(_open(s)) for s in sources]
    else:
        sources = list(after)
        _refuse_repeats(sources)
        sources = [as_side(s) for s in sources]
        readers = [stack.enter_context(_open(s)) for s in sources]
        labels = seed_labels([getattr(s, "label", s) for s in sources], [r.header for r in readers])
    if len(set(labels)) != len(labels):
        raise UsageError(f"seeds must name each after side once, got {labels!r}")
    for reader, seed in zip(readers, labels):
        if not reader.is_file and not isinstance(reader.source, RowSource):
            reader.label = f"<after seed {seed} rows>"
    return labels, readers


def _open(source: RowInput) -> RowReader:
    """One after side opened: a harness's output (a :class:`RowSource`) keeps its path as its label."""
    return RowReader(source, name=source.label if isinstance(source, RowSource) else None)


def _refuse_repeats(sources: Sequence[RowInput]) -> None:
    """One source given twice would count as two training seeds and halve the seed spread."""
    seen: dict[str | int, int] = {}
    for position, source in enumerate(sources, 1):
        key = os.path.realpath(source) if isinstance(source, (str, os.PathLike)) else id(source)
        if key in seen:
            shown = os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"the row list #{position}"
            raise UsageError(f"after side {position} ({shown}) is after side {seen[key]} again: each training seed "
                             "is its own run's rows; pass every seed's file once")
        seen[key] = position
