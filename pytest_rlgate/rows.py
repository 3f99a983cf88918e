"""Graded rows: one JSON line per sampled reply, the input of every gate.

A row is a plain dict::

    {"prompt": str, "scenario_id": str | None, "category": str, "rollout_index": int,
     "reply": str, "score": float, "reward": 0 | 1, "markers": {name: number},
     "policy": str?, "sample_seed": int?, "eval_run": int | str?}

``final_text`` (the seed SDK's name) is accepted for ``reply``. Files are read as a stream
(one line at a time, validated, never held whole) so a gate over millions of rows runs in
memory that grows with the number of prompts, not rows. Every problem is a
:class:`~pytest_rlgate.errors.DataError` naming ``file:line``, the field and the fix.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .atomic import atomic_open
from .errors import DataError, UsageError

__all__ = ["REQUIRED_FIELDS", "grade_replies", "iter_checked", "iter_rows", "read_rows", "validate_row", "write_rows"]

#: fields every row must carry (``reply`` may be spelled ``final_text``)
REQUIRED_FIELDS: tuple[str, ...] = ("prompt", "category", "rollout_index", "reply", "score", "reward", "markers")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_name(value: Any) -> str:
    return {type(None): "null", bool: "boolean", str: "string", list: "array", dict: "object"}.get(
        type(value), "number" if _is_number(value) else type(value).__name__
    )


def validate_row(obj: Any, *, path: str | None = None, line: int | None = None) -> dict[str, Any]:
    """Check one row and return it normalised (``final_text`` -> ``reply``, ``reward`` int).

    Raises :class:`DataError` at ``path:line`` naming the field that is wrong.
    """

    def fail(message: str) -> DataError:
        return DataError(message, path=path or "<rows>", line=line)

    if type(obj) is dict and _fast_row(obj):
        if type(obj["reward"]) is not int:
            obj = {**obj, "reward": int(obj["reward"])}
        return obj
    if not isinstance(obj, Mapping):
        raise fail(f"expected a JSON object per line, got {_type_name(obj)}")
    row = dict(obj)
    if "reply" not in row and "final_text" in row:
        row["reply"] = row.pop("final_text")
    elif "final_text" in row and row["final_text"] != row["reply"]:
        raise fail("'reply' and 'final_text' disagree; keep one of them")
    missing = [name for name in REQUIRED_FIELDS if name not in row]
    if missing:
        raise fail(f"missing field{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
                   "(a graded row needs prompt, category, rollout_index, reply, score, reward, markers; "
                   "grade replies with pytest_rlgate.grade_replies)")
    for name in ("prompt", "category"):
        if not isinstance(row[name], str) or not row[name]:
            raise fail(f"'{name}' must be a non-empty string, got {_type_name(row[name])} {row[name]!r}")
    if not isinstance(row["reply"], str):
        raise fail(f"'reply' must be a string, got {_type_name(row['reply'])}")
    scenario = row.get("scenario_id")
    if scenario is not None and not (isinstance(scenario, str) and scenario):
        raise fail(f"'scenario_id' must be a non-empty string or null, got {_type_name(scenario)} {scenario!r}")
    index = row["rollout_index"]
    if not (isinstance(index, int) and not isinstance(index, bool)) or index < 0:
        raise fail(f"'rollout_index' must be a non-negative integer, got {_type_name(index)} {index!r}")
    score = row["score"]
    if not _is_number(score):
        raise fail(f"'score' must be a number, got {_type_name(score)} {score!r}")
    if not math.isfinite(score):
        raise fail(f"'score' must be finite, got {score!r}")
    reward = row["reward"]
    if not _is_number(reward) or reward not in (0, 1):
        raise fail(f"'reward' must be 0 or 1 (1 = the reply passes), got {_type_name(reward)} {reward!r}")
    row["reward"] = int(reward)
    markers = row["markers"]
    if not isinstance(markers, Mapping):
        raise fail(f"'markers' must be an object {{name: number}}, got {_type_name(markers)}")
    for name, value in markers.items():
        if not _is_number(value) or not math.isfinite(value):
            raise fail(f"marker {name!r} must be a finite number, got {_type_name(value)} {value!r}")
    if row.get("policy") is not None and not isinstance(row["policy"], str):
        raise fail(f"'policy' must be a string, got {_type_name(row['policy'])}")
    seed = row.get("sample_seed")
    if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool)):
        raise fail(f"'sample_seed' must be an integer, got {_type_name(seed)} {seed!r}")
    run = row.get("eval_run")
    if run is not None and not (isinstance(run, str) or isinstance(run, int) and not isinstance(run, bool)):
        raise fail(f"'eval_run' must be an integer or a string, got {_type_name(run)} {run!r}")
    return row


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (scores and markers must be finite numbers)")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_NUMBERS = (int, float)
_OPTIONAL_TYPES = {"scenario_id": (str,), "policy": (str,), "sample_seed": (int,), "eval_run": (int, str)}


def _fast_row(row: dict[str, Any]) -> bool:
    """True for a plain, valid row (exact built-in types): the common case, checked cheaply.

    Anything else (a bad row, numpy numbers, ``final_text``) takes the slow path, which
    accepts what is valid and names what is not.
    """
    try:
        prompt, category, index, score, reward, markers = (
            row["prompt"], row["category"], row["rollout_index"], row["score"], row["reward"], row["markers"])
        if not (type(prompt) is str and prompt and type(category) is str and category
                and type(row["reply"]) is str and type(index) is int and index >= 0
                and type(score) in _NUMBERS and math.isfinite(score)
                and type(reward) in _NUMBERS and (reward == 0 or reward == 1)
                and type(markers) is dict and "final_text" not in row):
            return False
    except KeyError:
        return False
    for value in markers.values():
        if type(value) not in _NUMBERS or not math.isfinite(value):
            return False
    for name, types in _OPTIONAL_TYPES.items():
        value = row.get(name)
        if value is not None and (type(value) not in types or value == ""):
            return False
    return True


def _rollout_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes a row unique: one rollout of one prompt of one scenario in one eval run.

    Several prompts may share a scenario (paraphrases of one situation), so the scenario
    and rollout index alone are not unique; the prompt text is part of the key. Re-runs of
    the same policy (``eval_run``) legitimately repeat a rollout index.
    """
    return (row.get("scenario_id"), row["prompt"], row.get("eval_run"))


