"""Generating k seeded replies per prompt: the one place the sampler talks to ``generate`` or vLLM.

How: generation runs greedily over a logits processor that does the sampling itself. At
step ``t`` it applies temperature and top-p exactly like ``generate``'s warpers, then picks
the token by inverse CDF with the row's ``t``-th pre-drawn uniform, and hands ``generate`` a
one-hot score. Cost: one sort per step, the same as top-p sampling in ``generate``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from .._io.progress import progress_enabled
from ..environment.contract import Env
from ..errors import RlgateWarning, UsageError
from ..options import SEED, Number, bounds_of, knob, knob_meta
from .handles import Prompts
from .identity import is_tiny
from .lora import check_adapter
from .models import fetched_model_dir, is_model_name

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig
    from typing_extensions import Unpack

    from .handles import Model, Tokenizer

__all__ = ["BASE_RUN_SEEDS", "DEFAULT_BATCH_SIZE", "DEFAULT_MAX_NEW_TOKENS", "K", "RUNS", "SAMPLE_SEED",
           "SAMPLE_TEMPERATURE", "SAMPLE_TOP_P", "SAMPLING", "TINY_MAX_NEW_TOKENS", "SampleKeywords",
           "SampleOptions", "VllmSampler", "generate_batch", "max_new_tokens_for", "prompt_text", "render",
           "reply_seed", "request_params", "vllm_params"]

#: The ``--help`` section of the sampling flags, on every command that samples.
SAMPLING = "sampling"
#: The reference run's evaluation temperature: diverse enough that pass@1 over k samples
#: measures a policy, not one greedy path.
SAMPLE_TEMPERATURE = 0.8
#: The reference run's nucleus: drops the long tail of junk tokens a small policy puts mass on.
SAMPLE_TOP_P = 0.95
#: The reference run's sample seed, so rows here line up with its published numbers.
SAMPLE_SEED = 17
#: Three base re-runs (seeds 17, 18, 19) measure the base policy's own sampling noise.
BASE_RUN_SEEDS: tuple[int, ...] = (17, 18, 19)
#: Replies per prompt: pass@1 is estimated from four replies (the reference run's).
K = 4
#: The reference run's completion budget; a policy that ends its turn stops earlier.
DEFAULT_MAX_NEW_TOKENS = 160
#: The tiny policy's replies are ~31 tokens; 48 leaves room without paying for 160.
TINY_MAX_NEW_TOKENS = 48
#: Prompts per generate call (each expanded to k rows): fits a CPU and any GPU.
DEFAULT_BATCH_SIZE = 16
#: Runs of one policy at seeds S, S+1, ...: 3 measure its own sampling noise (a noise floor).
RUNS = Number(1, 100, "3 (a noise floor)", integer=True)


def prompt_text(item: object) -> str:
    if isinstance(item, str):
        return item
    text = item.get("prompt") if isinstance(item, Mapping) else None
    if isinstance(text, str):
        return text
    raise UsageError(f"a prompt must be a string or a prompt item with a 'prompt' string, got {item!r:.80}")


def chat_tokenizer(tokenizer: Tokenizer | None) -> Tokenizer:
    """*tokenizer*, checked to have the chat template that renders prompts as conversations."""
    if tokenizer is None or getattr(tokenizer, "chat_template", None) is None:
        raise UsageError("the tokenizer has no chat_template; load an instruct/chat model "
                         "(or set tokenizer.chat_template) so prompts render as conversations")
    return tokenizer


def render(tokenizer: Tokenizer | None, prompts: Prompts, env: Env) -> list[str]:
    """The chat each prompt becomes: ``env.messages_for`` through the tokenizer's template."""
    chats = [env.messages_for(prompt_text(p)) for p in prompts]
    tokenizer = chat_tokenizer(tokenizer)
    return list(tokenizer.apply_chat_template(chats, add_generation_prompt=True, tokenize=False))


