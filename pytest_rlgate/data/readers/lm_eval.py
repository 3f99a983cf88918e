"""lm-evaluation-harness ``--log_samples`` output: ``samples_<task>_<date>.jsonl`` per leaf task.

``lm_eval run ... --log_samples --output_path out/`` writes ``out/<model>/results_<date>.json``
and one samples file per leaf task beside it. A samples line is one (document, filter):
``doc_id``, the ``doc``, ``arguments`` (the prompt is the first request's first argument),
``filtered_resps``, the ``filter``, the ``metrics`` it scored and one field per metric, and
the SHA-256 of the document, prompt and target. Repeats stay inside one line (the metric is
already reduced), so a document is one reply.

Unit = (task, ``doc_id``); category = the leaf task (``task``), its group from the results
file's ``group_subtasks`` (``group``) or any field of the line (``doc.subject``); score = a
metric field (default: the line's first metric). A task scored under several filters
(gsm8k's ``strict-match`` and ``flexible-extract``) needs ``--filter``. The results file, when
found, gives the task versions, the lm-eval version, the model and which metrics are
lower-is-better; the hashes go to the pairing check, so another document or target on the
other side is refused and another prompt (a chat-template change) too unless allowed.

A samples line is large and a row needs a handful of its fields, so the reader parses each
line without ruling out deep nesting in the fields it never reads (it checks those it
keeps), builds each row valid as made and decides its key state itself: the gate reads
these rows through the source's checked pass, without checking every row a second time.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import NamedTuple

from ...errors import DataError
from ...options import FILE_NUMBER
from ..records import Row
from ..rows import CHANGED, NEW, SAME, validate_row
from .hashes import HASH_DIGITS, pack
from .lines import check_depth, not_an_object, record_lines
from .source import (
    MISSING,
    ReadOptions,
    RowSource,
    keys_at,
    label_of,
    number,
    pass_of,
    path_getter,
    rows_of,
    source_header,
)

__all__ = ["READER"]

_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>[^_]+)\.jsonl(\.gz)?$")
_RESULTS = re.compile(r"^results_(?P<date>[^_]+)\.json$")


def _samples_in(folder: Path) -> list[Path]:
    found = sorted(p for p in folder.iterdir() if p.is_file() and _SAMPLES.match(p.name))
    if not found:
        found = sorted(p for sub in folder.iterdir() if sub.is_dir() for p in sub.iterdir()
                       if p.is_file() and _SAMPLES.match(p.name))
    return found


def _layout(path: Path) -> tuple[list[tuple[str, Path]], Path | None]:
    """(task, samples file) pairs of one run, and its results file when there is one."""
    if path.is_dir():
        files = _samples_in(path)
        dates = sorted({_SAMPLES.match(p.name).group("date") for p in files})  # type: ignore[union-attr]
        if not files:
            raise DataError("holds no samples_<task>_<date>.jsonl (run lm_eval with --log_samples)", path=path)
        if len(dates) > 1:
            raise DataError(f"holds samples of {len(dates)} runs ({', '.join(dates[:4])}); point at one run's "
                            "results_<date>.json", path=path)
        folders = {p.parent for p in files}
        if len(folders) > 1:
            raise DataError(f"holds runs of {len(folders)} models ({', '.join(sorted(f.name for f in folders))}); "
                            "point at one model's folder", path=path)
        date, folder = dates[0], files[0].parent
    else:
        match = _RESULTS.match(path.name) or _SAMPLES.match(path.name)
        if match is None:
            return [("", path)], None  # a samples file renamed: its task is unknown
        date, folder = match.group("date"), path.parent
        files = [path] if _SAMPLES.match(path.name) else sorted(
            p for p in folder.iterdir() if (m := _SAMPLES.match(p.name)) and m.group("date") == date)
        if not files:
            raise DataError(f"has no samples_<task>_{date}.jsonl beside it (run lm_eval with --log_samples)",
                            path=path)
    results = folder / f"results_{date}.json"
    pairs = [(_SAMPLES.match(p.name).group("task"), p) for p in files]  # type: ignore[union-attr]
    return pairs, results if results.is_file() else None


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _load_results(path: Path | None) -> dict[str, object]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise DataError(f"not an lm-eval results file: {exc}", path=path) from None
    if not isinstance(data, dict):
        raise DataError("not an lm-eval results file (expected a JSON object)", path=path)
    return data


def _filters(results: Mapping[str, object], task: str) -> list[str]:
    """The filters the results file scored *task* under (``"<metric>,<filter>"`` keys)."""
    scores = _mapping(_mapping(results.get("results")).get(task))
    return sorted({key.split(",", 1)[1] for key in scores if "," in key and "_stderr" not in key})


def _groups(results: Mapping[str, object]) -> dict[str, str]:
    """leaf task -> its closest group, from ``group_subtasks``."""
    out: dict[str, str] = {}
    subtasks = _mapping(results.get("group_subtasks"))
    for group, children in subtasks.items():
        for child in children if isinstance(children, list) else ():
            if isinstance(child, str) and child not in subtasks:
                out.setdefault(child, group)
    return out


def _reply(rec: Mapping[str, object]) -> str:
    """The reply: the filtered generation, or for a choice task the continuation it scored highest."""
    resps = rec.get("filtered_resps")
    if type(resps) is list and resps and type(resps[0]) is str:  # a generation task: the common case
        return str(resps[0])
    if isinstance(resps, str):
        return resps
    if isinstance(resps, list) and resps:
        first = resps[0]
        if isinstance(first, str):
            return first
        if all(isinstance(r, (list, tuple)) and len(r) == 2 for r in resps):
            try:
                best = max(range(len(resps)), key=lambda i: float(resps[i][0]))
            except (TypeError, ValueError):
                return ""
            args = _mapping(rec.get("arguments")).get(f"gen_args_{best}", {})
            chosen = args.get("arg_1") if isinstance(args, Mapping) else None
            return chosen if isinstance(chosen, str) else str(best)
        if isinstance(first, list) and first and isinstance(first[0], str):
            return first[0]
    return ""


def _prompt(rec: Mapping[str, object]) -> str | None:
    args = rec.get("arguments")
    if type(args) is dict:
        first = args.get("gen_args_0")
        prompt = first.get("arg_0") if type(first) is dict else None
        if type(prompt) is str and prompt:
            return prompt
    if isinstance(args, Mapping):
        first = args.get("gen_args_0")
        if isinstance(first, Mapping) and isinstance(first.get("arg_0"), str) and first["arg_0"]:
            return str(first["arg_0"])
    return None


class LmEvalReader:
    name = "lm-eval"

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return bool(_samples_in(path))
        if _SAMPLES.match(path.name):
            return True
        if _RESULTS.match(path.name):
            return b'"lm_eval_version"' in head or b'"n-samples"' in head or b'"group_subtasks"' in head
        return head.lstrip().startswith(b"{") and b'"doc_id"' in head and b'"doc_hash"' in head

    def open(self, path: Path, options: ReadOptions) -> RowSource:
        files, results_path = _layout(path)
        results = _load_results(results_path)
        versions = _mapping(results.get("versions"))
        tasks = {task or path.stem: versions.get(task) for task, _ in files}
        model = results.get("model_name") or _mapping(results.get("config")).get("model")
        category = options.category or "task"
        if category == "group" and not results:
            raise DataError("--category-key group needs the run's results_<date>.json beside the samples "
                            "(its group_subtasks says which group a task rolls up to)", path=path)
        filters = {task: _filters(results, task) for task, _ in files}
        for task, names in filters.items():
            if len(names) > 1 and options.filter is None:
                raise DataError(f"task {task!r} was scored under {len(names)} filters ({', '.join(names)}); choose "
                                "one with --filter NAME", path=results_path or path)
            if options.filter is not None and len(names) > 1 and options.filter not in names:
                raise DataError(f"--filter {options.filter!r}: task {task!r} has filters {', '.join(names)}",
                                path=results_path or path)
        header = source_header("lm-eval", version=results.get("lm_eval_version"), tasks=tasks, options=options,
                               path=path, model=model if isinstance(model, str) else None,
                               extra={"task_hashes": results.get("task_hashes") or {},
                                      "results": os.fspath(results_path) if results_path else None})
        groups = _groups(results)
        lower = {task: {m for m, hib in _mapping(spec).items() if hib is False}
                 for task, spec in _mapping(results.get("higher_is_better")).items()}

        plan = []
        for task, file in files:
            name = task or file.stem
            known = filters.get(task) or []
            use = options.filter if options.filter in known or not known else known[0]
            plan.append(_File(name, file, use, groups.get(name), lower.get(task, set())))

        def checked(source: RowSource) -> Generator[tuple[Row, int, int], None, int]:
            return _rows(source, plan, options)

        return RowSource(self.name, path, header, rows_of(checked), options, checked=checked)


class _File(NamedTuple):
    """One samples file of a run, and how its rows are read."""

    task: str
    path: Path
    use: str | None  #: the filter whose rows are kept (None: the only one there is)
    group: str | None  #: the task's group (``--category-key group``)
    lower: set[str]  #: the task's lower-is-better metrics


def _rows(source: RowSource, files: list[_File], options: ReadOptions) -> Generator[tuple[Row, int, int], None, int]:
    """Every samples file's rows, streamed, as a checked pass: ``(row, position, state)``, then the count.

    Every row is valid as built, so the gate need not check it again (a score beyond a
    row's bounds goes through the row check, which names it), and each row's key state is
    the one :func:`~pytest_rlgate.data.rows.iter_checked` would give it: a (unit, prompt)
    seen before is refused when it repeats a rollout index, as the row reader refuses it.
    A document is one line per filter, so without ``--unit-key`` its row is rollout 0 of its
    own unit; with one, the rows of a unit and prompt in a file count up its rollout index.
    """
    category_key, unit_key, threshold = options.category or "task", options.unit, options.pass_threshold
    pairs = source.pairs
    #: hash of each (unit, prompt) -> bitmask of the rollout indices it had: ints hold no prompt alive
    seen: dict[int, int] = {}
    large: set[tuple[int, int]] = set()
    made = 0
    last_unit = last_prompt = None
    low, high = FILE_NUMBER.low, FILE_NUMBER.high
    get_category = None if category_key in ("task", "group") else path_getter(category_key)
    parts = category_key.split(".")
    two = len(parts) == 2  # the common doc.<field>: two lookups inline
    first, second = parts[0], parts[-1]
    get_unit = None if unit_key is None else path_getter(unit_key)
    for task, file, use, group, lower in files:
        label = os.fspath(file)
        others: set[str] = set()
        metric = options.metric
        higher = metric not in lower
        counts: dict[tuple[str, str], int] = {}
        fixed_category = task if category_key == "task" else group or task
        kept = 0
        for line, rec, _checked in record_lines(file):
            if type(rec) is not dict:
                raise not_an_object(rec, label, line)
            name = rec.get("filter", "none")
            doc_id = rec.get("doc_id")
            target = rec.get("target")
            doc_hash = rec.get("doc_hash")
            prompt_hash = rec.get("prompt_hash")
            target_hash = rec.get("target_hash")
            plain = (type(doc_hash) is str and type(prompt_hash) is str and type(target_hash) is str
                     and type(name) is str and type(doc_id) is int and type(target) is str)
            if not plain:  # what the row keeps must not nest too deep
                check_depth({"filter": name, "doc_id": doc_id, "target": target, "doc_hash": doc_hash,
                             "prompt_hash": prompt_hash, "target_hash": target_hash}, label, line)
            if use is None:
                use = name
            elif name != use:
                if options.filter is None:
                    raise DataError(f"task {task!r} has rows under several filters ({use}, {name}); choose one "
                                    "with --filter NAME", path=label, line=line)
                others.add(name)
                continue
            kept += 1
            if doc_id is None:
                raise DataError("no 'doc_id' (not an lm-eval samples line?)", path=label, line=line)
            if metric is None:
                listed = rec.get("metrics")
                check_depth({"metrics": listed}, label, line)
                if not isinstance(listed, list) or not listed:
                    raise DataError("no 'metrics' list to take the score from; pass --metric NAME", path=label,
                                    line=line)
                metric = str(listed[0])
                higher = metric not in lower
            value = rec.get(metric, MISSING)
            if type(value) is float and low <= value <= high:  # NaN and infinities compare False
                score = value
            elif value is MISSING:
                check_depth({"metrics": rec.get("metrics")}, label, line)
                raise DataError(f"no metric {metric!r} (this line has "
                                f"{', '.join(map(str, rec.get('metrics') or []))}); pass --metric NAME",
                                path=label, line=line)
            else:
                check_depth({metric: value}, label, line)
                score = number(value, metric=metric, path=label, line=line)
            if threshold is None and higher and (score == 1.0 or score == 0.0):
                reward = int(score)
            else:
                reward = pass_of(score, threshold, higher_is_better=higher, metric=metric, path=label, line=line)
            if get_category is None:
                category = fixed_category
            else:
                found = rec.get(first, MISSING) if two else None
                found = found.get(second, MISSING) if type(found) is dict else get_category(rec)
                if type(found) is str and found:
                    category = found
                elif found is MISSING:
                    raise DataError(f"no category at {category_key!r} ({keys_at(rec, category_key)}); pass another "
                                    "--category-key", path=label, line=line)
                else:
                    category = label_of(found, what="category", path=label, line=line, key=category_key)
            if get_unit is None or unit_key is None:
                unit = f"{task}/{doc_id}"
                index = 0
            else:
                found = get_unit(rec)
                if found is MISSING:
                    raise DataError(f"no unit at {unit_key!r} ({keys_at(rec, unit_key)}); pass another --unit-key",
                                    path=label, line=line)
                unit = label_of(found, what="unit", path=label, line=line, key=unit_key)
                index = -1
            args = rec.get("arguments")  # the prompt: the first request's first argument, the common shape inline
            request = args.get("gen_args_0") if type(args) is dict else None
            prompt = request.get("arg_0") if type(request) is dict else None
            if type(prompt) is not str or not prompt:
                prompt = _prompt(rec) or f"{task}/{doc_id}"
            if index < 0:
                slot_key = (unit, prompt)
                index = counts.get(slot_key, 0)
                counts[slot_key] = index + 1
            slot = hash((unit, prompt))
            mask = seen.get(slot, -1)
            if mask < 0:
                state, mask = NEW, 0
            else:
                state = SAME if unit == last_unit and prompt == last_prompt else CHANGED
            if index < 256:
                bit = 1 << index
                if mask & bit:
                    raise _repeated(unit, prompt, index, label, line)
                seen[slot] = mask | bit
            elif (slot, index) in large:
                raise _repeated(unit, prompt, index, label, line)
            else:
                large.add((slot, index))
                seen[slot] = mask
            last_unit, last_prompt = unit, prompt
            if type(doc_hash) is str and type(target_hash) is str and type(prompt_hash) is str:  # three digests
                packed = doc_hash[:HASH_DIGITS] + target_hash[:HASH_DIGITS] + prompt_hash[:HASH_DIGITS]
            else:
                packed = ""
            pairs[(task, doc_id)] = packed if len(packed) == 3 * HASH_DIGITS else pack(
                _text(doc_hash), _text(target_hash), _text(prompt_hash))
            resps = rec.get("filtered_resps")  # the reply: the filtered generation, the common shape inline
            reply = resps[0] if type(resps) is list and resps and type(resps[0]) is str else _reply(rec)
            row: Row = {
                "prompt": prompt,
                "scenario_id": unit,
                "category": category,
                "rollout_index": index,
                "reply": reply,
                "score": score,
                "reward": reward,
                "markers": {},
                "case": {"task": task, "doc_id": doc_id, "filter": name, "target": target,
                         "doc_hash": doc_hash, "prompt_hash": prompt_hash, "target_hash": target_hash},
            }
            made += 1
            if not low <= score <= high:  # beyond a row's bounds: the row check refuses it, naming the field
                validate_row(row, path=source.label, line=made)
            yield row, made, state
        if not kept and others:
            raise DataError(f"no rows under --filter {use!r} (this task's filters: {', '.join(sorted(others))})",
                            path=label)
    return made


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _repeated(unit: str, prompt: str, index: int, path: str, line: int) -> DataError:
    shown = prompt if len(prompt) <= 40 else prompt[:39] + "…"
    return DataError(f"duplicate row: scenario {unit!r}, prompt {shown!r}, rollout_index {index} appears twice (an "
                     "lm-eval samples file has one line per document and filter; pass --unit-key to count the "
                     "rows of a unit as its rollouts)", path=path, line=line)


READER = LmEvalReader()
