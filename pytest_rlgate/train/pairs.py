"""Preference pairs for DPO: on-policy pairs by raw score, plus capped constructed negatives.

Pure functions over prompt items and the replies a policy sampled for them, so the rules
can be tested without a model and the same replies and seed always give the same pairs.

Why these rules (DESIGN section 7, the seed's DPO recipe):

* **Raw score, margin >= 0.5.** The pass/fail reward is too coarse to rank replies; the raw
  score separates "called with the wrong id" (0.3) from "asked" (0.3) from "nothing" (0.0),
  and the margin keeps near-ties (noise) out of the preference data.
* **At most 2 pairs per prompt.** Prompts with much contrast would otherwise dominate.
* **Rejected matched by length.** Among the eligible rejects the one closest in length to
  the chosen reply is taken, so DPO cannot learn "longer (or shorter) is better" instead of
  the behaviour that earned the score.
* **Identical first turns are never paired.** The reward reads the first turn only; two
  replies with the same first turn teach nothing about what the reward pays for.
* **Constructed negatives** put contrast where on-policy sampling has none: a policy that
  almost always asks on no-id prompts yields no no-id pairs, so DPO learns "call the tool"
  from the with-id prompts and nothing tells it "unless there is no id". The constructed
  pair is (the policy's own shortest passing reply without a call, a well-formed
  ``lookup_order`` with an invented id). Uncapped they teach "never call" (the seed saw
  with_id fall), so they are capped at a share of the sampled pairs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..envs import refund
from ..errors import DataError, UsageError

__all__ = [
    "CONSTRUCTED_CAP",
    "CONSTRUCTED_CATEGORIES",
    "MAX_PAIRS_PER_PROMPT",
    "MIN_MARGIN",
    "Pair",
    "PairSet",
    "build_pairs",
    "cap_constructed",
    "constructed_candidates",
    "first_turn",
    "invented_order_id",
    "read_pairs",
    "sampled_pairs",
    "write_pairs",
]

#: Smallest raw-score gap between chosen and rejected (seed recipe; the SDK default 1.0 kept
#: only pass-vs-zero pairs and starved with_id of "wrong id is worse than right id" contrast).
MIN_MARGIN = 0.5
#: Pairs taken from one prompt's samples, so high-contrast prompts do not dominate.
MAX_PAIRS_PER_PROMPT = 2
#: Constructed pairs may be at most this share of the sampled pairs (seed: uncapped learned
#: "never call"; 0.3 held no_id in round two without losing with_id).
CONSTRUCTED_CAP = 0.3
#: Categories whose prompts get a constructed negative: the ones where any call is wrong.
CONSTRUCTED_CATEGORIES: tuple[str, ...] = ("no_id", "off_topic")
#: Invented ids come from the range the tiny policy's tokenizer knows as single tokens.
_INVENTED_LOW, _INVENTED_SPAN = 1000, 9000

_WS = re.compile(r"\s+")
_TOOL_OPEN = "<tool_call>"

ScoreFn = Callable[[str, Mapping[str, Any]], float]


@dataclass(frozen=True)
class Pair:
    """One preference pair; ``origin`` is ``sampled`` or ``constructed``."""

    prompt: str
    chosen: str
    rejected: str
    chosen_score: float
    rejected_score: float
    origin: str
    category: str
    scenario_id: str
    item_index: int

    @property
    def margin(self) -> float:
        return round(self.chosen_score - self.rejected_score, 3)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "margin": self.margin}


@dataclass
class PairSet:
    """The pairs a round trains on and the counts that explain them (for config/summary)."""

    pairs: list[Pair]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def sampled(self) -> list[Pair]:
        return [p for p in self.pairs if p.origin == "sampled"]

    @property
    def constructed(self) -> list[Pair]:
        return [p for p in self.pairs if p.origin == "constructed"]


def first_turn(reply: str) -> str:
    """What the reward reads of *reply*: its first tool call in canonical form, else its text.

    Whitespace is collapsed so replies that differ only in spacing count as the same turn.
    """
    call = refund.parse_tool_call(reply)
    if call is not None:
        body = json.dumps({"name": call.name, "arguments": call.arguments}, sort_keys=True)
        return f"{_TOOL_OPEN}{body}</tool_call>"
    return _WS.sub(" ", (reply or "").strip())


def _scores_for(
    items: Sequence[Mapping[str, Any]],
    replies: Sequence[Sequence[str]],
    scores: Sequence[Sequence[float]] | None,
    score_fn: ScoreFn,
) -> list[list[float]]:
    if len(items) != len(replies):
        raise DataError(f"{len(items)} prompts but {len(replies)} reply lists; give one list of replies per prompt")
    if scores is None:
        return [[float(score_fn(r, _case(item))) for r in group] for item, group in zip(items, replies)]
    if len(scores) != len(replies) or any(len(s) != len(g) for s, g in zip(scores, replies)):
        raise DataError("scores must have the same shape as replies (one score per reply)")
    return [[float(s) for s in group] for group in scores]


def _case(item: Mapping[str, Any]) -> Mapping[str, Any]:
    case = item.get("case")
    return case if isinstance(case, Mapping) else refund.case_for(str(item["prompt"]))


def _category(item: Mapping[str, Any]) -> str:
    return str(item.get("category") or _case(item).get("category"))


def sampled_pairs(
    items: Sequence[Mapping[str, Any]],
    replies: Sequence[Sequence[str]],
    *,
    scores: Sequence[Sequence[float]] | None = None,
    min_margin: float = MIN_MARGIN,
    max_per_prompt: int = MAX_PAIRS_PER_PROMPT,
    score_fn: ScoreFn = refund.score,
) -> list[Pair]:
    """On-policy pairs: per prompt, best replies first, each against its closest-length reject.

    For each prompt the replies are ranked by raw score (ties: sample order). Each reply in
    turn, while the prompt has fewer than *max_per_prompt* pairs, is paired with the unused
    reply scoring at least *min_margin* lower whose length is closest to its own (ties: the
    earlier sample), skipping replies with the same first turn. Both replies are then used.
    Every copy of a prompt in *items* (``--balance`` repeats rows) is its own prompt here.
    """
    if min_margin <= 0:
        raise UsageError(f"min_margin must be > 0, got {min_margin}")
    if max_per_prompt < 1:
        raise UsageError(f"max_per_prompt must be >= 1, got {max_per_prompt}")
    all_scores = _scores_for(items, replies, scores, score_fn)
    pairs: list[Pair] = []
    for index, (item, group, group_scores) in enumerate(zip(items, replies, all_scores)):
        turns = [first_turn(r) for r in group]
        order = sorted(range(len(group)), key=lambda i: (-group_scores[i], i))
        used: set[int] = set()
        taken = 0
        for c in order:
            if taken >= max_per_prompt:
                break
            if c in used:
                continue
            eligible = [
                r for r in range(len(group))
                if r not in used and r != c
                and group_scores[c] - group_scores[r] >= min_margin - 1e-9
                and turns[r] != turns[c]
            ]
            if not eligible:
                continue
            r = min(eligible, key=lambda j: (abs(len(group[j]) - len(group[c])), j))
            used.update((c, r))
            taken += 1
            pairs.append(Pair(
                prompt=str(item["prompt"]), chosen=group[c], rejected=group[r],
                chosen_score=group_scores[c], rejected_score=group_scores[r], origin="sampled",
                category=_category(item), scenario_id=str(item.get("scenario_id", "")), item_index=index,
            ))
    return pairs


def invented_order_id(prompt: str, seed: int) -> str:
    """A well-formed order id derived from (seed, prompt) that does not occur in *prompt*."""
    digest = hashlib.sha256(f"{seed}\x00{prompt}".encode()).digest()
    number = int.from_bytes(digest[:8], "big") % _INVENTED_SPAN
    for step in range(_INVENTED_SPAN):
        candidate = _INVENTED_LOW + (number + step) % _INVENTED_SPAN
        if str(candidate) not in prompt:
            return f"ORD-{candidate}"
    raise DataError(f"every id ORD-1000..ORD-9999 occurs in the prompt {prompt[:60]!r}")  # pragma: no cover


def invented_call(order_id: str) -> str:
    """The rejected side of a constructed pair: a well-formed ``lookup_order`` call."""
    body = json.dumps({"name": "lookup_order", "arguments": {"order_id": order_id}})
    return f"{_TOOL_OPEN}{body}</tool_call>"


def constructed_candidates(
    items: Sequence[Mapping[str, Any]],
    replies: Sequence[Sequence[str]],
    *,
    seed: int,
    scores: Sequence[Sequence[float]] | None = None,
    score_fn: ScoreFn = refund.score,
    categories: Sequence[str] = CONSTRUCTED_CATEGORIES,
) -> list[Pair]:
    """One constructed pair per distinct no-id / off-topic prompt where the policy passed.

    Chosen is the policy's own shortest passing reply without a tool call (ties: the earlier
    sample), so the pair teaches nothing the policy does not already say; rejected is a
    well-formed ``lookup_order`` with an id invented from (seed, prompt). Prompts where the
    policy never passed without a call get none: there is no own reply to prefer. Copies of
    a prompt (``--balance``) count once, matched case- and whitespace-insensitively.
    """
    all_scores = _scores_for(items, replies, scores, score_fn)
    seen: set[str] = set()
    out: list[Pair] = []
    for index, (item, group, group_scores) in enumerate(zip(items, replies, all_scores)):
        category = _category(item)
        key = _WS.sub(" ", str(item["prompt"]).strip().lower())
        if category not in categories or key in seen:
            continue
        passing = [
            i for i, reply in enumerate(group)
            if refund.passes(group_scores[i]) and _TOOL_OPEN not in reply and refund.parse_tool_call(reply) is None
        ]
        if not passing:
            continue
        seen.add(key)
        c = min(passing, key=lambda i: (len(group[i].strip()), i))
        rejected = invented_call(invented_order_id(str(item["prompt"]), seed))
        out.append(Pair(
            prompt=str(item["prompt"]), chosen=group[c], rejected=rejected,
            chosen_score=group_scores[c], rejected_score=float(score_fn(rejected, _case(item))),
            origin="constructed", category=category, scenario_id=str(item.get("scenario_id", "")),
            item_index=index,
        ))
    return out


def cap_constructed(candidates: Sequence[Pair], n_sampled: int, cap: float) -> tuple[list[Pair], int]:
    """At most ``floor(cap * n_sampled)`` candidates, picked by an even stride (deterministic).

    The stride spreads the kept pairs over the prompt order, so the categories and scenarios
    keep their mix. Returns (kept pairs, the cap as a count).
    """
    if not cap >= 0:  # also rejects NaN
        raise UsageError(f"--constructed-cap must be >= 0 (a share of the sampled pairs), got {cap}")
    limit = math.floor(cap * n_sampled + 1e-9)
    if len(candidates) <= limit:
        return list(candidates), limit
    picks = sorted({(i * len(candidates)) // limit for i in range(limit)}) if limit else []
    return [candidates[i] for i in picks], limit


def build_pairs(
    items: Sequence[Mapping[str, Any]],
    replies: Sequence[Sequence[str]],
    *,
    seed: int,
    min_margin: float = MIN_MARGIN,
    max_per_prompt: int = MAX_PAIRS_PER_PROMPT,
    constructed: bool = False,
    constructed_cap: float = CONSTRUCTED_CAP,
    score_fn: ScoreFn = refund.score,
) -> PairSet:
    """All pairs of one DPO round, sampled first, and the counts that explain them."""
    scores = _scores_for(items, replies, None, score_fn)
    sampled = sampled_pairs(items, replies, scores=scores, min_margin=min_margin,
                            max_per_prompt=max_per_prompt, score_fn=score_fn)
    kept: list[Pair] = []
    candidates: list[Pair] = []
    limit = 0
    if constructed:
        candidates = constructed_candidates(items, replies, seed=seed, scores=scores, score_fn=score_fn)
        kept, limit = cap_constructed(candidates, len(sampled), constructed_cap)
    pairs = sampled + kept
    stats: dict[str, Any] = {
        "prompts": len(items),
        "replies": sum(len(g) for g in replies),
        "prompts_with_pairs": len({p.item_index for p in sampled}),
        "sampled_pairs": len(sampled),
        "constructed_negatives": constructed,
        "constructed_candidates": len(candidates),
        "constructed_cap": constructed_cap if constructed else None,
        "constructed_limit": limit if constructed else None,
        "constructed_pairs": len(kept),
        "constructed_share": round(len(kept) / len(sampled), 4) if sampled else 0.0,
        "pairs": len(pairs),
        "pairs_by_category": {
            origin: dict(sorted(Counter(p.category for p in pairs if p.origin == origin).items()))
            for origin in ("sampled", "constructed")
        },
        "min_margin": min_margin,
        "max_pairs_per_prompt": max_per_prompt,
    }
    return PairSet(pairs=pairs, stats=stats)


def write_pairs(path: str | os.PathLike[str], pairs: Iterable[Pair]) -> Path:
    """Write ``pairs.jsonl`` atomically (the run folder's writer): one pair a line, sorted keys."""
    from .run import write_jsonl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(path, (pair.to_dict() for pair in pairs))
    return path


_FIELDS = {f for f in Pair.__dataclass_fields__}


def read_pairs(path: str | os.PathLike[str]) -> list[Pair]:
    """Read a ``pairs.jsonl``; a bad line is a :class:`DataError` naming the file and line."""
    out: list[Pair] = []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise DataError(f"not JSON ({exc.msg}); each line must be one pair object", path=path, line=line_no) from None
            missing = sorted(_FIELDS - set(obj) if isinstance(obj, dict) else _FIELDS)
            if missing:
                raise DataError(f"pair is missing {', '.join(missing)}", path=path, line=line_no)
            if obj["origin"] not in ("sampled", "constructed"):
                raise DataError(f"origin must be 'sampled' or 'constructed', got {obj['origin']!r}", path=path, line=line_no)
            out.append(Pair(**{k: obj[k] for k in _FIELDS}))
    return out