def reply_seed(seed: int, rollout: int, rendered: str) -> int:
    """The 63-bit seed of reply *rollout* of a rendered chat: independent of batch layout."""
    digest = hashlib.sha256(f"{seed}\0{rollout}\0{rendered}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


#: "as declared" (a default of None would be a default too)
_SAME = object()


@dataclass(frozen=True)
class SampleOptions:
    """How replies are drawn, declared once: *k* replies per prompt at *temperature* (0: greedy)
    and nucleus *top_p*, reply ``j`` seeded from *seed* (:func:`reply_seed`), at most
    *max_new_tokens* a turn, *batch_size* prompts a ``generate`` call. *first* > 0 draws replies
    ``first .. first + k - 1`` instead, each on its own seed: what extends a prompt sampled at
    k = *first* without resampling it.

    Each field carries its help, its range and its flag (:func:`~pytest_rlgate.options.knob`):
    ``rlgate sample``, ``rlgate watch`` and ``rlgate eval`` generate their sampling flags from
    them, and a training run's knobs copy the ones it evaluates with (:meth:`as_knob`), so a
    setting is spelled, bounded and explained once. Every sampler passes one inside; the
    public ones (:func:`~pytest_rlgate.policy.sampling.sample`, ``sample_rows``,
    ``sample_episodes``) take one as ``sampling=`` and its fields as keywords
    (:class:`SampleKeywords`), checked here once.
    """

    k: int = knob(K, "replies per prompt (%(default)s)", group=SAMPLING, bound=Number(1, 1024, str(K), integer=True))
    temperature: float = knob(SAMPLE_TEMPERATURE, "softmax temperature, 0 for greedy (%(default)s)", group=SAMPLING,
                              bound=Number(0, 10, f"{SAMPLE_TEMPERATURE:g}"))
    top_p: float = knob(SAMPLE_TOP_P, "nucleus: sample from the smallest set of tokens holding this much mass "
                                      "(%(default)s)", group=SAMPLING,
                        bound=Number(0, 1, f"{SAMPLE_TOP_P:g}", low_open=True))
    seed: int = knob(SAMPLE_SEED, "seed of the replies: reply j of a prompt is drawn from (seed, j, the chat) "
                                  "(%(default)s)", group=SAMPLING, bound=SEED, flag="--sample-seed")
    max_new_tokens: int = knob(DEFAULT_MAX_NEW_TOKENS, f"most tokens a reply (a turn) may have (default "
                                                       f"{DEFAULT_MAX_NEW_TOKENS}; {TINY_MAX_NEW_TOKENS} on a tiny "
                                                       "policy)", group=SAMPLING, metavar="TOKENS",
                               bound=Number(1, 32768, str(DEFAULT_MAX_NEW_TOKENS), integer=True))
    batch_size: int = knob(DEFAULT_BATCH_SIZE, "prompts per generate call; does not change the rows (%(default)s)",
                           group=SAMPLING, bound=Number(1, 4096, str(DEFAULT_BATCH_SIZE), integer=True))
    first: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.first, bool) or not isinstance(self.first, int) or self.first < 0:
            raise UsageError(f"first={self.first!r}: the first reply to sample is an index of 0 or more")
        for name, bound in bounds_of(self).items():
            problem = bound.problem(getattr(self, name))
            if problem is not None:
                raise UsageError(f"{name}={getattr(self, name)!r}: {problem}")

    @classmethod
    def of(cls, sampling: SampleOptions | None = None, **keywords: Unpack[SampleKeywords]) -> SampleOptions:
        """*sampling* (default: the defaults) with *keywords* on top: what a public sampler's door builds."""
        base = cls() if sampling is None else sampling
        return dataclasses.replace(base, **keywords) if keywords else base

    def drawn(self) -> dict[str, int | float]:
        """The settings that decide which replies are drawn (every field but *batch_size* and
        *first*): what a row file's header, a watch folder and a cache key record."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _LAYOUT}

    @classmethod
    def as_knob(cls, name: str, *, help: str | None = None, bound: Number | None = None, default: object = _SAME,
                aliases: tuple[str, ...] = ()) -> Any:
        """Field *name*'s declaration, for a class that carries the setting too (a training
        run's knobs): the same flag, help, range and default unless *help*, *bound* or *default*
        says otherwise on that class; *aliases* are that class's older flags."""
        spec = cls.field(name)
        meta = knob_meta(spec)
        assert meta is not None  # every field but first is a knob
        return knob(spec.default if default is _SAME else default, help or meta["help"], group=meta["group"],
                    bound=bound or meta["bound"], metavar=meta["metavar"], flag=meta["flag"],
                    aliases=meta["aliases"] + aliases, fills=name)

    @classmethod
    def field(cls, name: str) -> dataclasses.Field[object]:
        """The field *name* (its help, range and flag in ``metadata``)."""
        return next(f for f in dataclasses.fields(cls) if f.name == name)

    @classmethod
    def flag_names(cls) -> tuple[str, ...]:
        """The fields a command line sets (every field but *first*)."""
        return tuple(f.name for f in dataclasses.fields(cls) if knob_meta(f) is not None)

    @classmethod
    def from_args(cls, args: object, *, model: str | os.PathLike[str] | None = None, **fixed: Any) -> SampleOptions:
        """The options a command's generated flags ask for (:func:`~pytest_rlgate.options.add_knob_arguments`):
        each field the command has a flag for, *fixed* on top; ``--max-new-tokens`` left unset is
        :func:`max_new_tokens_for` *model*."""
        values: dict[str, Any] = {name: getattr(args, name) for name in cls.flag_names() if hasattr(args, name)}
        values.update(fixed)
        if values.get("max_new_tokens") is None:
            values["max_new_tokens"] = max_new_tokens_for(model)
        return cls(**values)


