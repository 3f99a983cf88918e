"""Build an environment's tiny policy into a folder: corpus, tokenizer, model, warm start, save.

One builder for every environment: the environment supplies a :class:`~.recipe.TinyRecipe`
(its corpus, reply mix, added tokens and options such as refund's copy head) and renders
the chats (``messages_for``); nothing here names a task. Deterministic for a recipe and the
library versions: every random choice comes from the recipe's seed (the corpus from
:mod:`random`, the weights from torch), always drawn in the same order.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..._io.progress import bar
from ...environment.contract import Env
from .copyhead import CopyHead
from .corpus import dialogues
from .manifest import BUILD_INFO, content_hash, file_digests
from .model import new_model
from .spec import TinyRecipe, recipe_of
from .tokenizer import build_tokenizer
from .warmstart import encode_dialogues, warm_start

__all__ = ["build_policy", "versions"]

#: Chat-template role lines the BPE sees, so role names are cheap tokens.
_ROLE_LINES = ["system\n", "user\n", "assistant\n"] * 50


def build_policy(out: Path, env: Env, recipe: TinyRecipe | None = None, *,
                 progress: bool | None = None) -> dict[str, Any]:
    """Build *env*'s tiny policy (or *recipe*, a variant) into the existing folder *out*.

    *progress* shows the warm-start steps as a bar (None: when stderr is a terminal).

    Returns the build info it wrote last (:data:`~.manifest.BUILD_INFO`): the recipe,
    library versions, data mix, loss curve, timings, and each file's SHA-256 with the
    policy's content hash.
    """
    import torch

    recipe = recipe or recipe_of(env)
    started, cpu_started = time.perf_counter(), time.process_time()
    torch.set_num_threads(1)
    writer = recipe.corpus.writer(recipe.seed)
    category_of = (lambda text: env.category_of({"case": env.case_for(text)})) if env.has_case_for else None
    stream = dialogues(writer, recipe.mix, seed=recipe.seed, category_of=category_of)
    data = list(itertools.islice(stream, recipe.schedule.steps * recipe.schedule.batch_size))
    head_data = data[: recipe.tokenizer_dialogues]
    tokenizer = build_tokenizer(
        [d.prompt for d in head_data] + [d.reply for d in head_data] + _ROLE_LINES,
        vocab_size=recipe.vocab_size, words=recipe.words, phrases=recipe.phrases,
        chat_template=recipe.chat_template,
    )
    model = new_model(tokenizer, recipe.shape, seed=recipe.seed)
    head = CopyHead.for_tokens(tokenizer, recipe.words, seed=recipe.seed) if recipe.copy_head else None
    if head is not None:
        head.install(model)
    examples = encode_dialogues(tokenizer, data, env.messages_for,
                                tools=env.tool_functions() if env.is_episodic else None)
    steps = bar(recipe.schedule.steps, f"building tiny policy {recipe.name}", progress, unit="step")

    def log(step: int, loss: float) -> None:
        steps.set_postfix(loss=f"{loss:.3f}", refresh=False)
        steps.update(1)

    try:
        curve = warm_start(
            model, examples, recipe.schedule, seed=recipe.seed, pad_id=tokenizer.pad_token_id,
            after_step=head.after_step if head is not None else None,
            log=log,
        )
    finally:
        if head is not None:
            head.remove()
        steps.close()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    files = file_digests(out)
    info = {
        "name": recipe.name,
        "environment": env.describe(),
        "recipe": recipe.as_dict(),
        "versions": versions(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "data_kinds": {f"{c}/{k}": v for (c, k), v in sorted(Counter((d.category, d.kind) for d in data).items())},
        "build_seconds": time.perf_counter() - started,
        "build_cpu_seconds": time.process_time() - cpu_started,  # wall time on an idle core
        **curve,
        "files": files,
        "content_sha256": content_hash(files),
    }
    (out / BUILD_INFO).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return info


def versions() -> dict[str, str]:
    """Library versions that can change the built weights."""
    import tokenizers
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
