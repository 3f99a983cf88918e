"""A tiny agent for any tool environment: a recipe built from the environment's own prompts and tools.

The shipped tiny policies know their own tasks; a user's tool environment has none, and a
tokenizer that never saw its system prompt and tool schemas spends hundreds of positions on
them (an airline agent's two tools and three sentences: about 790 of a 512-position model).
:func:`agent_spec` makes the recipe :func:`~pytest_rlgate.policy.load.build_tiny_policy` (and
``rlgate policy build --env SPEC``) builds for *any* episode environment:

* Qwen2.5's tool chat template (:data:`~.tokenizer.TOOL_CHAT_TEMPLATE`), which renders the
  environment's tools, its calls and results, and which TRL's tool loop parses;
* the environment's system turn, tools included, added as one token, so a prompt stays short;
* warm-start episodes over the environment's own prompts: by category, half the time it
  answers at once, half the time it calls one of the tools, with arguments taken from the
  prompt (an id-looking word for a string, a number for a number), reads what the tool
  really returns in a fresh instance, and then answers or calls again.

It knows nothing of the task (which tool, which argument, what to say after), so it passes
some episodes by chance and fails others: enough for GRPO to have something to learn, and
the whole flow (prompts, the tool loop, episode rows, training, the gate) to run offline.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...environment.contract import Env
from ...errors import UsageError
from .corpus import ReplyMix
from .model import ModelShape
from .spec import TINY_PREFIX, TinySpec, digest
from .tokenizer import TOOL_CHAT_TEMPLATE
from .warmstart import TrainSchedule

__all__ = ["ANSWERS", "AgentWriter", "ToolCorpus", "agent_spec", "system_turn"]

#: What the agent says when it does not call (or has called enough): generic, task-free.
ANSWERS = (
    "Could you tell me a bit more, please?",
    "Which one do you mean? Please give me the reference.",
    "Sorry, I cannot help with that.",
    "Done, that is sorted for you.",
    "I have checked it for you.",
    "Thanks, all is in order now.",
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
#: The warm start of a recipe for a user's environment: a minute or two on one core.
SCHEDULE = TrainSchedule(steps=300, batch_size=16)


def _schema(tool: Callable[..., object]) -> dict[str, Any]:
    from transformers.utils import get_json_schema

    schema: dict[str, Any] = get_json_schema(tool)
    return schema


def system_turn(env: Env, prompt: str) -> str:
    """What Qwen2.5's template renders between ``<|im_start|>system`` and ``<|im_end|>`` for the
    environment's chat and tools: the text the recipe adds to its tokenizer as one token."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[env.messages_for(prompt)], tools=env.tool_functions(),
                                        chat_template=TOOL_CHAT_TEMPLATE, add_generation_prompt=True)
    return str(rendered[0]).split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]


def _argument(rng: random.Random, spec: Mapping[str, Any], prompt: str) -> object:
    """A value for one parameter, taken from the prompt where the prompt has one of its kind."""
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return rng.choice(spec["enum"])
    kind = spec.get("type")
    if kind in ("integer", "number"):
        found = _NUMBER.findall(prompt)
        if found and rng.random() < 0.7:
            value = float(rng.choice(found))
            return int(value) if kind == "integer" else value
        return rng.randint(0, 20)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return []
    if kind == "object":
        return {}
    words = _WORD.findall(prompt)
    coded = [w for w in words if any(ch.isdigit() for ch in w)]
    if coded and rng.random() < 0.7:
        return rng.choice(coded)
    return rng.choice(words) if words else "it"


