"""Every Eval Ever instance-level files: ``{uuid}_samples.jsonl`` beside the aggregate ``{uuid}.json``.

Every Eval Ever (``evaleval/every_eval_ever``, schema 0.3) is a shared schema for eval
results; its converters write it from Inspect AI, HELM and lm-evaluation-harness logs, so
one reader covers those harnesses and any other that exports to it. An instance record
(``instance_level_eval.schema.json``) carries ``evaluation_id``, ``model_id``,
``evaluation_name``, ``evaluation_result_id`` (the aggregate result it counts toward: one
record per sample and metric), ``sample_id``, ``sample_hash``, ``interaction_type``
(``single_turn``, ``multi_turn``, ``agentic``), ``input {raw, formatted, reference}``,
``output {raw}`` or ``messages``, ``evaluation {score, is_correct}``, ``error`` and
``metadata``. The aggregate (``eval.schema.json``) names the evaluation library and says,
per result, whether lower is better.

The reader takes a samples file, its aggregate, or a folder holding such pairs (one per
benchmark, as the converters lay them out: ``<benchmark>/<developer>/<model>/``). Unit =
(``evaluation_name``, ``sample_id``), one reply per record of the same result; category =
the ``evaluation_name``, or a dotted path into the record (``metadata.subject``); score =
``evaluation.score`` with the record's own ``is_correct`` as the pass (``--pass-threshold``
decides instead: ``>=``, or ``<=`` for a result the aggregate marks lower-is-better). A
sample scored under several results (``acc`` and ``acc_norm``) needs ``--score-key ID``,
one or more ``evaluation_result_id`` values joined by commas. Records with an ``error``
are counted and reported, not gated.

:func:`eee_record` writes a gate's result the other way: an aggregate record whose
results are the gate's comparisons, each delta with its interval in
``score_details.uncertainty``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ..._version import __version__
from ...errors import DataError, hide_user_errors
from ...records import Row
from .lines import json_lines, json_object
from .source import Opened, Pass, Pick, ReaderOption, ReadOptions, as_dict, number, pass_of, short_hash, source_header

__all__ = ["READER", "SCHEMA_VERSION", "eee_record"]

#: a bad instance file read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

#: the Every Eval Ever schema version this reader was written against and :func:`eee_record` writes
SCHEMA_VERSION = "0.3.0"
_SAMPLES = "_samples.jsonl"


def _pairs(path: Path) -> list[tuple[Path, Path | None]]:
    """(samples file, its aggregate or None) of every benchmark under *path*."""
    if path.is_file():
        if path.name.endswith(_SAMPLES):
            aggregate = path.with_name(path.name[: -len(_SAMPLES)] + ".json")
            return [(path, aggregate if aggregate.is_file() else None)]
        samples = path.with_name(path.stem + _SAMPLES)
        if not samples.is_file():
            raise DataError(f"has no {samples.name} beside it: the instance-level records are what a paired gate "
                            "needs (convert with --include_samples)", path=path)
        return [(samples, path)]
    found = sorted(_samples_under(path))
    if not found:
        raise DataError(f"holds no Every Eval Ever instance file (*{_SAMPLES})", path=path)
    return [pair for file in found for pair in _pairs(file)]


def _samples_under(folder: Path, depth: int = 3) -> Iterator[Path]:
    """The ``*_samples.jsonl`` files in *folder* and up to *depth* levels below it (the converters' layout)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_file() and entry.name.endswith(_SAMPLES):
            yield entry
        elif depth and entry.is_dir() and not entry.name.startswith("."):
            yield from _samples_under(entry, depth - 1)


def _load(aggregate: Path | None) -> dict[str, object]:
    if aggregate is None:
        return {}
    data = json_object(aggregate, "an Every Eval Ever aggregate file")
    if not isinstance(data.get("evaluation_results"), list):
        raise DataError("not an Every Eval Ever aggregate file (no evaluation_results list)", path=aggregate)
    return data


def _first(samples: Path) -> dict[str, object]:
    for _line, rec in json_lines(samples):
        return rec
    raise DataError("no instance records (an empty samples file)", path=samples)


def _reply(rec: Mapping[str, object]) -> str:
    """The model's answer: the first output of a single-turn record, else the last assistant message."""
    raw = as_dict(rec.get("output")).get("raw")
    if isinstance(raw, list) and raw and isinstance(raw[0], str):
        return raw[0]
    messages = rec.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


class EveryEvalEverReader:
    name = "eee"
    summary = "Every Eval Ever instance-level files (`{uuid}_samples.jsonl` and aggregate), from its converters"
    options: tuple[ReaderOption, ...] = ()

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return next(_samples_under(path, depth=2), None) is not None
        if path.name.endswith(_SAMPLES):
            return b'"schema_version"' in head and b'"sample_id"' in head
        return (path.suffix == ".json" and b'"schema_version"' in head and b'"evaluation_results"' in head
                and b'"eval_library"' in head)

    def open(self, path: Path, options: ReadOptions) -> Opened:
        pairs = _pairs(path)
        aggregates = [_load(aggregate) for _samples, aggregate in pairs]
        firsts = [_first(samples) for samples, _ in pairs]
        models = sorted({str(rec.get("model_id")) for rec in firsts})
        if len(models) > 1:
            raise DataError(f"holds instance files of {len(models)} models ({', '.join(models)}); point at one "
                            "model's files", path=path)
        libraries = {f"{as_dict(a.get('eval_library')).get('name')} {as_dict(a.get('eval_library')).get('version')}"
                     for a in aggregates if a}
        tasks: dict[str, object] = {}
        lower: set[str] = set()
        for aggregate, rec in zip(aggregates, firsts):
            listed = aggregate.get("evaluation_results")
            results = [as_dict(r) for r in listed] if isinstance(listed, list) else []
            for result in results or [rec]:
                tasks.setdefault(str(result.get("evaluation_name")), None)
            lower |= {str(r.get("evaluation_result_id") or r.get("evaluation_name")) for r in results
                      if as_dict(r.get("metric_config")).get("lower_is_better") is True}
        header = source_header("eee", version=firsts[0].get("schema_version"), tasks=tasks, options=options,
                               path=path, model=models[0],
                               extra={"eval_library": sorted(libraries),
                                      "evaluation_ids": sorted({str(rec.get("evaluation_id")) for rec in firsts})})
        wanted = None if options.score is None else {m.strip() for m in options.score.split(",") if m.strip()}

        def rows(record: Pass) -> Iterator[Row]:
            category, unit = Pick("category", options.category), Pick("unit", options.unit)
            kept = 0
            for samples, _aggregate in pairs:
                kept += yield from _rows(record, samples, options, wanted, lower, category, unit)
            if not kept:
                raise DataError(f"no records of --score-key {options.score} here (read a samples file's "
                                "evaluation_result_id values)", path=path)

        return Opened(header, rows)


def _rows(record: Pass, file: Path, options: ReadOptions, wanted: set[str] | None, lower: set[str],
          category: Pick, unit: Pick) -> Generator[Row, None, int]:
    """One samples file's rows, streamed; returns how many records the metric kept."""
    label = os.fspath(file)
    counts: dict[tuple[str, str], int] = {}
    results: dict[str, str] = {}  #: evaluation name -> the one result its records count toward
    kept = 0
    for line, rec in json_lines(file):
        evaluation, sample = rec.get("evaluation_name"), rec.get("sample_id")
        if not isinstance(evaluation, str) or not evaluation or sample is None:
            raise DataError("no evaluation_name and sample_id (not an Every Eval Ever instance record?)", path=label,
                            line=line)
        result = str(rec.get("evaluation_result_id") or evaluation)
        if wanted is not None and result not in wanted and evaluation not in wanted:
            continue
        chosen = results.setdefault(evaluation, result)
        if chosen != result:
            raise DataError(f"evaluation {evaluation!r} has records of several results ({chosen}, {result}); "
                            "choose with --score-key ID (comma-separated for several evaluations)", path=label,
                            line=line)
        kept += 1
        where = f"{evaluation} sample {sample}"
        if rec.get("error") not in (None, ""):
            record.tally("errored record(s) not gated", where, str(rec.get("error")), label=label)
            continue
        graded = as_dict(rec.get("evaluation"))
        score = number(graded.get("score"), metric=f"{result} (evaluation.score)", path=label, line=line)
        if options.pass_threshold is None:
            correct = graded.get("is_correct")
            if not isinstance(correct, bool):
                raise DataError(f"evaluation.is_correct is {correct!r}, not true or false; say what passes with "
                                "--pass-threshold X", path=label, line=line)
            reward = int(correct)
        else:
            reward = pass_of(score, options.pass_threshold, higher_is_better=result not in lower, metric=result,
                             path=label, line=line)
        given = as_dict(rec.get("input"))
        prompt = given.get("raw")
        prompt = prompt if isinstance(prompt, str) and prompt else f"{evaluation}/{sample}"
        name = unit(rec, f"{evaluation}/{sample}", path=label, line=line)
        index = counts.get((name, prompt), 0)
        counts[(name, prompt)] = index + 1
        formatted = given.get("formatted")
        record.pair((evaluation, str(sample)), _text(rec.get("sample_hash")), short_hash(given.get("reference") or []),
                    short_hash(formatted) if isinstance(formatted, str) else None)
        yield {"prompt": prompt, "scenario_id": name, "category": category(rec, evaluation, path=label, line=line),
               "rollout_index": index, "reply": _reply(rec), "score": score, "reward": reward, "markers": {},
               "case": {"evaluation_name": evaluation, "evaluation_result_id": result, "sample_id": sample,
                        "interaction_type": rec.get("interaction_type"), "reference": given.get("reference")}}
    return kept


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


READER = EveryEvalEverReader()


class Compared(Protocol):
    """What :func:`eee_record` reads of one comparison (a :class:`~pytest_rlgate.gate.result.Comparison`)."""

    @property
    def metric(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def n_units(self) -> int: ...
    @property
    def before(self) -> float: ...
    @property
    def after(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...
    @property
    def verdict(self) -> str: ...


class Gated(Protocol):
    """What :func:`eee_record` reads of a gate's result (a :class:`~pytest_rlgate.gate.result.GateResult`)."""

    @property
    def comparisons(self) -> Sequence[Compared]: ...
    @property
    def method(self) -> str: ...
    @property
    def confidence_level(self) -> float: ...
    @property
    def n_resamples(self) -> int: ...


def eee_record(result: Gated, *, model: str | None = None, retrieved: float | None = None) -> dict[str, object]:
    """A gate's result as an Every Eval Ever aggregate record (``eval.schema.json``).

    Each comparison is one ``evaluation_results`` entry: its score is the paired delta
    (after minus before) of the metric in the group, and ``score_details.uncertainty``
    holds the gate's interval (``confidence_interval`` with its own two-sided level, which the
    gate's family set, and its method, the units as ``num_samples``, a bootstrap method's
    resamples as ``num_bootstrap_samples``); ``details``
    keeps both sides' means and the verdict. *model* is the candidate's id
    (``org/name``). The record validates against the schema of :data:`SCHEMA_VERSION`.
    """
    stamp = f"{time.time() if retrieved is None else retrieved:.0f}"
    entries: list[dict[str, object]] = []
    for c in result.comparisons:
        uncertainty: dict[str, object] = {"num_samples": int(c.n_units)}
        level = getattr(c, "level", None)  # each side's one-sided level: the interval is 1 - 2 x level
        if c.low is not None and c.high is not None:
            uncertainty["confidence_interval"] = {
                "lower": c.low, "upper": c.high,
                "confidence_level": result.confidence_level if level is None else round(1.0 - 2.0 * level, 6),
                "method": f"paired {result.method} bootstrap of per-unit deltas" if result.method != "t"
                else "paired t interval of per-unit deltas"}
        if result.n_resamples and result.method != "t":  # a t interval draws no bootstrap (its flips set the level)
            uncertainty["num_bootstrap_samples"] = int(result.n_resamples)
        entries.append({
            "evaluation_result_id": f"rlgate.delta.{c.metric}.{c.group}",
            "evaluation_name": f"{c.metric} {c.group}",
            "source_data": {"dataset_name": c.group, "source_type": "other"},
            "metric_config": {"evaluation_description": f"paired delta of {c.metric} in {c.group}, after minus before",
                              "metric_id": f"rlgate.delta.{c.metric}", "metric_name": f"delta {c.metric}",
                              "lower_is_better": False, "score_type": "continuous", "min_score": -1.0,
                              "max_score": 1.0},
            "score_details": {"score": c.delta, "uncertainty": uncertainty,
                              "details": {"before": f"{c.before:.6g}", "after": f"{c.after:.6g}",
                                          "verdict": str(c.verdict)}},
        })
    name = model or "unknown/unknown"
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"rlgate-gate/{name}/{stamp}",
        "retrieved_timestamp": stamp,
        "source_metadata": {"source_name": "pytest-rlgate", "source_type": "evaluation_run",
                            "source_organization_name": "pytest-rlgate", "evaluator_relationship": "other"},
        "eval_library": {"name": "pytest-rlgate", "version": __version__},
        "model_info": {"name": name, "id": name,
                       "additional_details": {"deployment_type": "unknown", "model_availability": "unknown"}},
        "evaluation_results": entries,
    }
