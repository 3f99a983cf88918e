"""The tool loop: sample whole episodes from a policy, seeded per request, batched per turn.

Each turn: render every unfinished episode's chat with the environment's tools through the
tokenizer's chat template, generate the next assistant turn for all of them in batches, parse
each turn's calls (the environment's parser, else the Hermes ``<tool_call>`` blocks the
common templates use), execute them in the episode's own fresh environment instance, append
the tool messages, and go on until a turn makes no call, the environment's ``max_turns`` or
the token budget. The turn of episode ``j`` of a prompt is drawn with the seed of
``(seed, j, the chat rendered so far)`` (:func:`~pytest_rlgate.policy.sampling.reply_seed`),
so an episode is the same whatever else is in its batch, like a one-turn reply.

The chat is re-rendered from the messages each turn (the assistant's calls as ``tool_calls``),
as agent frameworks do; TRL's trainer concatenates the generated tokens instead. For a policy
that writes its calls in its template's own format, the two are the same text.

A policy is a transformers model (with its tokenizer), a
:class:`~pytest_rlgate.policy.sampling.VllmSampler`, or any callable from the chat so far to
the next assistant turn (a string, or a message with ``tool_calls``): a scripted policy in a
test, an API model. A callable that takes a ``seed`` keyword gets the turn's seed.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from .._io.progress import bar, progress_enabled
from ..data.episodes import grade_episodes
from ..data.provenance import row_header
from ..data.rows import Rows
from ..environment.contract import Env
from ..environment.episode import Episode, EpisodeRun
from ..errors import RlgateWarning, UsageError
from ..records import PromptItem
from .generate import SampleOptions, VllmSampler, generate_batch, reply_seed, vllm_params
from .handles import Message, PolicyFunction, Prompts, RowMeta
from .kinds import Policy
from .served import Overflow, ServedModel, Turn, chat_key, tool_schemas

if TYPE_CHECKING:
    from typing_extensions import TypeIs, Unpack

    from .generate import SampleKeywords
    from .handles import Model, Tokenizer

__all__ = ["is_policy_function", "sample_episode_rows", "sample_episodes", "sample_texts"]


def is_policy_function(model: object) -> TypeIs[PolicyFunction]:
    """A plain callable policy (messages -> reply), not a model, a vLLM sampler or a served model."""
    return (callable(model) and not hasattr(model, "generate")
            and not isinstance(model, (VllmSampler, ServedModel)))


def _item_case(env: Env, item: str | Mapping[str, object]) -> tuple[str, dict[str, object]]:
    prompt = item if isinstance(item, str) else item.get("prompt") if isinstance(item, Mapping) else None
    if not isinstance(prompt, str):
        raise UsageError(f"a prompt must be a string or a prompt item with a 'prompt' string, got {item!r:.80}")
    case = item.get("case") if isinstance(item, Mapping) else None
    if case is None:
        case = env.case_for(prompt)
    if case is None:
        raise UsageError(f"environment {env.name} reads no case from a prompt text (it has no case_for): "
                         f"give each prompt item its case ({prompt[:60]!r})")
    if not isinstance(case, Mapping):
        raise UsageError(f"a prompt item's case must be a mapping of its fields, got {case!r:.80}")
    return prompt, dict(case)


def _takes_seed(fn: Callable[..., object]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "seed" or p.kind is p.VAR_KEYWORD for p in params)


class _Backend:
    """Renders chats and generates one turn for many of them: transformers, vLLM, a served model or a callable."""

    def __init__(self, model: Policy, tokenizer: Tokenizer | None, env: Env, sampling: SampleOptions, *,
                 adapter: bool) -> None:
        self.env = env
        self.sampling = sampling
        self.adapter = adapter
        self.function: PolicyFunction | None = None
        self.sampler: VllmSampler | None = None
        self.served: ServedModel | None = None
        self.lm: Model | None = None  # the transformers model, for the "transformers" kind
        if is_policy_function(model):
            self.kind, self.function = "function", model
        elif isinstance(model, ServedModel):
            self.kind, self.served = "served", model if adapter else model.base()
        elif isinstance(model, VllmSampler):
            self.kind, self.sampler = "vllm", model
        else:
            self.kind, self.lm = "transformers", model
        self.tokenizer = self.sampler.llm.get_tokenizer() if self.sampler is not None else tokenizer
        self.takes_seed = self.function is not None and _takes_seed(self.function)
        self.tools = env.tool_functions() if env.is_episodic else None
        #: the tools as the chat-completions API takes them (a served model renders its own template)
        self.schemas = tool_schemas(self.tools) if self.tools and self.served is not None else None
        #: the model's context in positions (0: it declares none, or it is not a transformers model)
        self.limit = 0
        if self.kind not in ("function", "served"):
            if self.tokenizer is None or getattr(self.tokenizer, "chat_template", None) is None:
                raise UsageError("the tokenizer has no chat_template; load an instruct/chat model "
                                 "(or set tokenizer.chat_template) so episodes render as conversations")
            limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
            self.limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else 0

    def render(self, messages: Sequence[Message]) -> str:
        if self.served is not None:  # the server renders the template; the seed reads the chat itself
            return chat_key(messages, self.schemas)
        if self.tokenizer is None or self.kind == "function":
            return repr(messages)  # only seeds read it
        extra = {"tools": self.tools} if self.tools else {}
        return str(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **extra))

    def width(self, rendered: str) -> int | None:
        """How many of the model's positions *rendered* takes (None: the model declares no context)."""
        if self.tokenizer is None or self.kind != "transformers" or not self.limit:
            return None
        return len(self.tokenizer(rendered, add_special_tokens=False)["input_ids"])

    def fits(self, rendered: str) -> bool:
        """Whether another turn fits the model's context after *rendered*."""
        width = self.width(rendered)
        return width is None or width + self.sampling.max_new_tokens <= self.limit

    def refuse_unfit(self, prompts: Sequence[str], rendered: Sequence[str]) -> None:
        """Before anything is sampled: a first chat (system prompt, tool schemas, prompt) that
        leaves no room for a turn in the model's context is a :class:`UsageError` naming the
        lengths and the fix; sampling on would return only empty episodes stopped by the budget."""
        widths = [self.width(text) for text in rendered]
        turn = self.sampling.max_new_tokens
        unfit = [(w, p) for w, p in zip(widths, prompts) if w is not None and w + turn > self.limit]
        if not unfit:
            return
        width, prompt = max(unfit, key=lambda found: found[0])
        tools = len(self.tools or ())
        schemas = f"{tools} tool schema{'s' * (tools != 1)} " if tools else ""
        parts = f"the system prompt, {schemas}and the prompt"
        room = self.limit - width
        lower = (f", lower --max-new-tokens (max_new_tokens) to {room} or less" if room >= 8 else "")
        raise UsageError(
            f"{len(unfit)} of {len(prompts)} prompts cannot be sampled: the chat of {prompt[:50]!r} renders to "
            f"{width} tokens ({parts}) and a turn may add {turn}, but the model's context is {self.limit} positions "
            f"(max_position_embeddings); every episode would stop before its first turn. Use a model with a longer "
            f"context{lower}, shorten the environment's system prompt or tools, or build a tiny policy for this "
            f"environment, whose system turn is one token (`rlgate policy build --env {self.env.spec or 'MODULE:CLASS'}"
            " --out DIR`, then --base-model DIR or --model DIR)")

    def generate(self, chats: Sequence[Sequence[Message]], rendered: Sequence[str], seeds: Sequence[int], *,
                 first_turn: bool = False) -> Sequence[str | Mapping[str, object] | None]:
        """The next turn of each chat; None where a served model's context cannot hold another turn
        (after the first: a first chat the server refuses is an error, as locally)."""
        if self.served is not None:
            turns = [Turn(chat, seed, prompt=_user_text(chat)) for chat, seed in zip(chats, seeds)]
            answers = self.served.chat(turns, self.sampling, tools=self.schemas, progress=False,
                                       overflow_ends=not first_turn)
            return [None if isinstance(answer, Overflow) else answer for answer in answers]
        if self.function is not None:
            call = self.function
            return [call([dict(m) for m in chat], seed=s) if self.takes_seed else call([dict(m) for m in chat])
                    for chat, s in zip(chats, seeds)]
        if self.sampler is not None:
            return _vllm_generate(self.sampler, rendered, seeds, self.sampling, adapter=self.adapter)
        return generate_batch(self.lm, self.tokenizer, rendered, seeds, self.sampling)

    def tokens(self, text: object) -> int:
        if self.tokenizer is None or self.kind == "function" or not isinstance(text, str):
            return 0
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _user_text(chat: Sequence[Message]) -> str:
    """The prompt a chat answers (its first user message), for a served model's error lines."""
    return next((str(m.get("content")) for m in chat if m.get("role") == "user"), "")


