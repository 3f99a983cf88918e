"""Next-round task selection: train round two on the tasks round one left half-solved.

A task the round-one policy passes every time gives GRPO a group of equal rewards (zero
advantage, no gradient) and DPO no pair; a task it never passes gives the same and teaches
mostly noise. So, like the reference run's ``next_round``, a second round (``--from-run``)
samples every train task ``k`` times under the round-one policy and keeps those whose pass
rate lies in the ``--difficulty`` band (default 0.2-0.8), reporting per category what it
dropped as solved (above the band) and as unsolved (below it).

A task is one train prompt, graded by the environment: the reference run keyed tasks by scenario and
so kept one paraphrase per scenario on a set with many; here every kept paraphrase stays.
The sampling seed is derived from the round-one run (its sample seed + 500, the reference run's
17 + 500), so the selection is reproducible and its draws are not the ones round one
trained on.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from ..data.prompts import count_by_category, fingerprint
from ..errors import DataError, RlgateWarning, UsageError
from ..policy.sampling import sample_rows
from ..records import PromptItem, Row
from .config import RunKnobs
from .run import RunFolder

if TYPE_CHECKING:
    from ..policy.handles import Model, Tokenizer

__all__ = ["SEED_OFFSET", "Selection", "describe", "pass_rates", "select_by_pass_rate", "select_next_round",
           "selection_seed"]

Item = PromptItem


class CategoryCounts(TypedDict):
    """One category's train tasks under the selection: how many, kept, solved (above the band), unsolved."""

    tasks: int
    kept: int
    solved: int
    unsolved: int


class KeptTask(TypedDict):
    """A kept task, by its scenario and prompt, with its pass rate."""

    scenario_id: str | None
    prompt: str
    pass_rate: float


class SelectionRecord(TypedDict):
    """``config.json``'s ``next_round``: :meth:`Selection.to_dict`."""

    band: list[float]
    k: int
    seed: int
    policy: str
    tasks: int
    kept: int
    by_category: dict[str, CategoryCounts]
    emptied: list[str]
    kept_fingerprint: str
    kept_tasks: list[KeptTask]

#: Added to the round-one run's sample seed: the reference run samples round two's tasks at 17 + 500.
SEED_OFFSET = 500


def selection_seed(from_run: str) -> int:
    """The sampling seed of the selection: the round-one run's sample seed + :data:`SEED_OFFSET`."""
    try:
        knobs = RunFolder.open(from_run).config.get("knobs", {})
    except DataError as exc:
        raise UsageError(f"--from-run {from_run!r}: {exc.reason}") from None
    seed = knobs.get("sample_seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError(f"--from-run {from_run!r}: its config.json records no integer knobs.sample_seed; "
                         "re-run round one with this version of rlgate")
    return seed + SEED_OFFSET


@dataclass(frozen=True)
class Selection:
    """The train tasks a next round keeps, and what it dropped, per category."""

    kept: list[Item]
    band: tuple[float, float]
    k: int
    seed: int
    policy: str
    #: category -> its counts
    by_category: dict[str, CategoryCounts] = field(default_factory=dict)
    #: the kept tasks' pass rates, in ``kept`` order
    rates: list[float] = field(default_factory=list)

    @property
    def emptied(self) -> list[str]:
        """Categories that had train tasks and have none left."""
        return [c for c, n in self.by_category.items() if n["tasks"] and not n["kept"]]

    def to_dict(self) -> SelectionRecord:
        """What the run's ``config.json`` records under ``next_round``."""
        return {
            "band": list(self.band), "k": self.k, "seed": self.seed, "policy": self.policy,
            "tasks": sum(n["tasks"] for n in self.by_category.values()), "kept": len(self.kept),
            "by_category": self.by_category, "emptied": self.emptied, "kept_fingerprint": fingerprint(self.kept),
            "kept_tasks": [{"scenario_id": item.get("scenario_id"), "prompt": item["prompt"], "pass_rate": rate}
                           for item, rate in zip(self.kept, self.rates, strict=True)],
        }


