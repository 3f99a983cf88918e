"""The names the type checker gives to what policy and training code pass around.

A policy is a transformers model (a :class:`peft.PeftModel` once an adapter is attached),
its tokenizer, or a plain callable from the chat so far to the next assistant turn. The
heavy classes are imported for the type checker only (``if TYPE_CHECKING``): importing this
module costs nothing, so any module may name them in its signatures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict, Union

if TYPE_CHECKING:  # pragma: no cover - the names only the type checker reads
    from typing import TypeAlias

    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .generate import VllmSampler

    #: a loaded causal LM: a transformers model, or a PEFT model wrapping one
    Model: TypeAlias = PreTrainedModel | PeftModel
    #: the tokenizer loaded beside a model (its chat template renders the prompts)
    Tokenizer: TypeAlias = PreTrainedTokenizerBase

#: one message of a chat, in the chat-template shape (``role``, ``content``, ``tool_calls``...)
Message = Mapping[str, object]
#: a callable policy: the chat so far -> the next assistant turn (a string, or a message with
#: ``tool_calls``); a scripted policy in a test, an API model
PolicyFunction = Callable[..., str | Mapping[str, object]]
#: what the sampler accepts as a policy: a loaded model, a vLLM sampler, a callable, or (vLLM
#: backend only) a model name or folder
Policy = Union["Model", "VllmSampler", PolicyFunction, str]
#: the prompts the sampler accepts: prompt texts or prompt items (a ``prompt`` string and more)
Prompts = Sequence[str | Mapping[str, object]]


class RowMeta(TypedDict, total=False):
    """What sampling stamps on every row it grades: the seed, and the policy and run named."""

    sample_seed: int
    policy: str
    eval_run: int | str


class GenerationOptions(TypedDict, total=False):
    """How replies are drawn: the settings callers forward as ``**options`` to the sampler."""

    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int
    adapter: bool
    backend: str


class SampleOptions(GenerationOptions, total=False):
    """Every keyword :func:`~pytest_rlgate.policy.sampling.sample` takes besides *k*, *seed* and
    *env*: how replies are drawn, and the progress bar."""

    progress: bool | None
    desc: str


# and, for the type checker only, Model and Tokenizer
__all__ = ["GenerationOptions", "Message", "Policy", "PolicyFunction", "Prompts", "RowMeta", "SampleOptions"]
