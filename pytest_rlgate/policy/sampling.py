"""Seeded, batched sampling of k replies per prompt, and grading them into rows.

Reproducibility is per *reply*, not per call: reply ``j`` of a prompt is drawn with its own
random stream, seeded from ``(seed, j, the rendered chat)``. Plain ``generate(do_sample=True)``
draws every row from one global stream, so a prompt's replies change with the batch size
and with whatever prompts came before it (feasibility G14). Here the same prompt, seed and
k give the same replies whether it is sampled alone, first or last, in a batch of 1 or 64,
which is what lets before/after row files pair up by prompt and lets a cached row file be
extended without resampling it.

The generation itself is :mod:`.generate`; episodes (environments with tools) run the tool
loop of :mod:`.episode` over the same generation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from .._io import ranks
from .._io.progress import bar
from ..data.prompts import fingerprint
from ..data.provenance import row_header
from ..data.rows import Rows, grade_replies
from ..environment.contract import Env, EnvSpec, load_env
from ..errors import UsageError
from ..records import PromptItem, Row
from .episode import is_policy_function, sample_episode_rows, sample_texts
from .generate import (
    BASE_RUN_SEEDS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_NEW_TOKENS,
    SAMPLE_SEED,
    SAMPLE_TEMPERATURE,
    SAMPLE_TOP_P,
    SampleOptions,
    VllmSampler,
    chat_tokenizer,
    generate_batch,
    prompt_text,
    render,
    reply_seed,
)
from .handles import Prompts, RowMeta
from .kinds import Policy
from .served import ServedModel

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .generate import SampleKeywords
    from .handles import Tokenizer

#: what a prompt is sampled with on one rank: its scenario, else its prompt text
_Unit = tuple[str, object]
#: what one item's draw is: its k replies, or its k graded episodes
_Drawn = TypeVar("_Drawn")

__all__ = [
    "BASE_RUN_SEEDS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_NEW_TOKENS",
    "SAMPLE_SEED",
    "SAMPLE_TEMPERATURE",
    "SAMPLE_TOP_P",
    "SampleOptions",
    "VllmSampler",
    "graded_rows",
    "reply_seed",
    "sample",
    "sample_rows",
    "shard",
]

def sample(
    model: Policy,
    tokenizer: Tokenizer | None,
    prompts: Prompts,
    *,
    adapter: bool = True,
    env: EnvSpec = None,
    progress: bool | None = None,
    desc: str = "sampling",
    backend: str = "transformers",
    sampling: SampleOptions | None = None,
    **keywords: Unpack[SampleKeywords],
) -> list[list[str]]:
    """``replies[i]`` = the *k* sampled replies to ``prompts[i]`` (a prompt item or a string).

    How they are drawn is a :class:`SampleOptions` (*sampling*, with its fields as keywords on
    top: ``k``, ``temperature``, ``seed``, ``max_new_tokens``, ...).
    Prompts are rendered with the environment's ``messages_for`` (its system prompt and the
    user turn by default; the default environment when *env* is None) through the
    tokenizer's chat template. *adapter* False samples a ``PeftModel``'s base
    (adapter disabled). *temperature* 0 is greedy. ``backend="vllm"`` samples with vLLM:
    pass a :class:`VllmSampler` (or a model name/folder) as *model*; *tokenizer* may be None.
    A :class:`~pytest_rlgate.policy.served.ServedModel` samples a model behind an
    OpenAI-compatible endpoint (*tokenizer* None; *adapter* False samples an adapter's base).
    *progress* shows a bar named *desc* (None: when stderr is a terminal, see
    :mod:`pytest_rlgate._io.progress`). ``first=`` draws later replies of a prompt
    (:class:`~pytest_rlgate.policy.generate.SampleOptions`).
    """
    return _sample(model, tokenizer, prompts, SampleOptions.of(sampling, **keywords), env=load_env(env),
                   adapter=adapter, progress=progress, desc=desc, backend=backend)


def _sample(model: Policy, tokenizer: Tokenizer | None, prompts: Prompts, sampling: SampleOptions, *, env: Env,
            adapter: bool, progress: bool | None, desc: str, backend: str) -> list[list[str]]:
    if env.is_episodic or is_policy_function(model):  # the tool loop (episodes), or a callable policy
        return sample_texts(model, tokenizer, prompts, sampling, env=env, adapter=adapter, progress=progress,
                            desc=desc, backend=backend)
    if isinstance(model, ServedModel):
        served = model if adapter else model.base()
        return served.sample(prompts, sampling, env=env, progress=progress, desc=desc)
    if backend == "vllm" or isinstance(model, VllmSampler):
        sampler = model if isinstance(model, VllmSampler) else VllmSampler(model)
        return sampler.sample(prompts, sampling, env=env, adapter=adapter, progress=progress)
    if backend != "transformers":
        raise UsageError(f"backend={backend!r}: use 'transformers' (default) or 'vllm'")
    if not prompts:
        return []
    if isinstance(model, str):
        raise UsageError(f"model={model!r} is a name: load it with load_policy() first, or sample "
                         "it with backend='vllm'")
    import torch

    tokenizer = chat_tokenizer(tokenizer)
    rendered = render(tokenizer, prompts, env)
    if tokenizer.pad_token_id is None:
        raise UsageError("the tokenizer has no pad token, which batched sampling needs; load the "
                         "policy with load_policy() or set tokenizer.pad_token = tokenizer.eos_token")
    lengths = [len(ids) for ids in tokenizer(rendered, add_special_tokens=False)["input_ids"]]
    # Longest first: batches of similar length waste little on padding, and a reply does
    # not depend on its batch, so the order is free to choose.
    order = sorted(range(len(rendered)), key=lambda i: (-lengths[i], i))
    replies: list[list[str]] = [[] for _ in rendered]
    switch = contextlib.nullcontext()
    if not adapter and hasattr(model, "disable_adapter"):
        switch = model.disable_adapter()
    was_training = model.training
    model.eval()
    shown = bar(len(rendered), desc, progress, unit="prompt", leave=False)
    try:
        with switch, torch.inference_mode():
            for lo in range(0, len(order), sampling.batch_size):
                chunk = order[lo : lo + sampling.batch_size]
                rows = [(i, j) for i in chunk for j in range(sampling.first, sampling.first + sampling.k)]
                texts = generate_batch(
                    model, tokenizer, [rendered[i] for i, _ in rows],
                    [reply_seed(sampling.seed, j, rendered[i]) for i, j in rows], sampling,
                )
                for (i, _), text in zip(rows, texts):
                    replies[i].append(text)
                shown.update(len(chunk))
    finally:
        shown.close()
        model.train(was_training)
    return replies


def sample_rows(
    model: Policy,
    tokenizer: Tokenizer | None,
    items: Sequence[PromptItem],
    *,
    policy: str | None = None,
    eval_run: str | None = None,
    env: EnvSpec = None,
    shard: bool = True,
    adapter: bool = True,
    progress: bool | None = None,
    desc: str = "sampling",
    backend: str = "transformers",
    sampling: SampleOptions | None = None,
    **keywords: Unpack[SampleKeywords],
) -> Rows:
    """Sample *k* replies per prompt item and grade them into rows (``rows.grade_replies``).

    In a torchrun / accelerate job the items are shared out across the processes by unit
    and the rows gathered (every rank must call it); *shard* False samples them all on
    this process alone (what a callback running on the main process only needs).

    Rows carry ``sample_seed`` (and ``policy`` / ``eval_run`` when given). How replies are
    drawn is *sampling* with the keywords on top, as for :func:`sample` (which also explains
    *adapter*, *progress*, *desc* and *backend*). The returned
    :class:`~pytest_rlgate.data.rows.Rows` carry the provenance header (environment, prompt-set
    fingerprint, policy, sampling) that :func:`~pytest_rlgate.data.rows.write_rows` writes first.
    Replies ``first ..`` keep their index as ``rollout_index``.
    """
    drawn = SampleOptions.of(sampling, **keywords)
    resolved = load_env(env)
    if resolved.is_episodic:  # rows keep the transcript, turns, tool calls and per-turn markers
        fingerprint = _fingerprint(items)

        def episodes(part: Sequence[PromptItem], shown: bool = True) -> list[Rows]:
            rows = sample_episode_rows(model, tokenizer, part, drawn, env=resolved,
                                       meta=_row_meta(drawn, policy, eval_run),
                                       prompts_fingerprint=fingerprint, adapter=adapter,
                                       progress=progress if shown else False, desc=desc, backend=backend)
            _count_from(rows, drawn.first)
            return [Rows(rows[i * drawn.k:(i + 1) * drawn.k], header=rows.header) for i in range(len(part))]

        per_item = _sharded(episodes, items) if shard else episodes(items)
        header = per_item[0].header if per_item else None
        return Rows([row for rows in per_item for row in rows], header=header)

    def draw(part: Sequence[PromptItem], shown: bool = True) -> list[list[str]]:
        return _sample(model, tokenizer, part, drawn, env=resolved, adapter=adapter,
                       progress=progress if shown else False, desc=desc, backend=backend)

    replies = _sharded(draw, items) if shard else draw(items)
    return graded_rows(items, replies, drawn, env=resolved, policy=policy, eval_run=eval_run)


def graded_rows(items: Sequence[PromptItem], replies: Sequence[Sequence[str]], sampling: SampleOptions, *, env: Env,
                policy: str | None = None, eval_run: str | None = None) -> Rows:
    """*replies* (``replies[i]``: item *i*'s, drawn as *sampling* says) graded by *env* into rows,
    with their provenance header: what :func:`sample_rows` returns for a one-turn environment."""
    header = row_header(env, prompts_fingerprint=_fingerprint(items), policy=policy, sampling=sampling.drawn())
    return Rows(_count_from(grade_replies(items, replies, env=env, **_row_meta(sampling, policy, eval_run)),
                            sampling.first), header=header)


def _row_meta(sampling: SampleOptions, policy: str | None, eval_run: str | None) -> RowMeta:
    """What every row sampled here carries: its seed, and the policy and run when named."""
    meta: RowMeta = {"sample_seed": sampling.seed}
    if policy is not None:
        meta["policy"] = policy
    if eval_run is not None:
        meta["eval_run"] = eval_run
    return meta


def _count_from(rows: list[Row], first: int) -> list[Row]:
    """*rows* graded from replies ``first ..``: their ``rollout_index`` counted from *first*."""
    for row in rows:
        row["rollout_index"] += first
    return rows


def _unit(item: str | Mapping[str, object]) -> _Unit:
    """What a prompt is sampled with on one rank: its scenario (else the prompt itself)."""
    scenario = item.get("scenario_id") if isinstance(item, Mapping) else None
    return ("scenario", scenario) if scenario is not None else ("prompt", prompt_text(item))


def shard(items: Prompts, rank: int, world: int) -> list[int]:
    """The positions of *items* rank *rank* of *world* samples: whole units (scenarios), dealt
    longest-first to the least-loaded rank, so every rank has about the same work."""
    units: dict[_Unit, list[int]] = {}
    for position, item in enumerate(items):
        units.setdefault(_unit(item), []).append(position)
    load = [0] * world
    mine: list[int] = []
    for positions in sorted(units.values(), key=lambda ps: (-sum(len(prompt_text(items[p])) for p in ps), ps[0])):
        owner = min(range(world), key=lambda r: (load[r], r))
        load[owner] += sum(len(prompt_text(items[p])) + 1 for p in positions)
        if owner == rank:
            mine.extend(positions)
    return sorted(mine)


def _sharded(draw: Callable[[Sequence[PromptItem], bool], list[_Drawn]], items: Sequence[PromptItem]) -> list[_Drawn]:
    """``draw(items)`` (one result per item), split across the ranks of a torchrun / accelerate
    job by unit and gathered in the items' order.

    A reply (or an episode's turn) depends on its seed, rollout and rendered chat only
    (:func:`reply_seed`), so the gathered results are the ones one process draws. Only the
    main process shows a bar.
    """
    world = ranks.group_size()
    if world == 1:
        return draw(items, True)
    mine = shard(items, ranks.rank(), world)
    parts = ranks.run_everywhere(lambda: list(zip(mine, draw([items[i] for i in mine], ranks.is_main_process()))))
    drawn = dict(position_result for part in parts for position_result in part)
    return [drawn[position] for position in range(len(items))]


def _fingerprint(items: Sequence[PromptItem]) -> str | None:
    """The prompt set's fingerprint; None (unknown, never checked) for items JSON cannot hold."""
    try:
        return fingerprint(items)
    except (TypeError, ValueError):
        return None