def describe(record: SelectionRecord) -> list[str]:
    """The lines ``rlgate train`` prints for a ``next_round`` record (``Selection.to_dict``)."""
    low, high = record["band"]
    head = (f"next round: kept {record['kept']} of {record['tasks']} train tasks with a pass rate in "
            f"[{low:g}, {high:g}] under {record['policy']} ({record['k']} samples each, seed {record['seed']})")
    lines = [head]
    for category, n in record["by_category"].items():
        lines.append(f"  {category}: kept {n['kept']} of {n['tasks']}; dropped {n['solved']} solved (> {high:g}), "
                     f"{n['unsolved']} unsolved (< {low:g})")
    return lines


def pass_rates(tasks: Sequence[PromptItem], rows: Sequence[Row]) -> list[float]:
    """Each task's share of passing rows, matched by prompt text (rows carry ``prompt`` and ``reward``)."""
    passed: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for row in rows:
        seen[row["prompt"]] += 1
        passed[row["prompt"]] += int(row["reward"])
    missing = [task["prompt"] for task in tasks if not seen[task["prompt"]]]
    if missing:
        raise RuntimeError(f"no sampled rows for {len(missing)} train task(s), e.g. {missing[0]!r:.60}")
    return [passed[task["prompt"]] / seen[task["prompt"]] for task in tasks]


def select_by_pass_rate(
    tasks: Sequence[Item],
    rates: Sequence[float],
    band: tuple[float, float],
    *,
    k: int,
    seed: int,
    policy: str,
) -> Selection:
    """Keep the tasks whose pass rate lies in *band* (inclusive); count the rest per category.

    A category the filter empties is an :class:`RlgateWarning` naming it (round two cannot
    move it); no task kept at all is a :class:`UsageError`, since there is nothing to train on.
    """
    low, high = band
    counts: dict[str, CategoryCounts] = {c: {"tasks": 0, "kept": 0, "solved": 0, "unsolved": 0}
                                         for c in count_by_category(tasks)}
    kept: list[Item] = []
    kept_rates: list[float] = []
    for task, rate in zip(tasks, rates, strict=True):
        n = counts[str(task["category"])]
        n["tasks"] += 1
        if rate > high:
            n["solved"] += 1
        elif rate < low:
            n["unsolved"] += 1
        else:
            n["kept"] += 1
            kept.append(task)
            kept_rates.append(rate)
    selection = Selection(kept, (low, high), k, seed, policy, counts, kept_rates)
    if not kept:
        solved = sum(n["solved"] for n in counts.values())
        raise UsageError(f"--difficulty {low:g} {high:g}: no train task has a pass rate in the band under {policy} "
                         f"({solved} solved, {len(tasks) - solved} unsolved of {len(tasks)}); widen the band, e.g. "
                         "--difficulty 0 1 to keep every task")
    if selection.emptied:
        warnings.warn(f"--difficulty {low:g} {high:g} left no train task in {', '.join(selection.emptied)} "
                      f"(every one solved or unsolved under {policy}); round two will not train "
                      "that category", RlgateWarning, stacklevel=2)
    return selection


def select_next_round(model: Model, tokenizer: Tokenizer, tasks: Sequence[Item], knobs: RunKnobs, *, policy: str,
                      progress: bool | None = None) -> Selection:
    """Sample each task ``knobs.k`` times under *model* (the round-one policy, merged) and
    keep those inside ``knobs.difficulty``; see :func:`select_by_pass_rate`."""
    if knobs.difficulty is None or knobs.from_run is None:
        raise UsageError("--difficulty: next-round selection needs --from-run RUN (the round-one policy)")
    seed = selection_seed(knobs.from_run)
    unique = list({task["prompt"]: task for task in tasks}.values())  # a balance copy samples the same replies
    rows = sample_rows(model, tokenizer, unique, sampling=knobs.sampling(seed=seed), policy=policy,
                       eval_run="next-round", env=knobs.environment, progress=progress,
                       desc="sampling train tasks (next-round difficulty)")
    low, high = knobs.difficulty
    return select_by_pass_rate(tasks, pass_rates(tasks, rows), (low, high), k=knobs.k, seed=seed,
                               policy=policy)
