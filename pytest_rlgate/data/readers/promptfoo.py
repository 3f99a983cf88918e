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
``score`` with promptfoo's own ``success`` as the pass, or ``--metric NAME``, a named score
(then ``--pass-threshold`` decides). A file holding several providers is one side per
provider: pick it with ``results.json#provider=ID``. Error results (``failureReason`` 2)
are counted and reported, not gated. The file is one JSON document, read whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...errors import DataError
from ..records import Row
from .hashes import pack
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

_ERROR = 2
_SHOWN = 5


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


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _provider(result: Mapping[str, object]) -> str:
    provider = result.get("provider")
    if isinstance(provider, Mapping):
        return str(provider.get("id") or provider.get("label") or "")
    return str(provider or "")


def _unit_vars(result: Mapping[str, object]) -> dict[str, object]:
    given = result.get("vars")
    if not isinstance(given, Mapping):
        given = _mapping(_mapping(result.get("testCase")).get("vars"))
    return {k: v for k, v in given.items() if not str(k).startswith("_") and k != "sessionId"}


def _reply(result: Mapping[str, object]) -> str:
    response = result.get("response")
    output = response.get("output") if isinstance(response, Mapping) else None
    if output is None:
        return ""
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True, default=str)


class PromptfooReader:
    name = "promptfoo"

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir() or path.suffix != ".json":
            return False
        return b'"results"' in head and (b'"promptIdx"' in head or b'"evalId"' in head or b'"testIdx"' in head
                                         or (b'"version": 3' in head or b'"version":3' in head))

    def open(self, path: Path, options: ReadOptions) -> RowSource:
        data, results = _load(path)
        providers = sorted({_provider(r) for r in results if isinstance(r, Mapping)})
        provider = options.provider
        if provider is None and len(providers) > 1:
            raise DataError(f"holds {len(providers)} providers ({', '.join(providers)}): one side each; pick one "
                            f"with {path}#provider=ID", path=path)
        if provider is not None and provider not in providers:
            raise DataError(f"#provider={provider}: no such provider here ({', '.join(providers)})", path=path)
        provider = provider or (providers[0] if providers else None)
        config = _mapping(data.get("config"))
        task = str(config.get("description") or path.stem)
        body = _mapping(data.get("results")) or data
        version = _mapping(data.get("metadata")).get("promptfooVersion")
        header = source_header("promptfoo", version=version, tasks={task: body.get("version")}, options=options,
                               path=path, model=provider, extra={"eval_id": data.get("evalId")})

        def produce(source: RowSource) -> Iterator[Row]:
            yield from _rows(source, results, provider, os.fspath(path), task, options)

        return RowSource(self.name, path, header, produce, options)


def _rows(source: RowSource, results: list[object], provider: str | None, label: str, task: str,
          options: ReadOptions) -> Iterator[Row]:
    category_key = options.category
    errors: list[str] = []
    first_error = ""
    counts: dict[tuple[str, str, str], int] = {}
    for position, result in enumerate(results):
        where = f"results[{position}]"
        if not isinstance(result, Mapping):
            raise DataError(f"{where} is not an object", path=label)
        if provider is not None and _provider(result) != provider:
            continue
        if result.get("failureReason") == _ERROR:
            errors.append(f"test {result.get('testIdx')}")
            first_error = first_error or " ".join(str(result.get("error") or "").split())[:200]
            continue
        unit = f"{result.get('promptIdx', 0)}:{short_hash(_unit_vars(result))}"
        raw = result.get("prompt")
        prompt = (raw.get("raw") or raw.get("label")) if isinstance(raw, Mapping) else raw
        prompt = prompt if isinstance(prompt, str) and prompt else unit
        if category_key is None:
            category_key = ("testCase.metadata.category"
                            if lookup(result, "testCase.metadata.category") is not MISSING else "")
        named = _mapping(result.get("namedScores"))
        if category_key == "namedScores":
            entries: list[tuple[str, object]] = [(str(name), value) for name, value in named.items()]
            if not entries:
                raise DataError(f"{where} has no namedScores to take categories from", path=label)
        else:
            if category_key:
                found = lookup(result, category_key)
                if found is MISSING:
                    raise DataError(f"{where}: no category at {category_key!r} ({keys_at(result, category_key)}); "
                                    "pass another --category-key", path=label)
                category = label_of(found, what="category", path=label, line=None, key=category_key)
            else:
                category = "all"
            if options.metric is not None:
                if options.metric not in named:
                    raise DataError(f"{where}: no named score {options.metric!r} (it has "
                                    f"{', '.join(named) or 'none'})", path=label)
                entries = [(category, named[options.metric])]
            else:
                entries = [(category, None)]
        for category, value in entries:
            if value is None:
                score = number(result.get("score"), metric="score", path=label, line=None)
                reward = int(bool(result.get("success")))
            else:
                metric = options.metric or category
                score = number(value, metric=metric, path=label, line=None)
                reward = pass_of(score, options.pass_threshold, higher_is_better=True, metric=metric, path=label,
                                 line=None)
            index = result.get("repeatIndex")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                slot = (category, unit, prompt)
                index = counts.get(slot, 0)
                counts[slot] = index + 1
            source.pairs[(task, unit)] = pack(short_hash(_mapping(result.get("testCase")).get("assert") or []), None,
                                              short_hash(prompt))
            yield {"prompt": prompt, "scenario_id": unit, "category": category, "rollout_index": index,
                   "reply": _reply(result), "score": score, "reward": reward, "markers": {},
                   "case": {"testIdx": result.get("testIdx"), "promptIdx": result.get("promptIdx"),
                            "provider": _provider(result), "vars": _unit_vars(result)}}
    if errors:
        source.errors += len(errors)
        shown = ", ".join(errors[:_SHOWN]) + (f" and {len(errors) - _SHOWN} more" if len(errors) > _SHOWN else "")
        source.note(f"{label}: {len(errors)} error result(s) (failureReason 2) not gated ({shown}): {first_error}")


READER = PromptfooReader()
