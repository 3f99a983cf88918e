"""verifiers evaluation output: ``results.jsonl`` (``vf-eval``, v0) and ``traces.jsonl`` (v1 ``eval``).

``vf-eval`` / ``prime eval run`` write ``outputs/evals/<env>--<model>/<run>/results.jsonl``
beside ``metadata.json``: one ``RolloutOutput`` per line (``example_id``, ``prompt``,
``completion``, ``answer``, ``info``, ``reward``, ``metrics``, ``error``, ...), several
rollouts of an example sharing its ``example_id``. The v1 ``eval`` writes ``traces.jsonl``:
one ``Trace`` per line (``task {type, data, key, hash}``, ``rewards {name: {score, weight}}``,
``metrics``, ``info``, ``errors``, ``root_reply``).

Unit = ``example_id`` (v0) or ``task.key`` (v1); one reply per rollout; category = a dotted
path into the record (``info.task``; default ``info.env_id`` when the first record has it,
then the environment ``metadata.json`` names, else ``all``); score = ``reward`` (v1: the
weighted sum of ``rewards``) or ``--score-key NAME`` (a ``metrics`` entry, or a v1 reward's
score). RL rewards are rarely 0/1: ``--pass-threshold`` says what passes. Rollouts that
errored are counted and reported, not gated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...errors import DataError, hide_user_errors
from ...records import Row
from .lines import json_lines, json_object
from .source import (
    MISSING,
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

__all__ = ["READER"]

#: a bad results file read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

_FILES = ("results.jsonl", "traces.jsonl")


def _file(path: Path) -> Path:
    if path.is_dir():
        for name in _FILES:
            if (path / name).is_file():
                return path / name
        raise DataError("holds no results.jsonl or traces.jsonl (a verifiers evaluation folder)", path=path)
    return path


def _text(message: object) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, Mapping):
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = (part.get("text", "") for part in content if isinstance(part, Mapping))
            return "".join(text for text in texts if isinstance(text, str))
    return ""


def _last(messages: object, role: str) -> str:
    if isinstance(messages, str):
        return messages
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, Mapping) and message.get("role") == role:
                return _text(message)
    return ""


def _v1_reward(trace: Mapping[str, object], path: str, line: int) -> float | None:
    """A v1 trace's reward: its rewards' scores, weighted (None while one is not scored)."""
    rewards = as_dict(trace.get("rewards"))
    if any(r is None for r in rewards.values()):
        return None
    total = 0.0
    for name, entry in rewards.items():
        found = as_dict(entry)
        total += (number(found.get("score", 0.0), metric=f"rewards.{name}.score", path=path, line=line)
                  * number(found.get("weight", 1.0), metric=f"rewards.{name}.weight", path=path, line=line))
    return total


class VerifiersReader:
    name = "verifiers"
    summary = "verifiers `results.jsonl` (v0, beside `metadata.json`) and v1 `traces.jsonl`"
    options: tuple[ReaderOption, ...] = ()

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():  # a NeMo Evaluator bundle folder has a results.jsonl too, beside its eval-*.json
            return any((path / name).is_file() for name in _FILES) and not any(path.glob("eval-*.json"))
        if not head.lstrip().startswith(b"{"):
            return False
        v0 = b'"example_id"' in head and b'"reward"' in head
        v1 = b'"task"' in head and b'"rewards"' in head and b'"key"' in head
        return v0 or v1

    def open(self, path: Path, options: ReadOptions) -> Opened:
        file = _file(path)
        meta_path = file.parent / "metadata.json"
        meta: dict[str, object] = {}
        if meta_path.is_file():
            meta = json_object(meta_path, "a verifiers metadata.json")
        env = str(meta.get("env_id") or meta.get("env") or file.parent.name)
        model = meta.get("model")
        header = source_header("verifiers", version=meta.get("verifiers_version") or meta.get("version"),
                               tasks={env: meta.get("env_version")}, options=options, path=file,
                               model=model if isinstance(model, str) else None,
                               extra={"layout": "v1 traces" if file.name == "traces.jsonl" else "v0 results"})

        def rows(record: Pass) -> Iterator[Row]:
            return _rows(record, file, env, options)

        return Opened(header, rows, file)


def _rollout(rec: Mapping[str, object]) -> tuple[object, str, str, str | None]:
    """(unit id, prompt, reply, error or None) of a v0 result or a v1 trace."""
    task = rec.get("task")
    if isinstance(task, dict):
        data = as_dict(task.get("data"))
        asked = data.get("prompt")
        listed = rec.get("errors")
        error = json.dumps(listed[0] if isinstance(listed, (list, str)) and listed else None, default=str)
        return (task.get("key") or task.get("hash"), _last(asked, "user") or (asked if isinstance(asked, str) else ""),
                str(rec.get("root_reply") or ""), error if listed else None)
    failed = rec.get("error") not in (None, "", {})
    return (rec.get("example_id"), _last(rec.get("prompt"), "user"), _last(rec.get("completion"), "assistant"),
            str(rec.get("error")) if failed else None)


def _rows(record: Pass, file: Path, env: str, options: ReadOptions) -> Iterator[Row]:
    label = os.fspath(file)
    category = Pick("category", options.category, probe="info.env_id")
    unit_key = Pick("unit", options.unit)
    counts: dict[tuple[str, str, str], int] = {}
    for line, rec in json_lines(file):
        v1 = isinstance(rec.get("task"), dict)
        unit_id, prompt, reply, error = _rollout(rec)
        if unit_id is None:
            raise DataError("no example_id (v0) or task.key (v1) to pair rollouts by", path=label, line=line)
        if error is not None:
            record.tally("errored rollout(s) not gated", f"line {line}", error)
            continue
        unit = unit_key(rec, str(unit_id), path=label, line=line)
        name = category(rec, env, path=label, line=line)
        metric = options.score or "reward"
        value = _value(rec, options.score, v1, label, line)
        if value is None:
            record.tally("errored rollout(s) not gated", f"line {line} (not scored)")
            continue
        score = number(value, metric=metric, path=label, line=line)
        reward = pass_of(score, options.pass_threshold, higher_is_better=True, metric=metric, path=label, line=line)
        prompt = prompt or unit
        index = counts.get((name, unit, prompt), 0)
        counts[(name, unit, prompt)] = index + 1
        task = rec.get("task")
        answer = task.get("hash") if isinstance(task, dict) else rec.get("answer")
        record.pair((env, unit), None, short_hash(answer) if answer is not None else None, short_hash(prompt))
        yield {"prompt": prompt, "scenario_id": unit, "category": name, "rollout_index": index, "reply": reply,
               "score": score, "reward": reward, "markers": {}, "case": {"unit": unit_id, "answer": answer}}


def _value(rec: Mapping[str, object], metric: str | None, v1: bool, label: str, line: int) -> object:
    """The score: ``reward`` (v1: the weighted rewards; None while not scored) or a named metric."""
    if metric is None:
        return _v1_reward(rec, label, line) if v1 else rec.get("reward")
    metrics = as_dict(rec.get("metrics"))
    value = metrics.get(metric, MISSING)
    if value is MISSING and v1:
        entry = as_dict(rec.get("rewards")).get(metric)
        value = entry.get("score") if isinstance(entry, dict) else MISSING
    if value is MISSING:
        raise DataError(f"no metric {metric!r} (metrics: {', '.join(metrics) or 'none'})", path=label, line=line)
    return value


READER = VerifiersReader()
