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
keeps).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from ...errors import DataError, hide_user_errors
from ...options import FILE_NUMBER
from ...records import Row
from .hashes import HASH_DIGITS, pack
from .lines import check_depth, json_object, not_an_object, record_lines
from .source import FILTER, MISSING, Opened, Pass, Pick, ReadOptions, as_dict, number, pass_of, source_header

__all__ = ["READER"]

#: a bad log read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

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


def _load_results(path: Path | None) -> dict[str, object]:
    return {} if path is None else json_object(path, "an lm-eval results file")


def _filters(results: Mapping[str, object], task: str) -> list[str]:
    """The filters the results file scored *task* under (``"<metric>,<filter>"`` keys)."""
    scores = as_dict(as_dict(results.get("results")).get(task))
    return sorted({key.split(",", 1)[1] for key in scores if "," in key and "_stderr" not in key})


def _groups(results: Mapping[str, object]) -> dict[str, str]:
    """leaf task -> its closest group, from ``group_subtasks``."""
    out: dict[str, str] = {}
    subtasks = as_dict(results.get("group_subtasks"))
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
            args = as_dict(rec.get("arguments")).get(f"gen_args_{best}", {})
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
    summary = "lm-evaluation-harness `--log_samples` output: the folder, a `results_<date>.json` or a samples file"
    options = (FILTER,)

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return bool(_samples_in(path))
        if _SAMPLES.match(path.name):
            return True
        if _RESULTS.match(path.name):
            return b'"lm_eval_version"' in head or b'"n-samples"' in head or b'"group_subtasks"' in head
        return head.lstrip().startswith(b"{") and b'"doc_id"' in head and b'"doc_hash"' in head

    def open(self, path: Path, options: ReadOptions) -> Opened:
        files, results_path = _layout(path)
        results = _load_results(results_path)
        versions = as_dict(results.get("versions"))
        tasks = {task or path.stem: versions.get(task) for task, _ in files}
        model = results.get("model_name") or as_dict(results.get("config")).get("model")
        category = options.category or "task"
        if category == "group" and not results:
            raise DataError("--category-key group needs the run's results_<date>.json beside the samples "
                            "(its group_subtasks says which group a task rolls up to)", path=path)
        wanted = options.text("filter")
        filters = {task: _filters(results, task) for task, _ in files}
        for task, names in filters.items():
            if len(names) > 1 and wanted is None:
                raise DataError(f"task {task!r} was scored under {len(names)} filters ({', '.join(names)}); choose "
                                "one with --filter NAME", path=results_path or path)
            if wanted is not None and len(names) > 1 and wanted not in names:
                raise DataError(f"--filter {wanted!r}: task {task!r} has filters {', '.join(names)}",
                                path=results_path or path)
        header = source_header("lm-eval", version=results.get("lm_eval_version"), tasks=tasks, options=options,
                               path=path, model=model if isinstance(model, str) else None,
                               extra={"task_hashes": results.get("task_hashes") or {},
                                      "results": os.fspath(results_path) if results_path else None})
        groups = _groups(results)
        lower = {task: {m for m, hib in as_dict(spec).items() if hib is False}
                 for task, spec in as_dict(results.get("higher_is_better")).items()}
        plan = []
        for task, file in files:
            name = task or file.stem
            known = filters.get(task) or []
            use = wanted if wanted in known or not known else known[0]
            plan.append(_File(name, file, use, groups.get(name), lower.get(task, set())))

        def rows(record: Pass) -> Iterator[Row]:
            keys = _Keys(options)
            for file in plan:
                yield from _file_rows(file, record, keys, options)

        return Opened(header, rows)


class _File(NamedTuple):
    """One samples file of a run, and how its rows are read."""

    task: str
    path: Path
    use: str | None  #: the filter whose rows are kept (None: the only one there is)
    group: str | None  #: the task's group (``--category-key group``)
    lower: set[str]  #: the task's lower-is-better metrics


class _Keys:
    """The category and unit of one pass: ``task``/``group`` are the file's own, any other key a path."""

    def __init__(self, options: ReadOptions) -> None:
        key = options.category or "task"
        self.fixed = key in ("task", "group")
        self.by_group = key == "group"
        self.category = Pick("category", None if self.fixed else key)
        self.unit = None if options.unit is None else Pick("unit", options.unit)


