"""Inspect AI logs (``.eval`` and ``.json``), read through ``inspect_ai.log``.

``inspect eval`` writes one log per task run; a log whose ``status`` is not ``success``
(an error, a cancelled or still-running eval) is refused with its error: its samples are
not the run the team meant to gate. Samples stream one at a time
(``read_eval_log_samples``). Unit = the sample ``id``, one reply per ``epoch``; category =
a ``sample.metadata`` key (the one users already pass to ``grouped()``; default
``category`` when the first sample has it, else the task name); score = a scorer's
``Score.value`` (default: the first scorer): the letter grades ``C``/``I``/``P``/``N`` read
1 / 0 / 0.5 / 0, numbers as they are, a mapping's entry by ``--metric scorer.key``.
Samples that errored or were not scored are counted and reported in the gate's result,
never dropped silently. The input and target of each sample go to the pairing check.

``inspect_ai`` is an optional extra (``pip install pytest-rlgate[inspect]``), imported only
when an Inspect log is read.
"""

from __future__ import annotations

import importlib
import math
import os
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from ...errors import DataError, UsageError
from ..records import Row
from .hashes import pack
from .source import (
    MISSING,
    ReadOptions,
    RowSource,
    keys_at,
    label_of,
    lookup,
    pass_of,
    short_hash,
    source_header,
)

__all__ = ["LETTERS", "READER"]

#: Inspect's letter grades (``inspect_ai.scorer``: CORRECT, INCORRECT, PARTIAL, NOANSWER)
LETTERS: dict[str, float] = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_SHOWN = 5


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
                    f"({'/'.join(LETTERS)}); pick a mapping entry with --metric {metric}.KEY", path=path)


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


class InspectReader:
    name = "inspect"

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return any(p.suffix == ".eval" for p in path.iterdir())
        if path.suffix == ".eval":
            return head[:2] == b"PK"
        return (path.suffix == ".json" and head.lstrip().startswith(b"{") and b'"eval"' in head
                and b'"status"' in head and b'"version"' in head)

    def open(self, path: Path, options: ReadOptions) -> RowSource:
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
        version = (spec.packages or {}).get("inspect_ai")
        task_version = spec.task_version
        header = source_header("inspect", version=version, tasks={spec.task: task_version}, options=options,
                               path=file, model=spec.model,
                               extra={"task_id": spec.task_id, "run_id": spec.run_id, "scorers": scorers,
                                      "epochs": spec.config.epochs if spec.config else None,
                                      "dataset": spec.dataset.name if spec.dataset else None})

        def produce(source: RowSource) -> Iterator[Row]:
            yield from _rows(source, log, label, spec.task, scorers, options)

        return RowSource(self.name, file, header, produce, options)


def _rows(source: RowSource, log: ModuleType, label: str, task: str, scorers: list[str],
          options: ReadOptions) -> Iterator[Row]:
    category_key = options.category
    metric = options.metric or (scorers[0] if scorers else None)
    scorer, _, entry = (metric or "").partition(".")
    errored: list[str] = []
    unscored: list[str] = []
    first_error = ""
    threshold = options.pass_threshold
    pairs = source.pairs
    for sample in log.read_eval_log_samples(label, all_samples_required=False):
        where = f"{sample.id} epoch {sample.epoch}"
        if sample.error is not None:
            errored.append(where)
            first_error = first_error or " ".join(str(sample.error.message).split())[:200]
            continue
        metadata = sample.metadata or {}
        if category_key is None:
            category_key = "category" if "category" in metadata else ""
        if category_key:
            found = lookup(metadata, category_key)
            if found is MISSING:
                raise DataError(f"sample {where}: no metadata {category_key!r} ({keys_at(metadata, category_key)}); "
                                "pass another --category-key", path=label)
            category = label_of(found, what="category", path=label, line=None, key=category_key)
        else:
            category = task
        if options.unit:
            found = lookup(metadata, options.unit)
            if found is MISSING:
                raise DataError(f"sample {where}: no metadata {options.unit!r} ({keys_at(metadata, options.unit)}); "
                                "pass another --unit-key", path=label)
            unit = label_of(found, what="unit", path=label, line=None, key=options.unit)
        else:
            unit = str(sample.id)
        scores = sample.scores or {}
        if not scorer:
            scorer = next(iter(scores), "")
            metric = scorer
        score_obj = scores.get(scorer)
        if score_obj is None:
            if scores:
                raise DataError(f"sample {where}: no scorer {scorer!r} (it has {', '.join(scores)}); pass "
                                "--metric NAME", path=label)
            unscored.append(where)
            continue
        value = score_obj.value
        if entry:
            if not isinstance(value, Mapping) or entry not in value:
                raise DataError(f"sample {where}: scorer {scorer!r} has no entry {entry!r}", path=label)
            value = value[entry]
        elif isinstance(value, Mapping):
            raise DataError(f"sample {where}: scorer {scorer!r} gives a mapping ({', '.join(map(str, value))}); "
                            f"pick one with --metric {scorer}.KEY", path=label)
        score = _value(value, metric=str(metric), path=label, where=where)
        if score is None:
            unscored.append(where)
            continue
        prompt = _prompt(sample) or f"{task}/{sample.id}"
        pairs[(task, str(sample.id))] = pack(None, short_hash(sample.target), short_hash(prompt))
        yield {
            "prompt": prompt,
            "scenario_id": unit,
            "category": category,
            "rollout_index": max(int(sample.epoch) - 1, 0),
            "reply": sample.output.completion if sample.output is not None else "",
            "score": score,
            "reward": pass_of(score, threshold, higher_is_better=True, metric=str(metric), path=label, line=None),
            "markers": {},
            "case": {"task": task, "id": sample.id, "epoch": sample.epoch,
                     "target": sample.target if isinstance(sample.target, (str, list)) else str(sample.target)},
        }
    if errored:
        source.errors += len(errored)
        shown = ", ".join(errored[:_SHOWN]) + (f" and {len(errored) - _SHOWN} more" if len(errored) > _SHOWN else "")
        source.note(f"{label}: {len(errored)} errored sample(s) not gated ({shown}): {first_error}")
    if unscored:
        shown = ", ".join(unscored[:_SHOWN]) + (f" and {len(unscored) - _SHOWN} more" if len(unscored) > _SHOWN else "")
        source.note(f"{label}: {len(unscored)} sample(s) without a {metric!r} score not gated ({shown})")


READER = InspectReader()
