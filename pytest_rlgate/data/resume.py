"""A row file written in pieces: ``<out>.partial`` grows unit by unit, ``<out>`` appears at the end.

Sampling a large holdout takes hours on a big model; a killed job should lose minutes, not
the rows it had. So ``rlgate sample`` appends every finished piece to ``<out>.partial``
(plain JSONL, its header first, each piece flushed to disk) and publishes ``<out>``
atomically only when every row is in. A rerun with the same configuration reads the
partial file back and continues after its last whole unit; a truncated last line (the job
was killed mid-write) is dropped.

The header is the configuration: a partial file whose header differs from the rerun's
(another model, adapter, seed, k, environment or prompt set) is never continued - its rows
would mix two configurations in one file. The rerun says which field differs and how to
start over.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from .._io.atomic import disk_errors
from ..errors import DataError, UsageError
from .records import Header, Row
from .rows import validate_row, write_rows

__all__ = ["PARTIAL_SUFFIX", "PartialRows", "header_differences"]

PARTIAL_SUFFIX = ".partial"


def header_differences(mine: Mapping[str, object], theirs: Mapping[str, object], prefix: str = "") -> list[str]:
    """The dotted names of the fields two headers disagree on."""
    out: list[str] = []
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += header_differences(a, b, f"{prefix}{name}.")
        elif a != b:
            out.append(f"{prefix}{name}")
    return out


def _normal(header: Mapping[str, object]) -> Header:
    """The header as it reads back from JSON (tuples become lists)."""
    normal: Header = json.loads(json.dumps(header, sort_keys=True))
    return normal


class PartialRows:
    """The rows of *out* sampled so far, and the file that keeps them across interruptions."""

    def __init__(self, out: str | os.PathLike[str], header: Mapping[str, object], *, restart: bool = False) -> None:
        self.out = Path(out)
        self.path = self.out.with_name(self.out.name + PARTIAL_SUFFIX)
        self.header = _normal(header)
        self.rows: list[Row] = []
        if restart:
            self.path.unlink(missing_ok=True)
        if self.path.exists():
            self.rows = self._read()
        self._rewrite()

    def _read(self) -> list[Row]:
        label = str(self.path)
        try:
            text = self.path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise DataError("not UTF-8 text; delete it (or pass --restart) to sample from the start",
                            path=label) from None
        lines = text.split("\n")
        if lines and lines[-1]:
            lines = lines[:-1]  # a line without its newline: the job stopped while writing it
        if not lines or not lines[0].strip():
            return []
        try:
            found = json.loads(lines[0])
        except json.JSONDecodeError:
            raise DataError("its first line is no header; delete it (or pass --restart)", path=label, line=1) from None
        if not isinstance(found, dict):
            raise DataError("its first line is no header; delete it (or pass --restart)", path=label, line=1)
        differ = header_differences(self.header, found)
        if differ:
            raise UsageError(
                f"{label} holds rows sampled with another configuration ({', '.join(differ[:6])} differ); "
                "rerun with the same flags to continue it, pass --restart to start over, or choose another --out")
        rows = []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                rows.append(validate_row(json.loads(line), path=label, line=number))
            except json.JSONDecodeError:
                raise DataError("not valid JSON; delete the file (or pass --restart) to sample from the start",
                                path=label, line=number) from None
        return rows

    def _rewrite(self) -> None:
        """Start the partial file over with the header and the rows kept (a torn tail gone)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with disk_errors(self.path, "the partial row file"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with tmp.open("w", encoding="utf-8") as out:
                    out.write(json.dumps(self.header, sort_keys=True) + "\n")
                    out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in self.rows)
                    out.flush()
                    os.fsync(out.fileno())
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            os.replace(tmp, self.path)

    def keep(self, count: int) -> None:
        """Keep only the first *count* rows (the whole units the rerun continues after)."""
        if count < len(self.rows):
            self.rows = self.rows[:count]
            self._rewrite()

    def append(self, rows: Iterable[Row]) -> None:
        """Add a finished piece, on disk before this returns."""
        new = [row.copy() for row in rows]
        with disk_errors(self.path, "the partial row file (the rows sampled so far stay in it; a rerun continues)"), \
                self.path.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in new)
            out.flush()
            os.fsync(out.fileno())
        self.rows.extend(new)

    def publish(self, header: Mapping[str, object] | None = None) -> Path:
        """Write *out* (validated, atomically, gzip for ``.gz``) and remove the partial file."""
        write_rows(self.out, self.rows, header=header or self.header)
        self.path.unlink(missing_ok=True)
        return self.out