def _vllm_generate(sampler: VllmSampler, rendered: Sequence[str], seeds: Sequence[int], sampling: SampleOptions, *,
                   adapter: bool) -> list[str]:
    """One turn on vLLM: one request per chat, each with its own seed (the sampler's engine and LoRA)."""
    params = [vllm_params(sampler._vllm, sampling, n=1, seed=s) for s in seeds]
    lora = None
    if adapter and sampler.adapter is not None:
        from vllm.lora.request import LoRARequest

        lora = LoRARequest("rlgate-adapter", 1, sampler.adapter)
    outputs = sampler.llm.generate(list(rendered), params, use_tqdm=progress_enabled(False), lora_request=lora)
    return [out.outputs[0].text for out in outputs]


def sample_episodes(
    model: Policy,
    tokenizer: Tokenizer | None,
    prompts: Prompts,
    *,
    env: Env,
    adapter: bool = True,
    progress: bool | None = None,
    desc: str = "sampling episodes",
    token_budget: int | None = None,
    backend: str = "transformers",
    sampling: SampleOptions | None = None,
    **keywords: Unpack[SampleKeywords],
) -> list[list[Episode]]:
    """``episodes[i]`` = the *k* episodes of ``prompts[i]`` (prompt items with their case, or texts
    the environment's ``case_for`` reads), drawn as *sampling* with the keywords on top says
    (see :func:`~pytest_rlgate.policy.sampling.sample`). *max_new_tokens* bounds one turn;
    *token_budget* (default: *max_new_tokens* times the environment's ``max_turns``) bounds an
    episode's generated tokens."""
    return _episodes(model, tokenizer, prompts, SampleOptions.of(sampling, **keywords), env=env, adapter=adapter,
                     progress=progress, desc=desc, token_budget=token_budget, backend=backend)


