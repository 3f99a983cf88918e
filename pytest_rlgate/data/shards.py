"""Shards of one sampling run that cannot be misjoined: ``rlgate sample --shard I/N`` and ``rlgate merge``.

A holdout too large for one machine is sampled as N jobs (a SLURM array, a Kubernetes indexed
job, Ray tasks), each calling ``rlgate sample --shard I/N``. Shard ``I`` takes the scenarios
whose stable hash (:func:`shard_of`: SHA-256 of the scenario id, else of the prompt) falls in
it, so every reply of a scenario lands in one shard, whatever machine computes it and
whatever else the holdout holds. Its row file's header is the whole run's header (the
prompt-set fingerprint, the sampling, the model's identity) plus a ``shard`` record: its
index, the count, the run's number of prompts and the ``[position, hash]`` of every prompt it
covers.

:func:`merge_shards` is the one place shards become a run: it refuses shards of two runs
(naming the header field that differs and the shard), gaps, overlaps, a prompt in the wrong
shard, rows that are not the prompts the header lists, and incomplete shards, each in one
line with the fix; what it returns is the header and rows one unsharded run writes, in its
order, so the merged file is byte-identical to it. A merge is the place where pieces
sampled by separate jobs are joined; peers that join by position without an identity check
turn two runs on different questions into confident flips.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DataError, UsageError
from ..records import Header, Row
from .resume import header_differences

__all__ = ["SHARD_KEY", "Shard", "item_hash", "merge_shards", "parse_shard", "shard_header", "shard_of",
           "shard_positions"]

#: The header key of a shard's record.
SHARD_KEY = "shard"
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
#: Most shards a run is split into (a SLURM array's usual ceiling).
MAX_SHARDS = 100_000


@dataclass(frozen=True)
class Shard:
    """Shard *index* (0-based, as ``SLURM_ARRAY_TASK_ID`` and ``JOB_COMPLETION_INDEX`` count) of *count*."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"2/8"`` -> ``Shard(2, 8)``; a :class:`UsageError` naming the flag otherwise."""
    found = _SPEC.match(text) if isinstance(text, str) else None
    if found is None:
        raise UsageError(f"--shard {text!r}: write INDEX/COUNT, e.g. --shard 0/4 for the first of four "
                         "(0-based, as SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX count)")
    index, count = int(found.group(1)), int(found.group(2))
    if not 1 <= count <= MAX_SHARDS or not 0 <= index < count:
        raise UsageError(f"--shard {text!r}: INDEX runs from 0 to COUNT - 1 and COUNT from 1 to {MAX_SHARDS:,} "
                         f"(the shards of --shard I/{max(count, 1)} are 0/{max(count, 1)} .. "
                         f"{max(count, 1) - 1}/{max(count, 1)})")
    return Shard(index, count)


def _unit_key(item: Mapping[str, object]) -> str:
    scenario = item.get("scenario_id")
    return f"scenario\0{scenario}" if scenario is not None else f"prompt\0{item.get('prompt')}"


