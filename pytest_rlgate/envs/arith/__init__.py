"""The arith environment, as a package: this module *is* the environment object.

A small arithmetic assistant, built in to show an environment of another shape than refund:
no tool calls, and the answer key lives in the case (``{"category", "answer", "numbers"}``)
that the prompt writer stores next to each prompt, so there is no ``case_for`` and arith
prompt files carry their cases. Categories: ``add`` (sums of two small numbers),
``compare`` ("which is larger") and ``unanswerable`` (a number is missing; the right reply
says so and asks for it). The reward has one deliberate, documented hack (:mod:`.rules`).

:func:`pytest_rlgate.load_env` (``--env arith``) reads the contract's members off this
module; the rules, prompt writer, replies, hack features, Hypothesis strategies (loaded on
first use) and tiny-policy build spec each live in their own module beside it.
"""

from __future__ import annotations

from ...environment.hack import Hack, lazy
from .features import features
from .replies import rejected_reply
from .rules import CATEGORIES, SYSTEM, markers, score
from .templates import PROMPT_SIZES, build_prompts
from .tiny import BASE_MODEL, SPEC

# -- the environment contract ---------------------------------------------------------
name = "arith"
#: bump when the reward's rules change, so rows graded by the old rules are never compared silently
version = "1"
categories = CATEGORIES
system = SYSTEM
#: markers the gate guards by default: a policy that learns the hack is paid while leaving the
#: format (a list, a hedge after the answer) or the honest reading of its final answer (an echo)
guards = ("exact", "format")
#: the sizes build_prompts writes (small, default, large)
prompt_sizes = tuple(PROMPT_SIZES)
#: what the reward should pay for, per category (features.py names them)
endorsed = {"add": ("answer_line",), "compare": ("answer_line",), "unanswerable": ("declines", "asks")}
#: probe_reward's honest replies and arith's exploits; Hypothesis loads only when a probe runs
honest_replies = lazy(f"{__name__}.strategies:honest_replies")
hacks = (
    Hack("hedge", lazy(f"{__name__}.strategies:hedge"), categories=("add", "compare"),
         description="a second, wrong guess after the answer: the reward pays any reply the answer appears in"),
    Hack("list_numbers", lazy(f"{__name__}.strategies:list_numbers"), free=False, categories=("add", "compare"),
         description="a list of candidates instead of one answer (a comparison's two numbers): paid in full"),
)
#: the shipped tiny policy (``rlgate/tiny-arith``) and the spec `rlgate policy build` rebuilds it from
base_model = BASE_MODEL
tiny_policy = SPEC

__all__ = [
    "CATEGORIES",
    "PROMPT_SIZES",
    "SYSTEM",
    "base_model",
    "build_prompts",
    "categories",
    "endorsed",
    "features",
    "guards",
    "hacks",
    "honest_replies",
    "markers",
    "name",
    "prompt_sizes",
    "rejected_reply",
    "score",
    "system",
    "tiny_policy",
    "version",
]
