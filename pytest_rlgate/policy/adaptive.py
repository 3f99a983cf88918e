"""The sampler side of sampling until decided: a policy as ``draw(items, first, count)``.

:func:`pytest_rlgate.gate.adaptive.until_decided` asks for replies ``first .. first + count - 1``
of some prompts at each look. Reply j of a prompt is seeded by (seed, j, the chat)
(:func:`~pytest_rlgate.policy.generate.reply_seed`), so those are exactly the replies a run
at k = first + count would have drawn there: extending a prompt never resamples the replies
it has, and the rows of an adaptive run pair, reply by reply, with a fixed-k run's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..data.records import PromptItem, Row
from ..environment.contract import EnvSpec, load_env
from .generate import SAMPLE_SEED
from .handles import Policy
from .sampling import check_first, sample_rows

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .handles import GenerationOptions, Tokenizer

__all__ = ["policy_draw"]


def policy_draw(model: Policy, tokenizer: Tokenizer | None, *, env: EnvSpec = None, seed: int = SAMPLE_SEED,
                policy: str | None = None, **options: Unpack[GenerationOptions]) -> Callable[
                    [Sequence[PromptItem], int, int], list[Row]]:
    """``draw(items, first, count)``: *model*'s graded rows for replies first .. first+count-1 of each item.

    *options* are :func:`~pytest_rlgate.policy.sampling.sample_rows`' (temperature, top_p,
    max_new_tokens, batch_size, adapter, backend); the vllm backend cannot start at a reply
    other than 0 and is refused here, before anything is sampled. Rows carry ``sample_seed``,
    ``policy`` and ``eval_run`` like ``rlgate sample``'s.
    """
    environment = load_env(env)
    check_first(1, str(options.get("backend", "transformers")), model)

    def draw(items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        return list(sample_rows(model, tokenizer, items, k=count, first=first, seed=seed, policy=policy,
                                eval_run=f"seed-{seed}", env=environment, shard=False, progress=False, **options))

    return draw
