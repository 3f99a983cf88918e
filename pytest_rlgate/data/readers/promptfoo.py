"""promptfoo ``promptfoo eval -o results.json``: one result per (test, prompt, provider).

Two envelopes are in circulation: ``{evalId, results: {version: 3, results: [...], prompts,
stats}, config, ...}`` (what ``-o results.json`` writes) and the one promptfoo's outputs page
documents, ``{version: 3, timestamp, results: {prompts, providers, outputs: [...], stats}}``;
both are read. A result (``EvaluateResult`` in promptfoo's ``src/types``) carries
``promptIdx``, ``testIdx``, ``testCase``, ``provider {id, label}``, ``prompt {raw}``, ``vars``,
``response {output}``, ``success``, ``score``, ``namedScores``, ``failureReason`` (0 none, 1
an assertion failed, 2 an error) and, with ``--repeat``, ``repeatIndex``.

Unit = the test (a hash of its ``vars`` without promptfoo's runtime ``_*``/``sessionId``
entries) and the prompt (``promptIdx``); category = a dotted path into the result
(``testCase.metadata.topic``; default ``testCase.metadata.category`` when the first result
has one, else ``all``), or ``namedScores``: each named score its own category; score =
``score`` with promptfoo's own ``success`` as the pass, or ``--score-key NAME``, a named score
(then ``--pass-threshold`` decides). A file holding several providers is one side per
provider: pick it with ``results.json#provider=ID``. Error results (``failureReason`` 2)
are counted and reported, not gated. The file is one JSON document, read whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...errors import DataError, hide_user_errors
from ...records import Row
from .source import Opened, Pass, Pick, ReaderOption, ReadOptions, as_dict, number, pass_of, short_hash, source_header

__all__ = ["READER"]

#: a bad results file read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

_ERROR = 2


def _load(path: Path) -> tuple[dict[str, object], list[object]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except ValueError as exc:
        raise DataError(f"not a promptfoo results file: {exc}", path=path) from None
    if not isinstance(data, dict):
        raise DataError("not a promptfoo results file (expected a JSON object)", path=path)
    body = data.get("results")
    if isinstance(body, Mapping):
        results = body.get("results", body.get("outputs"))
    else:
        results = body if isinstance(body, list) else data.get("outputs")
    if not isinstance(results, list):
        raise DataError("no results list (expected results.results or results.outputs, as promptfoo eval -o "
                        "results.json writes)", path=path)
    return data, results


def _provider(result: Mapping[str, object]) -> str:
    provider = result.get("provider")
    if isinstance(provider, Mapping):
        return str(provider.get("id") or provider.get("label") or "")
    return str(provider or "")


def _unit_vars(result: Mapping[str, object]) -> dict[str, object]:
    given = result.get("vars")
    if not isinstance(given, Mapping):
        given = as_dict(as_dict(result.get("testCase")).get("vars"))
    return {k: v for k, v in given.items() if not str(k).startswith("_") and k != "sessionId"}


def _reply(result: Mapping[str, object]) -> str:
    response = result.get("response")
    output = response.get("output") if isinstance(response, Mapping) else None
    if output is None:
        return ""
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True, default=str)


class PromptfooReader:
    name = "promptfoo"
    summary = "promptfoo `promptfoo eval -o results.json`, one side per provider"
    options = (ReaderOption("provider", "promptfoo: the provider of a file holding several (PATH#provider=ID)",
                            metavar="ID", shapes=False),)

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir() or path.suffix != ".json":
            return False
        return b'"results"' in head and (b'"promptIdx"' in head or b'"evalId"' in head or b'"testIdx"' in head
                                         or (b'"version": 3' in head or b'"version":3' in head))

    def open(self, path: Path, options: ReadOptions) -> Opened:
        data, results = _load(path)
        providers = sorted({_provider(r) for r in results if isinstance(r, Mapping)})
        provider = options.text("provider")
        if provider is None and len(providers) > 1:
            raise DataError(f"holds {len(providers)} providers ({', '.join(providers)}): one side each; pick one "
                            f"with {path}#provider=ID", path=path)
        if provider is not None and provider not in providers:
            raise DataError(f"#provider={provider}: no such provider here ({', '.join(providers)})", path=path)
        provider = provider or (providers[0] if providers else None)
        config = as_dict(data.get("config"))
        task = str(config.get("description") or path.stem)
        body = as_dict(data.get("results")) or data
        version = as_dict(data.get("metadata")).get("promptfooVersion")
        header = source_header("promptfoo", version=version, tasks={task: body.get("version")}, options=options,
                               path=path, model=provider, extra={"eval_id": data.get("evalId")})

        def rows(record: Pass) -> Iterator[Row]:
            return _rows(record, results, provider, os.fspath(path), task, options)

        return Opened(header, rows)


def _rows(record: Pass, results: list[object], provider: str | None, label: str, task: str,
          options: ReadOptions) -> Iterator[Row]:
    named_categories = options.category == "namedScores"
    category = Pick("category", None if named_categories else options.category, probe="testCase.metadata.category")
    counts: dict[tuple[str, str, str], int] = {}
    for position, result in enumerate(results):
        where = f"results[{position}]"
        if not isinstance(result, dict):
            raise DataError(f"{where} is not an object", path=label)
        if provider is not None and _provider(result) != provider:
            continue
        if result.get("failureReason") == _ERROR:
            record.tally("error result(s) (failureReason 2) not gated", f"test {result.get('testIdx')}",
                         str(result.get("error") or ""))
            continue
        unit = f"{result.get('promptIdx', 0)}:{short_hash(_unit_vars(result))}"
        raw = result.get("prompt")
        prompt = (raw.get("raw") or raw.get("label")) if isinstance(raw, Mapping) else raw
        prompt = prompt if isinstance(prompt, str) and prompt else unit
        for name, score, reward in _scores(result, category, named_categories, options, label, where):
            index = result.get("repeatIndex")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                index = counts.get((name, unit, prompt), 0)
                counts[(name, unit, prompt)] = index + 1
            record.pair((task, unit), short_hash(as_dict(result.get("testCase")).get("assert") or []), None,
                        short_hash(prompt))
            yield {"prompt": prompt, "scenario_id": unit, "category": name, "rollout_index": index,
                   "reply": _reply(result), "score": score, "reward": reward, "markers": {},
                   "case": {"testIdx": result.get("testIdx"), "promptIdx": result.get("promptIdx"),
                            "provider": _provider(result), "vars": _unit_vars(result)}}


def _scores(result: dict[str, object], category: Pick, named_categories: bool, options: ReadOptions, label: str,
            where: str) -> list[tuple[str, float, int]]:
    """(category, score, pass) of a result: one, or one per named score with ``--category-key namedScores``."""
    named = as_dict(result.get("namedScores"))
    if named_categories:
        if not named:
            raise DataError(f"{where} has no namedScores to take categories from", path=label)
        return [(str(name), *_named(value, options.score or str(name), options, label))
                for name, value in named.items()]
    name = category(result, "all", path=label, where=where)
    if options.score is None:
        return [(name, number(result.get("score"), metric="score", path=label, line=None),
                 int(bool(result.get("success"))))]
    if options.score not in named:
        raise DataError(f"{where}: no named score {options.score!r} (it has {', '.join(named) or 'none'})",
                        path=label)
    return [(name, *_named(named[options.score], options.score, options, label))]


def _named(value: object, metric: str, options: ReadOptions, label: str) -> tuple[float, int]:
    score = number(value, metric=metric, path=label, line=None)
    return score, pass_of(score, options.pass_threshold, higher_is_better=True, metric=metric, path=label, line=None)


READER = PromptfooReader()
