"""The names the type checker gives to what policy and training code pass around.

A policy is a transformers model (a :class:`peft.PeftModel` once an adapter is attached),
its tokenizer, or a plain callable from the chat so far to the next assistant turn. The
heavy classes are imported for the type checker only (``if TYPE_CHECKING``): importing this
module costs nothing, so any module may name them in its signatures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # pragma: no cover - the names only the type checker reads
    from typing import TypeAlias

    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    #: a loaded causal LM: a transformers model, or a PEFT model wrapping one
    Model: TypeAlias = PreTrainedModel | PeftModel
    #: the tokenizer loaded beside a model (its chat template renders the prompts)
    Tokenizer: TypeAlias = PreTrainedTokenizerBase

#: one message of a chat, in the chat-template shape (``role``, ``content``, ``tool_calls``...)
Message = Mapping[str, object]
#: a callable policy: the chat so far -> the next assistant turn (a string, or a message with
#: ``tool_calls``); a scripted policy in a test, an API model
PolicyFunction = Callable[..., str | Mapping[str, object]]
#: the prompts the sampler accepts: prompt texts or prompt items (a ``prompt`` string and more)
Prompts = Sequence[str | Mapping[str, object]]


class RowMeta(TypedDict, total=False):
    """What sampling stamps on every row it grades: the seed, and the policy and run named."""

    sample_seed: int
    policy: str
    eval_run: int | str


# and, for the type checker only, Model and Tokenizer
__all__ = ["Message", "PolicyFunction", "Prompts", "RowMeta"]
