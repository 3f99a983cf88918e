"""Episodes: what an agent did over several turns, as the gate and the reward read it.

A one-turn environment scores one reply. An *episode* environment (one that declares
``tools`` or an ``environment_factory``) scores the whole exchange: every assistant turn,
every tool call with the result the tool really returned, and the final answer. This
module holds that record (:class:`Episode`, :class:`ToolCallRecord`) and the one stepper
every producer of episodes drives (:class:`EpisodeRun`): the batched sampler, a scripted or
API policy, and the grader of a given transcript all append a turn, execute its calls in
the episode's own fresh environment instance and append the tool messages, so an episode
means the same thing whoever produced it.

An episode also has a plain-text form (:attr:`Episode.text`): the assistant turns with the
tool results between them in ``<tool_response>`` blocks, the way the Qwen / Hermes chat
templates show them to a model. Rows keep it as their ``reply``, so the gate, reports, reward
tables, ``hack_scan`` and ``probe_reward`` read episodes through the same field as one-turn
replies. Scoring a text *replays* it (:func:`replay`): the assistant turns are re-run in a
fresh instance and the tool results in the text are ignored, so a transcript cannot grade
itself by writing its own tool results.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from ..errors import DataError

if TYPE_CHECKING:
    from .contract import Env

__all__ = [
    "Episode",
    "EpisodeRecord",
    "EpisodeRun",
    "ToolCall",
    "ToolCallRecord",
    "describe_episode",
    "episode_from_messages",
    "messages_text",
    "parse_hermes_calls",
    "replay",
    "split_turns",
]

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_RESPONSE = re.compile(r"\s*<tool_response>\n?(.*?)\n?</tool_response>\s*", re.DOTALL)

#: Why an episode ended ("continued": a prefix of one that went on, see :meth:`Episode.upto`).
STOPS = ("no_call", "max_turns", "budget", "continued")


@dataclass(frozen=True)
class ToolCall:
    """One call a reply asks for: the tool's name and its arguments."""

    name: str
    arguments: dict[str, object] = field(default_factory=dict)

    def as_message(self) -> dict[str, object]:
        """The ``tool_calls`` entry of an assistant message (the transformers / TRL shape)."""
        return {"type": "function", "function": {"name": self.name, "arguments": dict(self.arguments)}}


@dataclass(frozen=True)
class ToolCallRecord:
    """A call that was executed: on which turn, what it asked, what the tool returned."""

    turn: int
    name: str
    arguments: dict[str, object]
    result: str
    error: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"turn": self.turn, "name": self.name, "arguments": dict(self.arguments), "result": self.result,
                "error": self.error}


@dataclass(frozen=True)
class Episode:
    """A finished episode: the chat (system, user, assistant and tool messages), the calls
    executed with their results, the assistant's raw turn texts and why it stopped."""

    messages: tuple[dict[str, object], ...]
    turns: tuple[str, ...]
    tool_calls: tuple[ToolCallRecord, ...] = ()
    stop: str = "no_call"

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    @property
    def final(self) -> str:
        """The last assistant turn's text with its call blocks removed: what the user reads."""
        return _CALL.sub("", self.turns[-1]).strip() if self.turns else ""

    def calls(self, name: str | None = None) -> list[ToolCallRecord]:
        """The executed calls (of tool *name*), in order."""
        return [c for c in self.tool_calls if name is None or c.name == name]

    @property
    def text(self) -> str:
        """The plain-text form: assistant turns with each turn's tool results between them."""
        parts = []
        for turn, raw in enumerate(self.turns):
            parts.append(raw)
            results = [c.result for c in self.tool_calls if c.turn == turn]
            parts.extend(f"\n<tool_response>\n{r}\n</tool_response>\n" for r in results)
        return "".join(parts)

    def upto(self, turn: int) -> Episode:
        """The episode as it stood after assistant turn *turn* (0-based): per-turn markers read it."""
        turns = self.turns[: turn + 1]
        return Episode(self.messages, turns, tuple(c for c in self.tool_calls if c.turn <= turn),
                       self.stop if turn + 1 >= len(self.turns) else "continued")

    def as_dict(self) -> EpisodeRecord:
        """What a row keeps: the transcript, how many turns and executed calls, why it stopped.

        The counts are ``n_turns`` and ``n_tool_calls``, as here (``turns`` and ``tool_calls``
        are this record's lists); rows written before kept them as ``turns`` and ``tool_calls``,
        which the row reader still reads."""
        return {"transcript": [dict(m) for m in self.messages], "n_turns": self.n_turns,
                "n_tool_calls": len(self.tool_calls), "stop": self.stop}