def shard_of(item: Mapping[str, object], count: int) -> int:
    """The shard of *count* that samples *item*: a stable hash of its scenario (else its prompt)."""
    digest = hashlib.sha256(_unit_key(item).encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def item_hash(item: Mapping[str, object]) -> str:
    """A prompt's identity in a shard header: its scenario and text (what its rows carry too)."""
    text = json.dumps([item.get("scenario_id"), item.get("prompt")], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_positions(items: Sequence[Mapping[str, object]], shard: Shard) -> list[int]:
    """The positions of *items* shard *shard* samples, in order."""
    return [i for i, item in enumerate(items) if shard_of(item, shard.count) == shard.index]


def shard_header(header: Mapping[str, object], items: Sequence[Mapping[str, object]], shard: Shard) -> Header:
    """The run's *header* with the shard's record: which of the run's *items* it covers."""
    return {**header, SHARD_KEY: {"index": shard.index, "count": shard.count, "prompts": len(items),
                                  "units": [[i, item_hash(items[i])] for i in shard_positions(items, shard)]}}


def _record(label: str, header: Mapping[str, object] | None) -> tuple[Shard, int, list[tuple[int, str]]]:
    fix = "pass the files `rlgate sample --shard I/N` wrote"
    record = None if header is None else header.get(SHARD_KEY)
    if not isinstance(record, Mapping):
        raise DataError(f"not a shard (its header has no '{SHARD_KEY}' record); {fix}", path=label)
    try:
        shard = Shard(int(record["index"]), int(record["count"]))
        prompts = int(record["prompts"])
        units = [(int(position), str(digest)) for position, digest in record["units"]]
    except (KeyError, TypeError, ValueError):
        raise DataError(f"its '{SHARD_KEY}' record is damaged ({json.dumps(record)[:80]}); sample the shard again",
                        path=label) from None
    return shard, prompts, units


def _seeds(header: Mapping[str, object]) -> list[object]:
    sampler = header.get("sampler")
    seeds = sampler.get("seeds") if isinstance(sampler, Mapping) else None
    if isinstance(seeds, list) and seeds:
        return seeds
    sampling = header.get("sampling")
    return [sampling.get("seed") if isinstance(sampling, Mapping) else None]


def merge_shards(shards: Sequence[tuple[str, Mapping[str, object] | None, Sequence[Row]]]) -> tuple[Header, list[Row]]:
    """The header and rows of the one run the shards ``(label, header, rows)`` are pieces of.

    :raises DataError: one line naming the shard and the fix, for shards of different runs
        (any header field besides the shard record differs), a shard count that differs, a
        missing or repeated shard, a prompt in a shard its hash does not pick, units that
        overlap or leave a gap, or rows that are not the k replies of the units listed.
    """
    if not shards:
        raise UsageError("rlgate merge: pass the shard row files (SHARD...) to merge")
    records = [_record(label, header) for label, header, _rows in shards]
    first_label, first_header, _ = shards[0]
    assert first_header is not None
    run = {key: value for key, value in first_header.items() if key != SHARD_KEY}
    count = records[0][0].count
    seen: dict[int, str] = {}
    for (label, header, _rows), (shard, _prompts, _units) in zip(shards, records):
        assert header is not None
        differ = header_differences(run, {key: value for key, value in header.items() if key != SHARD_KEY})
        if differ:
            raise DataError(f"belongs to another run than {first_label} ({', '.join(differ[:4])} differ); merge only "
                            "the shards of one `rlgate sample ... --shard I/N` command, or resample this shard with "
                            "its flags", path=label)
        if shard.count != count:
            raise DataError(f"is shard {shard} but {first_label} is one of {count}; every shard of a run is "
                            f"--shard I/{count} (resample this one with the run's count)", path=label)
        if shard.index in seen:
            raise DataError(f"is shard {shard} again (so is {seen[shard.index]}); pass each shard once", path=label)
        seen[shard.index] = label
    missing = [i for i in range(count) if i not in seen]
    if missing:
        listed = ", ".join(f"{i}/{count}" for i in missing[:6]) + (" ..." if len(missing) > 6 else "")
        raise DataError(f"the run is missing shard(s) {listed} of {count}: sample them with the run's flags and "
                        f"--shard I/{count}, then merge every shard", path=first_label)
    prompts = records[0][1]
    k = _k(run, first_label)
    seeds = _seeds(run)
    blocks: dict[tuple[int, int], list[Row]] = {}
    owner: dict[int, str] = {}
    for (label, _header, rows), (shard, total, units) in zip(shards, records):
        if total != prompts:
            raise DataError(f"covers a run of {total} prompts but {first_label} one of {prompts}; merge only the "
                            "shards of one run", path=label)
        if len(rows) != len(seeds) * len(units) * k:
            raise DataError(f"holds {len(rows)} rows where its {len(units)} prompts x {len(seeds)} seed(s) x k "
                            f"{k} make {len(seeds) * len(units) * k}: the shard is incomplete; run its command again "
                            "(it continues from <out>.partial)", path=label)
        for position, _digest in units:
            if not 0 <= position < prompts:
                raise DataError(f"lists prompt {position}, outside the run's {prompts}; resample this shard",
                                path=label)
            if position in owner:
                raise DataError(f"and {owner[position]} both hold prompt {position} (the shards overlap); merge "
                                "only the shards of one run", path=label)
            owner[position] = label
        for s, _seed in enumerate(seeds):
            for u, (position, digest) in enumerate(units):
                block = list(rows[(s * len(units) + u) * k:(s * len(units) + u + 1) * k])
                found = item_hash(block[0])
                if found != digest or any(item_hash(row) != digest for row in block):
                    raise DataError(f"rows {(s * len(units) + u) * k + 1}-{(s * len(units) + u + 1) * k} are not "
                                    f"prompt {position} its header lists (the file was edited); resample this shard",
                                    path=label)
                if shard_of(block[0], count) != shard.index:
                    raise DataError(f"holds prompt {position}, which shard {shard_of(block[0], count)}/{count} "
                                    "samples, not this one; resample it with the run's flags", path=label)
                blocks[(s, position)] = block
    gap = [p for p in range(prompts) if p not in owner]
    if gap:
        raise DataError(f"no shard holds prompt(s) {', '.join(map(str, gap[:6]))}: the shards leave a gap (sampled "
                        "from another prompt set?); resample the run's shards with the same flags", path=first_label)
    merged = [row for s in range(len(seeds)) for p in range(prompts) for row in blocks[(s, p)]]
    return run, merged


def _k(header: Mapping[str, object], label: str) -> int:
    sampling = header.get("sampling")
    k = sampling.get("k") if isinstance(sampling, Mapping) else None
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise DataError("its header names no 'sampling.k'; merge the files `rlgate sample --shard I/N` wrote",
                        path=label)
    return k


def shard_summary(header: Mapping[str, Any]) -> str:
    """``shard 2/8: 13 of 100 prompts``, for the line a sharded sample prints."""
    record = header[SHARD_KEY]
    return f"shard {record['index']}/{record['count']}: {len(record['units'])} of {record['prompts']} prompts"
