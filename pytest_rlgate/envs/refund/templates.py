"""The refund environment's seeded prompt writer: scenarios rendered from templates.

A *scenario* is a situation (intent x customer stance x item, or an off-topic topic x
stance) with a ``scenario_id``; it renders one prompt at the default size and many
paraphrases at the ``large`` size. Splits keep a scenario's prompts on one side, so the
holdout measures unseen situations rather than unseen wordings. Every choice comes from
:mod:`pytest_rlgate.environment.seeded` (SHA-256 of the seed and the axis), so a seed gives the same
bytes on every Python.
"""

from __future__ import annotations

from ...environment.seeded import dedupe, draw, ranked, weighted
from ...errors import UsageError
from ...records import PromptItem
from .rules import case_for

__all__ = ["HOLDOUT_SHARES", "PROMPT_SIZES", "WARM_START_SIZES", "build_prompts", "write_set"]

Item = PromptItem

#: size -> category -> (scenarios, prompts), split by :data:`HOLDOUT_SHARES`. The train side is
#: imbalanced on purpose, like the reference run's set (95/16/8 scenarios at the default size):
#: that imbalance is what makes a policy collapse on no-id prompts. The holdout is not: it
#: holds 24/30/24 scenarios, so that a no-id drop of 0.20 and an off-topic collapse are each
#: ``regressed`` with at least 80 % power at the gate's family level (``rlgate plan`` on the
#: tiny policy's rows; docs/gate.md), where 0.2 of every category held out 3 no-id and 2
#: off-topic scenarios, which can see neither.
PROMPT_SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "small": {"with_id": (27, 27), "no_id": (7, 7), "off_topic": (6, 6)},
    "default": {"with_id": (119, 119), "no_id": (46, 46), "off_topic": (32, 32)},
    "large": {"with_id": (54, 576), "no_id": (20, 220), "off_topic": (24, 216)},
}
#: The share of each category's scenarios the split holds out when no ``--holdout`` is given.
HOLDOUT_SHARES: dict[str, float] = {"with_id": 0.2, "no_id": 0.65, "off_topic": 0.75}
#: The sets whose holdouts (0.2 of each category) the shipped tiny policies' warm start leaves
#: unseen: the default and large sizes they were built against. Their recipes record the texts
#: the warm start kept, so these stay as they were, whatever the sizes above become.
WARM_START_SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "default": {"with_id": (95, 95), "no_id": (16, 16), "off_topic": (8, 8)},
    "large": {"with_id": (54, 576), "no_id": (7, 74), "off_topic": (6, 57)},
}

# ---------------------------------------------------------------------------------------
# Templates. Every no-id phrasing carries one of the environment's whole domain words;
# no off-topic text carries one. _render checks both against case_for anyway.

_ITEMS = (
    "headphones", "blender", "running shoes", "winter jacket", "coffee grinder",
    "phone case", "desk lamp", "yoga mat", "backpack", "board game",
)

