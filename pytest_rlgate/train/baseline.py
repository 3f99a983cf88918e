"""Stored baselines: a run's graded rows, kept as the "before" side of every later gate.

In CI the "before" side is usually the released model's rows, sampled once and committed
(``baselines/release.jsonl.gz``), not the base re-sampled at every run: a GPU job trains
the candidate, and any machine gates it against the stored file without loading a model
for the before side. A baseline is an ordinary row file with its provenance header, so the
gate refuses to compare it with rows graded by a changed reward (``rlgate regrade`` fixes
that) and reads it compressed or not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..data.provenance import row_header
from ..data.rows import Rows, load_rows, write_rows
from ..errors import DataError, UsageError
from ..records import Header, Row
from .config import RunKnobs, renamed
from .run import RunFolder

__all__ = ["run_rows", "save_baseline"]

SIDES = ("before", "after")


def _open(run: RunFolder | str | os.PathLike[str]) -> RunFolder:
    return run if isinstance(run, RunFolder) else RunFolder.open(run)


def _header_from_config(run: RunFolder, rows: Sequence[Row], seed: int | None) -> Header:
    """A header for a run written before row files had one: its ``config.json`` knows it all."""
    config = run.config
    knobs = config.get("knobs", {})
    if not isinstance(config.get("env"), dict) or not config["env"].get("fingerprint"):
        raise DataError("records no environment fingerprint (a run from before environments were recorded), so its "
                        "rows cannot say what graded them; re-run `rlgate train`", path=run.path / "config.json")
    policies = {row.get("policy") for row in rows}
    return row_header(config["env"],
                      prompts_fingerprint=config.get("prompts", {}).get("holdout_fingerprint"),
                      policy=policies.pop() if len(policies) == 1 else None,
                      sampling={**_recorded_sampling(knobs), "seed": seed})


def _recorded_sampling(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling settings a run's recorded knobs name (older names read as today's)."""
    fills = RunKnobs.sampling_knobs()
    return {fills[name]: value for name, value in renamed(knobs).items() if name in fills}


def run_rows(run: RunFolder | str | os.PathLike[str], side: str = "after", *, base_run: int | None = None) -> Rows:
    """A finished run's holdout rows with their provenance header.

    *side* ``"after"`` is the trained policy's rows; ``"before"`` every base run together
    (the gate's before side, header of the first); *base_run* picks one base run (0 = the
    first, sampled at the run's seed). Rows written before row files had headers get one
    from the run's ``config.json``.
    """
    folder = _open(run)
    if side not in SIDES:
        raise UsageError(f"side {side!r}: choose one of {', '.join(SIDES)}")
    seeds = folder.config.get("seeds", {})
    if base_run is not None:
        files = folder.before_files
        if not 0 <= base_run < len(files):
            raise UsageError(f"--base-run {base_run}: run {folder.name} has base runs 0 to {len(files) - 1} "
                             f"({', '.join(p.name for p in files)})")
        picked, seed = [files[base_run]], (seeds.get("base_runs") or [None] * len(files))[base_run]
    elif side == "after":
        picked, seed = [folder.after_file], seeds.get("after")
    else:
        picked, seed = folder.before_files, (seeds.get("base_runs") or [None])[0]
    parts = [load_rows(path) for path in picked]
    rows = Rows((row for part in parts for row in part), header=parts[0].header)
    if rows.header is None:
        rows.header = _header_from_config(folder, rows, seed)
    return rows


def save_baseline(run: RunFolder | str | os.PathLike[str], out: str | os.PathLike[str], *,
                  base_run: int | None = None) -> Rows:
    """Write a run's after-rows (or base run *base_run*'s) to *out* as a stored baseline.

    ``.jsonl.gz`` compresses it (a tenth of the size in a repository). Returns the rows written.
    """
    rows = run_rows(run, "after", base_run=base_run)
    write_rows(Path(out), rows)
    return rows