def _file_rows(file: _File, record: Pass, keys: _Keys, options: ReadOptions) -> Iterator[Row]:
    """One samples file's rows, streamed: a line is a document under one filter, one reply.

    Without ``--unit-key`` a document is rollout 0 of its own unit, so a document twice is
    refused at its line; with one, the rows of a unit and prompt count up its rollout index.
    """
    task, use, label = file.task, file.use, os.fspath(file.path)
    metric, threshold, wanted = options.score, options.pass_threshold, options.text("filter")
    higher = metric not in file.lower
    fixed = (file.group or task) if keys.by_group else task
    counts: dict[tuple[str, str], int] = {}
    docs: set[object] = set()
    others: set[str] = set()
    kept = 0
    low, high = FILE_NUMBER.low, FILE_NUMBER.high
    pairs, category_of, unit_of = record.pairs, None if keys.fixed else keys.category, keys.unit
    for line, rec, _checked in record_lines(file.path):
        if type(rec) is not dict:
            raise not_an_object(rec, label, line)
        name = rec.get("filter", "none")
        doc_id = rec.get("doc_id")
        target = rec.get("target")
        doc_hash, prompt_hash, target_hash = rec.get("doc_hash"), rec.get("prompt_hash"), rec.get("target_hash")
        if not (type(doc_hash) is str and type(prompt_hash) is str and type(target_hash) is str
                and type(name) is str and type(doc_id) is int and type(target) is str):
            check_depth({"filter": name, "doc_id": doc_id, "target": target, "doc_hash": doc_hash,
                         "prompt_hash": prompt_hash, "target_hash": target_hash}, label, line)
        if use is None:
            use = name
        elif name != use:
            if wanted is None:
                raise DataError(f"task {task!r} has rows under several filters ({use}, {name}); choose one "
                                "with --filter NAME", path=label, line=line)
            others.add(name)
            continue
        kept += 1
        if doc_id is None:
            raise DataError("no 'doc_id' (not an lm-eval samples line?)", path=label, line=line)
        if metric is None:
            metric = _first_metric(rec, label, line)
            higher = metric not in file.lower
        value = rec.get(metric, MISSING)
        if type(value) is float and low <= value <= high:  # NaN and infinities compare False
            score = value
        else:
            score = _score(rec, metric, value, label, line)
        if threshold is None and higher and (score == 1.0 or score == 0.0):
            reward = int(score)
        else:
            reward = pass_of(score, threshold, higher_is_better=higher, metric=metric, path=label, line=line)
        category = fixed if category_of is None else category_of(rec, fixed, path=label, line=line)
        args = rec.get("arguments")  # the prompt: the first request's first argument, the common shape inline
        request = args.get("gen_args_0") if type(args) is dict else None
        prompt = request.get("arg_0") if type(request) is dict else None
        if type(prompt) is not str or not prompt:
            prompt = _prompt(rec) or f"{task}/{doc_id}"
        if unit_of is None:
            unit, index = f"{task}/{doc_id}", 0
            if doc_id in docs:
                raise _repeated(unit, prompt, label, line)
            docs.add(doc_id)
        else:
            unit = unit_of(rec, "", path=label, line=line)
            index = counts.get((unit, prompt), 0)
            counts[(unit, prompt)] = index + 1
        if type(doc_hash) is str and type(target_hash) is str and type(prompt_hash) is str:  # three digests
            packed = doc_hash[:HASH_DIGITS] + target_hash[:HASH_DIGITS] + prompt_hash[:HASH_DIGITS]
        else:
            packed = ""
        pairs[(task, doc_id)] = packed if len(packed) == 3 * HASH_DIGITS else pack(
            _text(doc_hash), _text(target_hash), _text(prompt_hash))
        resps = rec.get("filtered_resps")  # the reply: the filtered generation, the common shape inline
        reply = resps[0] if type(resps) is list and resps and type(resps[0]) is str else _reply(rec)
        yield {"prompt": prompt, "scenario_id": unit, "category": category, "rollout_index": index,
               "reply": reply, "score": score, "reward": reward, "markers": {},
               "case": {"task": task, "doc_id": doc_id, "filter": name, "target": target,
                        "doc_hash": doc_hash, "prompt_hash": prompt_hash, "target_hash": target_hash}}
    if not kept and others:
        raise DataError(f"no rows under --filter {use!r} (this task's filters: {', '.join(sorted(others))})",
                        path=label)


def _first_metric(rec: Mapping[str, object], label: str, line: int) -> str:
    listed = rec.get("metrics")
    check_depth({"metrics": listed}, label, line)
    if not isinstance(listed, list) or not listed:
        raise DataError("no 'metrics' list to take the score from; pass --score-key NAME", path=label, line=line)
    return str(listed[0])


def _score(rec: Mapping[str, object], metric: str, value: object, label: str, line: int) -> float:
    """The metric's value when it is not a plain float in a row's bounds: named when missing or bad."""
    if value is MISSING:
        check_depth({"metrics": rec.get("metrics")}, label, line)
        listed = rec.get("metrics")
        raise DataError(f"no metric {metric!r} (this line has "
                        f"{', '.join(map(str, listed if isinstance(listed, list) else []))}); pass --score-key NAME",
                        path=label, line=line)
    check_depth({metric: value}, label, line)
    return number(value, metric=metric, path=label, line=line)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _repeated(unit: str, prompt: str, path: str, line: int) -> DataError:
    shown = prompt if len(prompt) <= 40 else prompt[:39] + "…"
    return DataError(f"duplicate row: scenario {unit!r}, prompt {shown!r}, rollout_index 0 appears twice (an "
                     "lm-eval samples file has one line per document and filter; pass --unit-key to count the "
                     "rows of a unit as its rollouts)", path=path, line=line)


READER = LmEvalReader()