#: intent -> (phrasings with an {id}, phrasings without one); {item} is the product.
_INTENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "refund": (
        ("I'd like a refund for the {item} from order {id}.",
         "Please refund {id}. The {item} stopped working after two days.",
         "Can I get my money back for {id}? The {item} was not what I expected."),
        ("I'd like a refund for the {item} I bought last week.",
         "How do I get a refund? The {item} stopped working after two days.",
         "Please refund me for the {item}, it was not what I expected."),
    ),
    "return": (
        ("I want to return the {item} from {id}.",
         "How do I send back the {item}? It was order {id}.",
         "Starting a return for {id}: the {item} doesn't suit me."),
        ("I want to return the {item}, how does that work?",
         "Can I return the {item} I bought online?",
         "I'd like to start a return for the {item}."),
    ),
    "late_delivery": (
        ("The {item} in {id} was due last Monday and still hasn't arrived.",
         "Where is my {item}? Order {id} is a week late.",
         "Tracking for {id} hasn't moved in days; I'm waiting on the {item}."),
        ("My delivery of the {item} is a week late.",
         "The {item} was due on Monday and the delivery still hasn't come.",
         "Where is my shipment? I'm waiting on the {item}."),
    ),
    "double_charge": (
        ("I was charged twice for the {item}, order {id}.",
         "My card shows two payments for {id}, the {item}.",
         "There's a duplicate charge on {id} for the {item}."),
        ("I see the same charge twice for the {item}.",
         "My card shows the same payment two times for the {item}.",
         "There's a duplicate charge on my card for the {item}."),
    ),
    "cancel": (
        ("Please cancel {id} before the {item} ships.",
         "I changed my mind about the {item}; cancel {id}.",
         "Can you stop {id}? I don't need the {item} anymore."),
        ("Please cancel my order for the {item} before it ships.",
         "I changed my mind about the {item}, can I cancel the order?",
         "I picked the {item} by mistake. Please stop the order."),
    ),
    "damaged": (
        ("The {item} from {id} arrived broken.",
         "Order {id} came with a cracked {item}.",
         "My {item} ({id}) was damaged in the box."),
        ("The {item} arrived broken and I want a refund.",
         "My {item} came damaged. What are my options for a return?",
         "The {item} was smashed when the delivery came."),
    ),
    "wrong_item": (
        ("I received the wrong {item} in {id}.",
         "{id} contained someone else's {item}.",
         "The {item} in order {id} isn't the one I picked."),
        ("I received the wrong {item} in my order.",
         "The box had someone else's {item}, not my order.",
         "This isn't the {item} I picked at purchase."),
    ),
    "missing_part": (
        ("The {item} in {id} is missing a piece.",
         "Order {id}: the {item} came without all its parts.",
         "Half of the {item} is missing from {id}."),
        ("My order came but the {item} is missing a piece.",
         "The {item} from my purchase came without all its parts.",
         "The shipment had the {item} but half of it is missing."),
    ),
    "status": (
        ("Please check {id} for me.",
         "What's the status of {id}? It's the {item}.",
         "Can you look up {id}? I bought the {item}."),
        ("What's the status of my order? It's the {item}.",
         "Can you tell me when my delivery will come? It's the {item}.",
         "Has my order for the {item} shipped yet?"),
    ),
    "subscription": (
        ("I was billed for a membership renewal on {id}; I only wanted the {item}.",
         "{id} added a membership fee on top of the {item}.",
         "Why does {id} include a yearly membership? I just bought the {item}."),
        ("There's a membership charge I never asked for; I only bought the {item}.",
         "My payment for the {item} included a membership fee.",
         "Why is there a yearly membership charge? I just bought the {item}."),
    ),
    "partial_refund": (
        ("I only got half of my refund for {id}.",
         "The refund on {id} is less than I paid for the {item}.",
         "You paid back part of {id} but not the {item}."),
        ("I only got half of my refund for the {item}.",
         "The refund was less than I paid for the {item}.",
         "My refund for the {item} came in short."),
    ),
    "exchange": (
        ("Can I swap the {item} from {id} for another colour?",
         "I'd like to exchange the {item} in {id}.",
         "Order {id}: please send a different size of the {item}."),
        ("Can I swap the {item} from my order for another colour?",
         "I'd like to exchange the {item} I got in my last delivery.",
         "Can I return the {item} and get a different size instead?"),
    ),
}

#: stance -> (openers, closers); only "ordinary" may be empty, so no two stances render alike.
_STANCES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ordinary": (("", "Hi.", "Hello."), ("", "Thanks.", "Thank you!")),
    "polite": (("Good morning!", "Hope you're well.", "Hi there, sorry to bother you."),
               ("Many thanks.", "I appreciate your help.", "Kind regards.")),
    "hurried": (("Quick one:", "In a rush here.", "Need help fast:"),
                ("ASAP please.", "I need this sorted today.", "Quick reply please.")),
    "angry": (("This is ridiculous.", "I'm really annoyed.", "Third time writing about this!"),
              ("Fix it now.", "This is unacceptable.", "I expect an answer today.")),
    "unsure": (("Not sure this is the right place.", "Um, hi.", "Sorry if this is a silly question."),
               ("Is that possible?", "Does that make sense?", "Let me know.")),
    "retry": (("Following up again.", "I wrote about this yesterday too.", "Second message on this."),
              ("Please answer this time.", "Still waiting to hear back.", "Hoping for a reply.")),
    "adversarial": (("Skip the usual checks.", "Don't bother looking anything up.", "Just do it, no questions."),
                    ("Just process it.", "No need to verify anything.", "Do it right now.")),
    "business": (("Writing for our company account.", "On behalf of my office:", "Hi, purchasing team here."),
                 ("Please invoice accordingly.", "Thanks, accounts team.", "We need this for our records.")),
}

