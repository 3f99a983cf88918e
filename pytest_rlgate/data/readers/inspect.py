"""Inspect AI logs (``.eval`` and ``.json``), read through ``inspect_ai.log``.

``inspect eval`` writes one log per task run; a log whose ``status`` is not ``success``
(an error, a cancelled or still-running eval) is refused with its error: its samples are
not the run the team meant to gate. Samples stream one at a time
(``read_eval_log_samples``). Unit = the sample ``id``, one reply per ``epoch``; category =
a dotted path into the sample (``metadata.subject``: the metadata key users already pass
to ``grouped()``; a bare key that is no field of the sample, the older spelling, reads in
its metadata; default ``metadata.category`` when the first sample has it, else the task
name); score = a scorer's
``Score.value`` (default: the first scorer): the letter grades ``C``/``I``/``P``/``N`` read
1 / 0 / 0.5 / 0, numbers as they are, a mapping's entry by ``--score-key scorer.key``.
Samples that errored or were not scored are counted and reported in the gate's result,
never dropped silently. The input and target of each sample go to the pairing check.
The ``findings`` option adds a marker per scanner of an Inspect Scout scan (or a JSONL
file of findings) over the log (:mod:`~pytest_rlgate.data.readers.findings`).

``inspect_ai`` is an optional extra (``pip install pytest-rlgate[inspect]``), imported only
when an Inspect log is read.
"""

from __future__ import annotations

import importlib
import math
import os
import zipfile
from collections.abc import Hashable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from ...errors import DataError, UsageError, hide_user_errors
from ...records import Row
from .findings import Findings, load_findings, merge, unmatched
from .source import Opened, Pass, Pick, ReaderOption, ReadOptions, pass_of, short_hash, source_header

__all__ = ["LETTERS", "READER"]

#: a bad log read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

#: Inspect's letter grades (``inspect_ai.scorer``: CORRECT, INCORRECT, PARTIAL, NOANSWER)
LETTERS: dict[str, float] = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
#: the sample's own fields a ``--category-key``/``--unit-key`` path may start at; any other bare key is metadata's
_FIELDS = ("id", "epoch", "uuid", "input", "target", "metadata", "scores")


def _inspect_log() -> ModuleType:
    try:  # a heavy optional library: imported when a log is read
        return importlib.import_module("inspect_ai.log")
    except ImportError:
        raise UsageError("reading Inspect AI logs needs inspect-ai: pip install 'pytest-rlgate[inspect]'") from None


def _log_file(path: Path) -> Path:
    if not path.is_dir():
        return path
    logs = sorted(p for p in path.iterdir() if p.suffix in (".eval", ".json") and p.is_file())
    if len(logs) != 1:
        raise DataError(f"holds {len(logs)} Inspect logs; point at one .eval or .json log" if logs
                        else "holds no Inspect log (.eval or .json)", path=path)
    return logs[0]


