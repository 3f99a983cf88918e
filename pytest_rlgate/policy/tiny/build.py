"""Build an environment's tiny policy into a folder: corpus, tokenizer, model, warm start, save.

One builder for every environment: the environment supplies a :class:`~.spec.TinySpec`
(its corpus, reply mix, added tokens and options such as refund's copy head) and renders
the chats (``messages_for``); nothing here names a task. Deterministic for a spec and the
library versions: every random choice comes from the spec's seed (the corpus from
:mod:`random`, the weights from torch), always drawn in the same order.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from pathlib import Path

from ..._io.progress import bar
from ...environment.contract import Env
from .copyhead import CopyHead
from .corpus import dialogues
from .manifest import BUILD_INFO, BuildInfo, content_hash, file_digests
from .model import new_model
from .spec import TinySpec, spec_of
from .tokenizer import build_tokenizer
from .warmstart import encode_dialogues, warm_start

__all__ = ["build_policy", "versions"]

#: Chat-template role lines the BPE sees, so role names are cheap tokens.
_ROLE_LINES = ["system\n", "user\n", "assistant\n"] * 50


def build_policy(out: Path, env: Env, spec: TinySpec | None = None, *,
                 progress: bool | None = None) -> BuildInfo:
    """Build *env*'s tiny policy (or *spec*, a variant) into the existing folder *out*.

    *progress* shows the warm-start steps as a bar (None: when stderr is a terminal).

    Returns the build info it wrote last (:data:`~.manifest.BUILD_INFO`): the spec,
    library versions, data mix, loss curve, timings, and each file's SHA-256 with the
    policy's content hash.
    """
    import torch

    spec = spec or spec_of(env)
    started, cpu_started = time.perf_counter(), time.process_time()
    torch.set_num_threads(1)
    writer = spec.corpus.writer(spec.seed)
    category_of = (lambda text: env.category_of({"case": env.case_for(text)})) if env.has_case_for else None
    stream = dialogues(writer, spec.mix, seed=spec.seed, category_of=category_of)
    data = list(itertools.islice(stream, spec.schedule.steps * spec.schedule.batch_size))
    head_data = data[: spec.tokenizer_dialogues]
    tokenizer = build_tokenizer(
        [d.prompt for d in head_data] + [d.reply for d in head_data] + _ROLE_LINES,
        vocab_size=spec.vocab_size, words=spec.words + spec.copy_values, phrases=spec.phrases,
        chat_template=spec.chat_template,
    )
    model = new_model(tokenizer, spec.shape, seed=spec.seed)
    head = (CopyHead.for_tokens(tokenizer, spec.words, seed=spec.seed, values=spec.copy_values)
            if spec.copy_head else None)
    if head is not None:
        head.install(model)
    examples = encode_dialogues(tokenizer, data, env.messages_for,
                                tools=env.tool_functions() if env.is_episodic else None)
    steps = bar(spec.schedule.steps, f"building tiny policy {spec.name}", progress, unit="step")

    def log(step: int, loss: float) -> None:
        steps.set_postfix(loss=f"{loss:.3f}", refresh=False)
        steps.update(1)

    try:
        curve = warm_start(
            model, examples, spec.schedule, seed=spec.seed, pad_id=tokenizer.pad_token_id,
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
    info: BuildInfo = {
        "name": spec.name,
        "environment": env.describe(),
        "recipe": spec.as_dict(),
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