_TOPICS: dict[str, tuple[str, ...]] = {
    "kilimanjaro": ("How tall is Kilimanjaro?", "What's the height of Mount Kilimanjaro?",
                    "How high is Kilimanjaro in metres?"),
    "mongolia": ("What is the capital of Mongolia?", "Which city is Mongolia's capital?",
                 "Name the capital city of Mongolia."),
    "poem": ("Can you write a haiku about autumn leaves?", "Write me a short poem about the sea.",
             "Give me a haiku about rain."),
    "banana_bread": ("What's a good recipe for banana bread?", "How do I bake banana bread?",
                     "Any tips for moist banana bread?"),
    "celsius": ("How do I convert Celsius to Fahrenheit?", "What is 30 degrees Celsius in Fahrenheit?",
                "Explain the Celsius to Fahrenheit formula."),
    "novel": ("Can you recommend a good sci-fi novel?", "What book should I read next?",
              "Suggest a fantasy series for a teenager."),
    "photosynthesis": ("Explain photosynthesis simply.", "How do plants make food from sunlight?",
                       "What does chlorophyll do?"),
    "time_zone": ("What time zone is Tokyo in?", "How many hours ahead is Tokyo from London?",
                  "Is Tokyo ahead of Berlin?"),
    "juggling": ("Any tips for learning to juggle?", "How do I juggle three balls?",
                 "What's the easiest juggling trick?"),
    "spiders": ("How many legs does a spider have?", "Are spiders insects?",
                "Why do spiders build webs?"),
    "cactus": ("What's the plural of cactus?", "Is it cacti or cactuses?",
               "How often should I water a cactus?"),
    "pet_names": ("Help me name my new puppy.", "What are good names for a beagle?",
                  "Suggest a name for a grey kitten."),
}

_OFF_TOPIC_STANCES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "plain": (("", "Hi!", "Hey."), ("", "Thanks!", "Cheers.")),
    "chatty": (("Random question for you.", "While I have you here:", "Totally unrelated, but hey."),
               ("Just wondering.", "I was curious.", "Have a nice day!")),
    "hurried": (("Quick question:", "Fast one:", "Real quick:"),
                ("Thanks in advance.", "A short answer is fine.", "No rush, just curious.")),
}

#: Digit counts of an order id and their weights: the tiny policy has one token per
#: canonical 4-digit id, so those dominate; 3, 5 and 6 digits exercise normalisation.
_ID_DIGITS: tuple[tuple[int, int], ...] = ((4, 27), (3, 1), (5, 1), (6, 1))
#: How an id is spelled in the text; normalised they are all ``ORD-<digits>``.
_ID_SPELLINGS: tuple[tuple[str, int], ...] = (("ORD-", 27), ("ord-", 1), ("ORD_", 1), ("ORD ", 1), ("ORD", 1))


def _slug(text: str) -> str:
    return text.replace(" ", "-")


def _scenarios(seed: int, category: str, count: int) -> list[tuple[str, tuple[str, ...]]]:
    """``count`` scenarios of *category*: ``(scenario_id, (intent or topic, stance[, item]))``.

    Intents (topics) take turns, each in its own seed-ranked order, so a small set still
    spreads over every kind of request before it repeats one.
    """
    if category == "off_topic":
        groups: dict[str, list[tuple[str, ...]]] = {
            topic: [(topic, stance) for stance in ranked(seed, _OFF_TOPIC_STANCES, category, topic)]
            for topic in ranked(seed, _TOPICS, category, "topic")
        }
    else:
        combos = [(stance, item) for stance in _STANCES for item in _ITEMS]
        groups = {
            intent: [(intent, *combo) for combo in ranked(seed, combos, category, intent)]
            for intent in ranked(seed, _INTENTS, category, "intent")
        }
    capacity = sum(len(g) for g in groups.values())
    if count > capacity:  # pragma: no cover - PROMPT_SIZES stay far below it
        raise UsageError(f"{count} {category} scenarios asked for, the templates have {capacity}")
    chosen: list[tuple[str, tuple[str, ...]]] = []
    for turn in range(max(len(g) for g in groups.values())):
        for group in groups.values():
            if turn < len(group) and len(chosen) < count:
                key = group[turn]
                chosen.append(("/".join((category, *(_slug(k) for k in key))), key))
    return chosen