class EpisodeRecord(TypedDict):
    """What :meth:`Episode.as_dict` gives a row: its transcript, turn and call counts, and why it stopped."""

    transcript: list[dict[str, object]]
    n_turns: int
    n_tool_calls: int
    stop: str


def describe_episode(episode: Episode, width: int = 60) -> str:
    """The transcript in one line, turn by turn: each call with its arguments and result, then the
    answer (``1: lookup_order(order_id=ORD-4017) -> {...} | 2: "Sorry, ..."``). Flipped scenarios
    show it beside the reply, so a reviewer sees what the agent did after its first call."""
    def cut(text: str) -> str:
        flat = " ".join(str(text).split())
        return flat if len(flat) <= width else flat[: width - 1] + "…"

    parts = []
    for turn, raw in enumerate(episode.turns):
        calls = [c for c in episode.tool_calls if c.turn == turn]
        said = _CALL.sub("", raw).strip()
        shown = [f"{c.name}({', '.join(f'{k}={v}' for k, v in c.arguments.items())}) -> {cut(c.result)}"
                 for c in calls]
        if said or not calls:
            shown.append(repr(cut(said)))
        parts.append(f"{turn + 1}: " + "; ".join(shown))
    return " | ".join(parts) + (f" [{episode.stop}]" if episode.stop != "no_call" else "")


def parse_hermes_calls(text: str) -> list[ToolCall]:
    """The ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks of *text*.

    The Hermes / Qwen format most open chat templates use. A block that is not JSON or has
    no ``name`` is no call: a tool runtime could not execute it either.
    """
    calls = []
    for body in _CALL.findall(text or ""):
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
            continue
        arguments = obj.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {}
        calls.append(ToolCall(obj["name"], dict(arguments) if isinstance(arguments, Mapping) else {}))
    return calls


def messages_text(messages: Sequence[Mapping[str, object]]) -> str:
    """The text form of assistant and tool messages (a TRL tool-loop completion): each
    assistant turn with its calls as ``<tool_call>`` blocks, each result in ``<tool_response>``."""
    parts = []
    for message in messages:
        if message.get("role") == "tool":
            parts.append(f"\n<tool_response>\n{message.get('content', '')}\n</tool_response>\n")
            continue
        text = str(message.get("content") or "")
        for entry in _entries(message.get("tool_calls")):
            function = _function(entry)
            block = json.dumps({"name": function.get("name"), "arguments": function.get("arguments", {})})
            text = f"{text}\n<tool_call>\n{block}\n</tool_call>" if text else f"<tool_call>\n{block}\n</tool_call>"
        parts.append(text)
    return "".join(parts)


def _entries(value: object) -> Sequence[object]:
    """A message's ``tool_calls``: a list of entries, or none."""
    return value if isinstance(value, (list, tuple)) else ()


def _function(entry: object) -> Mapping[str, object]:
    """The ``function`` of a ``tool_calls`` entry (or the entry itself, in the flat shape)."""
    if not isinstance(entry, Mapping):
        return {}
    function = entry.get("function", entry)
    return function if isinstance(function, Mapping) else {}


def _arguments(value: object) -> dict[str, object]:
    return dict(value) if isinstance(value, Mapping) else {}


def split_turns(text: str) -> list[str]:
    """The assistant turns of an episode's text form; the tool results between them are dropped.

    A text without ``<tool_response>`` blocks is one turn (a one-turn reply, or every call
    written at once without reading a result).
    """
    pieces = _RESPONSE.split(text or "")
    turns = [p for i, p in enumerate(pieces) if i % 2 == 0]
    kept = [t for t in turns if t.strip()]
    return kept or [text or ""]


def _result_text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


