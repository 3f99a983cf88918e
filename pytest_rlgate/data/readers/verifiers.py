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
weighted sum of ``rewards``) or ``--metric NAME`` (a ``metrics`` entry, or a v1 reward's
score). RL rewards are rarely 0/1: ``--pass-threshold`` says what passes. Rollouts that
errored are counted and reported, not gated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...errors import DataError
from ..records import Row
from .hashes import pack
from .lines import json_lines
from .source import (
    MISSING,
    ReadOptions,
    RowSource,
    keys_at,
    label_of,
    lookup,
    number,
    pass_of,
    short_hash,
    source_header,
)

__all__ = ["READER"]

_FILES = ("results.jsonl", "traces.jsonl")
_SHOWN = 5


def _file(path: Path) -> Path:
    if path.is_dir():
        for name in _FILES:
            if (path / name).is_file():
                return path / name
        raise DataError("holds no results.jsonl or traces.jsonl (a verifiers evaluation folder)", path=path)
    return path


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


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
    rewards = _mapping(trace.get("rewards"))
    if any(r is None for r in rewards.values()):
        return None
    total = 0.0
    for name, entry in rewards.items():
        found = _mapping(entry)
        total += (number(found.get("score", 0.0), metric=f"rewards.{name}.score", path=path, line=line)
                  * number(found.get("weight", 1.0), metric=f"rewards.{name}.weight", path=path, line=line))
    return total


class VerifiersReader:
    name = "verifiers"

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():  # a NeMo Evaluator bundle folder has a results.jsonl too, beside its eval-*.json
            return any((path / name).is_file() for name in _FILES) and not any(path.glob("eval-*.json"))
        if not head.lstrip().startswith(b"{"):
            return False
        v0 = b'"example_id"' in head and b'"reward"' in head
        v1 = b'"task"' in head and b'"rewards"' in head and b'"key"' in head
        return v0 or v1

    def open(self, path: Path, options: ReadOptions) -> RowSource:
        file = _file(path)
        meta_path = file.parent / "metadata.json"
        meta: dict[str, object] = {}
        if meta_path.is_file():
            try:
                loaded = json.loads(meta_path.read_text(encoding="utf-8"))
                meta = loaded if isinstance(loaded, dict) else {}
            except ValueError as exc:
                raise DataError(f"not JSON: {exc}", path=meta_path) from None
        env = str(meta.get("env_id") or meta.get("env") or file.parent.name)
        model = meta.get("model")
        header = source_header("verifiers", version=meta.get("verifiers_version") or meta.get("version"),
                               tasks={env: meta.get("env_version")}, options=options, path=file,
                               model=model if isinstance(model, str) else None,
                               extra={"layout": "v1 traces" if file.name == "traces.jsonl" else "v0 results"})

        def produce(source: RowSource) -> Iterator[Row]:
            yield from _rows(source, file, env, options)

        return RowSource(self.name, file, header, produce, options)


def _rows(source: RowSource, file: Path, env: str, options: ReadOptions) -> Iterator[Row]:
    label = os.fspath(file)
    category_key = options.category
    errors: list[str] = []
    first_error = ""
    counts: dict[tuple[str, str, str], int] = {}
    for line, rec in json_lines(file):
        task = rec.get("task")
        v1 = isinstance(task, dict)
        if isinstance(task, dict):
            unit_id = task.get("key") or task.get("hash")
            data = _mapping(task.get("data"))
            asked = data.get("prompt")
            prompt = _last(asked, "user") or (asked if isinstance(asked, str) else "")
            reply = str(rec.get("root_reply") or "")
            failed = bool(rec.get("errors"))
            listed = rec.get("errors")
            error_text = json.dumps(listed[0] if isinstance(listed, (list, str)) and listed else None, default=str)
        else:
            unit_id = rec.get("example_id")
            prompt = _last(rec.get("prompt"), "user")
            reply = _last(rec.get("completion"), "assistant")
            failed = rec.get("error") not in (None, "", {})
            error_text = str(rec.get("error"))
        if unit_id is None:
            raise DataError("no example_id (v0) or task.key (v1) to pair rollouts by", path=label, line=line)
        if failed:
            errors.append(f"line {line}")
            first_error = first_error or " ".join(error_text.split())[:200]
            continue
        if options.unit:
            found = lookup(rec, options.unit)
            if found is MISSING:
                raise DataError(f"no unit at {options.unit!r} ({keys_at(rec, options.unit)})", path=label, line=line)
            unit = label_of(found, what="unit", path=label, line=line, key=options.unit)
        else:
            unit = str(unit_id)
        if category_key is None:
            category_key = "info.env_id" if lookup(rec, "info.env_id") is not MISSING else ""
        if category_key:
            found = lookup(rec, category_key)
            if found is MISSING:
                raise DataError(f"no category at {category_key!r} ({keys_at(rec, category_key)}); pass another "
                                "--category-key", path=label, line=line)
            category = label_of(found, what="category", path=label, line=line, key=category_key)
        else:
            category = env
        metric = options.metric
        if metric is None:
            value: object = _v1_reward(rec, label, line) if v1 else rec.get("reward")
            metric = "reward"
            if value is None:
                errors.append(f"line {line} (not scored)")
                continue
        else:
            metrics = _mapping(rec.get("metrics"))
            value = metrics.get(metric, MISSING)
            if value is MISSING and v1:
                entry = _mapping(rec.get("rewards")).get(metric)
                value = entry.get("score") if isinstance(entry, Mapping) else MISSING
            if value is MISSING:
                raise DataError(f"no metric {metric!r} (metrics: {', '.join(metrics) or 'none'})",
                                path=label, line=line)
        score = number(value, metric=metric, path=label, line=line)
        reward = pass_of(score, options.pass_threshold, higher_is_better=True, metric=metric, path=label, line=line)
        prompt = prompt or unit
        slot = (category, unit, prompt)
        index = counts.get(slot, 0)
        counts[slot] = index + 1
        answer = task.get("hash") if isinstance(task, dict) else rec.get("answer")
        source.pairs[(env, unit)] = pack(None, short_hash(answer) if answer is not None else None, short_hash(prompt))
        yield {"prompt": prompt, "scenario_id": unit, "category": category, "rollout_index": index, "reply": reply,
               "score": score, "reward": reward, "markers": {}, "case": {"unit": unit_id, "answer": answer}}
    if errors:
        source.errors += len(errors)
        shown = ", ".join(errors[:_SHOWN]) + (f" and {len(errors) - _SHOWN} more" if len(errors) > _SHOWN else "")
        source.note(f"{label}: {len(errors)} errored rollout(s) not gated ({shown}){': ' if first_error else ''}"
                    f"{first_error}")


READER = VerifiersReader()
