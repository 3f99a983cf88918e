"""The tiny policy's network: a small Llama, sized by :class:`ModelShape`, seeded.

A plain ``LlamaForCausalLM`` with tied embeddings, so the saved checkpoint loads through
``AutoModelForCausalLM`` like any hub model. A spec may add the hand-built copy head
(:mod:`.copyhead`) before the warm start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

    from ..handles import Tokenizer

__all__ = ["ModelShape", "new_model"]


@dataclass(frozen=True)
class ModelShape:
    """Size of the tiny Llama (refund's: about 1.7 M parameters, most of them its tied 9.5k embedding)."""

    hidden: int = 128
    layers: int = 2
    heads: int = 4
    mlp: int = 512
    max_positions: int = 512


def new_model(tokenizer: Tokenizer, shape: ModelShape, *, seed: int) -> LlamaForCausalLM:
    """A freshly initialised model sized for *tokenizer* (seeded, float32)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        intermediate_size=shape.mlp,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).float()
    model.generation_config = GenerationConfig(
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None
    )
    return model
