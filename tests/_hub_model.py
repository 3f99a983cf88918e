"""A hub-shaped chat model, built offline in seconds: the shape of a real instruct checkpoint.

The shipped tiny policies carry everything rlgate needs in their own files (a left-padding
tokenizer, a pad token, one eos, a plain template). A checkpoint from the hub does not:
this one is built the way Qwen2.5-Instruct ships, so the tests meet what a user's folder
brings. A ``Qwen2ForCausalLM`` (random init, tiny dims), a byte-level BPE tokenizer trained
here with ``tokenizers``, and:

* Qwen2.5's tool-aware chat template: tools go into the system block, calls are
  ``<tool_call>`` JSON, tool results come back as ``<tool_response>`` user turns, and a
  chat without a system turn gets a default system prompt;
* ``<|im_start|>`` / ``<|im_end|>`` / ``<|endoftext|>`` as special tokens, the tool tags as
  *non-special* added tokens (so decoding keeps them, as Qwen's tokenizer does);
* eos ``<|im_end|>`` in the tokenizer but ``[<|im_end|>, <|endoftext|>]`` in the generation
  config, pad ``<|endoftext|>``, right padding, no bos;
* a generation config that samples by default (temperature 0.7, top-p 0.8, top-k 20,
  repetition penalty 1.05) - which rlgate's seeded sampler must not inherit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_rlgate.data.prompts import build_prompts
from pytest_rlgate.envs.refund import SYSTEM, TOOLS, messages_for

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
DEFAULT_SYSTEM = "You are a helpful assistant."

#: Qwen2.5-Instruct's chat template (its tool block, call and response markup), with its
#: default system prompt shortened.
TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- '" + DEFAULT_SYSTEM + "' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, "
    "\\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\n" + DEFAULT_SYSTEM + "<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or "
    "(message.role == 'assistant' and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'tool' %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)


def _corpus() -> list[str]:
    lines = [SYSTEM, DEFAULT_SYSTEM, "system\n", "user\n", "assistant\n"]
    lines += [m["content"] for item in build_prompts(0, "default") for m in messages_for(item["prompt"])]
    lines += [str(tool) for tool in TOOLS]
    lines += ['\n{"name": "lookup_order", "arguments": {"order_id": "ORD-4017"}}\n'] * 5
    return lines


def build_hub_model(folder: str | Path, seed: int = 0) -> Path:
    """Build and save the hub-shaped model into *folder* (about 0.4 M parameters); returns it."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=448, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TOOL_TAGS])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 bos_token=None, unk_token=None, additional_special_tokens=["<|im_start|>"],
                                 padding_side="right", model_max_length=32768, clean_up_tokenization_spaces=False)
    hf.chat_template = TEMPLATE
    endoftext, im_end = hf.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(hf), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=True, bos_token_id=endoftext, eos_token_id=im_end,
                         use_sliding_window=False)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=endoftext, pad_token_id=endoftext, eos_token_id=[im_end, endoftext], do_sample=True,
        temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    hf.save_pretrained(out)
    return out


def model_and_tokenizer(folder: str | Path) -> tuple[Any, Any]:
    """The folder loaded the way a user's script would, without rlgate's loader."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
