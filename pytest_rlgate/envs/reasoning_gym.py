"""reasoning-gym tasks as one environment: ``load_env("reasoning_gym[basic_arithmetic, leg_counting]")``.

`reasoning-gym <https://pypi.org/project/reasoning-gym/>`_ (the optional extra
``pytest-rlgate[reasoning-gym]``) writes seeded procedural datasets and grades answers with
each dataset's own ``score_answer(answer, entry)``. This adapter maps it onto the
environment contract, adding as little of its own as it can, so a gate on these tasks
measures what reasoning-gym measures:

* **categories** are the chosen task names, so the gate reports one verdict per task;
* **cases** are the dataset entries (``question``, ``answer``, ``metadata``), normalised to
  JSON plus the task name (``category``) and the dataset's ``seed``/``size``. The answer key
  lives only in the case, so prompt files written by ``rlgate prompts --env`` carry their
  cases and a file read back in a fresh process grades exactly as the items did in memory;
* **score** is the task's ``score_answer`` on the answer pulled out of the reply by
  :func:`extract_answer`, clamped to [0, 1];
* **prompts** are each task's seeded generator, ``reasoning_gym.create_dataset(task, seed=,
  size=)``, so ``rlgate prompts --prompt-seed N`` and reasoning-gym agree entry for entry.

Only the default configuration of each task is offered: the fingerprint (docs/environments.md) holds the
task names and the package version, which is all that fixes the reward then.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from types import ModuleType
from typing import NamedTuple, Protocol, TypeGuard

from ..errors import UsageError
from ..records import JSONObject, PromptItem

__all__ = ["ADAPTER_VERSION", "ENVIRONMENT", "PROMPT_SIZES", "SYSTEM", "Extracted", "ReasoningGymEnv", "extract_answer",
           "known_tasks"]

#: Bump when :func:`extract_answer` or the scoring rules change: the environment fingerprint
#: hashes ``score``'s own source only, not the helpers it calls.
ADAPTER_VERSION = "1"

#: ``rlgate prompts --size`` -> multiple of the entries per task (the constructor's ``size``).
PROMPT_SIZES: dict[str, float] = {"small": 0.2, "default": 1.0, "large": 4.0}

#: reasoning-gym's own answer convention (its ``utils.extract_answer`` reads these tags), so
#: models already trained on reasoning-gym need no new format.
SYSTEM = (
    "Solve the problem. Think step by step if it helps, then give only the final answer inside "
    "<answer></answer> tags, for example <answer>42</answer>. If the question asks for a "
    "particular answer format, use that format inside the tags."
)

_INSTALL = 'pip install "pytest-rlgate[reasoning-gym]"'
#: registered in reasoning-gym but not a task: it mixes other tasks and needs their configs
_NOT_TASKS = frozenset({"composite"})
#: a name longer than this many tasks becomes ``reasoning_gym-<n>tasks-<hash>``
_NAMED_TASKS = 3

_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_MARKER = re.compile(r"^[ \t]*answer[ \t]*:", re.IGNORECASE | re.MULTILINE)


class Extracted(NamedTuple):
    """The answer read from a reply, and whether the reply stated it in the asked format."""

    answer: str | None
    explicit: bool


def extract_answer(reply: str) -> Extracted:
    """The answer a reply gives, by the first rule that finds one.

    1. the content of the last ``<answer>...</answer>`` tag (reasoning-gym's convention);
    2. else everything after the last line that starts with ``Answer:`` (any case);
    3. else the last non-empty line, so a bare ``292`` still scores.

    ``explicit`` is true for rules 1 and 2 only: it feeds the ``answered`` marker, which
    tells a policy that stopped formatting its answers from one that got worse at the task.
    Whitespace around the answer is stripped; nothing else is normalised, because the task's
    ``score_answer`` decides what counts as the same answer.
    """
    tags = _TAG.findall(reply)
    if tags:
        return Extracted(tags[-1].strip(), True)
    markers = list(_MARKER.finditer(reply))
    if markers:
        answer = reply[markers[-1].end():].strip()
        return Extracted(answer or None, bool(answer))
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    return Extracted(lines[-1] if lines else None, False)


def _rg() -> ModuleType:
    """reasoning-gym, imported on first use: it is an optional extra and takes ~1 s to import."""
    try:
        import reasoning_gym
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "reasoning_gym":
            raise UsageError(f"the reasoning_gym environment needs the reasoning-gym package: {_INSTALL}") from None
        raise
    module: ModuleType = reasoning_gym
    return module


def _rg_version() -> str:
    try:
        return importlib_metadata.version("reasoning-gym")
    except importlib_metadata.PackageNotFoundError:  # a source checkout on sys.path
        return str(getattr(_rg(), "__version__", "unknown"))


def known_tasks() -> tuple[str, ...]:
    """Every task name the installed reasoning-gym registers, sorted."""
    from_registry = _rg().factory.DATASETS
    return tuple(sorted(name for name in from_registry if name not in _NOT_TASKS))


class _Dataset(Protocol):
    """What rlgate uses of a reasoning-gym dataset: its entries, and the task's own scorer."""

    def __getitem__(self, index: int) -> Mapping[str, object]: ...

    def score_answer(self, answer: str | None, entry: Mapping[str, object]) -> float: ...


@functools.lru_cache(maxsize=256)
def _dataset(task: str, seed: int, size: int) -> _Dataset:
    """One dataset object per (task, seed, size): generation is seeded, scoring needs the object."""
    try:
        dataset: _Dataset = _rg().create_dataset(task, seed=seed, size=size)
        return dataset
    except (TypeError, ValueError, AssertionError) as exc:
        raise UsageError(f"reasoning-gym could not build task {task!r} (seed={seed}, size={size}): {exc}") from None


@functools.lru_cache(maxsize=8192)
def _entry(task: str, seed: int, size: int, index: int) -> tuple[Mapping[str, object], JSONObject]:
    """Entry *index* of a dataset as generated, and its JSON form (what a case carries)."""
    entry = _dataset(task, seed, size)[index]
    plain: JSONObject = json.loads(json.dumps(entry))
    return entry, plain


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class ReasoningGymEnv:
    """An environment over chosen reasoning-gym tasks (see the module docstring).

    :param tasks: reasoning-gym task names (``reasoning_gym.factory.DATASETS``); repeats are
        dropped. From a spec string, ``size=N`` among them sets *size*:
        ``reasoning_gym[leg_counting, size=20]``.
    :param size: entries per task in the ``default`` prompt set; ``small`` writes a fifth of
        that, ``large`` four times as many.
    :raises UsageError: without tasks, for an unknown task (naming the known ones), or when
        reasoning-gym is not installed (naming the extra to install).
    """

    version: str
    prompt_sizes = tuple(PROMPT_SIZES)
    system = SYSTEM
    #: ``answered`` is a symptom to read in reports, not a default gate: many tasks accept a
    #: bare last line, so guarding it would fail honest policies that skip the tags.
    guards: tuple[str, ...] = ()

    def __init__(self, *tasks: str, size: int | str = 50) -> None:
        names: list[str] = []
        for task in tasks:
            key, eq, value = str(task).partition("=")
            if not eq:
                names.append(key.strip())
            elif key.strip() == "size":
                size = value.strip()
            else:
                raise UsageError(f"reasoning_gym: unknown option {key.strip()!r}; the only option is size=N")
        try:
            per_task = int(size)
        except ValueError:
            raise UsageError(f"reasoning_gym: size must be a whole number of entries per task, got {size!r}") from None
        if per_task < 1:
            raise UsageError(f"reasoning_gym: size must be at least 1, got {per_task}")
        if not names:
            raise UsageError("reasoning_gym: name at least one task, "
                             "e.g. reasoning_gym[basic_arithmetic, leg_counting]")
        known = known_tasks()
        for task in names:
            if task not in known:
                close = difflib.get_close_matches(task, known, n=3)
                hint = f"did you mean {', '.join(close)}? " if close else ""
                raise UsageError(f"reasoning_gym: unknown task {task!r}; {hint}known tasks: {', '.join(known)}")
        self.tasks: tuple[str, ...] = tuple(dict.fromkeys(names))
        self.size = per_task
        for task in self.tasks:
            _dataset(task, 0, 1)  # a task whose default config does not build fails here, not mid-run
        self.categories: tuple[str, ...] = self.tasks
        ordered = sorted(self.tasks)
        if len(ordered) <= _NAMED_TASKS:
            self.name = "-".join(["reasoning_gym", *ordered])
        else:
            digest = hashlib.sha256(",".join(ordered).encode()).hexdigest()[:8]
            self.name = f"reasoning_gym-{len(ordered)}tasks-{digest}"
        self.version = f"{ADAPTER_VERSION}+reasoning-gym-{_rg_version()}"

    def __repr__(self) -> str:
        return f"ReasoningGymEnv({', '.join(map(repr, self.tasks))}, size={self.size})"

    # -- prompts -------------------------------------------------------------------------

    def build_prompts(self, seed: int = 0, size: str = "default") -> list[PromptItem]:
        """Each task's seeded entries as prompt items, interleaved task by task.

        Entry *i* of task *t* is ``reasoning_gym.create_dataset(t, seed=seed, size=n)[i]``
        with ``n`` set by *size* (:data:`PROMPT_SIZES`); its ``scenario_id`` is
        ``"<task>-<seed>-<i>"``. Interleaving keeps every task in any head of the file; a
        question that repeats one already written (short-range tasks do repeat) is dropped,
        so no prompt is counted twice by the gate.
        """
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise UsageError(f"seed must be an integer, got {seed!r}")
        if size not in PROMPT_SIZES:
            raise UsageError(f"unknown prompt set size {size!r}; use one of {', '.join(PROMPT_SIZES)}")
        count = max(1, round(self.size * PROMPT_SIZES[size]))
        items: list[PromptItem] = []
        seen: set[str] = set()
        for index in range(count):
            for task in self.tasks:
                _, plain = _entry(task, seed, count, index)
                question = str(plain["question"])  # reasoning-gym's entries ask in text
                if question in seen:
                    continue
                seen.add(question)
                case = {"category": task, **plain, "dataset": {"seed": seed, "size": count}}
                items.append({"prompt": question, "case": case, "category": task,
                              "scenario_id": f"{task}-{seed}-{index}"})
        return items

    # -- grading -------------------------------------------------------------------------

    def _task_of(self, case: Mapping[str, object]) -> str:
        meta = case.get("metadata")
        task = case.get("category") or (meta.get("source_dataset") if isinstance(meta, Mapping) else None)
        if task not in self.tasks:
            raise UsageError(f"environment {self.name}: a case for task {task!r} is not one of its tasks "
                             f"({', '.join(self.tasks)})")
        return str(task)

    def _entry_for(self, task: str, case: Mapping[str, object]) -> tuple[_Dataset, Mapping[str, object]]:
        """The dataset to score with, and the entry to hand to its ``score_answer``.

        A case read back from JSON has lost Python types some scorers compare against
        (``arc_agi`` compares tuples of tuples). When the case is exactly the JSON form of an
        entry the generator gives again, that original entry is used; a case that differs (a
        hand-written or edited one) is scored as written, never replaced.
        """
        meta = case.get("metadata")
        if not isinstance(case.get("question"), str) or not isinstance(meta, Mapping):
            raise UsageError(f"environment {self.name}: a case needs 'question' (text) and 'metadata' (an object), "
                             f"as build_prompts writes them; got keys {sorted(case)}")
        written = {"question": case["question"], "answer": case.get("answer"), "metadata": dict(meta)}
        source = case.get("dataset")
        index = meta.get("source_index")
        seed, size = (source.get("seed"), source.get("size")) if isinstance(source, Mapping) else (None, None)
        if _is_int(seed) and _is_int(size) and _is_int(index):
            if 0 <= index < size:
                entry, plain = _entry(task, seed, size, index)
                if plain == written:
                    return _dataset(task, seed, size), entry
            return _dataset(task, seed, size), written
        return _dataset(task, 0, 1), written

    def score(self, reply: str, case: Mapping[str, object]) -> float:
        """The task's own ``score_answer`` on :func:`extract_answer`'s answer, in [0, 1].

        A scorer that raises on an answer it cannot parse (``prime_factorization`` on words)
        has judged it wrong: that is 0. NaN is 0; anything outside [0, 1] is clamped.
        """
        task = self._task_of(case)
        dataset, entry = self._entry_for(task, case)
        answer = extract_answer(reply).answer
        try:
            value = float(dataset.score_answer(answer, entry))
        except Exception:  # the task's parser refusing the answer is a wrong answer
            return 0.0
        return 0.0 if math.isnan(value) else min(1.0, max(0.0, value))

    def markers(self, reply: str, case: Mapping[str, object]) -> dict[str, float]:
        """``answered``: 1 when the reply states its answer in a tag or an ``Answer:`` line."""
        return {"answered": float(extract_answer(reply).explicit)}


#: The environment this module holds (the registry finds ``reasoning_gym`` by looking: ``reasoning_gym[TASK,...]``).
ENVIRONMENT = ReasoningGymEnv