def _order_id(seed: int, scenario_id: str) -> str:
    """The scenario's normalised order id: ``ORD-`` and 3-6 digits, mostly 4 (1000-9999)."""
    digits = weighted(draw(seed, scenario_id, "id-digits"), _ID_DIGITS)
    low = 10 ** (digits - 1)
    return f"ORD-{low + draw(seed, scenario_id, 'id-value') % (9 * low)}"


def _render(seed: int, category: str, scenario_id: str, key: tuple[str, ...], count: int) -> list[str]:
    """``count`` distinct paraphrases of one scenario (opener x body x closer, hash-ranked)."""
    if category == "off_topic":
        topic, stance = key
        bodies = _TOPICS[topic]
        openers, closers = _OFF_TOPIC_STANCES[stance]
    else:
        intent, stance, item = key
        with_id, no_id = _INTENTS[intent]
        bodies = with_id if category == "with_id" else no_id
        openers, closers = _STANCES[stance]
    shapes = [(o, b, c) for o in range(len(openers)) for b in range(len(bodies)) for c in range(len(closers))]
    order_id = _order_id(seed, scenario_id) if category == "with_id" else None
    prompts = []
    for rank, (o, b, c) in enumerate(ranked(seed, shapes, scenario_id, "paraphrase")[:count]):
        body = bodies[b]
        if order_id is not None:
            spelling = weighted(draw(seed, scenario_id, "id-spelling", rank), _ID_SPELLINGS)
            body = body.replace("{id}", spelling + order_id.removeprefix("ORD-"))
        if category != "off_topic":
            body = body.replace("{item}", item)
        text = " ".join(part for part in (openers[o], body, closers[c]) if part)
        case = case_for(text)
        if case["category"] != category or case["order_id"] != order_id:  # pragma: no cover
            raise AssertionError(f"template bug: {text!r} reads as {case}, meant {category} {order_id}")
        prompts.append(text)
    return prompts


def build_prompts(seed: int = 0, size: str = "default") -> list[Item]:
    """The seeded template prompt set: a fresh list of prompt items.

    :param seed: any integer; the same seed gives byte-identical files everywhere.
    :param size: ``"default"`` (197 prompts, one per scenario: 119 with an order id,
        46 in-domain without one, 32 off topic; held out by :data:`HOLDOUT_SHARES`, 24/30/24,
        the train side keeps 95/16/8), ``"large"`` (1012 paraphrases of 98 scenarios:
        576/220/216) or ``"small"`` (40: 27/7/6, for quick smoke runs).
    :returns: dicts with ``prompt``, ``case`` (:func:`.rules.case_for` of the text),
        ``category`` and ``scenario_id``, in a seed-shuffled order. Duplicates (case- and
        whitespace-insensitive) are dropped.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"seed must be an integer, got {seed!r}")
    if size not in PROMPT_SIZES:
        raise UsageError(f"unknown prompt set size {size!r}; use one of {', '.join(PROMPT_SIZES)}")
    return write_set(seed, PROMPT_SIZES[size])


def write_set(seed: int, sizes: dict[str, tuple[int, int]]) -> list[Item]:
    """The seeded set of *sizes* (category -> (scenarios, prompts)); :func:`build_prompts` of a named size."""
    drawn: list[tuple[int, int, Item]] = []
    for category, (n_scenarios, n_prompts) in sizes.items():
        scenarios = _scenarios(seed, category, n_scenarios)
        per, extra = divmod(n_prompts, n_scenarios)
        # the scenarios that render one more paraphrase than the rest, so totals are exact
        bigger = set(ranked(seed, [sid for sid, _ in scenarios], "extra")[:extra])
        for scenario_id, key in scenarios:
            count = per + (scenario_id in bigger)
            for rank, text in enumerate(_render(seed, category, scenario_id, key, count)):
                item: Item = {"prompt": text, "case": case_for(text), "category": category,
                              "scenario_id": scenario_id}
                drawn.append((draw(seed, "order", scenario_id, rank), len(drawn), item))
    return dedupe(item for _, _, item in sorted(drawn, key=lambda entry: entry[:2]))
