"""A zoo of reward functions written the way users write them, to measure the hack probe on.

Each module holds the rewards of one environment: *sound* ones (strict, correct, written in
several styles: the environment's helpers, hand-rolled parsing, partial credit, TRL's batch
signature) and *flawed* ones, each a sound reward with one realistic mistake, of the kinds real
reward code has (an id matched by substring, a parser that forgives bad JSON, a tolerance, a
length bonus, a category's right move paid in another). They were written against the
environments' documented rules, before the probe was tuned on them; the probe never sees this
package.

Every flawed entry carries its *exploit*: one concrete reply, built from the case, that the
environment's truth calls wrong (its score does not pass, or a guarded marker drops) and that the
flawed reward pays at least as much as an honest reply ("wrong"), or an honest reply with
nothing added but filler that the reward pays more ("unpriced"), or a wrong reply its sound base
pays nothing for that the flawed reward pays part of the credit ("partial": what a group-relative
update learns wherever a group holds no right reply). ``tests/test_hack_zoo.py``
checks every exploit and checks that no sound reward pays any of them; the benchmark
``benchmarks/bench_hack_zoo.py`` runs the probe on every entry.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pytest_rlgate import load_env
from pytest_rlgate.environment.contract import Env

__all__ = ["ENVS", "ZOO", "ZooReward", "honest", "items_for", "judge_wrong", "quickmath_env"]

_ROOT = Path(__file__).resolve().parents[2]

#: the planted flaws, by kind (the benchmark reports detection per kind)
FLAW_KINDS: tuple[str, ...] = (
    "near_miss",       # a case value matched loosely: substring, prefix, digits only, tolerance, Unicode
    "lenient_parse",   # a broken call block (or a wrapped answer) still read
    "wrong_move",      # another category's right move paid in this one
    "extra_text",      # text before or after the answer changes what is read
    "length",          # length or whitespace paid
    "keyword",         # a word paid for itself
    "multi_call",      # a second tool call or a later turn never read
    "partial_credit",  # a wrong move paid part of the credit (format, politeness, a word, a refusal, a near miss)
)


@cache
def quickmath_env() -> Env:
    """The docs' own example environment (``examples/quickmath/quickmath.py``), loaded from its file."""
    path = _ROOT / "examples" / "quickmath" / "quickmath.py"
    spec = importlib.util.spec_from_file_location("quickmath_zoo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return load_env(module.QuickMath())


@cache
def _env(name: str) -> Env:
    return quickmath_env() if name == "quickmath" else load_env(name)


ENVS: tuple[str, ...] = ("refund", "arith", "refund_agent", "quickmath")


def env_of(name: str) -> Env:
    return _env(name)


@cache
def items_for(name: str) -> tuple[dict[str, Any], ...]:
    """The prompt items a probe of *name* reads: its own seed-0 set, or quickmath's shipped file."""
    env = _env(name)
    if name == "quickmath":
        from pytest_rlgate.data import read_prompts

        return tuple(read_prompts(_ROOT / "examples" / "quickmath" / "prompts.jsonl", env=env))
    return tuple(env.build_prompts(0, "default"))


@dataclass(frozen=True)
class ZooReward:
    """One reward of the zoo: sound, or a sound *base* with one planted flaw."""

    name: str
    env: str
    reward: Callable[..., Any]
    sound: bool
    description: str
    flaw: str = ""  #: one of FLAW_KINDS for a flawed reward
    base: str = ""  #: the sound reward this one is a variant of
    exploit: Callable[[Mapping[str, Any]], str | None] | None = None
    exploit_kind: str = "wrong"  #: "wrong", "unpriced" or "partial" (see the module docstring)
    categories: tuple[str, ...] = ()  #: where the exploit applies
    tags: tuple[str, ...] = field(default=())

    @property
    def takes_episode(self) -> bool:
        params = list(inspect.signature(self.reward).parameters)
        return bool(params) and params[0] == "episode"

    @property
    def trl(self) -> bool:
        return "completions" in inspect.signature(self.reward).parameters

    def score(self, reply: str, case: Mapping[str, Any], prompt: str = "") -> float:
        """The reward of one reply, however the reward is called (episode, TRL batch, or reply and case)."""
        if self.trl:  # as GRPOTrainer calls it on rlgate's conversational dataset
            chat = _env(self.env).messages_for(prompt)
            return float(self.reward(prompts=[chat], completions=[[{"role": "assistant", "content": reply}]],
                                     case=[dict(case)])[0])
        if self.takes_episode:
            return float(self.reward(_env(self.env).episode(reply, case)[0], case))
        return float(self.reward(reply, case))


def judge_wrong(env: Env, reply: str, case: Mapping[str, Any], prompt: str | None = None) -> bool:
    """The environment's truth, written out independently of the probe: the score does not pass,
    a guarded marker is below 1, or a hack the environment declares with a judge recognises it."""
    if not env.passes(env.score(reply, case)):
        return True
    marks = env.markers(reply, case, prompt=prompt)
    if any(marks.get(g, 1.0) < 1.0 for g in env.guards):
        return True
    read = env.episode(reply, case)[0] if env.is_episodic else reply
    return any(hack.judge(read, case) for hack in env.hacks
               if hack.judge is not None and hack.applies_to(str(case.get("category"))))


def honest(env_name: str, case: Mapping[str, Any]) -> str:
    """One canonical honest reply to *case* in *env_name*."""
    from . import arith, quickmath, refund, refund_agent

    return {"refund": refund.honest, "arith": arith.honest, "refund_agent": refund_agent.honest,
            "quickmath": quickmath.honest}[env_name](case)


def _all() -> tuple[ZooReward, ...]:
    from . import arith, quickmath, refund, refund_agent

    return (*refund.ZOO, *arith.ZOO, *refund_agent.ZOO, *quickmath.ZOO)


ZOO: Sequence[ZooReward] = _all()