#: the fields that lay the draws out without changing them
_LAYOUT = ("batch_size", "first")


class SampleKeywords(TypedDict, total=False):
    """:class:`SampleOptions`' fields as the keywords the public samplers take (a test holds
    the two to the same names and types)."""

    k: int
    temperature: float
    top_p: float
    seed: int
    max_new_tokens: int
    batch_size: int
    first: int


def max_new_tokens_for(model: str | os.PathLike[str] | None) -> int:
    """The default reply budget for *model*: :data:`TINY_MAX_NEW_TOKENS` on a tiny policy (its
    replies are short), :data:`DEFAULT_MAX_NEW_TOKENS` otherwise."""
    return TINY_MAX_NEW_TOKENS if model is not None and is_tiny(os.fspath(model)) else DEFAULT_MAX_NEW_TOKENS


class _InverseCdfSampler:
    """A logits processor that samples with per-row uniforms and returns a one-hot score."""

    def __init__(self, uniforms: torch.Tensor, temperature: float, top_p: float, prompt_width: int) -> None:
        self.uniforms, self.temperature, self.top_p, self.prompt_width = uniforms, temperature, top_p, prompt_width

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        step = input_ids.shape[1] - self.prompt_width
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
        cum = sorted_p.cumsum(dim=-1)
        kept = torch.where(cum - sorted_p < self.top_p, sorted_p, torch.zeros_like(sorted_p))
        kept_cum = kept.cumsum(dim=-1)
        target = self.uniforms[:, step : step + 1] * kept_cum[:, -1:]
        choice = (kept_cum <= target).sum(dim=-1, keepdim=True).clamp_(max=scores.shape[-1] - 1)
        token = order.gather(-1, choice)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, token, 0.0)


def _eos_ids(model: Model, tokenizer: Tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    return [eos] if isinstance(eos, int) else list(eos or [])


def generate_batch(model: Model, tokenizer: Tokenizer, rendered: Sequence[str], seeds: Sequence[int],
                   sampling: SampleOptions) -> list[str]:
    """One reply per rendered chat, reply ``i`` drawn from ``seeds[i]`` as *sampling* says (its *k*,
    *seed* and *batch_size* are the caller's: they chose *rendered* and *seeds*)."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    device = next(model.parameters()).device
    enc = tokenizer(list(rendered), return_tensors="pt", padding=True, add_special_tokens=False,
                    padding_side="left").to(device)
    width = enc["input_ids"].shape[1]
    config = GenerationConfig(
        do_sample=False, num_beams=1, max_new_tokens=sampling.max_new_tokens,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=_eos_ids(model, tokenizer),
        temperature=None, top_p=None, top_k=None,
    )
    processors = LogitsProcessorList()
    if sampling.temperature > 0:
        uniforms = torch.stack([torch.rand(sampling.max_new_tokens, generator=torch.Generator().manual_seed(s),
                                           dtype=torch.float64) for s in seeds]).to(device)
        processors.append(_InverseCdfSampler(uniforms, sampling.temperature, sampling.top_p, width))
    with _own_generation_config(model, config):
        out = model.generate(**enc, generation_config=config, logits_processor=processors)
    return list(tokenizer.batch_decode(out[:, width:], skip_special_tokens=True))


@contextlib.contextmanager
def _own_generation_config(model: Model, config: GenerationConfig) -> Iterator[None]:
    """Generate with *config* alone: ``generate`` fills every field left unset from the model's
    own generation config, and a hub checkpoint's (Qwen2.5's: repetition penalty 1.05, top-k 20,
    temperature 0.7) would change the distribution the rows' header names."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    saved = inner.generation_config
    inner.generation_config = config
    try:
        yield
    finally:
        inner.generation_config = saved

