"""How a reward under test is called: as its trainer calls it, or not at all.

A probe that calls a reward differently from its trainer measures another function: TRL's
documented ``reward_func(completions, ground_truth, **kwargs)`` called positionally with the
prompts first reads the prompts as completions and reports a false all-clear. So a reward is
called in one of three shapes, each exactly:

* ``reward(reply, case)`` (the environment contract's), or ``reward(episode, case)`` for an
  episode environment (the replayed :class:`~pytest_rlgate.environment.Episode`);
* TRL's, as ``GRPOTrainer._calculate_rewards`` calls it: keywords only, ``prompts=`` and
  ``completions=`` (chat messages for a conversational dataset, rlgate's own: a prompt is the
  environment's chat and a completion ``[{"role": "assistant", "content": reply}]``; plain
  strings otherwise), ``completion_ids=``, every dataset column under its own name (``case``,
  ``category``, ``scenario_id``, each field of the case: ``answer``, ``solution``, ... and the
  columns a user maps, ``columns={"ground_truth": "answer"}``), ``trainer_state=``,
  ``log_extra=`` and ``log_metric=``. ``None`` for a completion is TRL's "skip it": the probe
  skips that example. An ``async def`` reward is awaited, as TRL does.

A reward whose signature cannot take that call (a required parameter no column fills, no
``**kwargs`` for the keywords TRL always passes, a positional-only parameter) is refused with
one line naming what is missing; it is never called another way. A reward that scores a reply
by the others in its batch (open-r1's ``len_reward``) is found by scoring one batch two ways,
and is then always scored inside a fixed group of the prompt's replies, as GRPO scores a group,
so a finding reproduces whatever was asked before.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..environment.contract import Env
from ..environment.episode import Episode
from ..errors import UsageError
from ..records import PromptItem

__all__ = ["TRL_KEYWORDS", "RewardCall", "reward_call"]

#: What GRPOTrainer passes every reward function besides the dataset's columns.
TRL_KEYWORDS: tuple[str, ...] = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra",
                                 "log_metric")
#: Dataset columns rlgate's GRPO dataset has besides the case's own fields.
_DATASET_COLUMNS: tuple[str, ...] = ("case", "category", "scenario_id")
#: Replies in a fixed group a group-relative reward scores a reply in (GRPO's usual group size).
GROUP_SIZE = 8


def _name(reward: Callable[..., object]) -> str:
    return str(getattr(reward, "__qualname__", None) or getattr(reward, "__name__", None) or type(reward).__name__)


def _takes_episode(params: Mapping[str, inspect.Parameter]) -> bool:
    """Whether a ``(reply, case)`` reward reads an Episode: its first parameter says so by name or type."""
    first = next(iter(params.values()), None)
    if first is None:
        return False
    annotation = first.annotation
    return first.name == "episode" or annotation is Episode or (isinstance(annotation, str) and
                                                                annotation.split(".")[-1] == "Episode")


class _LazyTrainerState:
    """``transformers.TrainerState()``, built on first use: TRL passes the trainer's state, and importing
    transformers costs seconds a probe of a reward that never reads it should not pay."""

    def __init__(self) -> None:
        self._state: object | None = None

    def __getattr__(self, attr: str) -> object:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._state is None:
            from transformers.trainer_callback import TrainerState

            self._state = TrainerState()
        return getattr(self._state, attr)


def _log_extra(column: str, values: Sequence[object]) -> None:
    """TRL's ``log_extra(column, values)``: the probe keeps no completions table."""


def _log_metric(name: str, value: float) -> None:
    """TRL's ``log_metric(name, value)``: the probe logs nothing."""


