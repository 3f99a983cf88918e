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
one or more ``evaluation_result_id`` values joined by commas. A sample is counted once: the
lm-eval converter writes a task scored under several filters as one evaluation per filter
(``rg_refund`` and ``rg_refund/first-line``, the same samples), so a sample met under a
second evaluation is refused with the fix, ``--filter NAME`` (the filter its records name
in ``metadata.filter``, as the lm-eval reader asks) or ``--score-key ID``; a chosen filter's
rows keep the task's name, as the lm-eval reader's do. Records with an ``error`` are
counted and reported, not gated.

:func:`eee_record` writes a gate's result the other way: an aggregate record whose first
result is the gate's decision (with its rule and failures) and whose other results are the
gate's comparisons, each delta with its interval in ``score_details.uncertainty``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, NoReturn, Protocol

from ..._version import __version__
from ...errors import DataError, hide_user_errors
from ...records import Row
from .lines import json_lines, json_object
from .source import (
    FILTER,
    Opened,
    Pass,
    Pick,
    ReaderOption,
    ReadOptions,
    as_dict,
    number,
    pass_of,
    short_hash,
    source_header,
)

__all__ = ["DECISION_ID", "READER", "SCHEMA_VERSION", "eee_record"]

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
    options: tuple[ReaderOption, ...] = (FILTER,)

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
        datasets: dict[str, str] = {}  #: evaluation name -> the dataset its aggregate says it scored
        for aggregate, rec in zip(aggregates, firsts):
            listed = aggregate.get("evaluation_results")
            results = [as_dict(r) for r in listed] if isinstance(listed, list) else []
            for result in results or [rec]:
                tasks.setdefault(str(result.get("evaluation_name")), None)
                dataset = as_dict(result.get("source_data")).get("dataset_name")
                if isinstance(dataset, str) and dataset:
                    datasets[str(result.get("evaluation_name"))] = dataset
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
            counted = _Counted(datasets)
            for samples, _aggregate in pairs:
                kept += yield from _rows(record, samples, options, wanted, lower, category, unit, counted)
            if not kept:
                chosen = " and ".join(f"--{name} {value}" for name, value in (("score-key", options.score),
                                                                             ("filter", options.text("filter")))
                                      if value is not None)
                raise DataError(f"no records of {chosen} here (read a samples file's evaluation_result_id values, "
                                "or the filter its records name in metadata.filter)", path=path)

        return Opened(header, rows)


class _Variant(NamedTuple):
    """Which evaluation (and lm-eval filter) a sample was first counted under."""

    evaluation: str
    result: str
    filter: str | None


def _filter_of(rec: Mapping[str, object]) -> str | None:
    """The lm-eval filter a record converted from lm-eval names (``metadata.filter``), or None."""
    name = as_dict(rec.get("metadata")).get("filter")
    return name if isinstance(name, str) and name else None


def _task_of(evaluation: str, filter_name: str | None) -> str:
    """The evaluation without the filter the lm-eval converter appends to it (``rg_refund/first-line``)."""
    suffix = f"/{filter_name}"
    return evaluation[: -len(suffix)] if filter_name and evaluation.endswith(suffix) else evaluation


class _Counted:
    """The samples a pass has counted, so none is counted under two evaluations.

    A sample is its dataset (the aggregate's ``source_data.dataset_name``, else the
    evaluation less the filter the lm-eval converter appends), its id and its hash (else its
    prompt): a filter variant of a task is the same sample scored again, while two benchmarks
    that happen to share an item are two datasets. Memory grows with the samples, as the
    gate's own units do.
    """

    def __init__(self, datasets: Mapping[str, str]) -> None:
        self.datasets = datasets
        self.seen: dict[tuple[str, str, str], _Variant] = {}

    def once(self, rec: Mapping[str, object], variant: _Variant, sample: object, prompt: object, label: str,
             line: int) -> None:
        """Refuse *rec* when its sample was counted under another evaluation (``overall`` would count it twice)."""
        digest = rec.get("sample_hash")
        same = digest if isinstance(digest, str) and digest else prompt if isinstance(prompt, str) and prompt \
            else None
        if same is None:
            return  # nothing tells this sample from another evaluation's of the same id
        dataset = self.datasets.get(variant.evaluation) or _task_of(variant.evaluation, variant.filter)
        first = self.seen.setdefault((dataset, str(sample), same), variant)
        if first.evaluation != variant.evaluation:
            _refuse(first, variant, sample, label, line)


