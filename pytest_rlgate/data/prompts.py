"""Prompt sets of any environment: files, fingerprint, splits and balance.

A prompt item is ``{"prompt", "case", "category", "scenario_id"}``. The environment (see
:mod:`pytest_rlgate.environment.contract`) says which categories exist and, when it can, what a prompt's case
is and how to write a seeded set; this module never names a task. A prompt file is the
user's data: its own ``case`` and ``category`` are kept, the environment's ``case_for`` only
fills lines that have none, and a category the environment does not declare is an error
naming the line, never a silent relabel.

Why so strict about determinism: a gate compares *the same* holdout before and after
training. Files are canonical bytes (sorted keys, UTF-8, ``\n``) with a SHA-256
fingerprint, and splits rank scenarios by SHA-256, so the same input gives the same holdout
on every Python, in every process, whatever ``PYTHONHASHSEED`` says.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple, cast

from .._io.atomic import atomic_write
from ..environment.contract import Env, EnvSpec, load_env
from ..environment.seeded import prompt_key
from ..errors import DataError, UsageError
from ..options import HOLDOUT_FRACTION
from ..records import PromptItem
from .hygiene import Decontamination, decontaminate, skip_decontamination
from .jsonl import iter_json_lines

#: how prompt files are named in messages, and how to get one
PROMPTS_FILE = "prompts file"
PROMPTS_FIX = "write one with `rlgate prompts --out-dir DIR`"

__all__ = [
    "HOLDOUT",
    "PROMPT_SEED",
    "SIZE",
    "SPLITS",
    "Holdout",
    "Split",
    "TrainSplit",
    "balance",
    "build_prompts",
    "canonical_bytes",
    "count_by_category",
    "describe_holdout",
    "fingerprint",
    "holdout_shares",
    "plain_split",
    "prepare_split",
    "prompt_item",
    "read_prompts",
    "stratified_split",
    "write_prompts",
]

#: a checked prompt item (the name the functions below have always used)
Item = PromptItem
#: Prompt seed of the template writer: the same seed writes the same prompt set and holdout, byte for byte.
PROMPT_SEED = 0
#: Prompt-set size handed to the environment's ``build_prompts`` (refund: the reference run's 200 situations).
SIZE = "default"
#: The share of each category's scenarios held out when neither the caller nor the environment
#: (its ``holdout_shares``) says otherwise.
HOLDOUT = 0.2


def build_prompts(seed: int = PROMPT_SEED, size: str = SIZE, env: EnvSpec = None) -> list[Item]:
    """The environment's own seeded prompt set (the default environment's when *env* is None).

    :param seed: any integer; the same seed gives byte-identical files everywhere.
    :param size: one of the environment's sizes (``env.prompt_sizes``).
    :returns: fresh prompt items, each in a category the environment declares.
    :raises UsageError: when the environment writes no prompts (it reads them from a file).
    """
    env = load_env(env)
    return [_built(item, env, number) for number, item in enumerate(env.build_prompts(seed, size), start=1)]


def _built(item: dict[str, object], env: Env, number: int) -> Item:
    """An item of the environment's own prompt set, checked: a prompt, and a category it declares."""
    where = f"<environment {env.name}: build_prompts item>"
    prompt = item.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise DataError(f"no 'prompt' string, got {prompt!r:.40}; each prompt item needs one", path=where, line=number)
    env.check_category(env.category_of(item), path=where, line=number)
    return cast(Item, item)  # checked above: the environment writes the rest of its own items


# ---------------------------------------------------------------------------------------
# Files and fingerprint


def _line(item: Mapping[str, object]) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False) + "\n"


def canonical_bytes(items: Iterable[Mapping[str, object]]) -> bytes:
    """The canonical JSONL of *items*: one object a line, sorted keys, UTF-8, ``\\n``."""
    return "".join(_line(item) for item in items).encode("utf-8")


def fingerprint(items: Iterable[Mapping[str, object]]) -> str:
    """``sha256:<hex>`` of :func:`canonical_bytes`; equal fingerprints mean equal files."""
    return "sha256:" + hashlib.sha256(canonical_bytes(items)).hexdigest()


