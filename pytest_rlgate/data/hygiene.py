"""Data hygiene for prompt sets: decontamination and the keep filter for model-written prompts.

Both guard the same promise the gate makes: the holdout measures *unseen* situations. A train
prompt that repeats a holdout prompt nearly word for word teaches the policy the answer to
a question it will later be graded on (decontamination), and a model-written paraphrase that
drifted into another category, is too short to mean anything, or repeats an earlier one
would grade the policy on the writer's mistakes (the keep filter). Pure Python, no task
knowledge: categories come from the environment's ``case_for`` where it has one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, cast

from ..environment.contract import EnvSpec, load_env
from ..errors import DataError, UsageError
from ..records import PromptItem

__all__ = ["Decontamination", "KeepResult", "decontaminate", "keep_prompts", "word_ngrams"]

Item = PromptItem

_WORD = re.compile(r"\w+", re.UNICODE)
#: Shorter than this (whitespace collapsed) a prompt says too little to grade a policy on.
KEEP_MIN_CHARS = 12
#: Longer than this it is an essay, not a customer's message.
KEEP_MAX_CHARS = 700
#: Word-set Jaccard at or above this makes a prompt a near-duplicate of an earlier kept one.
NEAR_DUPLICATE_JACCARD = 0.8


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def word_ngrams(text: str, n: int = 8) -> set[tuple[str, ...]]:
    """The set of lower-cased word *n*-grams of *text*.

    A text of fewer than *n* words has no *n*-gram; it gets one gram instead, its whole word
    sequence, so a short holdout prompt is contaminated exactly when a train prompt contains
    it word for word (and an empty text has none).
    """
    words = _words(text)
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _contains(words: Sequence[str], gram: tuple[str, ...]) -> bool:
    size = len(gram)
    return any(tuple(words[i:i + size]) == gram for i in range(len(words) - size + 1))


class Dropped(TypedDict):
    """A train prompt decontamination dropped, and the holdout prompt it repeats."""

    prompt: str
    scenario_id: str | None
    holdout_prompt: str
    holdout_scenario_id: str | None
    coverage: float


@dataclass(frozen=True)
class Decontamination:
    """Which train prompts were dropped for repeating a holdout prompt, and why."""

    kept: list[Item]
    dropped: list[Dropped]
    n: int
    threshold: float
    enabled: bool = True

    def summary(self) -> str:
        """One line for every split's report."""
        total = len(self.kept) + len(self.dropped)
        if not self.enabled:
            return f"decontamination: off ({total} train prompts kept unchecked)"
        rule = (f"its word {self.n}-grams cover >= {self.threshold:g} of a holdout prompt's; "
                f"holdout prompts under {self.n} words must appear in it word for word")
        return f"decontamination: dropped {len(self.dropped)} of {total} train prompts ({rule})"

    def to_dict(self) -> dict[str, object]:
        """What a run's ``config.json`` records."""
        return {"enabled": self.enabled, "n": self.n, "threshold": self.threshold,
                "train_before": len(self.kept) + len(self.dropped), "dropped": len(self.dropped),
                "dropped_prompts": self.dropped[:50], "summary": self.summary()}


