"""Preference pairs for DPO: on-policy pairs by raw score, plus capped constructed negatives.

Pure functions over prompt items and the replies a policy sampled for them, so the rules
can be tested without a model and the same replies and seed always give the same pairs.

Why these rules (the reference run's DPO):

* **Raw score, margin >= 0.5.** The pass/fail reward is too coarse to rank replies; the raw
  score (the environment's ``score``) separates, in refund, "called with the wrong id" (0.3)
  from "asked" (0.3) from "nothing" (0.0), and the margin keeps near-ties (noise) out of the
  preference data.
* **At most 2 pairs per prompt.** Prompts with much contrast would otherwise dominate.
* **Rejected matched by length.** Among the eligible rejects the one closest in length to
  the chosen reply is taken, so DPO cannot learn "longer (or shorter) is better" instead of
  the behaviour that earned the score.
* **Replies that differ only in spacing are never paired.** They teach nothing about what
  the reward pays for (a reward that reads a reply's first tool call already scores two
  replies with the same first call alike, so the margin keeps those apart).
* **Constructed negatives** put contrast where on-policy sampling has none: a policy that
  almost always asks on no-id prompts yields no no-id pairs, so DPO learns "call the tool"
  from the with-id prompts and nothing tells it "unless there is no id". The constructed
  pair is (the policy's own shortest clean passing reply, the environment's
  ``rejected_reply`` for the prompt: refund's is a well-formed ``lookup_order`` with an
  invented id). Uncapped they teach "never call" (the reference run saw with_id fall), so they are
  capped at a share of the sampled pairs. An environment without ``rejected_reply`` builds
  none, and the build says so.
"""

from __future__ import annotations

import math
import os
import random
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..data.jsonl import iter_json_lines
from ..environment.contract import Env, EnvSpec, load_env
from ..errors import DataError, RlgateWarning, UsageError
from ..records import Case, PromptItem
from .run import write_jsonl

__all__ = [
    "CONSTRUCTED_CAP",
    "MAX_PAIRS_PER_PROMPT",
    "MIN_MARGIN",
    "Pair",
    "PairSet",
    "build_pairs",
    "cap_constructed",
    "constructed_candidates",
    "read_pairs",
    "sampled_pairs",
    "turn_key",
    "write_pairs",
]

#: Smallest raw-score gap between chosen and rejected (reference run; the SDK default 1.0 kept
#: only pass-vs-zero pairs and starved with_id of "wrong id is worse than right id" contrast).
MIN_MARGIN = 0.5
#: Pairs taken from one prompt's samples, so high-contrast prompts do not dominate.
MAX_PAIRS_PER_PROMPT = 2
#: Constructed pairs may be at most this share of the sampled pairs (seed: uncapped learned
#: "never call"; 0.3 held no_id in round two without losing with_id).
CONSTRUCTED_CAP = 0.3

_WS = re.compile(r"\s+")


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

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "margin": self.margin}


@dataclass
class PairSet:
    """The pairs a round trains on and the counts that explain them (for config/summary)."""

    pairs: list[Pair]
    stats: dict[str, object] = field(default_factory=dict)

    @property
    def sampled(self) -> list[Pair]:
        return [p for p in self.pairs if p.origin == "sampled"]

    @property
    def constructed(self) -> list[Pair]:
        return [p for p in self.pairs if p.origin == "constructed"]


def turn_key(reply: str) -> str:
    """*reply* as pairing compares it: whitespace collapsed, so spacing alone is no contrast."""
    return _WS.sub(" ", (reply or "").strip())


def _scores_for(
    items: Sequence[PromptItem],
    replies: Sequence[Sequence[str]],
    scores: Sequence[Sequence[float]] | None,
    env: Env,
) -> list[list[float]]:
    if len(items) != len(replies):
        raise DataError(f"{len(items)} prompts but {len(replies)} reply lists; give one list of replies per prompt")
    if scores is None:
        return [[env.score(r, _case(item, env)) for r in group] for item, group in zip(items, replies)]
    if len(scores) != len(replies) or any(len(s) != len(g) for s, g in zip(scores, replies)):
        raise DataError("scores must have the same shape as replies (one score per reply)")
    return [[float(s) for s in group] for group in scores]


def _case(item: PromptItem, env: Env) -> Case:
    case = item.get("case")
    if isinstance(case, Mapping):
        return case
    found = env.case_for(str(item["prompt"]))
    if found is None:
        raise DataError(f"prompt {str(item['prompt'])[:60]!r} has no case and environment {env.name} reads none "
                        "from the text; give every prompt item its case")
    return found


def _category(item: PromptItem, env: Env) -> str:
    return str(env.category_of({**item, "case": _case(item, env)}))


def sampled_pairs(
    items: Sequence[PromptItem],
    replies: Sequence[Sequence[str]],
    *,
    scores: Sequence[Sequence[float]] | None = None,
    min_margin: float = MIN_MARGIN,
    max_per_prompt: int = MAX_PAIRS_PER_PROMPT,
    env: Env,
) -> list[Pair]:
    """On-policy pairs: per prompt, best replies first, each against its closest-length reject.

    For each prompt the replies are ranked by raw score (*env*'s ``score`` unless *scores*
    are given; ties: sample order). Each reply in turn, while the prompt has fewer than
    *max_per_prompt* pairs, is paired with the unused reply scoring at least *min_margin*
    lower whose length is closest to its own (ties: the earlier sample), skipping replies
    that differ from it only in spacing. Both replies are then used. Every copy of a prompt
    in *items* (``--balance`` repeats rows) is its own prompt here.
    """
    if not 0 < min_margin < math.inf:  # also refuses NaN, which every gap comparison would silently fail
        raise UsageError(f"min_margin must be a finite number > 0, got {min_margin}")
    if max_per_prompt < 1:
        raise UsageError(f"max_per_prompt must be >= 1, got {max_per_prompt}")
    all_scores = _scores_for(items, replies, scores, env)
    pairs: list[Pair] = []
    for index, (item, group, group_scores) in enumerate(zip(items, replies, all_scores)):
        turns = [turn_key(r) for r in group]
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
                category=_category(item, env), scenario_id=str(item.get("scenario_id", "")), item_index=index,
            ))
    return pairs


