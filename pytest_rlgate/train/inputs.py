"""What a training run starts from: its prompt sets and the versions of the packages that decide its numbers."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..data.prompts import TrainSplit, build_prompts, count_by_category, fingerprint, prepare_split, read_prompts
from ..errors import UsageError
from ..records import PromptItem
from .config import RunKnobs
from .difficulty import Selection

__all__ = ["VERSIONED", "PromptSets", "load_prompts", "versions"]

#: Packages whose versions decide a run's numbers (recorded in config.json and cache keys).
VERSIONED = ("pytest-rlgate", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers")


@dataclass
class PromptSets:
    """The prompt set and its split (train decontaminated, narrowed by a next round's
    selection, balanced), with the fingerprints that identify them."""

    split: TrainSplit
    fingerprint: str
    source: str
    #: round two's task selection (``--from-run``); None in round one
    selection: Selection | None = None

    @property
    def train(self) -> list[PromptItem]:
        return self.split.train

    @property
    def holdout(self) -> list[PromptItem]:
        return self.split.holdout

    def record(self) -> dict[str, object]:
        return {
            "source": self.source, "fingerprint": self.fingerprint,
            "train_fingerprint": fingerprint(self.train), "holdout_fingerprint": fingerprint(self.holdout),
            "train": count_by_category(self.train), "holdout": count_by_category(self.holdout),
        }


def versions() -> dict[str, str]:
    """Installed versions of the packages that decide a run's numbers."""
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def load_prompts(knobs: RunKnobs) -> PromptSets:
    """The environment's seeded set (or ``--prompts-file``), split by category, train
    decontaminated (unless ``no_decontaminate``) and balanced."""
    env = knobs.environment
    if knobs.prompts_file:
        if not Path(knobs.prompts_file).is_file():
            raise UsageError(f"--prompts-file {knobs.prompts_file!r}: no such file; write one with `rlgate prompts`")
        items, source = read_prompts(knobs.prompts_file, env=env), str(knobs.prompts_file)
    else:
        items = build_prompts(seed=knobs.prompt_seed, size=knobs.size, env=env)
        source = f"template:seed={knobs.prompt_seed}:{knobs.size}"
    split = prepare_split(items, knobs.holdout, env=env, share=knobs.balance,
                          decontaminate_train=not knobs.no_decontaminate)
    return PromptSets(split=split, fingerprint=fingerprint(items), source=source)