class _DuplicateCheck:
    """Remembers which rollout indices each prompt had, as one int bitmask per prompt."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: dict[int, int] = {}
        self.large: set[tuple[int, int]] = set()

    def add(self, row: Mapping[str, Any], line: int | None) -> bool:
        """Record the row; True when its prompt was new. Raises on a duplicate."""
        key = hash(_rollout_key(row))
        index = row["rollout_index"]
        new = key not in self.seen
        mask = self.seen.get(key, 0)
        if index < 256:
            bit = 1 << index
            duplicate = bool(mask & bit)
            self.seen[key] = mask | bit
        else:
            duplicate = (key, index) in self.large
            self.large.add((key, index))
            self.seen.setdefault(key, 0)
        if duplicate:
            where = f"scenario {row.get('scenario_id')!r}, " if row.get("scenario_id") is not None else ""
            run = f", eval_run {row.get('eval_run')!r}" if row.get("eval_run") is not None else ""
            raise DataError(
                f"duplicate row: {where}prompt {_short(row['prompt'])}, rollout_index {index}{run} "
                "appears twice (each rollout of a prompt is one row; give re-runs distinct eval_run values)",
                path=self.path, line=line,
            )
        return new


def _short(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def iter_rows(source: Any, *, name: str | None = None) -> Iterator[tuple[dict[str, Any], int | None]]:
    """Yield ``(row, line)`` from a JSONL path or an iterable of dicts, validated, streaming.

    ``line`` is the 1-based file line (or the 1-based position for in-memory rows). An
    empty source, bad JSON, a bad field or a duplicate rollout raises :class:`DataError`.
    """
    for row, line, _new in iter_checked(source, name=name):
        yield row, line


def iter_checked(source: Any, *, name: str | None = None) -> Iterator[tuple[dict[str, Any], int | None, bool]]:
    """:func:`iter_rows` plus a flag: True for the first row of its (prompt, eval_run)."""
    if isinstance(source, (str, os.PathLike)):
        yield from _iter_file(Path(source))
        return
    if isinstance(source, Mapping):
        raise UsageError("expected rows (a list of dicts) or a row-file path, got a single dict")
    label = name or "<rows>"
    dupes = _DuplicateCheck(label)
    count = 0
    for count, obj in enumerate(source, 1):
        row = validate_row(obj, path=label, line=count)
        yield row, count, dupes.add(row, count)
    if count == 0:
        raise DataError("no rows (an empty gate proves nothing; grade some replies first)", path=label)


def _iter_file(path: Path) -> Iterator[tuple[dict[str, Any], int | None, bool]]:
    label = str(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise DataError("no such row file (write one with pytest_rlgate.write_rows or rlgate eval)", path=label) from None
    except IsADirectoryError:
        raise DataError("is a directory, expected a JSONL row file", path=label) from None
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror}", path=label) from None
    dupes = _DuplicateCheck(label)
    count = 0
    with handle:
        for lineno, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError("not UTF-8 text (row files are UTF-8 JSON lines)", path=label, line=lineno) from None
            try:
                obj = _DECODER.decode(text)
            except ValueError as exc:
                truncated = not text.endswith("\n")
                what = "truncated line (the file ends mid-row)" if truncated else "not valid JSON"
                raise DataError(f"{what}: {exc}", path=label, line=lineno) from None
            row = validate_row(obj, path=label, line=lineno)
            new = dupes.add(row, lineno)
            count += 1
            yield row, lineno, new
    if count == 0:
        raise DataError("empty row file (no rows; grade some replies first)", path=label)


def read_rows(source: Any) -> Iterator[dict[str, Any]]:
    """Stream validated rows from a JSONL file (or check an iterable of row dicts).

    A generator: errors surface while iterating, at the line they concern. Use
    ``list(read_rows(path))`` to hold a small file in memory.
    """
    for row, _line in iter_rows(source):
        yield row


def write_rows(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    """Validate and write rows as JSONL, atomically (a temp file renamed into place).

    Readers never see half a file; a bad row raises before anything is replaced.
    """
    with atomic_open(path) as out:
        for row, _line in iter_rows(rows, name="<rows to write>"):
            out.write(json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(", ", ": ")))
            out.write("\n")
    return Path(path)


def _default_env() -> Any:
    from .envs import refund

    return refund


def grade_replies(
    items: Sequence[Mapping[str, Any]],
    replies: Sequence[Sequence[str]],
    *,
    env: Any = None,
    **meta: Any,
) -> list[dict[str, Any]]:
    """Grade ``replies[i]`` (the k replies sampled for ``items[i]``) into rows.

    *env* provides ``score(reply, case)``, ``passes(score)`` and optionally
    ``markers(reply, case, prompt=...)`` and ``case_for(prompt)``; the refund environment by
    default. *meta* (``policy=``, ``sample_seed=``, ``eval_run=``...) is stamped on every row.
    """
    env = _default_env() if env is None else env
    for needed in ("score", "passes"):
        if not callable(getattr(env, needed, None)):
            raise UsageError(f"env has no {needed}() (an environment needs score(reply, case) and passes(score))")
    if len(items) != len(replies):
        raise UsageError(f"got {len(items)} items but {len(replies)} reply lists (replies[i] holds item i's k replies)")
    clash = sorted(set(meta) & {*REQUIRED_FIELDS, "scenario_id", "final_text"})
    if clash:
        raise UsageError(f"meta keys {clash} would overwrite graded fields")
    rows: list[dict[str, Any]] = []
    for position, (item, sampled) in enumerate(zip(items, replies)):
        if isinstance(sampled, str):
            raise UsageError(f"replies[{position}] is a string; expected the list of k replies for that item")
        prompt = item.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise DataError(f"item {position} has no 'prompt' string", path="<items>")
        case = item.get("case")
        if case is None and callable(getattr(env, "case_for", None)):
            case = env.case_for(prompt)
        case = case if case is not None else {}
        category = item.get("category") or (case.get("category") if isinstance(case, Mapping) else None)
        if not category:
            raise DataError(f"item {position} has no 'category' (and the env's case names none)", path="<items>")
        for index, reply in enumerate(sampled):
            value = float(env.score(reply, case))
            found = env.markers(reply, case, prompt=prompt) if callable(getattr(env, "markers", None)) else {}
            rows.append({
                "prompt": prompt,
                "scenario_id": item.get("scenario_id"),
                "category": category,
                "rollout_index": index,
                "reply": reply,
                "score": value,
                "reward": int(bool(env.passes(value))),
                "markers": {name: float(v) for name, v in found.items()},
                **meta,
            })
    return rows