def _episodes(model: Policy, tokenizer: Tokenizer | None, prompts: Prompts, sampling: SampleOptions, *, env: Env,
              adapter: bool, progress: bool | None, desc: str, token_budget: int | None,
              backend: str) -> list[list[Episode]]:
    k, seed, first = sampling.k, sampling.seed, sampling.first
    if backend not in ("transformers", "vllm"):
        raise UsageError(f"backend={backend!r}: use 'transformers' (default) or 'vllm'")
    if backend == "vllm" and not isinstance(model, (VllmSampler, ServedModel)) and not is_policy_function(model):
        model = VllmSampler(model)
    engine = _Backend(model, tokenizer, env, sampling, adapter=adapter)
    budget = token_budget if token_budget is not None else sampling.max_new_tokens * env.max_turns
    cases = [_item_case(env, item) for item in prompts]
    runs = [[EpisodeRun(env, case, prompt) for _ in range(k)] for prompt, case in cases]
    used = {(i, j): 0 for i in range(len(runs)) for j in range(k)}
    switch: AbstractContextManager[object] = contextlib.nullcontext()
    training = None
    lm = engine.lm
    if lm is not None:
        import torch

        if not adapter and hasattr(lm, "disable_adapter"):
            switch = lm.disable_adapter()
        training = lm.training
        lm.eval()
        switch = _both(switch, torch.inference_mode())
    engine.refuse_unfit([prompt for prompt, _ in cases], [engine.render(row[0].messages) for row in runs if row])
    shown = bar(len(runs) * k * env.max_turns, desc, progress, unit="turn", leave=False)
    try:
        with switch:
            for _turn in range(env.max_turns):
                active = [(i, j) for i in range(len(runs)) for j in range(k) if not runs[i][j].done]
                if not active:
                    break
                rendered = {key: engine.render(runs[key[0]][key[1]].messages) for key in active}
                for key in [key for key in active if not engine.fits(rendered[key])]:
                    runs[key[0]][key[1]].stop = "budget"
                active = [key for key in active if not runs[key[0]][key[1]].done]
                # longest first, as in one-turn sampling: a turn does not depend on its batch
                active.sort(key=lambda key: (-len(rendered[key]), key))
                step = sampling.batch_size * k
                for lo in range(0, len(active), step):
                    chunk = active[lo: lo + step]
                    replies = engine.generate([runs[i][j].messages for i, j in chunk],
                                               [rendered[key] for key in chunk],
                                               [reply_seed(seed, first + j, rendered[(i, j)]) for i, j in chunk],
                                               first_turn=_turn == 0)
                    for (i, j), reply in zip(chunk, replies):
                        if reply is None:  # a served model's context is full: the budget stop, as locally
                            runs[i][j].stop = "budget"
                            continue
                        used[(i, j)] += engine.tokens(reply)
                        runs[i][j].step(reply, budget_left=used[(i, j)] < budget)
                    shown.update(len(chunk))
    finally:
        shown.close()
        if lm is not None and training is not None:
            lm.train(training)
    episodes = [[run.finish("max_turns") for run in row] for row in runs]
    _warn_if_silent(episodes)
    return episodes