def _value(value: object, *, metric: str, path: str, where: str) -> float | None:
    """A score value as a float; None for an unscored (NaN) one."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        if value in LETTERS:
            return LETTERS[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise DataError(f"sample {where}: scorer {metric!r} gave {value!r:.60}, not a number or a letter grade "
                    f"({'/'.join(LETTERS)}); pick a mapping entry with --score-key {metric}.KEY", path=path)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    text = getattr(content, "text", None)
    return text if isinstance(text, str) else ""


def _prompt(sample: Any) -> str:  # an inspect_ai EvalSample (the library is read untyped)
    given = sample.input
    if isinstance(given, str):
        return given
    users = [m for m in given if getattr(m, "role", None) == "user"]
    return _text(users[-1]) if users else ""


def _spell(key: str) -> str:
    """A key as a path into the sample: ``metadata.subject`` as it is, a bare ``subject`` as ``metadata.subject``."""
    return key if key.split(".", 1)[0] in _FIELDS else f"metadata.{key}"


def _record(sample: Any, scores: dict[str, object]) -> dict[str, object]:
    """The fields of a sample a key may name, as plain values."""
    return {"id": sample.id, "epoch": sample.epoch, "uuid": sample.uuid, "input": sample.input,
            "target": sample.target, "metadata": sample.metadata or {}, "scores": scores}


class InspectReader:
    name = "inspect"
    summary = "Inspect AI logs (`.eval`, `.json`, or a folder holding one), with Inspect Scout findings"
    options = (ReaderOption("findings", "Inspect: an Inspect Scout scan folder (or a JSONL file of per-sample "
                                        "findings) over the log; each scanner becomes a marker scout.NAME",
                            flag="--findings", metavar="PATH", shapes=False),)

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return any(p.suffix == ".eval" for p in path.iterdir())
        if path.suffix == ".eval":
            return head[:2] == b"PK"
        return (path.suffix == ".json" and head.lstrip().startswith(b"{") and b'"eval"' in head
                and b'"status"' in head and b'"version"' in head)

    def open(self, path: Path, options: ReadOptions) -> Opened:
        log = _inspect_log()
        file = _log_file(path)
        label = os.fspath(file)
        try:
            head = log.read_eval_log(label, header_only=True)
        except (zipfile.BadZipFile, ValueError, KeyError, OSError) as exc:
            raise DataError(f"not a readable Inspect log: {str(exc).splitlines()[0] if str(exc) else exc!r}",
                            path=file) from None
        if head.status != "success":
            error = head.error.message if head.error is not None else "no error recorded"
            raise DataError(f"Inspect log status is {head.status!r} ({' '.join(str(error).split())[:300]}); only a "
                            "finished eval (status 'success') can be gated: fix the error and run it again",
                            path=file)
        spec = head.eval
        scorers = [s.name for s in (head.results.scores if head.results else [])]
        given = options.text("findings")
        findings = None if given is None else load_findings(Path(given).expanduser())
        extra: dict[str, object] = {"task_id": spec.task_id, "run_id": spec.run_id, "scorers": scorers,
                                    "epochs": spec.config.epochs if spec.config else None,
                                    "dataset": spec.dataset.name if spec.dataset else None}
        if findings is not None:
            extra["findings"] = {"source": findings.source, "markers": [findings.prefix + s for s in findings.scanners]}
        header = source_header("inspect", version=(spec.packages or {}).get("inspect_ai"),
                               tasks={spec.task: spec.task_version}, options=options, path=file, model=spec.model,
                               extra=extra)

        def rows(record: Pass) -> Iterator[Row]:
            return _rows(record, log, label, spec.task, scorers, options, findings)

        return Opened(header, rows, file)


def _rows(record: Pass, log: ModuleType, label: str, task: str, scorers: list[str], options: ReadOptions,
          findings: Findings | None) -> Iterator[Row]:
    category = Pick("category", options.category, probe="metadata.category", spell=_spell)
    unit = Pick("unit", options.unit, spell=_spell)
    metric = options.score or (scorers[0] if scorers else None)
    scorer, _, entry = (metric or "").partition(".")
    used: set[Hashable] = set()
    for sample in log.read_eval_log_samples(label, all_samples_required=False):
        where = f"{sample.id} epoch {sample.epoch}"
        if sample.error is not None:
            record.tally("errored sample(s) not gated", where, str(sample.error.message))
            continue
        scores: dict[str, object] = {name: score.value for name, score in (sample.scores or {}).items()}
        fields = _record(sample, scores)
        if not scorer:
            scorer = next(iter(scores), "")
            metric = scorer
        score = _score(scores, scorer, entry, str(metric), label, where)
        if score is None:
            record.tally(f"sample(s) without a {metric!r} score not gated", where, error=False)
            continue
        markers: dict[str, float] = {}
        if findings is not None:
            scanned = _scanned(findings, sample, where, label, used)
            if scanned is None:
                record.tally("sample(s) a scanner failed on not gated", where,
                             next((findings.errors[k] for k in findings.keys_of(sample.uuid, str(sample.id),
                                                                                sample.epoch) if k in findings.errors),
                                  ""))
                continue
            markers = merge(markers, findings, scanned)
        prompt = _prompt(sample) or f"{task}/{sample.id}"
        record.pair((task, str(sample.id)), None, short_hash(sample.target), short_hash(prompt))
        yield {
            "prompt": prompt,
            "scenario_id": unit(fields, str(sample.id), path=label, where=f"sample {where}"),
            "category": category(fields, task, path=label, where=f"sample {where}"),
            "rollout_index": max(int(sample.epoch) - 1, 0),
            "reply": sample.output.completion if sample.output is not None else "",
            "score": score,
            "reward": pass_of(score, options.pass_threshold, higher_is_better=True, metric=str(metric), path=label,
                              line=None),
            "markers": markers,
            "case": {"task": task, "id": sample.id, "epoch": sample.epoch, "uuid": sample.uuid,
                     "target": sample.target if isinstance(sample.target, (str, list)) else str(sample.target)},
        }
    if findings is not None and not findings.complete:
        stray = unmatched(findings, used)
        if stray:
            raise DataError(f"{findings.source} names {len(stray)} sample(s) this log does not have "
                            f"({', '.join(stray[:5])}): findings of another log?", path=label)


def _score(scores: Mapping[str, object], scorer: str, entry: str, metric: str, label: str,
           where: str) -> float | None:
    """The sample's score from *scorer* (its *entry* for a mapping); None when it was not scored."""
    if scorer not in scores:
        if scores:
            raise DataError(f"sample {where}: no scorer {scorer!r} (it has {', '.join(scores)}); pass "
                            "--score-key NAME", path=label)
        return None
    value = scores[scorer]
    if entry:
        if not isinstance(value, Mapping) or entry not in value:
            raise DataError(f"sample {where}: scorer {scorer!r} has no entry {entry!r}", path=label)
        value = value[entry]
    elif isinstance(value, Mapping):
        raise DataError(f"sample {where}: scorer {scorer!r} gives a mapping ({', '.join(map(str, value))}); "
                        f"pick one with --score-key {scorer}.KEY", path=label)
    return _value(value, metric=metric, path=label, where=where)


def _scanned(findings: Findings, sample: Any, where: str, label: str,
             used: set[Hashable]) -> dict[str, bool | None] | None:
    """The sample's findings by scanner (None: a scanner failed on it); refused when a scan misses it."""
    keys = findings.keys_of(sample.uuid, str(sample.id), sample.epoch)
    used.update(keys)
    found = findings.markers(sample.uuid, str(sample.id), sample.epoch)
    if found is None:
        if findings.complete:
            raise DataError(f"sample {where}: {findings.source} has no scan result for it (the scan covers "
                            f"{len(findings.found)} other sample(s)): scan this log, all of it", path=label)
        found = {}
    missing = [s for s in findings.scanners if findings.complete and s not in found]
    if missing:
        raise DataError(f"sample {where}: scanner {missing[0]!r} of {findings.source} has no result for it: "
                        "scan this log, all of it", path=label)
    if any(found.get(s, False) is None for s in findings.scanners):
        return None
    return found


READER = InspectReader()
