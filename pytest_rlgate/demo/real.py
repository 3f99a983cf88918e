"""The story on a real model: ``rlgate demo --base-model smollm2-135m``, the long version.

The tiny policy tells the story in minutes because its replies are templates. A real instruct
model (a registry model such as ``smollm2-135m``) tells it on real replies, at a real model's
cost: on two shared CPU cores a GRPO step of eight completions takes about a minute, not a second. So
the story is the same runs with knobs scaled to a CPU (:func:`real_story`): the environment's
warm start first (``<model>+<env>``, cached by content), then eight steps of GRPO with groups of
four and 48-token completions, no reference model; two base runs and one reply per holdout prompt
of the environment's own holdout (refund's: 24 with-id, 30 no-id, 24 off-topic scenarios, sized to see
a drop); no HackMonitor (its looks sample 32 prompts x 4, as much
as the training on these cores: ``hack_scan`` reads the trained policy's holdout rows instead); the
honest run's LoRA kept every four steps, so ``rlgate watch`` gates its checkpoints. Every run is
cached like the tiny story's, so ``benchmarks/bench_real_story.py`` and this demo share them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..environment.contract import Env
from ..policy.models import is_model_name
from ..policy.warm import warm_name, warm_recipe
from ..policy.warm_train import warm_start

__all__ = ["REAL_STEPS", "RealStory", "real_story", "warm_base"]

#: Steps of each real-model run: 10 to 16 minutes a run on two shared CPU cores (docs/training.md).
REAL_STEPS = 8
#: Completions per GRPO group and per step: two prompts of four, each step.
REAL_GROUP, REAL_BATCH = 4, 8
#: LoRA learning rate of the GRPO runs: the warm start's, twice the arith run's (which moved add in 24
#: steps of 4), for 8 steps of 8.
REAL_LEARNING_RATE = 1e-3
#: Reply budget: a lookup call is about 30 tokens, an ask about 15.
REAL_COMPLETION = 48
#: Replies per holdout prompt and base runs: a prompt's 240 tokens of chat cost a CPU second or two a
#: reply before it writes a word, so one reply a prompt and two base runs for the noise floor.
REAL_EVAL_K, REAL_BASE_RUNS = 1, 2
#: DPO: two replies sampled per train prompt to pair, four pairs a step (a DPO step then costs about a
#: GRPO step), the GRPO runs' order of learning rate, prompt and reply in 320 tokens, and the SFT term
#: on the chosen reply as on the tiny policy (plain DPO sinks the chosen reply with the rejected one).
REAL_DPO: Mapping[str, object] = MappingProxyType({"pair_samples": 2, "pairs_per_step": 4, "pairs_per_device": 4,
                                                   "learning_rate": 5e-4, "max_length": 320,
                                                   "loss_type": ("sigmoid", "sft")})
#: The watched run keeps its adapter this often: two looks over the default steps.
REAL_SAVE_STEPS = 4


@dataclass(frozen=True)
class RealStory:
    """The knobs of the real-model story: every run's, each method's, and the watched run's."""

    base_model: str
    shared: Mapping[str, object]
    grpo: Mapping[str, object]
    dpo: Mapping[str, object]
    watched: Mapping[str, object] = field(default_factory=dict)

    def knobs(self, method: str, *, watched: bool = False) -> dict[str, object]:
        """The knobs a run of *method* adds to the story's shared ones."""
        return {**self.shared, **(self.grpo if method == "grpo" else self.dpo), **(self.watched if watched else {})}


def real_story(base_model: str, steps: int = REAL_STEPS) -> RealStory:
    """The story's knobs on *base_model* (the name the runs train from, e.g. ``smollm2-135m+refund``)."""
    return RealStory(
        base_model=base_model,
        shared={"base_model": base_model, "k": REAL_EVAL_K,
                "base_runs": REAL_BASE_RUNS, "max_new_tokens": REAL_COMPLETION, "monitor_every": 0},
        grpo={"num_generations": REAL_GROUP, "batch_size": REAL_BATCH, "learning_rate": REAL_LEARNING_RATE,
              "beta": 0.0},
        dpo=dict(REAL_DPO),
        watched={"save_steps": min(REAL_SAVE_STEPS, steps)},
    )


def warm_base(model: str, env: Env, say: Callable[[str], None]) -> str:
    """The base the story trains from: registry *model* warm-started for *env* when the environment
    declares a warm start (trained once, then served from the cache), else *model* itself."""
    if not is_model_name(model) or env.warm_start is None:
        return model
    recipe = warm_recipe(env)
    say(f"warm start: {model} for {env.name}, {recipe.steps} SFT steps of {recipe.batch_size} chats "
        "(cached after the first time)")
    folder = warm_start(model, env)
    say(f"  -> {warm_name(model, env.name)} at {folder}")
    return warm_name(model, env.name)
