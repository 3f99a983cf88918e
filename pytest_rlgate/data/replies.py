"""Replies sampled anywhere - vLLM, an API, a user's own loop - graded into rows.

A replies file is JSONL, one object a line::

    {"prompt": str | "scenario_id": str, "category": str?, "case": {...}?,
     "reply": str | "replies": [str, ...], "policy": str?, "sample_seed": int?, "eval_run": str | int?}

A line that names only its ``scenario_id`` takes its prompt (and case and category) from a
prompt set: a prompts file, or the environment's own. Replies to the same prompt on
several lines are rollouts ``0, 1, 2, ...`` of that prompt in line order (per
``eval_run``). The environment scores each reply against the line's case (its
``case_for`` reads one from the prompt when the line has none), exactly as
:func:`~pytest_rlgate.data.rows.grade_replies` grades sampled replies. Every bad line is a
:class:`~pytest_rlgate.errors.DataError` naming ``file:line`` and the field.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from ..environment.contract import EnvSpec, load_env
from ..errors import DataError
from .jsonl import iter_json_lines
from .provenance import row_header
from .rows import Rows, grade_replies

__all__ = ["grade_file"]

_META = ("policy", "sample_seed", "eval_run")
_SHAPE = ('each line is a JSON object like {"prompt": "...", "category": "...", "case": {...}, "reply": "..."} '
          '(or "scenario_id" for "prompt", "replies": [...] for "reply")')


def _replies(obj: Mapping[str, object], fail: Callable[[str], DataError]) -> list[str]:
    if "reply" in obj and "replies" in obj:
        raise fail("has both 'reply' and 'replies'; keep one")
    if "reply" in obj:
        if not isinstance(obj["reply"], str):
            raise fail(f"'reply' must be a string, got {type(obj['reply']).__name__}")
        return [obj["reply"]]
    replies = obj.get("replies")
    if not isinstance(replies, list) or not replies or not all(isinstance(r, str) for r in replies):
        raise fail(f"needs 'reply' (a string) or 'replies' (a non-empty list of strings); {_SHAPE}")
    return replies


def grade_file(path: str | os.PathLike[str], env: EnvSpec = None, *,
               prompts: Sequence[Mapping[str, object]] | None = None) -> Rows:
    """Grade the replies file *path* with *env* into rows (with a header naming *env*).

    *prompts* is the prompt set a line's ``scenario_id`` is looked up in when it has no
    ``prompt`` (default: the environment's own set at seed 0, built only when needed).
    """
    env = load_env(env)
    label = os.fspath(path)
    by_scenario: dict[str, Mapping[str, object]] | None = None
    rollouts: dict[tuple[object, ...], int] = {}
    out = Rows()
    for number, obj in iter_json_lines(label, what="replies file",
                                       fix="write one JSON object a line with a prompt and its reply"):
        def fail(message: str, number: int = number) -> DataError:
            return DataError(message, path=label, line=number)

        if not isinstance(obj, dict):
            raise fail(f"expected a JSON object, got {type(obj).__name__}; {_SHAPE}")
        replies = _replies(obj, fail)
        item = {k: obj[k] for k in ("prompt", "scenario_id", "category", "case") if obj.get(k) is not None}
        if "prompt" not in item:
            if not isinstance(item.get("scenario_id"), str):
                raise fail(f"needs 'prompt' (a string) or 'scenario_id'; {_SHAPE}")
            if by_scenario is None:
                source = prompts if prompts is not None else env.build_prompts(0, "default")
                by_scenario = {str(p.get("scenario_id")): p for p in source}
            known = by_scenario.get(item["scenario_id"])
            if known is None:
                raise fail(f"scenario_id {item['scenario_id']!r:.60} is in no prompt of the prompt set; give the "
                           "line its 'prompt', or pass the prompts file it came from (--prompts)")
            item = {**known, **item}
        elif not isinstance(item["prompt"], str) or not item["prompt"]:
            raise fail("'prompt' must be a non-empty string")
        if "case" in item and not isinstance(item["case"], dict):
            raise fail(f"'case' must be an object, got {type(item['case']).__name__}")
        meta = {k: obj[k] for k in _META if k in obj}
        try:
            rows = grade_replies([item], [replies], env=env, **meta)
        except DataError as exc:
            raise fail(exc.reason) from None
        unit = (item.get("scenario_id"), item["prompt"], repr(meta.get("eval_run")))
        start = rollouts.get(unit, 0)
        rollouts[unit] = start + len(rows)
        out.extend({**row, "rollout_index": start + row["rollout_index"]} for row in rows)
    if not out:
        raise DataError(f"no replies in the file; {_SHAPE}", path=label)
    policies = {row.get("policy") for row in out}
    seeds = {row.get("sample_seed") for row in out}
    policy, seed = (policies.pop() if len(policies) == 1 else None), (seeds.pop() if len(seeds) == 1 else None)
    out.header = row_header(env, policy=policy if isinstance(policy, str) else None,
                            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None)
    return out