class EpisodeRun:
    """One episode in progress: its fresh environment instance, its chat, its calls.

    ``messages`` is the chat so far in the transformers / TRL shape (the assistant's calls as
    ``tool_calls``, results as ``{"role": "tool", "name": ..., "content": ...}``); :meth:`step`
    takes the assistant's next turn, executes its calls and says whether the episode goes on.
    """

    def __init__(self, env: Env, case: Mapping[str, object], prompt: str) -> None:
        self.env = env
        self.instance, self.tools, intro = env.new_episode(case)
        messages = env.messages_for(prompt)
        if intro:  # TRL appends what reset() returns to the last user message
            last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
            messages[last] = {**messages[last], "content": f"{messages[last]['content']}{intro}"}
        self.messages: list[dict[str, object]] = [dict(m) for m in messages]
        self.turns: list[str] = []
        self.records: list[ToolCallRecord] = []
        self.stop: str | None = None

    @property
    def done(self) -> bool:
        return self.stop is not None

    def step(self, reply: str | Mapping[str, object], *, budget_left: bool = True) -> bool:
        """Append the assistant's *reply* (text, or a message with ``tool_calls``), run its
        calls, append their results; True while the episode continues."""
        if self.done:
            raise RuntimeError("step() on a finished episode")
        text, calls = self._read(reply)
        turn = len(self.turns)
        self.turns.append(text)
        content = _CALL.sub("", text).strip() if calls else text
        message: dict[str, object] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [c.as_message() for c in calls]
        self.messages.append(message)
        if not calls:
            self.stop = "no_call"
            return False
        for call in calls:
            result, error = self._execute(call)
            self.records.append(ToolCallRecord(turn, call.name, dict(call.arguments), result, error))
            self.messages.append({"role": "tool", "name": call.name, "content": result})
        if len(self.turns) >= self.env.max_turns:
            self.stop = "max_turns"
        elif not budget_left:
            self.stop = "budget"
        return not self.done

    def _read(self, reply: str | Mapping[str, object]) -> tuple[str, list[ToolCall]]:
        if isinstance(reply, Mapping):
            calls = [ToolCall(str(function.get("name")), _arguments(function.get("arguments") or {}))
                     for function in map(_function, _entries(reply.get("tool_calls")))]
            text = str(reply.get("content") or "")
            if calls and "<tool_call>" not in text:
                blocks = "".join(f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments})}\n</tool_call>"
                                 for c in calls)
                text = f"{text}\n{blocks}" if text else blocks
            return text, calls or self.env.parse_tool_calls(text)
        text = str(reply)
        return text, self.env.parse_tool_calls(text)

    def _execute(self, call: ToolCall) -> tuple[str, bool]:
        tool = self.tools.get(call.name)
        if tool is None:
            return json.dumps({"error": f"Tool {call.name} not found."}), True
        try:
            return _result_text(tool(**call.arguments)), False
        except Exception as exc:
            return json.dumps({"error": str(exc)}), True

    def finish(self, stop: str = "budget") -> Episode:
        """The episode; one cut short by the caller (its token budget) stops with *stop*."""
        if self.stop is None:
            self.stop = stop
        return Episode(tuple(self.messages), tuple(self.turns), tuple(self.records), self.stop)


def replay(env: Env, case: Mapping[str, object], turns: Sequence[str | Mapping[str, object]],
           prompt: str = "") -> tuple[Episode, object]:
    """Re-run the assistant *turns* in a fresh instance: (the episode, the instance after it).

    Turns after the episode would have ended (no call, ``max_turns``) are dropped, as the
    sampler would never have generated them.
    """
    run = EpisodeRun(env, case, prompt)
    for turn in turns:
        if not run.step(turn):
            break
    return run.finish("budget"), run.instance


def episode_from_messages(env: Env, case: Mapping[str, object], messages: Sequence[Mapping[str, object]], *,
                          where: str = "<transcript>") -> tuple[Episode, object]:
    """Grade-ready episode of a given transcript (a chat in the transformers / TRL shape).

    Only the assistant turns are taken from it; they are replayed (:func:`replay`), so the
    tool results are the environment's, not the transcript's. The prompt is the last user
    message before the first assistant turn.
    """
    if isinstance(messages, (str, Mapping)) or not isinstance(messages, Sequence):
        raise DataError("a transcript must be a list of chat messages ({'role': ..., 'content': ...})", path=where)
    prompt = ""
    turns: list[Mapping[str, object]] = []
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise DataError(f"message {position} has no 'role'", path=where)
        if message["role"] == "assistant":
            turns.append(message)
        elif message["role"] == "user" and not turns:
            prompt = str(message.get("content") or "")
    if not turns:
        raise DataError("the transcript has no assistant message to grade", path=where)
    return replay(env, case, turns, prompt)


#: A policy as a plain function: the chat so far -> the next assistant turn (text or message).
Respond = Callable[[list[dict[str, object]]], "str | Mapping[str, object]"]
