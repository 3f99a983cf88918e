"""Build the tiny refund policy into a folder: tokenizer, copy-head model, warm start, save.

Deterministic for a given :class:`Recipe` and library versions: every random choice comes
from the recipe's seed (the corpus from :mod:`random`, the weights from torch).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import Counter
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .corpus import INVENTED_ID, ReplyMix, dialogues, id_pools, writer_prompts
from .model import CopyHead, ModelShape, new_model
from .tokenizer import ID_TOKENS, build_tokenizer
from .warmstart import TrainSchedule, encode_dialogues, warm_start

__all__ = ["BUILD_INFO", "DEFAULT_MIX", "RECIPE", "Recipe", "build_policy"]

#: Written next to the weights: the recipe, versions, timings and the loss curve.
BUILD_INFO = "rlgate_policy.json"

#: The seed-like base behaviour: with an id, only about a third of the targets copy it (and
#: the model learns the copy imperfectly); the rest ask again, refund first or look up the
#: invented id, all well formed, so GRPO's format bonus pays each a little and only the
#: exact lookup pays in full. no_id gets as many examples as with_id because its prompts
#: read like with_id ones minus the id (0.25 of the data left no_id pass@1 near 0.35).
DEFAULT_MIX = ReplyMix(
    with_id={"copy": 0.35, "ask": 0.35, "refund": 0.15, "invent": 0.15},
    no_id={"ask": 0.95, "invent": 0.05},
    off_topic={"refuse": 0.95, "invent": 0.05},
    category_share={"with_id": 0.40, "no_id": 0.40, "off_topic": 0.20},
)


@dataclass(frozen=True)
class Recipe:
    """Everything that determines the built policy; its JSON is part of the cache key."""

    version: int = 1  # bump when the code changes what a recipe builds
    seed: int = 0
    vocab_size: int = 512
    heldout_ids: int = 1500  # ids never seen in warm-start prompts
    writer_seeds: tuple[int, ...] = (1, 2, 3)  # prompt-writer seeds that widen the phrasing
    shape: ModelShape = field(default_factory=ModelShape)
    schedule: TrainSchedule = field(default_factory=TrainSchedule)
    mix: ReplyMix = DEFAULT_MIX

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "seed": self.seed,
            "vocab_size": self.vocab_size,
            "heldout_ids": self.heldout_ids,
            "writer_seeds": list(self.writer_seeds),
            "shape": asdict(self.shape),
            "schedule": asdict(self.schedule),
            "mix": self.mix.as_dict(),
            "invented_id": INVENTED_ID,
        }


RECIPE = Recipe()


def build_policy(out: Path, recipe: Recipe = RECIPE, *, progress: bool = False) -> dict[str, Any]:
    """Build the policy into the existing folder *out*; returns the build info it wrote."""
    import torch

    from ..envs import refund

    started, cpu_started = time.perf_counter(), time.process_time()
    torch.set_num_threads(1)
    train_ids, heldout = id_pools(recipe.seed, recipe.heldout_ids)
    n = recipe.schedule.steps * recipe.schedule.batch_size
    extra = writer_prompts(recipe.writer_seeds)
    stream = dialogues(recipe.mix, seed=recipe.seed, train_ids=train_ids, extra_prompts=extra)
    data = list(itertools.islice(stream, n))
    roles = ["system\n", "user\n", "assistant\n"] * 50
    tokenizer = build_tokenizer(
        [d.prompt for d in data[:8000]] + [d.reply for d in data[:8000]] + roles,
        vocab_size=recipe.vocab_size,
    )
    model = new_model(tokenizer, recipe.shape, seed=recipe.seed)
    id_token_ids = tokenizer.convert_tokens_to_ids(list(ID_TOKENS))
    head = CopyHead(id_token_ids, [t[4:] for t in ID_TOKENS], seed=recipe.seed)
    head.install(model)
    examples = encode_dialogues(tokenizer, data)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=recipe.schedule.steps, desc="warm-starting tiny policy", unit="step")
    try:
        curve = warm_start(
            model, examples, recipe.schedule, seed=recipe.seed, pad_id=tokenizer.pad_token_id,
            after_step=head.after_step,
            log=(lambda step, loss: (bar.update(1), bar.set_postfix(loss=f"{loss:.3f}"))) if bar else None,
        )
    finally:
        head.remove()
        if bar is not None:
            bar.close()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    info = {
        "recipe": recipe.as_dict(),
        "versions": versions(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "heldout_ids": sorted(heldout),  # never in a warm-start prompt: copy tests use these
        "data_kinds": {f"{c}/{k}": v for (c, k), v in sorted(Counter((d.category, d.kind) for d in data).items())},
        "system_prompt_sha256": hashlib.sha256(refund.SYSTEM.encode("utf-8")).hexdigest(),
        "build_seconds": time.perf_counter() - started,
        "build_cpu_seconds": time.process_time() - cpu_started,  # wall time on an idle core
        **curve,
    }
    (out / BUILD_INFO).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return info


def versions() -> dict[str, str]:
    """Library versions that can change the built weights."""
    import tokenizers
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
