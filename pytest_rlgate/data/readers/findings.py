"""Per-sample findings beside an Inspect log: each scanner a guardable marker.

Inspect Scout (``inspect-scout``) scans an eval's transcripts for behaviours (reward
hacking, refusals, tool misuse) and writes one result per scanner and transcript in a scan
folder (``scans/scan_id=.../<scanner>.parquet``, read through ``inspect_scout.scan_results_df``).
A scan result names its transcript by the sample's ``uuid``, so one scan over both logs
serves both sides. Any other tool's findings come as JSON lines keyed by the sample:
``{"id": "q3", "epoch": 1, "scanner": "reward_hacking", "value": true}`` (``epoch``
optional: every epoch of the sample).

Each scanner becomes a marker, ``scout.<scanner>`` (``findings.<scanner>`` from a JSONL
file): 1 where the scanner found nothing, 0 where it flagged the sample, so it reads higher
is better like every guarded marker, and a rising flagged rate in one category fails
``--guard scout.<scanner>`` there, its flips naming the newly flagged samples. A value is
a finding by Scout's own rule: anything but ``False``, ``None``, ``0``, ``""``, ``"none"``,
``{}`` or ``[]``. A sample a scanner failed on (a scan error) is counted and reported, not
gated; a sample of the log that the scan does not cover is refused (scan the whole log),
and so is a JSONL line naming a sample the log does not have.

``inspect_scout`` is imported only when a scan is read (``pip install inspect-scout``).
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import DataError, UsageError, hide_user_errors
from .lines import json_lines

__all__ = ["Findings", "flagged", "load_findings"]

#: a bad findings file read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


def flagged(value: object) -> bool:
    """Whether a scanner's value is a finding, by Scout's rule (``is_positive_value``)."""
    if value is None or value is False:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    if value == 0 or value == "":
        return False
    if isinstance(value, str) and value.lower() == "none":
        return False
    return not (isinstance(value, (dict, list)) and not value)


@dataclass
class Findings:
    """What the scanners found, per sample: ``found[key][scanner]`` is flagged (True/False), or None for a scan error.

    A key is ``("uuid", uuid)`` for a Scout scan, ``("id", id, epoch)`` (epoch None: every
    epoch) for a JSONL file. ``complete``: every sample of the log must have a result (a
    Scout scan); else a sample absent is one nothing was found in.
    """

    source: str
    prefix: str
    scanners: tuple[str, ...]
    found: dict[Hashable, dict[str, bool | None]]
    complete: bool
    errors: dict[Hashable, str] = field(default_factory=dict)  #: key -> the first scan error on it

    def markers(self, uuid: str | None, sample_id: str, epoch: int) -> dict[str, bool | None] | None:
        """The sample's findings by scanner, or None when the findings do not name it."""
        if self.complete:
            return self.found.get(("uuid", uuid))
        exact = self.found.get(("id", sample_id, epoch))
        every = self.found.get(("id", sample_id, None))
        if exact is None and every is None:
            return None
        return {**(every or {}), **(exact or {})}

    def keys_of(self, uuid: str | None, sample_id: str, epoch: int) -> list[Hashable]:
        return [("uuid", uuid)] if self.complete else [("id", sample_id, epoch), ("id", sample_id, None)]


def load_findings(path: Path) -> Findings:
    """A Scout scan folder (or a folder of scans), or a JSONL findings file, as :class:`Findings`."""
    if not path.exists():
        raise DataError("no such findings file or Inspect Scout scan folder (the 'findings' read option)", path=path)
    if path.is_file():
        return _jsonl(path)
    scans = [path] if (path / "_scan.json").is_file() else sorted(
        p for p in path.iterdir() if p.is_dir() and (p / "_scan.json").is_file())
    if not scans:
        raise DataError("holds no Inspect Scout scan (a scan_id=... folder with _scan.json); point the 'findings' "
                        "option at the scan's folder, or at a JSONL file of findings", path=path)
    return _scout(path, scans)


