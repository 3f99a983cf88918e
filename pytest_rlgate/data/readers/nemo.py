"""NVIDIA NeMo Evaluator bundles: ``eval-*.json`` beside ``results.jsonl``, one per benchmark.

``nel eval run`` writes a bundle per benchmark (``engine/artifacts.py``: ``run_id``,
``config_hash``, ``sdk_version``, ``config``, ``benchmark {name, samples, repeats, scores}``)
and ``results.jsonl``, one line per (problem, repeat) (``engine/eval_loop.py``:
``problem_idx``, ``repeat``, ``reward``, ``model_response``, ``expected_answer``,
``scoring_details``, ``metadata``). ``nel gate`` reads a folder holding one bundle folder
per benchmark; so does this reader.

Unit = (benchmark, ``problem_idx``), one reply per ``repeat``; category = the benchmark, or
a dotted path into the line (``metadata.category``); score = ``reward`` (or ``--score-key``, a
``scorer_rewards`` entry). A 0/1 reward passes at 1; others need ``--pass-threshold`` (nel's
``--correct-above``). A line nel graded 0.0 because solving failed (``scoring_details``
with an ``error``) stays gated as nel scored it, and is counted and reported.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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

#: a bad bundle read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


def _bundle(folder: Path) -> Path | None:
    found = sorted(folder.glob("eval-*.json"))
    if len(found) > 1:
        raise DataError(f"holds {len(found)} eval bundles ({', '.join(p.name for p in found[:3])}); point at one "
                        "benchmark's folder (stale results from an earlier run?)", path=folder)
    return found[0] if found else None


def _bundles(path: Path) -> list[tuple[Path, Path]]:
    """(bundle json, results.jsonl) of every benchmark under *path*."""
    if path.is_file():
        folder = path.parent
        bundle = path if path.name.startswith("eval-") else _bundle(folder)
        results = folder / "results.jsonl" if path.suffix == ".json" else path
        if bundle is None:
            raise DataError("has no eval-*.json bundle beside it (a nel eval run output folder)", path=path)
        return [(bundle, results)]
    own = _bundle(path)
    if own is not None:
        return [(own, path / "results.jsonl")]
    found = [(b, sub / "results.jsonl") for sub in sorted(p for p in path.iterdir() if p.is_dir())
             if (b := _bundle(sub)) is not None]
    if not found:
        raise DataError("holds no NeMo Evaluator bundle (eval-*.json with results.jsonl)", path=path)
    return found


def _load(bundle: Path) -> dict[str, object]:
    data = json_object(bundle, "a NeMo Evaluator bundle")
    if not isinstance(data.get("benchmark"), dict):
        raise DataError("not a NeMo Evaluator bundle (no 'benchmark' object)", path=bundle)
    return data


class NemoReader:
    name = "nemo"
    summary = "NVIDIA NeMo Evaluator bundles (`eval-*.json` beside `results.jsonl`), one folder per benchmark"
    options: tuple[ReaderOption, ...] = ()

    def sniff(self, path: Path, head: bytes) -> bool:
        try:
            if path.is_dir():
                return _bundle(path) is not None or any(_bundle(p) for p in path.iterdir() if p.is_dir())
        except DataError:
            return True
        if path.name.startswith("eval-") and path.suffix == ".json":
            return b'"benchmark"' in head
        return path.name == "results.jsonl" and b'"problem_idx"' in head and (path.parent / "results.jsonl").exists() \
            and any(path.parent.glob("eval-*.json"))

    def open(self, path: Path, options: ReadOptions) -> Opened:
        pairs = _bundles(path)
        bundles = [(_load(b), results) for b, results in pairs]
        for bundle, results in pairs:
            if not results.is_file():
                raise DataError(f"bundle {bundle.name} has no results.jsonl beside it: per-problem results are what "
                                "a paired gate needs (re-run nel eval run)", path=bundle.parent)
        names = [str(as_dict(d["benchmark"]).get("name")) for d, _ in bundles]
        tasks = {name: as_dict(d["benchmark"]).get("repeats") for name, (d, _) in zip(names, bundles)}
        versions = sorted({str(d.get("sdk_version")) for d, _ in bundles})
        models = sorted({str(as_dict(d.get("config")).get("model")) for d, _ in bundles})
        header = source_header("nemo", version=versions[0] if len(versions) == 1 else ",".join(versions),
                               tasks=tasks, options=options, path=path, model=models[0] if len(models) == 1 else None,
                               extra={"config_hash": {name: d.get("config_hash")
                                                      for name, (d, _) in zip(names, bundles)}})

        def rows(record: Pass) -> Iterator[Row]:
            category, unit = Pick("category", options.category), Pick("unit", options.unit)
            for name, (_data, results) in zip(names, bundles):
                yield from _rows(record, name, results, options, category, unit)

        return Opened(header, rows)


def _rows(record: Pass, benchmark: str, file: Path, options: ReadOptions, category: Pick,
          unit: Pick) -> Iterator[Row]:
    label = os.fspath(file)
    metric = options.score or "reward"
    for line, rec in json_lines(file):
        idx, repeat = rec.get("problem_idx"), rec.get("repeat", 0)
        if idx is None:
            raise DataError("no 'problem_idx' (not a NeMo Evaluator results line?)", path=label, line=line)
        details = as_dict(rec.get("scoring_details"))
        if details.get("error"):
            record.tally("result(s) NeMo Evaluator graded 0 after a failed solve, gated as graded",
                         f"problem {idx} repeat {repeat}", str(details["error"]), label=label)
        rewards = as_dict(rec.get("scorer_rewards"))
        value = rec.get("reward") if options.score is None else rewards.get(metric, MISSING)
        if value is MISSING:
            raise DataError(f"no scorer reward {metric!r} (scorer_rewards: {', '.join(rewards) or 'none'})",
                            path=label, line=line)
        score = number(value, metric=metric, path=label, line=line)
        meta = as_dict(rec.get("metadata"))
        expected = rec.get("expected_answer")
        record.pair((benchmark, idx), None, short_hash(expected) if expected is not None else None, None)
        yield {"prompt": str(meta.get("question") or meta.get("prompt") or f"{benchmark} problem {idx}"),
               "scenario_id": unit(rec, f"{benchmark}/{idx}", path=label, line=line),
               "category": category(rec, benchmark, path=label, line=line),
               "rollout_index": repeat if isinstance(repeat, int) and not isinstance(repeat, bool) and repeat >= 0
               else 0,
               "reply": str(rec.get("model_response") or ""), "score": score,
               "reward": pass_of(score, options.pass_threshold, higher_is_better=True, metric=metric, path=label,
                                 line=line),
               "markers": {}, "case": {"benchmark": benchmark, "problem_idx": idx, "expected_answer": expected}}


READER = NemoReader()
