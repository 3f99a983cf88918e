"""A checkpoint shaped like a hub chat model goes through rlgate's loader and sampler as it is."""

from __future__ import annotations

import pytest
from _hub_model import TOOL_TAGS, model_and_tokenizer

from pytest_rlgate.envs.refund import TOOLS
from pytest_rlgate.policy import generate
from pytest_rlgate.policy.load import load_policy
from pytest_rlgate.policy.sampling import sample

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

PROMPTS = ["Please refund ORD-4017.", "Where is my order?", "Tell me a joke."]
FAST = {"max_new_tokens": 10, "progress": False}


def test_the_folder_is_hub_shaped(hub_model_dir) -> None:
    model, tok = model_and_tokenizer(hub_model_dir)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert tok.padding_side == "right" and tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>"
    assert len(model.generation_config.eos_token_id) == 2 and model.generation_config.do_sample
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tools=list(TOOLS), tokenize=False,
                                   add_generation_prompt=True)
    assert "<tools>" in chat and "lookup_order" in chat and chat.endswith("<|im_start|>assistant\n")
    assert tok.convert_ids_to_tokens(tok("<tool_call>")["input_ids"]) == ["<tool_call>"]


def test_load_policy_pads_left_and_keeps_the_tokens_own_pad(hub_model_dir) -> None:
    _model, tok = load_policy(hub_model_dir, device="cpu")
    assert tok.padding_side == "left"
    assert tok.pad_token == "<|endoftext|>"  # its own pad, not replaced by eos


def test_tool_tags_survive_decoding(hub_model_dir) -> None:
    _model, tok = load_policy(hub_model_dir, device="cpu")
    text = '<tool_call>\n{"name": "lookup_order", "arguments": {"order_id": "ORD-4017"}}\n</tool_call>'
    ids = tok(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
    decoded = tok.decode(ids, skip_special_tokens=True)
    assert decoded == text and all(tag in tok.get_vocab() for tag in TOOL_TAGS)


def test_sampling_ignores_the_checkpoints_own_sampling_defaults(hub_model_dir) -> None:
    """Its generation config asks for repetition penalty 1.05 and top-k 20; the rows' header
    names temperature and top-p only, so neither may leak into the draws."""
    from transformers import GenerationConfig

    model, tok = load_policy(hub_model_dir, device="cpu")
    ours = sample(model, tok, PROMPTS, k=2, **FAST)
    shipped = model.generation_config
    model.generation_config = GenerationConfig(eos_token_id=shipped.eos_token_id, pad_token_id=shipped.pad_token_id)
    assert sample(model, tok, PROMPTS, k=2, **FAST) == ours
    model.generation_config = shipped
    assert sample(model, tok, PROMPTS, k=2, **FAST) == ours  # and the model's own config is back


def test_generation_stops_at_either_eos(hub_model_dir) -> None:
    model, tok = load_policy(hub_model_dir, device="cpu")
    assert generate._eos_ids(model, tok) == tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