def _scout_results() -> Any:  # inspect_scout.scan_results_df (the library is read untyped)
    try:  # a heavy optional library: imported when a scan is read
        return importlib.import_module("inspect_scout").scan_results_df
    except ImportError:
        raise UsageError("reading Inspect Scout scans needs inspect-scout: pip install inspect-scout") from None


def _scout(path: Path, scans: list[Path]) -> Findings:
    results = _scout_results()
    found: dict[Hashable, dict[str, bool | None]] = {}
    errors: dict[Hashable, str] = {}
    scanners: list[str] = []
    for scan in scans:
        try:
            frame = results(os.fspath(scan))
        except Exception as exc:  # the library's own errors, whatever their class, named in one line
            raise DataError(f"not a readable Inspect Scout scan: {str(exc).splitlines()[0] if str(exc) else exc!r}",
                            path=scan) from None
        for scanner in frame.scanners:
            if scanner not in scanners:
                scanners.append(scanner)
            table = frame.scanners[scanner]
            columns = ("transcript_id", "value", "value_type", "scan_error")
            for uuid, value, kind, error in zip(*(table[c].tolist() if c in table else [None] * len(table)
                                                  for c in columns)):
                key = ("uuid", str(uuid))
                slot = found.setdefault(key, {})
                if isinstance(error, str) and error:
                    slot[scanner] = None
                    errors.setdefault(key, f"{scanner}: {error}")
                elif slot.get(scanner, False) is not None:
                    slot[scanner] = bool(slot.get(scanner)) or flagged(_value(value, kind))
    if not scanners:
        raise DataError("the scan holds no scanner results (did it finish? inspect_scout scan_complete)", path=path)
    return Findings(os.fspath(path), "scout.", tuple(scanners), found, complete=True, errors=errors)


def _value(value: object, kind: object) -> object:
    """A scan result's value as Scout stored it: arrays and objects of a mixed column are JSON text."""
    if isinstance(value, str) and kind in ("array", "object"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    try:
        missing = value is None or bool(value != value)  # pandas' NA and NaN
    except (TypeError, ValueError):
        missing = False
    return None if missing else value


def _jsonl(path: Path) -> Findings:
    label = os.fspath(path)
    found: dict[Hashable, dict[str, bool | None]] = {}
    scanners: list[str] = []
    for line, rec in json_lines(path):
        sample, scanner, epoch = rec.get("id"), rec.get("scanner"), rec.get("epoch")
        if sample is None or isinstance(sample, (dict, list, bool)):
            raise DataError("a finding needs the sample's 'id' (a string or number)", path=label, line=line)
        if not isinstance(scanner, str) or not scanner:
            raise DataError("a finding needs its 'scanner' (a non-empty string)", path=label, line=line)
        if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1):
            raise DataError(f"'epoch' is {epoch!r}, expected a whole number from 1", path=label, line=line)
        if "value" not in rec:
            raise DataError("a finding needs its 'value' (true/false, a count, a label...)", path=label, line=line)
        if scanner not in scanners:
            scanners.append(scanner)
        slot = found.setdefault(("id", str(sample), epoch), {})
        slot[scanner] = bool(slot.get(scanner)) or flagged(rec["value"])
    if not scanners:
        raise DataError("no findings (a JSON line per finding: id, epoch, scanner, value)", path=label)
    return Findings(label, "findings.", tuple(scanners), found, complete=False)


def unmatched(findings: Findings, used: set[Hashable]) -> list[str]:
    """The samples a JSONL findings file names that the log does not have."""
    return [f"{key[1]}" + (f" epoch {key[2]}" if key[2] is not None else "")
            for key in findings.found if key not in used and isinstance(key, tuple) and key[0] == "id"]


def merge(markers: Mapping[str, float], findings: Findings, scanned: Mapping[str, bool | None]) -> dict[str, float]:
    """A row's markers with one per scanner: 1.0 clean, 0.0 flagged."""
    out = dict(markers)
    for scanner in findings.scanners:
        out[findings.prefix + scanner] = 0.0 if scanned.get(scanner) else 1.0
    return out