def _warn_if_silent(episodes: Sequence[Sequence[Episode]]) -> None:
    """Every episode of a call without a word (no turn, or only empty turns) is a broken
    sampler, never a result: say so, so that rows of nothing are never gated silently."""
    flat = [episode for row in episodes for episode in row]
    if flat and not any(turn.strip() for episode in flat for turn in episode.turns):
        stops = sorted({episode.stop for episode in flat})
        warnings.warn(RlgateWarning(
            f"all {len(flat)} sampled episodes are empty (stop: {', '.join(stops)}): the policy wrote nothing; a gate "
            "of these rows compares nothing (check the model, its chat template and --max-new-tokens)"), stacklevel=3)


@contextlib.contextmanager
def _both(first: AbstractContextManager[object], second: AbstractContextManager[object]) -> Iterator[None]:
    with first, second:
        yield


def sample_texts(model: Policy, tokenizer: Tokenizer | None, prompts: Prompts, sampling: SampleOptions, *, env: Env,
                 adapter: bool, progress: bool | None, desc: str, backend: str) -> list[list[str]]:
    """What :func:`~pytest_rlgate.policy.sampling.sample` returns for an episode environment or a
    callable policy: each episode's text form (a one-turn environment's: the reply itself)."""
    episodes = _episodes(model, tokenizer, prompts, sampling, env=env, adapter=adapter, progress=progress, desc=desc,
                         token_budget=None, backend=backend)
    return [[ep.text if env.is_episodic else (ep.turns[0] if ep.turns else "") for ep in row] for row in episodes]


def sample_episode_rows(model: Policy, tokenizer: Tokenizer | None, items: Sequence[PromptItem],
                        sampling: SampleOptions, *, env: Env, meta: RowMeta, prompts_fingerprint: str | None,
                        adapter: bool, progress: bool | None, desc: str, backend: str) -> Rows:
    """Sampled episodes graded into rows (:func:`~pytest_rlgate.data.episodes.grade_episodes`)."""
    episodes = _episodes(model, tokenizer, items, sampling, env=env, adapter=adapter, progress=progress, desc=desc,
                         token_budget=None, backend=backend)
    header = row_header(env, prompts_fingerprint=prompts_fingerprint, policy=meta.get("policy"),
                        sampling=sampling.drawn())
    return Rows(grade_episodes(items, episodes, env=env, **meta), header=header)
