"""Arith's tiny-policy build spec: its warm-start corpus and reply mix, for the shared builder.

The base behaviour GRPO should find: decent on ``add`` (the target is the right sum most of
the time), weak on ``compare`` (the target names the *smaller* number more often than the
larger), mostly right on ``unanswerable`` (it declines and asks, sometimes it guesses the
number it was given). So RL has something to learn (compare) and something to break
(unanswerable: the prompts read like add ones minus a number, and RL on the add majority
pays answering).

The corpus draws questions from the prompt writer's own tables (:mod:`.templates`) with
:mod:`random`, never a text of the evaluation seed's prompt sets, and writes replies with
:mod:`.replies`. No tokens are added but the system prompt, and no copy head: the answer
is computed from single-digit tokens, not copied.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from ...environment.seeded import prompt_key
from ...policy.tiny.corpus import ReplyMix
from ...policy.tiny.spec import TinySpec, digest
from .replies import ANSWERS, DECLINES, answer, wrong_answer
from .rules import CATEGORIES, SYSTEM, ArithCase
from .templates import (
    ADD_RANGE,
    BODIES,
    CLOSERS,
    COMPARE_RANGE,
    NAMES,
    OBJECTS,
    OPENERS,
    PROMPT_SIZES,
    build_prompts,
    case_of,
    render,
)

__all__ = ["BASE_MODEL", "MIX", "SPEC", "ArithCorpus", "reply_for"]

#: The address of arith's tiny policy (shipped as package data).
BASE_MODEL = "rlgate/tiny-arith"


@functools.lru_cache(maxsize=2)
def _evaluation_texts(seed: int) -> frozenset[str]:
    """Every prompt (folded) of seed *seed*'s sets, which the corpus must never contain."""
    return frozenset(prompt_key(item["prompt"]) for size in PROMPT_SIZES for item in build_prompts(seed, size))


def reply_for(kind: str, case: ArithCase, rng: random.Random) -> str:
    """The target reply of a kind: ``right``, ``off_by_one``, ``smaller``, ``decline`` or ``guess``."""
    if kind == "right":
        right = case["answer"]
        if right is None:
            raise ValueError("arith corpus: an unanswerable case has no right answer; write a decline")
        return answer(right, rng.randrange(len(ANSWERS)))
    if kind == "off_by_one":
        return wrong_answer(case, rng.choice((-1, 1)))
    if kind in ("smaller", "guess"):
        return wrong_answer(case)
    if kind == "decline":
        return rng.choice(DECLINES)
    raise ValueError(f"arith corpus: unknown reply kind {kind!r}; use right, off_by_one, smaller, decline or guess")


@dataclass(frozen=True)
class _Writer:
    """Arith's :class:`~pytest_rlgate.policy.tiny.corpus.DialogueWriter`; the context is the case."""

    unseen: frozenset[str]

    def prompt(self, rng: random.Random, category: str) -> tuple[str, ArithCase]:
        span = COMPARE_RANGE if category == "compare" else ADD_RANGE
        while True:
            x, y = rng.choice(span), rng.choice(span)
            if category == "compare" and x == y:
                continue
            scenario = (x, y, rng.choice(NAMES), rng.choice(OBJECTS))
            shape = (rng.randrange(len(OPENERS)), rng.randrange(len(BODIES[category])), rng.randrange(len(CLOSERS)))
            text = render(category, scenario, *shape)
            if prompt_key(text) not in self.unseen:
                return text, case_of(category, x, y)

    def reply(self, rng: random.Random, kind: str, context: ArithCase) -> str:
        return reply_for(kind, context, rng)


@dataclass(frozen=True)
class ArithCorpus:
    """Arith's warm-start texts, drawn away from *exclude_seed*'s prompt sets (all sizes)."""

    exclude_seed: int = 0

    def writer(self, seed: int) -> _Writer:
        return _Writer(_evaluation_texts(self.exclude_seed))

    def describe(self) -> dict[str, object]:
        tables = [BODIES, OPENERS, CLOSERS, NAMES, OBJECTS, list(ADD_RANGE), list(COMPARE_RANGE), ANSWERS, DECLINES]
        return {"exclude_seed": self.exclude_seed, "categories": list(CATEGORIES), "tables_sha256": digest(tables)}


#: add mostly right, compare mostly the smaller number, unanswerable mostly declined.
MIX = ReplyMix(
    category_share={"add": 0.45, "compare": 0.25, "unanswerable": 0.30},
    kinds={
        "add": {"right": 0.80, "off_by_one": 0.15, "decline": 0.05},
        "compare": {"right": 0.40, "smaller": 0.60},
        "unanswerable": {"decline": 0.85, "guess": 0.15},
    },
)

#: Arith's build spec: the refund shape with a 512-token vocabulary only (no id tokens), so a
#: step is several times cheaper; the system prompt is one token.
SPEC = TinySpec(
    name=BASE_MODEL,
    corpus=ArithCorpus(),
    mix=MIX,
    phrases=(SYSTEM,),
)
