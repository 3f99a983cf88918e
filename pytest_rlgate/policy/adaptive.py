"""The sampler side of sampling until decided: a policy as ``draw(items, first, count)``.

:func:`pytest_rlgate.gate.adaptive.until_decided` asks for replies ``first .. first + count - 1``
of some prompts at each look. Reply j of a prompt is seeded by (seed, j, the chat)
(:func:`~pytest_rlgate.policy.generate.reply_seed`), so those are exactly the replies a run
at k = first + count would have drawn there: extending a prompt never resamples the replies
it has, and the rows of an adaptive run pair, reply by reply, with a fixed-k run's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..environment.contract import EnvSpec, load_env
from ..records import PromptItem, Row
from .generate import SampleOptions, VllmSampler, refuse_later_replies
from .kinds import Policy
from .sampling import sample_rows

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .generate import SampleKeywords
    from .handles import Tokenizer

__all__ = ["policy_draw"]


def policy_draw(model: Policy, tokenizer: Tokenizer | None, *, env: EnvSpec = None,
                sampling: SampleOptions | None = None, policy: str | None = None, adapter: bool = True,
                backend: str = "transformers", **keywords: Unpack[SampleKeywords]) -> Callable[
                    [Sequence[PromptItem], int, int], list[Row]]:
    """``draw(items, first, count)``: *model*'s graded rows for replies first .. first+count-1 of each item.

    Replies are drawn as *sampling* with *keywords* on top says (its ``k`` and ``first`` are the
    draw's own); *adapter* and *backend* are :func:`~pytest_rlgate.policy.sampling.sample_rows`'.
    The vllm backend cannot start at a reply other than 0 and is refused here, before anything
    is sampled. Rows carry ``sample_seed``, ``policy`` and ``eval_run`` like ``rlgate sample``'s.
    """
    environment = load_env(env)
    drawn = SampleOptions.of(sampling, **keywords)
    if backend == "vllm" or isinstance(model, VllmSampler):
        refuse_later_replies(dataclasses.replace(drawn, first=1))

    def draw(items: Sequence[PromptItem], first: int, count: int) -> list[Row]:
        return list(sample_rows(model, tokenizer, items, sampling=dataclasses.replace(drawn, k=count, first=first),
                                policy=policy, eval_run=f"seed-{drawn.seed}", env=environment, shard=False,
                                progress=False, adapter=adapter, backend=backend))

    return draw
