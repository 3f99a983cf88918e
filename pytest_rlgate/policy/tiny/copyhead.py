"""A hand-built, frozen copy head: lets a 2-layer model copy a four-digit code from the prompt.

Why hand-built: at this size (about 1.7 M parameters, minutes of CPU) training alone never
learns to copy the prompt's order id; 800-1000 warm-start steps leave exact-id lookups at
zero whatever the data (measured over six builds). So the copy circuit is
written into the initial weights and protected while the rest trains. It works for any
family of single-token *codes* ending in four digits (refund's ``ORD-1000`` .. ``ORD-9999``),
which a spec opts into with ``copy_head=True``:

* every code token's embedding is ``0.5*u + 0.5*sum_p D[p][digit_p]``: a shared "this is a
  code" direction ``u`` plus one of ten orthonormal directions per digit position (frozen);
* every other token carries ``0.3*c`` (re-set after each optimizer step, the rest trains);
* layer 0, heads 0 and 1: query dim 15 reads ``c`` and key dim 15 reads ``u`` (dim 15 is
  the lowest RoPE frequency, so the score barely depends on distance): every position
  attends to the code tokens before it; their values carry the digit directions (head 0
  digits 1-2, head 1 digits 3-4) and ``o_proj`` writes them back, so the residual stream
  holds the prompt code's digits and the tied output embedding scores that code highest.

A spec may also name *values*: a few whole tokens copied by identity (the agent's order
amounts, which it must carry from a lookup's result to the refund). Each value token's
embedding is ``0.5*w + 0.5*V[value]`` (frozen, one orthonormal direction per value), and head 2
of layer 0 does for values what heads 0 and 1 do for codes: every other position attends to
the value tokens before it and writes their direction back, so the tied embedding scores the
value seen in the context highest.

The saved checkpoint is a plain ``LlamaForCausalLM``; nothing here is needed to load it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import torch
    from torch.utils.hooks import RemovableHandle

    from ..handles import Model, Tokenizer

#: rows or columns of a weight: a tensor of indices or a list of them
_Index = Union["torch.Tensor", list[int], None]

__all__ = ["CODE_DIGITS", "CopyHead"]

#: Digits at the end of every code token the head copies.
CODE_DIGITS = 4
_QK_DIM = 15  # lowest-frequency rotary dimension of a 32-wide head
_COPY_HEADS = (0, 1)  # head 0 carries digits 1-2, head 1 digits 3-4
_VALUE_HEAD = 2
_CODE_DIRS = 42  # u, c and ten directions for each of the four digit positions


@dataclass
class CopyHead:
    """Writes the copy circuit into a fresh model and keeps it intact during the warm start.

    Use :meth:`install` once, call :meth:`after_step` after every optimizer step, and
    :meth:`remove` when training is done (drops the gradient hooks).
    """

    id_token_ids: Sequence[int]
    digits: Sequence[str]  # the four digits of each code token, aligned with id_token_ids
    seed: int
    value_token_ids: Sequence[int] = ()
    c_scale: float = 0.3
    qk_scale: float = 1.5
    _hooks: list[RemovableHandle] = field(default_factory=list, repr=False)
    _c: torch.Tensor | None = None
    _non_id: torch.Tensor | None = None

    @classmethod
    def for_tokens(cls, tokenizer: Tokenizer, tokens: Sequence[str], *, seed: int,
                   values: Sequence[str] = ()) -> CopyHead:
        """The head over *tokens* (each ends in four digits and is one token of *tokenizer*),
        and over *values* copied whole (each one token of *tokenizer*)."""
        bad = next((t for t in tokens if len(t) <= CODE_DIGITS or not t[-CODE_DIGITS:].isdigit()), None)
        if bad is not None or not tokens:
            raise ValueError(f"copy head: every word must end in {CODE_DIGITS} digits (like ORD-4017), got "
                             f"{bad!r}; set copy_head=False in the spec or give such words")
        ids = tokenizer.convert_tokens_to_ids(list(tokens))
        value_ids = tokenizer.convert_tokens_to_ids(list(values))
        unknown = [v for v, i in zip(values, value_ids) if i is None or i == tokenizer.unk_token_id]
        if unknown:
            raise ValueError(f"copy head: the values {unknown!r} are not single tokens of the tokenizer; "
                             "add them as words")
        return cls(ids, [t[-CODE_DIGITS:] for t in tokens], seed=seed, value_token_ids=value_ids)

    def install(self, model: Model) -> None:
        import torch

        cfg = model.config
        hidden, head_dim = cfg.hidden_size, cfg.hidden_size // cfg.num_attention_heads
        g = torch.Generator().manual_seed(self.seed)
        basis, _ = torch.linalg.qr(torch.randn(hidden, hidden, generator=g))
        u, c = basis[:, 0], basis[:, 1]
        digit_dir = basis[:, 2:_CODE_DIRS].T.reshape(4, 10, hidden)  # [position, digit, hidden]
        n_values = len(self.value_token_ids)
        if n_values >= head_dim or _CODE_DIRS + 1 + n_values > hidden:
            raise ValueError(f"copy head: {n_values} values do not fit a {hidden}-wide model with "
                             f"{head_dim}-wide heads")
        w = basis[:, _CODE_DIRS]
        value_dir = basis[:, _CODE_DIRS + 1 : _CODE_DIRS + 1 + n_values].T  # [value, hidden]
        self._c = c
        emb = model.get_input_embeddings().weight
        ids = torch.tensor(list(self.id_token_ids))
        positions = torch.arange(4)
        digit_idx = torch.tensor([[int(ch) for ch in d] for d in self.digits])  # [n_ids, 4]
        values = torch.tensor(list(self.value_token_ids), dtype=torch.long)
        with torch.no_grad():
            structure = basis[:, : _CODE_DIRS + 1 + n_values]
            emb -= (emb @ structure) @ structure.T  # other tokens start free of the copy directions
            emb += self.c_scale * c
            emb[ids] = 0.5 * u + 0.5 * digit_dir[positions, digit_idx].sum(dim=1)
            if n_values:
                emb[values] = 0.5 * w + 0.5 * value_dir
        non_id = torch.ones(emb.shape[0], dtype=torch.bool)
        non_id[ids] = False
        non_id[values] = False
        self._non_id = non_id

        attn = model.model.layers[0].self_attn
        heads = (*_COPY_HEADS, _VALUE_HEAD) if n_values else _COPY_HEADS
        qk_rows = [h * head_dim + _QK_DIM for h in heads]
        v_rows = [h * head_dim + j for h in heads for j in range(head_dim)]
        with torch.no_grad():
            attn.q_proj.weight[qk_rows] = self.qk_scale * c
            attn.k_proj.weight[qk_rows] = self.qk_scale * torch.stack([u] * len(_COPY_HEADS) + [w] * bool(n_values))
            attn.v_proj.weight[v_rows] = 0.0
            attn.o_proj.weight[:, v_rows] = 0.0
            for n, h in enumerate(_COPY_HEADS):
                dirs = digit_dir[2 * n : 2 * n + 2].reshape(20, hidden)  # two digit positions
                rows = [h * head_dim + j for j in range(20)]
                attn.v_proj.weight[rows] = dirs
                attn.o_proj.weight[:, rows] = dirs.T
            if n_values:
                rows = [_VALUE_HEAD * head_dim + j for j in range(n_values)]
                attn.v_proj.weight[rows] = value_dir
                attn.o_proj.weight[:, rows] = value_dir.T
        for bias in (attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias, attn.o_proj.bias):
            assert bias is None, "the copy head assumes bias-free projections (LlamaConfig default)"

        self._freeze(emb, rows=torch.cat([ids, values]))
        self._freeze(attn.q_proj.weight, rows=qk_rows)
        self._freeze(attn.k_proj.weight, rows=qk_rows)
        self._freeze(attn.v_proj.weight, rows=v_rows)
        self._freeze(attn.o_proj.weight, cols=v_rows)

    def _freeze(self, weight: torch.Tensor, *, rows: _Index = None, cols: _Index = None) -> None:
        import torch

        mask = torch.ones_like(weight)
        if rows is not None:
            mask[rows] = 0.0
        if cols is not None:
            mask[:, cols] = 0.0
        self._hooks.append(weight.register_hook(lambda grad: grad * mask))

    def after_step(self, model: Model) -> None:
        """Re-set the shared ``c`` component of every other token's embedding (the query signal)."""
        import torch

        emb = model.get_input_embeddings().weight
        with torch.no_grad():
            rows = emb[self._non_id]
            rows += (self.c_scale - rows @ self._c)[:, None] * self._c
            emb[self._non_id] = rows

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