def _refuse(first: _Variant, variant: _Variant, sample: object, label: str, line: int) -> NoReturn:
    """One sample under two evaluations: the fix is the option that picks one, a filter where they differ by one."""
    where = f"sample {sample} is scored under both {first.evaluation!r} and {variant.evaluation!r}"
    if first.filter is not None and variant.filter is not None and first.filter != variant.filter:
        raise DataError(f"{where} (lm-eval filters {first.filter}, {variant.filter}); a sample counts once: "
                        "choose one with --filter NAME", path=label, line=line)
    raise DataError(f"{where} (results {first.result}, {variant.result}); a sample counts once: choose one with "
                    "--score-key ID", path=label, line=line)


def _rows(record: Pass, file: Path, options: ReadOptions, wanted: set[str] | None, lower: set[str],
          category: Pick, unit: Pick, counted: _Counted) -> Generator[Row, None, int]:
    """One samples file's rows, streamed; returns how many records the metric (and filter) kept.

    *counted* holds every sample counted so far in this pass, so that no sample is counted
    under two evaluations (an lm-eval filter variant of the same task).
    """
    label = os.fspath(file)
    counts: dict[tuple[str, str], int] = {}
    results: dict[str, str] = {}  #: evaluation name -> the one result its records count toward
    only = options.text("filter")
    kept = 0
    for line, rec in json_lines(file):
        evaluation, sample = rec.get("evaluation_name"), rec.get("sample_id")
        if not isinstance(evaluation, str) or not evaluation or sample is None:
            raise DataError("no evaluation_name and sample_id (not an Every Eval Ever instance record?)", path=label,
                            line=line)
        result = str(rec.get("evaluation_result_id") or evaluation)
        if wanted is not None and result not in wanted and evaluation not in wanted:
            continue
        filter_name = _filter_of(rec)
        if only is not None:
            if filter_name is None:
                raise DataError(f"--filter {only}: this record names no lm-eval filter (metadata.filter), which "
                                "only files converted from lm-eval carry; choose its results with --score-key ID",
                                path=label, line=line)
            if filter_name != only:
                continue
        chosen = results.setdefault(evaluation, result)
        if chosen != result:
            raise DataError(f"evaluation {evaluation!r} has records of several results ({chosen}, {result}); "
                            "choose with --score-key ID (comma-separated for several evaluations)", path=label,
                            line=line)
        kept += 1
        given = as_dict(rec.get("input"))
        counted.once(rec, _Variant(evaluation, result, filter_name), sample, given.get("raw"), label, line)
        task = _task_of(evaluation, filter_name)
        where = f"{task} sample {sample}"
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
        prompt = given.get("raw")
        prompt = prompt if isinstance(prompt, str) and prompt else f"{task}/{sample}"
        name = unit(rec, f"{task}/{sample}", path=label, line=line)
        index = counts.get((name, prompt), 0)
        counts[(name, prompt)] = index + 1
        formatted = given.get("formatted")
        record.pair((task, str(sample)), _text(rec.get("sample_hash")), short_hash(given.get("reference") or []),
                    short_hash(formatted) if isinstance(formatted, str) else None)
        yield {"prompt": prompt, "scenario_id": name, "category": category(rec, task, path=label, line=line),
               "rollout_index": index, "reply": _reply(rec), "score": score, "reward": reward, "markers": {},
               "case": {"evaluation_name": evaluation, "evaluation_result_id": result, "sample_id": sample,
                        "interaction_type": rec.get("interaction_type"), "reference": given.get("reference")}}
    return kept


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


READER = EveryEvalEverReader()


class Failed(Protocol):
    """What :func:`eee_record` reads of a comparison's failure (a :class:`~pytest_rlgate.gate.verdicts.Failure`)."""

    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...


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
    @property
    def level(self) -> float | None: ...
    @property
    def failure(self) -> Failed | None: ...
    @property
    def tier(self) -> str | None: ...
    @property
    def decided_by(self) -> str | None: ...


class Family(Protocol):
    """What :func:`eee_record` reads of the family a gate held together
    (a :class:`~pytest_rlgate.gate.family.FamilyTest`)."""

    @property
    def law(self) -> str: ...
    @property
    def draws(self) -> int: ...
    def describe(self) -> str: ...