@dataclass
class RewardCall:
    """A reward as ``(prompt item, replies) -> [score or None, ...]``, called as its trainer calls it."""

    reward: Callable[..., object]
    style: str  #: "reply_case", "episode" or "trl"
    env: Env
    columns: Mapping[str, str | Callable[[Mapping[str, object]], object]] = field(default_factory=dict)
    conversational: bool = True
    tokenizer: object | None = None
    keywords: frozenset[str] | None = None  #: the TRL keywords it takes (None: all, it has **kwargs)
    required: tuple[str, ...] = ()  #: required parameters only a case field can fill (TRL style)
    #: scores a reply by the other replies of its batch (decided on the first batch scored)
    group_relative: bool | None = None
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return _name(self.reward)

    def __call__(self, item: PromptItem, replies: Sequence[str]) -> list[float | None]:
        if self.style == "episode":
            return [self._number(self.reward(self.env.episode(r, item["case"])[0], item["case"]), r) for r in replies]
        if self.style == "reply_case":
            return [self._number(self.reward(r, item["case"]), r) for r in replies]
        return self._trl(item, replies)

    # -- TRL's convention ------------------------------------------------------------------

    def dataset_row(self, item: PromptItem) -> dict[str, object]:
        """The dataset row TRL would hand the reward for *item*: rlgate's GRPO columns, the case's fields,
        the user's mapped columns."""
        case = item["case"]
        row: dict[str, object] = {k: v for k, v in case.items() if k not in TRL_KEYWORDS and k != "prompt"}
        row.update({"case": dict(case), "category": item["category"], "scenario_id": str(item.get("scenario_id", ""))})
        for column, source in self.columns.items():
            row[column] = source(case) if callable(source) else case.get(source)
        return row

    def _ids(self, reply: str) -> list[int]:
        if self.tokenizer is None:
            return list(reply.encode("utf-8"))
        encoded: Any = self.tokenizer(reply, add_special_tokens=False)  # type: ignore[operator]
        return list(encoded["input_ids"])

    def _trl(self, item: PromptItem, replies: Sequence[str]) -> list[float | None]:
        n = len(replies)
        prompt: object = self.env.messages_for(item["prompt"]) if self.conversational else item["prompt"]
        completions: list[object] = [[{"role": "assistant", "content": r}] if self.conversational else r
                                     for r in replies]
        kwargs: dict[str, object] = {
            "prompts": [prompt] * n, "completions": completions, "completion_ids": [self._ids(r) for r in replies],
            "trainer_state": _LazyTrainerState(), "log_extra": _log_extra, "log_metric": _log_metric,
            **{column: [value] * n for column, value in self.dataset_row(item).items()},
        }
        if self.keywords is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in self.keywords}
        got = self.reward(**kwargs)
        if inspect.isawaitable(got):
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            got = self._loop.run_until_complete(got)
        if isinstance(got, (str, Mapping)) or not isinstance(got, Iterable):
            raise UsageError(f"the TRL reward {self.name} returned {got!r:.60}; it must return a list of scores, "
                             "one a completion")
        values = list(got)
        if len(values) != n:
            raise UsageError(f"the TRL reward {self.name} returned {len(values)} rewards for {n} completions; "
                             "GRPOTrainer needs exactly one a completion")
        return [self._number(v, r) for v, r in zip(values, replies)]

    def _number(self, value: object, reply: str) -> float | None:
        if value is None:  # TRL: "skip this example"
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UsageError(f"the reward {self.name} returned {value!r} (not a finite number or None) for the reply "
                             f"{reply[:80]!r}")
        return float(value)

    def check_columns(self, items: Sequence[PromptItem]) -> None:
        """Every required parameter is a column of every item's row, or a UsageError naming the first missing."""
        for param in self.required:
            lacking = next((item for item in items if param not in self.dataset_row(item)), None)
            if lacking is not None:
                fields = ", ".join(sorted(str(k) for k in lacking["case"])) or "none"
                raise UsageError(f"the TRL reward {self.name} needs {param!r}, which no dataset column provides: "
                                 f"TRL passes the columns case, category, scenario_id and the case's fields "
                                 f"({fields}; environment {self.env.name}); map one, e.g. "
                                 f"columns={{{param!r}: 'answer'}}")

    def detect_group(self, item: PromptItem, group: Sequence[str]) -> bool:
        """Whether the reward scores a reply by its batch: *group* scored as one batch, reversed, and one by one."""
        if self.group_relative is None:
            if self.style != "trl" or len(group) < 2:
                self.group_relative = False
            else:
                together = self(item, group)
                backwards = self(item, list(reversed(group)))[::-1]
                alone = [self(item, [reply])[0] for reply in group]
                self.group_relative = together != backwards or together != alone
        return self.group_relative


def reward_call(reward: Callable[..., object], style: str, env: Env, *,
                columns: Mapping[str, str | Callable[[Mapping[str, object]], object]] | None = None,
                conversational: bool | None = None, tokenizer: object | None = None) -> RewardCall:
    """*reward* checked against the call it will get (``style`` "auto", "trl" or "reply_case"), or refused."""
    try:
        params: Mapping[str, inspect.Parameter] = inspect.signature(reward).parameters
    except (TypeError, ValueError):
        if style == "auto":
            raise UsageError(f"cannot read the signature of {reward!r:.60}; pass signature='trl' or "
                             "'reply_case'") from None
        params = MappingProxyType({})
    if style == "auto":
        style = "trl" if "completions" in params or "prompts" in params else "reply_case"
    mapped = dict(columns or {})
    for column, source in mapped.items():
        if not isinstance(column, str) or not (isinstance(source, str) or callable(source)):
            raise UsageError(f"columns maps a dataset column name to a case field or a function of the case, got "
                             f"{column!r}: {source!r:.40}")
    if style == "trl":
        call = RewardCall(reward, "trl", env, mapped, True if conversational is None else bool(conversational),
                          tokenizer)
        call.keywords = _trl_keywords(reward, params, call)
        return call
    if style != "reply_case":
        raise UsageError(f"signature must be 'auto', 'trl' or 'reply_case', got {style!r}")
    if params:
        positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in params.values()):
            raise UsageError(f"{_name(reward)!r} takes neither (reply, case) nor TRL's (prompts, completions, "
                             "**kwargs); pass signature='trl' or 'reply_case'")
    episodic = env.is_episodic and _takes_episode(params)
    return RewardCall(reward, "episode" if episodic else "reply_case", env)


def _trl_keywords(reward: Callable[..., object], params: Mapping[str, inspect.Parameter],
                  call: RewardCall) -> frozenset[str] | None:
    """The keywords to pass (None: all of them, it has ``**kwargs``), or a UsageError naming what TRL's call
    cannot satisfy. Required parameters that only a case field can fill are checked per item later
    (:meth:`RewardCall.check_columns`)."""
    if not params:  # no signature to read (a builtin): TRL passes everything
        return None
    name = _name(reward)
    positional_only = [p.name for p in params.values() if p.kind is p.POSITIONAL_ONLY]
    if positional_only:
        raise UsageError(f"the TRL reward {name} takes {positional_only[0]!r} positionally only, but GRPOTrainer "
                         "passes every argument by keyword; make it an ordinary parameter")
    call.required = tuple(p.name for p in params.values()
                          if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.default is p.empty
                          and p.name not in (*TRL_KEYWORDS, *_DATASET_COLUMNS, *call.columns))
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    extra = [k for k in TRL_KEYWORDS if k not in params]
    if extra:
        raise UsageError(f"the TRL reward {name} takes no **kwargs, but GRPOTrainer passes {', '.join(extra)} and "
                         "every dataset column as keywords, so it fails with a TypeError in training; add **kwargs")
    return frozenset(params)
