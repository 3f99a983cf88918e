"""A random-init tiny Llama policy for training tests (feasibility.md section 2).

Used only where a test needs *a* causal LM fast and does not care what it says; tests of
real behaviour use the embedded tiny policy from ``pytest_rlgate.policy.load``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_rlgate.data.prompts import build_prompts
from pytest_rlgate.envs.refund import SYSTEM, messages_for

SPECIALS = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny(folder: str | Path, seed: int = 0) -> tuple[Any, Any]:
    """Build, save and return (model, tokenizer) of a 0.5 M-parameter random Llama."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast


    lines = [SYSTEM] + [m["content"] for item in build_prompts(0, "default") for m in messages_for(item["prompt"])]
    lines += ['<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-4017"}}</tool_call>'] * 5
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=384, special_tokens=SPECIALS,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|im_end|>",
                                 bos_token=None, unk_token=None,
                                 additional_special_tokens=["<|im_start|>", "<|endoftext|>"], padding_side="left")
    hf.chat_template = TEMPLATE
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(hf), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True, pad_token_id=hf.pad_token_id, eos_token_id=hf.eos_token_id,
                      bos_token_id=None)
    model = LlamaForCausalLM(cfg)
    model.generation_config.pad_token_id = hf.pad_token_id
    model.generation_config.eos_token_id = hf.eos_token_id
    Path(folder).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    hf.save_pretrained(folder)
    return model, hf
