"""The tiny policy's tokenizer: byte-level BPE trained locally, plus the spec's added tokens.

* Byte-level BPE with digits split one per token, so any text round-trips.
* A spec's *words* are ordinary added tokens that match only as whole words
  (``single_word``, not special): refund adds ``ORD-1000`` .. ``ORD-9999`` so a canonical
  order id is one token, which is what lets a 2-layer model copy it with one attention head;
  other spellings (``ord_4017``, ``ORD-40170``) fall back to digits.
* A spec's *phrases* are ordinary added tokens matched verbatim: the environment's system
  prompt. It never changes within a run, so spending ~200 positions on it would only slow
  every warm-start, GRPO and sampling step (docs/policy.md has the measurement); a different
  system text still tokenizes normally through BPE.
* Markup such as ``<tool_call>`` stays plain text: TRL decodes completions with
  ``skip_special_tokens``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = ["CHAT_TEMPLATE", "EOS", "PAD", "SPECIALS", "TOOL_CHAT_TEMPLATE", "build_tokenizer"]

PAD, EOS = "<|pad|>", "<|im_end|>"
SPECIALS = ("<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: ChatML; the same template renders warm-start data, GRPO prompts and sampler prompts.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Qwen2.5's chat template, byte for byte: it renders tools, ``tool_calls`` and tool results, and
#: TRL recognises it, so GRPO's tool loop parses a tiny agent's calls as it parses Qwen's.
TOOL_CHAT_TEMPLATE = (
    '{%- if tools %}\n'
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    '    {%- else %}\n'
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    '    {%- endif %}\n'
    '    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\'
    'n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}\n'
    '    {%- for tool in tools %}\n'
    '        {{- "\\n" }}\n'
    '        {{- tool | tojson }}\n'
    '    {%- endfor %}\n'
    '    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and'
    ' arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-nam'
    'e>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}\n'
    '{%- else %}\n'
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    '    {%- else %}\n'
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful"
    " assistant.<|im_end|>\\n' }}\n"
    '    {%- endif %}\n'
    '{%- endif %}\n'
    '{%- for message in messages %}\n'
    '    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (m'
    'essage.role == "assistant" and not message.tool_calls) %}\n'
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    '    {%- elif message.role == "assistant" %}\n'
    "        {{- '<|im_start|>' + message.role }}\n"
    '        {%- if message.content %}\n'
    "            {{- '\\n' + message.content }}\n"
    '        {%- endif %}\n'
    '        {%- for tool_call in message.tool_calls %}\n'
    '            {%- if tool_call.function is defined %}\n'
    '                {%- set tool_call = tool_call.function %}\n'
    '            {%- endif %}\n'
    '            {{- \'\\n<tool_call>\\n{"name": "\' }}\n'
    '            {{- tool_call.name }}\n'
    '            {{- \'", "arguments": \' }}\n'
    '            {{- tool_call.arguments | tojson }}\n'
    "            {{- '}\\n</tool_call>' }}\n"
    '        {%- endfor %}\n'
    "        {{- '<|im_end|>\\n' }}\n"
    '    {%- elif message.role == "tool" %}\n'
    '        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}\n'
    "            {{- '<|im_start|>user' }}\n"
    '        {%- endif %}\n'
    "        {{- '\\n<tool_response>\\n' }}\n"
    '        {{- message.content }}\n'
    "        {{- '\\n</tool_response>' }}\n"
    '        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}\n'
    "            {{- '<|im_end|>\\n' }}\n"
    '        {%- endif %}\n'
    '    {%- endif %}\n'
    '{%- endfor %}\n'
    '{%- if add_generation_prompt %}\n'
    "    {{- '<|im_start|>assistant\\n' }}\n"
    '{%- endif %}\n'
)


def build_tokenizer(
    lines: Iterable[str],
    *,
    vocab_size: int = 512,
    words: Sequence[str] = (),
    phrases: Sequence[str] = (),
    chat_template: str = CHAT_TEMPLATE,
) -> PreTrainedTokenizerFast:
    """Train the BPE on *lines*, add *words* then *phrases*, wrap it for transformers."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(lines), trainer)
    ordinary = [AddedToken(t, single_word=True, normalized=False, special=False) for t in words]
    ordinary += [AddedToken(t, normalized=False, special=False) for t in phrases]
    if ordinary:
        tok.add_tokens(ordinary)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<|endoftext|>"],
        padding_side="left",
        chat_template=chat_template,
        model_max_length=512,
    )
