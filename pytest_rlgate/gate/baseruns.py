"""``--base-run FILE``: the other base runs of BEFORE's policy join its side, as the noise floor.

``rlgate train`` and ``rlgate demo`` sample the base policy's holdout three times, at sample
seeds 17, 18 and 19, and gate with all three on the before side: each scenario's before mean
pools them, and the spread between the runs is the gate's noise floor (a gain smaller than
the base runs differ from each other is not claimed as a move). A gate of
``holdout_before.jsonl`` alone has neither, so it prints other numbers and other verdicts than
the run did. :func:`with_base_runs` puts the runs back: each file must be rlgate rows of the
same environment, holdout and policy as BEFORE, sampled at its own seed (its ``eval_run``),
and the gate then reads the before side exactly as the run did.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..data.provenance import Provenance
from ..data.rows import RowInput, Rows, header_of, read_rows
from ..errors import RlgateError, UsageError

__all__ = ["with_base_runs"]

#: what a base run is, for the messages that refuse one
_WHAT = ("another base run of BEFORE's policy on the same holdout at another sample seed (rlgate train writes "
         "holdout_before_seed18.jsonl and holdout_before_seed19.jsonl beside holdout_before.jsonl)")


def with_base_runs(before: RowInput, base_runs: Sequence[str | os.PathLike[str]]) -> Rows:
    """BEFORE's rows followed by each base run's, with BEFORE's header: one before side.

    :raises UsageError: a base run that is not a file, that was graded by another environment,
        sampled on another holdout or by another policy, or whose eval run is already on the side.
    """
    label = os.fspath(before) if isinstance(before, (str, os.PathLike)) else getattr(before, "label", "BEFORE")
    header = header_of(before)
    rows = Rows(read_rows(before), header=header)
    runs = {row.get("eval_run") for row in rows}
    for base in base_runs:
        path = Path(base)
        if not path.is_file():
            raise UsageError(f"--base-run {os.fspath(base)!r}: no such row file; pass {_WHAT}")
        theirs = header_of(path)
        try:
            Provenance(header, theirs, str(label), os.fspath(base)).check()
        except RlgateError as exc:
            raise UsageError(f"--base-run {os.fspath(base)!r}: {exc.reason}") from None
        policies = {h.get("policy") for h in (header, theirs) if h is not None and h.get("policy") is not None}
        if len(policies) > 1:
            raise UsageError(f"--base-run {os.fspath(base)!r}: sampled from {theirs and theirs.get('policy')!r}, "
                             f"BEFORE from {header and header.get('policy')!r}; pass {_WHAT}")
        added = list(read_rows(path))
        repeated = sorted(str(r) for r in {row.get("eval_run") for row in added} & runs)
        if repeated:
            raise UsageError(f"--base-run {os.fspath(base)!r}: eval run {', '.join(repeated)} is already on the before "
                             f"side (the same file twice, or a run at the same seed); pass {_WHAT}")
        runs |= {row.get("eval_run") for row in added}
        rows.extend(added)
    return rows