class VllmSampler:
    """The same sampling interface on vLLM (GPU): one engine, per-reply seeds, LoRA on/off.

    ``VllmSampler("Qwen/Qwen2.5-1.5B-Instruct", adapter="runs/x/adapter")`` then
    ``sample(sampler, None, prompts)``. Replies are reproducible per prompt through vLLM's
    per-request seed, but they are not the same draws as the transformers backend's.

    *trust_remote_code* is vLLM's flag of that name: True runs Python shipped in the model's
    repository, with your permissions. It is off unless you pass ``True`` here, explicitly;
    *llm_options* (any other ``vllm.LLM`` argument) cannot switch it on.
    """

    def __init__(self, model: str | Path, *, adapter: str | Path | None = None, trust_remote_code: bool = False,
                 **llm_options: object) -> None:
        if not isinstance(trust_remote_code, bool):
            raise UsageError(f"trust_remote_code={trust_remote_code!r}: pass True or False (default False)")
        try:
            import vllm
        except ImportError:
            raise UsageError("backend='vllm' needs the vllm package (pip install vllm, on a CUDA "
                             "machine); or sample with backend='transformers'") from None
        if not isinstance(model, (str, Path)):
            raise UsageError("the vllm backend takes a model name or folder (or a VllmSampler), "
                             "not a loaded transformers model")
        self._vllm = vllm
        self.model = str(fetched_model_dir(model) if is_model_name(model) else model)
        self.adapter = None if adapter is None else str(adapter)
        if self.adapter is not None:
            check_adapter(self.adapter, flag="adapter")
            llm_options.setdefault("enable_lora", True)
        if trust_remote_code:
            warnings.warn(f"trust_remote_code=True: vLLM runs Python code from {self.model}'s repository",
                          RlgateWarning, stacklevel=2)
        self.llm = vllm.LLM(model=self.model, trust_remote_code=trust_remote_code, **llm_options)

    def sample(self, prompts: Prompts, sampling: SampleOptions, *, env: Env, adapter: bool = True,
               progress: bool | None = None) -> list[list[str]]:
        """*sampling.k* replies to each prompt (what :func:`~pytest_rlgate.policy.sampling.sample` returns)."""
        refuse_later_replies(sampling)
        if not prompts:
            return []
        tokenizer = self.llm.get_tokenizer()
        rendered = render(tokenizer, prompts, env)
        params = [vllm_params(self._vllm, sampling, n=sampling.k, seed=reply_seed(sampling.seed, 0, text))
                  for text in rendered]
        lora = None
        if adapter and self.adapter is not None:
            from vllm.lora.request import LoRARequest

            lora = LoRARequest("rlgate-adapter", 1, self.adapter)
        outputs = self.llm.generate(rendered, params, use_tqdm=progress_enabled(progress), lora_request=lora)
        return [[completion.text for completion in out.outputs] for out in outputs]


def vllm_params(vllm: Any, sampling: SampleOptions, *, n: int, seed: int) -> Any:
    """vLLM's ``SamplingParams`` for *n* replies as *sampling* says, the draws seeded by *seed*."""
    return vllm.SamplingParams(n=n, temperature=sampling.temperature, top_p=sampling.top_p,
                               max_tokens=sampling.max_new_tokens, seed=seed)


def request_params(sampling: SampleOptions, *, seed: int) -> dict[str, Any]:
    """An OpenAI-compatible chat-completions request's sampling fields: one reply (``n`` = 1) as
    *sampling* says, seeded by *seed* (what :class:`~pytest_rlgate.policy.served.ServedModel` sends)."""
    return {"n": 1, "seed": seed, "temperature": sampling.temperature, "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens}


def refuse_later_replies(sampling: SampleOptions) -> None:
    """vLLM seeds a prompt's replies together, so its one-turn sampler cannot start at reply *first*."""
    if sampling.first:
        raise UsageError(f"the vllm backend seeds a prompt's replies together, so it cannot sample replies "
                         f"{sampling.first} and up alone: extend rows with backend='transformers'")

