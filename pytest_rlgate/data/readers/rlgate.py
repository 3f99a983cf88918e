"""rlgate's own row files, one format among the others: read by :mod:`pytest_rlgate.data.rows`.

A row file is recognised by its first line: the provenance header, or a row with the
fields every graded row carries. The gate reads these files itself (their header is
checked and rows are validated on the fast path), so :func:`~pytest_rlgate.data.readers.as_side`
hands it the path back; this reader serves everything else that wants rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ...errors import hide_user_errors
from ..provenance import HEADER_KEY
from ..records import Row
from ..rows import read_header, read_rows
from .source import Opened, Pass, ReaderOption, ReadOptions

__all__ = ["READER"]

#: a bad row file read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

_ROW_KEYS = (b'"rollout_index"', b'"reward"', b'"prompt"')


class RlgateReader:
    name = "rlgate"
    summary = "rlgate's own graded row files (`.jsonl`, `.jsonl.gz`)"
    options: tuple[ReaderOption, ...] = ()

    def sniff(self, path: Path, head: bytes) -> bool:
        if not head:
            return False
        first = head.lstrip().split(b"\n", 1)[0]
        try:
            obj = json.loads(first)
        except ValueError:  # a first line longer than the sniffed head: look for the row's fields
            return first.startswith(b"{") and (HEADER_KEY.encode() in first or all(k in first for k in _ROW_KEYS))
        return isinstance(obj, dict) and (HEADER_KEY in obj or all(k.strip(b'"').decode() in obj for k in _ROW_KEYS))

    def open(self, path: Path, options: ReadOptions) -> Opened:
        def rows(_pass: Pass) -> Iterator[Row]:
            yield from read_rows(path)

        return Opened(read_header(path) or {}, rows)


READER = RlgateReader()
