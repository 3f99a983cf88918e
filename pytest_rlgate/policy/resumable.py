"""Sample a holdout into a row file that survives interruptions, on one process or many.

The work is a list of units - (sample seed, prompt) - done in order, a piece at a time.
Each piece goes through :func:`~pytest_rlgate.policy.sampling.sample_rows`, the sampler the
fixtures and ``rlgate eval`` use (sharded across the ranks of a torchrun / accelerate job),
and the main process appends it to ``<out>.partial`` (:mod:`pytest_rlgate.data.resume`). A
rerun keeps the whole units already there and samples the rest; since a reply depends
only on its seed, rollout and chat, the finished file is the one an uninterrupted run
writes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._io import ranks
from .._io.progress import bar
from ..data.resume import PartialRows
from ..environment.contract import Env
from ..errors import DataError
from ..records import PromptItem
from .generate import SampleOptions
from .kinds import Policy
from .sampling import DEFAULT_BATCH_SIZE, sample_rows

if TYPE_CHECKING:
    from .handles import Tokenizer

__all__ = ["piece_size", "sample_to_file"]


def piece_size(batch_size: int = DEFAULT_BATCH_SIZE) -> int:
    """Prompts per piece: two full batches on every rank, so sharding pays and a kill loses little."""
    return 2 * batch_size * ranks.group_size()


def _check_kept(rows: Sequence[Mapping[str, object]], work: Sequence[tuple[int, PromptItem]], k: int,
                path: Path) -> int:
    units = min(len(rows) // k, len(work))
    for unit in range(units):
        seed, item = work[unit]
        for row in rows[unit * k:(unit + 1) * k]:
            if row.get("prompt") != item["prompt"] or row.get("sample_seed") != seed:
                raise DataError(f"row {unit * k + 1} is not the unit this configuration samples there (the file "
                                "was edited); pass --restart to sample from the start", path=path)
    return units


def sample_to_file(
    model: Policy,
    tokenizer: Tokenizer | None,
    items: Sequence[PromptItem],
    out: str | os.PathLike[str],
    *,
    header: Mapping[str, object],
    env: Env,
    seeds: Sequence[int],
    sampling: SampleOptions,
    policy: str | None = None,
    restart: bool = False,
    progress: bool | None = None,
    backend: str = "transformers",
) -> tuple[int, int]:
    """Sample ``sampling.k`` replies per item at every seed in *seeds* into *out* (drawn as
    *sampling* says, its own seed aside); ``(units sampled now, kept)``.

    *header* is the file's provenance header and the configuration a partial file must match.
    Every rank calls this; only the main process reads and writes files.
    """
    k = sampling.k
    work = [(seed, item) for seed in seeds for item in items]
    journal: list[PartialRows] = []

    def open_partial() -> int:
        if not ranks.is_main_process():
            return 0
        journal.append(PartialRows(out, header, restart=restart))
        kept = _check_kept(journal[0].rows, work, k, journal[0].path)
        journal[0].keep(kept * k)
        return kept

    kept = ranks.run_everywhere(open_partial)[0]
    size = piece_size(sampling.batch_size)
    shown = bar(len(work), f"sampling {len(items)} prompts x {k} at {len(seeds)} seed(s)",
                progress if ranks.is_main_process() else False, unit="prompt")
    shown.update(kept)
    try:
        start = kept
        while start < len(work):
            seed = work[start][0]
            stop = start
            while stop < len(work) and stop - start < size and work[stop][0] == seed:
                stop += 1
            rows = sample_rows(model, tokenizer, [item for _seed, item in work[start:stop]], policy=policy,
                               eval_run=f"seed-{seed}", env=env, progress=False, backend=backend,
                               sampling=dataclasses.replace(sampling, seed=seed))
            if journal:
                journal[0].append(rows)
            shown.update(stop - start)
            start = stop
    finally:
        shown.close()
    ranks.together(lambda: journal[0].publish() if journal else None)
    return len(work) - kept, kept