class Gated(Protocol):
    """What :func:`eee_record` reads of a gate's result (a :class:`~pytest_rlgate.gate.result.GateResult`)."""

    @property
    def comparisons(self) -> Sequence[Compared]: ...
    @property
    def passed(self) -> bool: ...
    @property
    def failures(self) -> tuple[str, ...]: ...
    @property
    def side_failures(self) -> tuple[str, ...]: ...
    @property
    def rule(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def confidence_level(self) -> float: ...
    @property
    def n_resamples(self) -> int: ...
    @property
    def family(self) -> Family | None: ...


#: the result that carries the gate's decision (score 1 passed, 0 failed), first among the evaluation results
DECISION_ID = "rlgate.gate"


def eee_record(result: Gated, *, model: str | None = None, retrieved: float | None = None) -> dict[str, object]:
    """A gate's result as an Every Eval Ever aggregate record (``eval.schema.json``).

    The first ``evaluation_results`` entry (``evaluation_result_id`` :data:`DECISION_ID`) is the
    gate's decision, a binary score (1 passed, 0 failed) whose ``details`` hold the decision,
    the rule that decided and each failure, so a reader of the file alone sees the gate failed
    and why. Each comparison is one more entry: its score is the paired delta (after minus
    before) of the metric in the group, and ``score_details.uncertainty`` holds the gate's
    interval (``confidence_interval`` with its own two-sided level, which the gate's family
    set, and how it was made; the units as ``num_samples``; the draws behind the level as
    ``num_bootstrap_samples``: the sign flips that set the family's level under the default
    paired t, the resamples of a bootstrap method, 0 when nothing was drawn); ``details``
    keeps both sides' means, the verdict as every face prints it (upper case when that
    comparison failed the gate) and its failure, tier and the policy line that decided it.
    What the schema's string-only ``details`` cannot type travels in an ``rlgate`` block on
    the entry (the schema leaves an entry open to more keys; its top level is closed).
    *model* is the candidate's id (``org/name``). The record validates against the schema of
    :data:`SCHEMA_VERSION`.
    """
    stamp = f"{time.time() if retrieved is None else retrieved:.0f}"
    drawn = int(result.n_resamples)
    method = _method(result)
    entries = [_decision(result)]
    for c in result.comparisons:
        uncertainty: dict[str, object] = {"num_samples": int(c.n_units), "num_bootstrap_samples": drawn}
        if c.low is not None and c.high is not None:
            uncertainty["confidence_interval"] = {
                "lower": c.low, "upper": c.high,
                "confidence_level": result.confidence_level if c.level is None else round(1.0 - 2.0 * c.level, 6),
                "method": method}
        details = {"before": f"{c.before:.6g}", "after": f"{c.after:.6g}",
                   "verdict": c.verdict.upper() if c.failure is not None else c.verdict,
                   "passed": "false" if c.failure is not None else "true"}
        if c.failure is not None:
            details.update(failure=c.failure.text, failure_kind=c.failure.kind)
        details.update({key: value for key, value in (("tier", c.tier), ("decided_by", c.decided_by)) if value})
        entries.append({
            "evaluation_result_id": f"rlgate.delta.{c.metric}.{c.group}",
            "evaluation_name": f"{c.metric} {c.group}",
            "source_data": {"dataset_name": c.group, "source_type": "other"},
            "metric_config": {"evaluation_description": f"paired delta of {c.metric} in {c.group}, after minus before",
                              "metric_id": f"rlgate.delta.{c.metric}", "metric_name": f"delta {c.metric}",
                              "lower_is_better": False, "score_type": "continuous", "min_score": -1.0,
                              "max_score": 1.0},
            "score_details": {"score": c.delta, "uncertainty": uncertainty, "details": details},
            "rlgate": {"verdict": c.verdict, "passed": c.failure is None,
                       "failure": None if c.failure is None else {"kind": c.failure.kind, "text": c.failure.text},
                       "tier": c.tier, "decided_by": c.decided_by},
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


def _decision(result: Gated) -> dict[str, object]:
    """The gate's decision as an evaluation result of its own: 1 passed, 0 failed, the rule and the failures."""
    failures = list(result.failures)
    details = {"decision": "passed" if result.passed else "failed", "rule": result.rule,
               "failures": str(len(failures))}
    details.update({f"failure_{i}": text for i, text in enumerate(failures, start=1)})
    return {
        "evaluation_result_id": DECISION_ID,
        "evaluation_name": "rlgate gate",
        "source_data": {"dataset_name": "rlgate gate", "source_type": "other"},
        "metric_config": {"evaluation_description": "the gate's decision under its rule: 1 passed, 0 failed",
                          "metric_id": f"{DECISION_ID}.passed", "metric_name": "gate passed",
                          "lower_is_better": False, "score_type": "binary"},
        "score_details": {"score": 1.0 if result.passed else 0.0, "details": details},
        "rlgate": {"passed": bool(result.passed), "rule": result.rule, "failures": failures,
                   "side_failures": list(result.side_failures)},
    }


def _method(result: Gated) -> str:
    """How the intervals were made, and what the draws counted as ``num_bootstrap_samples`` were."""
    family = result.family
    if result.method != "t":
        how = f"paired {result.method} bootstrap of per-unit deltas ({result.n_resamples} resamples)"
    else:
        how = "paired t interval of per-unit deltas"
    if family is None:
        return how + ", each comparison on its own" + ("" if result.method != "t" else " (nothing drawn)")
    return f"{how}; {family.describe()}"