def write_prompts(path: str | os.PathLike[str], items: Iterable[Mapping[str, object]]) -> str:
    """Write *items* as canonical JSONL, atomically (temp file + rename); return the fingerprint."""
    data = canonical_bytes(items)
    atomic_write(path, data)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_prompts(path: str | os.PathLike[str], *, env: EnvSpec = None, repeats: bool = False) -> list[Item]:
    """Load a prompts file (JSONL, one object a line with at least ``prompt``).

    A line's own ``case`` and ``category`` are kept as written; *env*'s ``case_for`` fills the
    case of a line that has none, and the case's ``category`` fills a missing category.
    ``scenario_id`` falls back to the whitespace- and case-folded text; other keys are kept.
    Blank lines are skipped.

    :raises DataError: naming every bad line (up to ten) by number: not a JSON object, no
        prompt, no case where the environment reads none, a category *env* does not declare,
        or a prompt an earlier line already holds (same scenario and text) unless *repeats*
        (a balanced ``train.jsonl`` repeats minority prompts). An empty file is an error too.
    """
    path = Path(path)
    env = load_env(env)
    items: list[Item] = []
    problems: list[tuple[int, str]] = []

    def bad(exc: DataError) -> None:
        problems.append((exc.line or 0, exc.reason))

    first_seen: dict[tuple[str | None, str], int] = {}
    for number, row in iter_json_lines(path, what=PROMPTS_FILE, fix=PROMPTS_FIX, on_error=bad):
        try:
            item = prompt_item(row, env)
        except DataError as exc:
            problems.append((number, exc.reason))
            continue
        key = (item.get("scenario_id"), item["prompt"])
        if key in first_seen and not repeats:  # its rows would clash with the first one's in every gate
            problems.append((number, f"repeats the prompt of line {first_seen[key]} (scenario "
                                     f"{str(key[0])[:40]!r}); each prompt appears once (only a balanced train.jsonl "
                                     "repeats prompts: read it with repeats=True)"))
            continue
        first_seen[key] = number
        items.append(item)
    if problems:
        problems.sort()
        shown = "; ".join(f"line {n}: {why}" for n, why in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise DataError(f"{len(problems)} bad line(s): {shown}{more}. Each line must be a JSON object like "
                        '{"prompt": "...", "case": {...}, "category": "...", "scenario_id": "..."}',
                        path=path, line=problems[0][0])
    if not items:
        raise DataError("no prompts in the file; each line needs a JSON object with a \"prompt\"", path=path)
    return items


def prompt_item(row: object, env: Env) -> Item:
    """*row* as a prompt item of *env*: its own case and category kept, the gaps filled.

    A missing case comes from ``env.case_for``; a missing category from the case; a missing
    ``scenario_id`` is the folded prompt text. A :class:`DataError` (the reason only; the caller
    adds the place) says what is wrong.
    """
    if not isinstance(row, Mapping):
        raise DataError(f"expected a JSON object, got {type(row).__name__}")
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise DataError('needs a non-empty string "prompt"')
    scenario_id = row.get("scenario_id", prompt_key(prompt))
    if not isinstance(scenario_id, str) or not scenario_id:
        raise DataError(f'"scenario_id" must be a non-empty string, got {scenario_id!r}')
    case = row.get("case")
    if case is None:
        case = env.case_for(prompt)
        if case is None:
            raise DataError(f'no "case", and environment {env.name} reads none from the text (it has no '
                            'case_for); add the case to the line, e.g. "case": {"answer": ...}')
    elif not isinstance(case, Mapping):
        raise DataError(f'"case" must be a JSON object, got {type(case).__name__} {case!r:.40}')
    if row.get("category") is not None and not (isinstance(row["category"], str) and row["category"]):
        raise DataError(f'"category" must be a non-empty string, got {row["category"]!r}')
    category = env.category_of({**row, "case": case})
    if category is None:
        raise DataError(f'no "category" (and its case names none); add "category": one of '
                        f"{', '.join(env.categories)}")
    env.check_category(category)
    return cast(Item, {**row, "prompt": prompt, "case": dict(case), "category": category,  # checked above
                       "scenario_id": scenario_id})


# ---------------------------------------------------------------------------------------
# Splits and balance


class Split(NamedTuple):
    """Train and holdout items; every prompt of a scenario is on one side."""

    train: list[Item]
    holdout: list[Item]


def count_by_category(items: Iterable[Mapping[str, object]]) -> dict[str, int]:
    """``{category: count}`` in name order."""
    return dict(sorted(Counter(str(item["category"]) for item in items).items()))


def _check_fraction(fraction: float) -> None:
    if HOLDOUT_FRACTION.problem(fraction) is not None:
        raise UsageError(f"holdout fraction must be between 0 and 1 (exclusive), got {fraction!r}")


def holdout_shares(fraction: float | None, env: Env, categories: Iterable[str]) -> dict[str, float]:
    """The share held out of each of *categories*: *fraction* for every one when given, else
    *env*'s ``holdout_shares`` (a rare category held out more than a common one, so that each
    holdout can see a drop while the train split keeps its shares), else :data:`HOLDOUT`."""
    if fraction is not None:
        _check_fraction(fraction)
        return dict.fromkeys(categories, fraction)
    return {category: env.holdout_shares.get(category, HOLDOUT) for category in categories}


def describe_holdout(fraction: float | None, env: Env) -> str:
    """``0.2`` or, for an environment's own shares, ``no_id 0.65, off_topic 0.75, with_id 0.2``."""
    if fraction is not None or not env.holdout_shares:
        return f"{HOLDOUT if fraction is None else fraction:g}"
    shares = holdout_shares(None, env, env.categories)
    return ", ".join(f"{category} {share:g}" for category, share in shares.items())


def _sha_bucket(text: str) -> float:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF


def plain_split(items: Sequence[Item], fraction: float = HOLDOUT) -> Split:
    """Split by scenario alone: SHA-256 of the scenario id -> a bucket in [0, 1); below
    *fraction* is holdout. Kept for comparison; it can leave a whole category out of the
    holdout (the reference run's no-id blind spot), which :func:`stratified_split` refuses to do.
    """
    _check_fraction(fraction)
    train: list[Item] = []
    holdout: list[Item] = []
    for item in items:
        (holdout if _sha_bucket(str(item["scenario_id"])) < fraction else train).append(item)
    return Split(train, holdout)


def stratified_split(
    items: Sequence[Item],
    fraction: float | None = None,
    *,
    categories: Iterable[str] | None = None,
    env: EnvSpec = None,
) -> Split:
    """Hold out scenarios within each category, so every category is measured unseen.

    Within a category of ``S`` scenarios, rank them by SHA-256 of ``category:scenario_id``
    and hold out the first ``max(min(2, S - 1), round(share * S))``, never all ``S``:
    one always stays in train. Item order is kept on both sides.

    :param fraction: the share held out of every category; None: *env*'s ``holdout_shares``
        (refund holds out 0.65 of its rare no-id scenarios and 0.2 of the with-id ones), 0.2
        for a category they do not name.
    :param categories: the categories that must end up in the holdout; by default the ones
        *env* declares (the default environment's when *env* is None too).
    :raises DataError: when a declared category has no scenario in the holdout.
    """
    environment = load_env(env)
    scenarios: dict[str, set[str]] = {}
    for item in items:
        scenarios.setdefault(str(item["category"]), set()).add(str(item["scenario_id"]))
    shares = holdout_shares(fraction, environment, scenarios)
    held: set[tuple[str, str]] = set()
    for category, ids in scenarios.items():
        total = len(ids)
        count = min(max(min(2, total - 1), round(shares[category] * total)), total - 1)
        ranked = sorted(ids, key=lambda sid: hashlib.sha256(f"{category}:{sid}".encode()).hexdigest())
        held.update((category, sid) for sid in ranked[:count])
    declared = list(environment.categories if categories is None else categories)
    missing = [c for c in declared if not any(cat == c for cat, _ in held)]
    if missing:
        detail = ", ".join(f"{c} ({len(scenarios.get(c, ()))} scenario(s))" for c in missing)
        raise DataError(
            f"the holdout would have no {', '.join(missing)} prompts: {detail}. A category needs at "
            "least 2 scenarios (one held out, one kept for training); add prompts of that category "
            "with their own scenario_id, or declare only the categories you grade (categories=, or "
            "an environment that declares just those)"
        )
    train: list[Item] = []
    holdout: list[Item] = []
    for item in items:
        side = holdout if (str(item["category"]), str(item["scenario_id"])) in held else train
        side.append(item)
    return Split(train, holdout)


def balance(items: Sequence[Item], share: float, max_repeat: int = 6) -> list[Item]:
    """Repeat minority categories of a *train* list until each has at least *share*.

    For each category in name order: while its share of the growing list is below *share*
    and it appears fewer than *max_repeat* times (the original counts as one), append
    another copy of its original rows. Originals stay first, in order; repeats are fresh
    dict copies. Never apply it to a holdout. Seed check: 544 = 446/59/39 becomes
    857 = 446/177/234 at ``share=0.25``.
    """
    if not 0.0 <= share < 1.0:
        raise UsageError(f"balance share must be in [0, 1), got {share!r}; 0.25 is a good start")
    if max_repeat < 1:
        raise UsageError(f"max_repeat must be at least 1, got {max_repeat!r}")
    result = list(items)
    if share <= 0 or not result:
        return result
    by_category: dict[str, list[Item]] = {}
    for item in items:
        by_category.setdefault(str(item["category"]), []).append(item)
    counts = {category: len(rows) for category, rows in by_category.items()}
    for category in sorted(by_category):
        originals = by_category[category]
        copies = 1
        # one IEEE multiplication, no float sums: identical on every Python
        while counts[category] < share * len(result) and copies < max_repeat:
            result.extend(item.copy() for item in originals)
            counts[category] += len(originals)
            copies += 1
    return result


# ---------------------------------------------------------------------------------------
# The one place a prompt set becomes training data

#: The split rules ``prepare_split`` (and ``rlgate prompts --split``) offer.
SPLITS: tuple[str, ...] = ("stratified", "plain")


@dataclass(frozen=True)
class TrainSplit:
    """A split ready to train on: the holdout, and train tasks decontaminated against it.

    ``tasks`` is the train side after decontamination and before balance: one entry per
    task, what a next-round filter samples. ``train`` is ``tasks`` balanced to ``share``,
    recomputed whenever the tasks are narrowed, so balance always sees the final tasks.
    """

    tasks: list[Item]
    holdout: list[Item]
    decontamination: Decontamination
    share: float = 0.0
    #: ``tasks`` with minority categories repeated up to ``share`` (see :func:`balance`)
    train: list[Item] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "train", balance(self.tasks, self.share))

    @property
    def split(self) -> Split:
        return Split(self.train, self.holdout)

    def with_tasks(self, tasks: Iterable[Item]) -> TrainSplit:
        """The same split with the train tasks narrowed to *tasks* (balanced afresh)."""
        return replace(self, tasks=list(tasks))


