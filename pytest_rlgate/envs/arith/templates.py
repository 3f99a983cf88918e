"""The arith environment's seeded prompt writer: scenarios of small sums and comparisons.

A *scenario* is one question's situation: its numbers and its theme (a person and a kind
of object), with a ``scenario_id``; it renders one prompt at the default size and many
paraphrases (opener x body x closer) at the ``large`` size, all sharing one case. Splits
keep a scenario's prompts on one side, so the holdout measures unseen situations. Every
choice comes from :mod:`pytest_rlgate.environment.seeded` (SHA-256 of the seed and the axis), so a seed
gives the same bytes on every Python.

The sets are imbalanced on purpose, like refund's: ``add`` is the majority, so RL on the
prompts as they come mostly trains answering, which is what can teach a policy to answer
``unanswerable`` questions too.

:data:`BODIES`, :data:`OPENERS`, :data:`CLOSERS`, :data:`NAMES` and :data:`OBJECTS` are
shared with the tiny policy's corpus (:mod:`.policy`), which draws them with its own seed.
"""

from __future__ import annotations

from ...environment.seeded import dedupe, draw, ranked
from ...errors import UsageError
from ...records import PromptItem
from .rules import CATEGORIES, ArithCase

__all__ = ["BODIES", "CLOSERS", "NAMES", "OBJECTS", "OPENERS", "PROMPT_SIZES", "Scenario", "build_prompts",
           "case_of", "render"]

Item = PromptItem

#: size -> category -> (scenarios, prompts): add is the majority (0.70 / 0.17 / 0.13 by default).
PROMPT_SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "small": {"add": (20, 20), "compare": (6, 6), "unanswerable": (6, 6)},
    "default": {"add": (84, 84), "compare": (20, 20), "unanswerable": (16, 16)},
    "large": {"add": (60, 600), "compare": (20, 160), "unanswerable": (15, 120)},
}

#: Operands of a sum and of a comparison: single digits, so a 2-layer policy can learn the
#: sums and copy the numbers (with two-digit comparisons it mixed up digits: pass@1 0.0).
ADD_RANGE = range(2, 10)
COMPARE_RANGE = range(2, 10)

NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana")
OBJECTS = ("apples", "books", "coins", "marbles", "stamps", "pencils", "shells", "cards")
OPENERS = ("", "Quick question: ", "Hi! ", "Please help. ", "Homework check: ")
CLOSERS = ("", " Thanks!", " Please be brief.", " What is the final answer?")

#: category -> question bodies; {x} and {y} are the numbers, {name} and {obj} the theme.
#: Every body names the person, so two scenarios never render the same text. Unanswerable
#: bodies are add bodies with {x} replaced by a vague amount.
BODIES: dict[str, tuple[str, ...]] = {
    "add": (
        "{name} asks: what is {x} + {y}?",
        "{name} wants to know what {x} plus {y} is.",
        "Help {name} add {x} and {y}.",
        "{name} needs the sum of {x} and {y}.",
        "{name} has {x} {obj} and gets {y} more. How many {obj} does {name} have now?",
        "{name} had {x} {obj}. A friend gave {name} {y} more. How many {obj} does {name} have?",
        "{name} keeps {x} {obj} in one box and {y} in another. How many {obj} are there in total?",
        "{name} found {x} {obj} on Monday and {y} on Tuesday. How many {obj} did {name} find?",
    ),
    "compare": (
        "{name} asks: which is larger, {x} or {y}?",
        "{name} wants to know which number is bigger: {x} or {y}.",
        "Help {name} pick the larger number: {x} or {y}.",
        "{name} asks: of {x} and {y}, which is greater?",
        "{name} counted {x} {obj}, then {y} {obj}. Which count is larger?",
        "{name} has {x} {obj} and a friend has {y}. Which of the two numbers is larger?",
    ),
    "unanswerable": (
        "{name} asks: what is {y} plus the number on a hidden card?",
        "Help {name} add {y} to the number {name} is thinking of.",
        "{name} needs the sum of {y} and another number.",
        "{name} has some {obj} and gets {y} more. How many {obj} does {name} have now?",
        "{name} had a few {obj}. A friend gave {name} {y} more. How many {obj} does {name} have?",
        "{name} keeps {y} {obj} in one box and more in another. How many {obj} are there in total?",
        "{name} found some {obj} on Monday and {y} on Tuesday. How many {obj} did {name} find?",
    ),
}