def _clean_pass(env: Env, reply: str, value: float, case: Case, prompt: str) -> bool:
    """Passes, and every marker the environment guards is intact (refund: no malformed call block)."""
    if not env.passes(value):
        return False
    marks = env.markers(reply, case, prompt=prompt)
    return all(marks.get(guard, 1.0) >= 1.0 for guard in env.guards)


def constructed_candidates(
    items: Sequence[PromptItem],
    replies: Sequence[Sequence[str]],
    *,
    seed: int,
    scores: Sequence[Sequence[float]] | None = None,
    env: Env,
) -> list[Pair]:
    """One constructed pair per distinct prompt the environment builds a negative for.

    The rejected side is ``env.rejected_reply(item, rng)`` (None: no pair for that prompt),
    with *rng* seeded from (seed, prompt) so a prompt's negative does not depend on its
    neighbours. Chosen is the policy's own shortest clean passing reply (it passes and no
    guarded marker is broken; ties: the earlier sample), so the pair teaches nothing the
    policy does not already say. Prompts where the policy never passed cleanly get none:
    there is no own reply to prefer. Copies of a prompt (``--balance``) count once, matched
    case- and whitespace-insensitively.
    """
    all_scores = _scores_for(items, replies, scores, env)
    seen: set[str] = set()
    out: list[Pair] = []
    for index, (item, group, group_scores) in enumerate(zip(items, replies, all_scores)):
        prompt = str(item["prompt"])
        key = _WS.sub(" ", prompt.strip().lower())
        if key in seen:
            continue
        case = _case(item, env)
        passing = [i for i, reply in enumerate(group) if _clean_pass(env, reply, group_scores[i], case, prompt)]
        if not passing:
            continue
        rejected = env.rejected_reply({**item, "case": case}, random.Random(f"{seed}\x00{prompt}"))
        if rejected is None:
            continue
        seen.add(key)
        c = min(passing, key=lambda i: (len(group[i].strip()), i))
        out.append(Pair(
            prompt=prompt, chosen=group[c], rejected=rejected,
            chosen_score=group_scores[c], rejected_score=env.score(rejected, case),
            origin="constructed", category=_category(item, env), scenario_id=str(item.get("scenario_id", "")),
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
    items: Sequence[PromptItem],
    replies: Sequence[Sequence[str]],
    *,
    seed: int,
    min_margin: float = MIN_MARGIN,
    max_per_prompt: int = MAX_PAIRS_PER_PROMPT,
    constructed: bool = False,
    constructed_cap: float = CONSTRUCTED_CAP,
    env: EnvSpec = None,
) -> PairSet:
    """All pairs of one DPO round, sampled first, and the counts that explain them.

    *constructed* with an environment that has no ``rejected_reply`` builds no constructed
    pairs and says so: an :class:`RlgateWarning` and ``stats["constructed_note"]``.
    """
    env = load_env(env)
    scores = _scores_for(items, replies, None, env)
    sampled = sampled_pairs(items, replies, scores=scores, min_margin=min_margin,
                            max_per_prompt=max_per_prompt, env=env)
    kept: list[Pair] = []
    candidates: list[Pair] = []
    limit = 0
    note = None
    if constructed and not env.has_rejected_reply:
        note = (f"environment {env.name} has no rejected_reply(item, rng), so --constructed-negatives adds no "
                "pairs; give the environment one, or drop the flag")
        warnings.warn(note, RlgateWarning, stacklevel=2)
    elif constructed:
        candidates = constructed_candidates(items, replies, seed=seed, scores=scores, env=env)
        kept, limit = cap_constructed(candidates, len(sampled), constructed_cap)
    pairs = sampled + kept
    stats: dict[str, object] = {
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
    if note:
        stats["constructed_note"] = note
    return PairSet(pairs=pairs, stats=stats)


def write_pairs(path: str | os.PathLike[str], pairs: Iterable[Pair]) -> Path:
    """Write ``pairs.jsonl`` atomically (the run folder's writer): one pair a line, sorted keys."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(path, (pair.to_dict() for pair in pairs))
    return path


_FIELDS = {f for f in Pair.__dataclass_fields__}


def read_pairs(path: str | os.PathLike[str]) -> list[Pair]:
    """Read a ``pairs.jsonl``; a bad line is a :class:`DataError` naming the file and line."""
    out: list[Pair] = []
    for line_no, obj in iter_json_lines(path, what="pairs file", fix="write it with write_pairs (rlgate train)"):
        missing = sorted(_FIELDS - set(obj) if isinstance(obj, dict) else _FIELDS)
        if missing:
            raise DataError(f"pair is missing {', '.join(missing)}", path=path, line=line_no)
        if obj["origin"] not in ("sampled", "constructed"):
            raise DataError(f"origin must be 'sampled' or 'constructed', got {obj['origin']!r}",
                            path=path, line=line_no)
        out.append(Pair(**{k: obj[k] for k in _FIELDS}))
    return out