def decontaminate(
    train: Sequence[Item],
    holdout: Sequence[Item],
    n: int = 8,
    threshold: float = 0.8,
) -> Decontamination:
    """Drop train prompts that repeat a holdout prompt (word *n*-gram coverage >= *threshold*).

    A train prompt is contaminated when its word *n*-grams cover at least *threshold* of some
    holdout prompt's *n*-grams. Holdout prompts shorter than *n* words use their whole word
    sequence as their one gram (see :func:`word_ngrams`). Train order is kept.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"n must be a positive integer (word n-gram length), got {n!r}")
    if not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise UsageError(f"threshold must be in (0, 1] (share of a holdout prompt's n-grams), got {threshold!r}")
    long_index: dict[tuple[str, ...], list[int]] = {}
    sizes: list[int] = []
    short: list[tuple[int, tuple[str, ...]]] = []
    for h, item in enumerate(holdout):
        grams = word_ngrams(str(item["prompt"]), n)
        sizes.append(len(grams))
        if grams and len(next(iter(grams))) < n:
            short.append((h, next(iter(grams))))
            continue
        for gram in grams:
            long_index.setdefault(gram, []).append(h)
    kept: list[Item] = []
    dropped: list[Dropped] = []
    for item in train:
        text = str(item["prompt"])
        hits: Counter[int] = Counter()
        for gram in word_ngrams(text, n):
            hits.update(long_index.get(gram, ()))
        best = max(((count / sizes[h], h) for h, count in hits.items()), default=(0.0, -1))
        if best[0] < threshold and short:
            words = _words(text)
            best = next(((1.0, h) for h, gram in short if _contains(words, gram)), best)
        if best[0] >= threshold:
            source = holdout[best[1]]
            dropped.append({"prompt": text, "scenario_id": item.get("scenario_id"),
                            "holdout_prompt": source["prompt"], "holdout_scenario_id": source.get("scenario_id"),
                            "coverage": round(best[0], 3)})
        else:
            kept.append(item.copy())
    return Decontamination(kept, dropped, n, float(threshold))


def skip_decontamination(train: Sequence[Item], n: int = 8, threshold: float = 0.8) -> Decontamination:
    """The record of a split whose decontamination was turned off (``--no-decontaminate``)."""
    return Decontamination([item.copy() for item in train], [], n, threshold, enabled=False)


@dataclass(frozen=True)
class KeepResult:
    """The prompts the keep filter kept, and every drop counted by reason."""

    kept: list[Item]
    #: reason -> count: ``off_category``, ``too_short``, ``too_long``, ``near_duplicate``
    dropped: dict[str, int] = field(default_factory=dict)
    #: whether the category check ran (it needs the environment's ``case_for``)
    checked_category: bool = True

    def summary(self) -> str:
        total = len(self.kept) + sum(self.dropped.values())
        reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(self.dropped.items())) or "none"
        note = "" if self.checked_category else " (category not checked: the environment has no case_for)"
        return f"keep filter: kept {len(self.kept)} of {total}; dropped {reasons}{note}"


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def keep_prompts(
    items: Iterable[object],
    env: EnvSpec = None,
    *,
    min_chars: int = KEEP_MIN_CHARS,
    max_chars: int = KEEP_MAX_CHARS,
    jaccard: float = NEAR_DUPLICATE_JACCARD,
    path: str | None = None,
    lines: Sequence[int] | None = None,
) -> KeepResult:
    """Filter model-written prompts: keep those that read as the category their scenario asked for.

    Each item has ``prompt``, ``scenario_id`` and ``category`` (the one its source scenario
    asked the writer for). A prompt stays when the environment's ``case_for`` reads it in that
    category (skipped for environments without one), its whitespace-collapsed length is
    *min_chars*-*max_chars* characters, and its word set is not a near-duplicate (Jaccard >=
    *jaccard*) of an earlier kept prompt. Kept items carry the environment's case (their own
    where it has no ``case_for``, so each line must then carry one) and keep their
    ``scenario_id``. A line that is not such an object, or names a category the environment
    does not declare, is a :class:`DataError` naming *path* and the line (``lines[i]`` for
    item ``i`` when given, the file's line numbers with blank lines skipped; else ``i + 1``).
    """
    env = load_env(env)
    counts: Counter[str] = Counter()
    kept: list[Item] = []
    kept_words: list[frozenset[str]] = []
    for index, item in enumerate(items):
        place, line = path or "<items>", lines[index] if lines is not None else index + 1
        if not isinstance(item, Mapping):
            raise DataError(f"expected an object with prompt, scenario_id and category, got {type(item).__name__}",
                            path=place, line=line)
        for key in ("prompt", "scenario_id", "category"):
            value = item.get(key)
            if not isinstance(value, str) or (key != "prompt" and not value):  # an empty prompt is too short
                raise DataError(f"needs a {'' if key == 'prompt' else 'non-empty '}string {key!r} (each line: "
                                "prompt, scenario_id and the category its scenario asked for)", path=place, line=line)
        category = env.check_category(item["category"], path=place, line=line)
        if not env.has_case_for and not isinstance(item.get("case"), Mapping):
            raise DataError(f'no "case" object, and environment {env.name} reads none from the text (it has no '
                            'case_for); add each line\'s case, e.g. "case": {"answer": ...}', path=place, line=line)
        text = _collapsed(item["prompt"])
        if len(text) < min_chars:
            counts["too_short"] += 1
            continue
        if len(text) > max_chars:
            counts["too_long"] += 1
            continue
        case = env.case_for(text) if env.has_case_for else item["case"]
        # the category check needs the environment's own reading; None: it cannot read this prompt
        # (a line's own case, without case_for, was checked above and is never None)
        if case is None or (env.has_case_for and case.get("category", category) != category):
            counts["off_category"] += 1
            continue
        words = frozenset(_words(text))
        if any(_jaccard(words, other) >= jaccard for other in kept_words):
            counts["near_duplicate"] += 1
            continue
        kept_words.append(words)
        kept.append(cast(Item, {**item, "category": category, "case": dict(case)}))  # checked above
    return KeepResult(kept, dict(counts), checked_category=env.has_case_for)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)