#: (x, y, name, obj): a scenario's numbers and theme (unanswerable ignores x); the object
#: follows from the rest, so the scenario id names numbers and person only.
Scenario = tuple[int, int, str, str]


def case_of(category: str, x: int, y: int) -> ArithCase:
    """The answer key of a question: its category, answer (None when unanswerable), numbers."""
    if category == "add":
        return {"category": category, "answer": x + y, "numbers": [x, y]}
    if category == "compare":
        return {"category": category, "answer": max(x, y), "numbers": [x, y]}
    return {"category": category, "answer": None, "numbers": [y]}


def render(category: str, scenario: Scenario, opener: int, body: int, closer: int) -> str:
    """One wording of a scenario: ``OPENERS[opener] + BODIES[category][body] + CLOSERS[closer]``."""
    x, y, name, obj = scenario
    text = BODIES[category][body].format(x=x, y=y, name=name, obj=obj)
    return OPENERS[opener] + text + CLOSERS[closer]


def _numbers(seed: int, category: str, index: int) -> tuple[int, int]:
    span = COMPARE_RANGE if category == "compare" else ADD_RANGE
    x = span[draw(seed, category, index, "x") % len(span)]
    y = span[draw(seed, category, index, "y") % len(span)]
    if category == "compare" and x == y:  # a comparison needs two different numbers
        y = span[(span.index(y) + 1 + draw(seed, category, index, "y2") % (len(span) - 1)) % len(span)]
    return x, y


def _scenarios(seed: int, category: str, count: int) -> list[tuple[str, Scenario]]:
    """*count* distinct scenarios of *category*: ``(scenario_id, (x, y, name, obj))``."""
    chosen: dict[str, Scenario] = {}
    index = 0
    while len(chosen) < count:
        x, y = _numbers(seed, category, index)
        name = NAMES[draw(seed, category, index, "name") % len(NAMES)]
        obj = OBJECTS[draw(seed, category, index, "obj") % len(OBJECTS)]
        numbers = f"{y}" if category == "unanswerable" else f"{x}-{y}"
        chosen.setdefault(f"{category}/{numbers}/{name}", (x, y, name, obj))
        index += 1
    return list(chosen.items())


def build_prompts(seed: int = 0, size: str = "default") -> list[Item]:
    """The seeded arith prompt set: a fresh list of prompt items.

    :param seed: any integer; the same seed gives byte-identical files everywhere.
    :param size: ``"default"`` (120 prompts, one per scenario: 84 add, 20 compare, 16
        unanswerable), ``"large"`` (880 paraphrases of 95 scenarios: 600/160/120) or
        ``"small"`` (32: 20/6/6, for quick smoke runs).
    :returns: dicts with ``prompt``, ``case`` (``category``, ``answer``, ``numbers``),
        ``category`` and ``scenario_id``, in a seed-shuffled order, duplicates dropped.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"arith build_prompts: seed must be an integer, got {seed!r}")
    if size not in PROMPT_SIZES:
        raise UsageError(f"arith build_prompts: unknown size {size!r}; use one of {', '.join(PROMPT_SIZES)}")
    ranked_items: list[tuple[int, int, Item]] = []
    for category in CATEGORIES:
        n_scenarios, n_prompts = PROMPT_SIZES[size][category]
        scenarios = _scenarios(seed, category, n_scenarios)
        per, extra = divmod(n_prompts, n_scenarios)
        bigger = set(ranked(seed, [sid for sid, _ in scenarios], "extra")[:extra])
        shapes = [(o, b, c) for o in range(len(OPENERS)) for b in range(len(BODIES[category]))
                  for c in range(len(CLOSERS))]
        for scenario_id, scenario in scenarios:
            count = per + (scenario_id in bigger)
            for rank, shape in enumerate(ranked(seed, shapes, scenario_id, "paraphrase")[:count]):
                item: Item = {"prompt": render(category, scenario, *shape),
                              "case": case_of(category, *scenario[:2]), "category": category,
                              "scenario_id": scenario_id}
                ranked_items.append((draw(seed, "order", scenario_id, rank), len(ranked_items), item))
    return dedupe(item for _, _, item in sorted(ranked_items, key=lambda entry: entry[:2]))