@dataclass(frozen=True)
class Holdout:
    """An environment's held-out prompts as a training run holds them out: its seeded set
    (*seed*, *size*) split by category at *fraction* (:func:`stratified_split`), so a checkpoint
    trained elsewhere is sampled on the prompts ``rlgate train`` would have kept unseen."""

    seed: int = PROMPT_SEED
    size: str = SIZE
    #: None: the environment's own shares (:func:`holdout_shares`)
    fraction: float | None = None

    def items(self, env: Env) -> list[Item]:
        return list(stratified_split(build_prompts(self.seed, self.size, env), self.fraction, env=env).holdout)

    def describe(self, env: Env) -> str:
        return f"holdout of template:seed={self.seed}:{self.size} ({describe_holdout(self.fraction, env)})"


def prepare_split(
    items: Sequence[Item],
    fraction: float | None = None,
    *,
    env: EnvSpec = None,
    how: str = "stratified",
    share: float = 0.0,
    decontaminate_train: bool = True,
) -> TrainSplit:
    """Split *items*, drop train prompts that repeat a holdout prompt, balance the rest.

    Every surface that splits (``rlgate prompts``, the ``rlgate_split`` fixture, ``rlgate
    train``) calls this, so all three drop the same prompts and report the same numbers.
    Decontamination runs before balance, so a repeated minority prompt is never a copy of a
    contaminated one. *how* is ``stratified`` (by category, the default) or ``plain``;
    *fraction* None holds out the environment's own shares (:func:`stratified_split`).
    """
    if how not in SPLITS:
        raise UsageError(f"split {how!r}: choose one of {', '.join(SPLITS)}")
    split = (stratified_split(items, fraction, env=env) if how == "stratified"
             else plain_split(items, HOLDOUT if fraction is None else fraction))
    record = (decontaminate(split.train, split.holdout) if decontaminate_train
              else skip_decontamination(split.train))
    return TrainSplit(record.kept, list(split.holdout), record, share)