def _call_text(name: str, arguments: Mapping[str, object]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": dict(arguments)}) + "\n</tool_call>"


@dataclass(frozen=True)
class AgentWriter:
    """Writes the warm-start episodes of :class:`ToolCorpus` (a DialogueWriter with ``turns``)."""

    env: Env = field(repr=False)
    by_category: Mapping[str, Sequence[Mapping[str, object]]]
    #: each tool's parameters (JSON schema ``properties``), by name
    parameters: Mapping[str, Mapping[str, Any]]

    def prompt(self, rng: random.Random, category: str) -> tuple[str, Mapping[str, object]]:
        item = rng.choice(self.by_category[category])
        return str(item["prompt"]), item

    def reply(self, rng: random.Random, kind: str, context: Mapping[str, object]) -> str:  # pragma: no cover
        return self.turns(rng, kind, context)[0][1]

    def turns(self, rng: random.Random, kind: str, context: Mapping[str, object],
              ) -> list[tuple[list[dict[str, object]], str]]:
        """One episode's (history, target) pairs: an answer, or calls with their real results, then an answer."""
        prompt = str(context["prompt"])
        if kind == "answer" or self.env.max_turns < 2:
            return [([], rng.choice(ANSWERS))]
        case = context.get("case")
        instance, tools, _intro = self.env.new_episode(dict(case) if isinstance(case, Mapping) else {})
        names = sorted(tools)
        history: list[dict[str, object]] = []
        out: list[tuple[list[dict[str, object]], str]] = []
        for _turn in range(self.env.max_turns - 1):
            name = rng.choice(names)
            arguments = {key: _argument(rng, spec, prompt) for key, spec in sorted(self.parameters[name].items())}
            out.append((list(history), _call_text(name, arguments)))
            try:
                result = tools[name](**arguments)
            except Exception as exc:  # the tool refuses what the prompt gave it, as it would in an episode
                result = json.dumps({"error": str(exc)})
            history += [{"role": "assistant", "content": "",
                         "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]},
                        {"role": "tool", "name": name, "content": result if isinstance(result, str)
                         else json.dumps(result, sort_keys=True, default=str)}]
            if rng.random() < 0.6:
                break
        out.append((list(history), rng.choice(ANSWERS)))
        return out


@dataclass(frozen=True)
class ToolCorpus:
    """The warm-start texts of a user's tool environment: its prompts, its tools, generic answers."""

    env: Env = field(repr=False, compare=False)
    items: tuple[Mapping[str, object], ...] = field(repr=False)

    def writer(self, seed: int) -> AgentWriter:
        by_category: dict[str, list[Mapping[str, object]]] = {}
        for item in self.items:
            by_category.setdefault(str(item["category"]), []).append(item)
        parameters = {tool.__name__: _schema(tool)["function"].get("parameters", {}).get("properties", {})
                      for tool in self.env.tool_functions()}
        return AgentWriter(self.env, by_category, parameters)

    def describe(self) -> dict[str, object]:
        return {"environment": self.env.describe(), "prompts": len(self.items),
                "prompts_sha256": digest([[item["prompt"], item["category"], item.get("case")] for item in self.items]),
                "tools_sha256": digest([_schema(tool) for tool in self.env.tool_functions()]),
                "answers_sha256": digest(list(ANSWERS))}


def agent_spec(env: Env, items: Sequence[Mapping[str, object]], *, schedule: TrainSchedule = SCHEDULE,
               seed: int = 0) -> TinySpec:
    """The tiny-agent recipe for the episode environment *env*, warm-started on *items* (its prompts:
    the training split, or a prompts file; every category with a prompt is drawn alike)."""
    if not env.is_episodic:
        raise UsageError(f"environment {env.name} has no tools: a one-turn environment trains on a shipped tiny "
                         "policy (rlgate/tiny-refund) or its own tiny_policy")
    usable = tuple(item for item in items if isinstance(item.get("prompt"), str) and env.category_of(item))
    if not usable:
        raise UsageError(f"environment {env.name}: no prompts to warm the tiny agent up on; pass its prompts file "
                         "(--prompts-file), whose lines carry prompt, category and case")
    categories = sorted({str(env.category_of(item)) for item in usable})
    items_with_category = tuple({**item, "category": env.category_of(item)} for item in usable)
    name = TINY_PREFIX + re.sub(r"[^a-z0-9_-]", "-", env.name.lower()) + "-agent"
    return TinySpec(
        name=name,
        corpus=ToolCorpus(env, items_with_category),
        mix=ReplyMix(category_share={c: 1.0 for c in categories},
                     kinds={c: {"answer": 1.0, "call": 1.0} for c in categories}),
        phrases=(system_turn(env, str(usable[0]["prompt"])),),
        chat_template=TOOL_CHAT_TEMPLATE,
        schedule=schedule,
        seed=seed,
        tokenizer_dialogues=2000,
        shape=ModelShape(),
    )
