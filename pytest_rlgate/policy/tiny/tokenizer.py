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
from typing import Any

__all__ = ["CHAT_TEMPLATE", "EOS", "PAD", "SPECIALS", "build_tokenizer"]

PAD, EOS = "<|pad|>", "<|im_end|>"
SPECIALS = ("<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: ChatML; the same template renders warm-start data, GRPO prompts and sampler prompts.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tokenizer(
    lines: Iterable[str],
    *,
    vocab_size: int = 512,
    words: Sequence[str] = (),
    phrases: Sequence[str] = (),
) -> Any:  # a PreTrainedTokenizerFast
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
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
    )
