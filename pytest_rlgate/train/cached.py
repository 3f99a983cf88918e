"""Train once per configuration: runs and sampled rows in the content-addressed cache.

The key hashes everything that decides the result - the method, every knob, the
environment (name, version, fingerprint), the base model's identity, the prompt
fingerprint, the library versions and the training code - so a cached run is served only
when a fresh one would be the same, and never one graded by another reward. ``cache.cached_dir``
publishes atomically under a file lock, so two ``pytest-xdist`` workers train it once.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .._io import cache, ranks
from ..data.rows import Rows, load_rows, write_rows
from ..environment.contract import Env
from ..policy.generate import SampleOptions, prompt_text
from ..policy.load import tiny_policy_key
from ..policy.models import is_model_name, model_identity
from ..policy.served import ServedModel, warn_seed
from ..policy.tiny.spec import TINY_PREFIX
from ..records import PromptItem, Row
from .adapters import run_lineage
from .config import RunKnobs, resolved
from .difficulty import selection_seed
from .inputs import load_prompts, versions
from .methods import trainer
from .run import RunFolder

__all__ = ["CachedRun", "adapter_name", "base_identity", "cached_rows", "cached_run", "env_identity", "run_key",
           "served_identity"]

T = TypeVar("T")

#: Knobs that name where a run lands, not what it learns, or (``env``) that the key holds
#: by identity instead of by spelling: left out of the knobs part.
_PLACEMENT = ("run_name", "runs_dir", "auto", "env")


@dataclass(frozen=True)
class CachedRun:
    """A finished run served from (or just written to) the cache."""

    run: RunFolder
    key: str
    hit: bool

    @property
    def adapter(self) -> Path:
        return Path(self.run.adapter)


#: The code a cached run's files depend on: training, the environment contract and the
#: built-in environments (their rewards, prompt writers, features, negatives), sampling,
#: grading and the gate (gate.json is cached with the run). Edit any of it and runs retrain.
#: An environment outside the package is keyed by its fingerprint.
_RUN_CODE = ("train/*.py", "environment/contract.py", "envs/**/*.py", "policy/sampling.py", "data/rows.py",
             "gate/adapter.py", "gate/recipe_stats.py", "gate/stats.py", "data/prompts.py", "data/hygiene.py",
             "policy/load.py")


def _code_digest() -> str:
    package = Path(__file__).parent.parent
    digest = hashlib.sha256()
    for path in sorted({p for pattern in _RUN_CODE for p in package.glob(pattern)}):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def base_identity(name_or_path: str) -> dict[str, str]:
    """What identifies a base model: a tiny policy's content hash, a folder's files, or a hub id."""
    if name_or_path.startswith(TINY_PREFIX):
        return {"tiny": tiny_policy_key(name_or_path)}
    if is_model_name(name_or_path):
        return model_identity(name_or_path)
    folder = Path(name_or_path)
    if folder.is_dir():
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            small = path.stat().st_size < 64 << 20  # hash small files whole, name large ones by size
            content = path.read_bytes() if small else str(path.stat().st_size).encode()
            digest.update(path.name.encode() + b"\0" + content)
        return {"folder": digest.hexdigest()}
    return {"hub": name_or_path}


def env_identity(env: Env) -> dict[str, object]:
    """What identifies an environment in a key: name, version, fingerprint, and the chat it renders
    (its system prompt is not in the fingerprint, yet it changes what a policy learns)."""
    return {**env.describe(), "chat": env.messages_for("{prompt}")}


def run_key(knobs: RunKnobs) -> str:
    """The cache key of a training run with resolved *knobs*."""
    parts = {k: v for k, v in knobs.to_dict().items() if k not in _PLACEMENT}
    return cache.key(method=knobs.method, knobs=parts, env=env_identity(knobs.environment),
                     base=base_identity(resolved(knobs.base_model, "base_model")),
                     prompts=load_prompts(knobs).fingerprint, from_run=from_run_identity(knobs), versions=versions(),
                     code=_code_digest())


def from_run_identity(knobs: RunKnobs) -> dict[str, object] | None:
    """What a ``--from-run`` round adds to its key: the adapters it merges, by content, and the
    seed its task selection samples at. With the band and the sampling knobs (in the knobs
    part) they decide round two's kept task list, so another list is always another key."""
    if not knobs.from_run:
        return None
    _base, lineage = run_lineage(knobs.from_run)
    return {"adapters": [adapter_identity(step["adapter"]) for step in lineage],
            "selection_seed": selection_seed(knobs.from_run)}


def _rank_aware(kind: str, key: str, build: Callable[[Path], object], *, root: str | os.PathLike[str] | None,
                everyone: Callable[[], object]) -> Path:
    """``cache.cached_dir(kind, key, build)``, in a torchrun / accelerate job too.

    Building is collective there (sampling is sharded, training is data-parallel), but the
    cache's file lock lets one process build while the others wait on the lock: they would
    never join. So the main process says whether the entry is there; on a miss every rank
    runs *everyone()* (the main process inside ``cached_dir``, which alone writes the
    cache), and every rank gets the main process's folder.
    """
    if ranks.group_size() == 1:
        return cache.cached_dir(kind, key, build, root=root)
    final = cache.cache_root(root) / kind / key
    if not ranks.broadcast(cache.is_complete(final)):
        ranks.together(lambda: cache.cached_dir(kind, key, build, root=root) if ranks.is_main_process() else everyone())
    return Path(ranks.broadcast(str(final)))


def cached_run(knobs: RunKnobs, *, root: str | os.PathLike[str] | None = None,
               progress: bool | None = None) -> CachedRun:
    """The finished run for *knobs*, trained now (once, under a lock) if the cache lacks it.

    *progress* shows the trainer's and sampler's progress bars while it trains (None: when
    stderr is a terminal).
    """
    key = run_key(knobs)
    built: list[bool] = []

    def build(out: Path) -> None:
        built.append(True)
        trainer(knobs.method)(knobs, runs_dir=str(out), run_name="run", progress=progress)

    def follow() -> None:
        built.append(True)
        trainer(knobs.method)(knobs, runs_dir=tempfile.gettempdir(), run_name=f"rlgate-{key[:12]}", progress=False)

    folder = _rank_aware(f"runs-{knobs.method}", key, build, root=root, everyone=follow)
    return CachedRun(run=RunFolder.open(folder / "run"), key=key, hit=not built)


def cached_rows(
    parts: Mapping[str, object],
    sample: Callable[[], Sequence[Row]],
    *,
    root: str | os.PathLike[str] | None = None,
) -> tuple[Rows, bool]:
    """Rows that ``sample() -> list[row]`` produces, cached under a key of *parts* (with their header)."""
    key = cache.key(**parts)
    built: list[bool] = []

    def build(out: Path) -> None:
        built.append(True)
        write_rows(out / "rows.jsonl", sample())

    def follow() -> None:
        built.append(True)
        sample()

    folder = _rank_aware("rows", key, build, root=root, everyone=follow)
    return load_rows(folder / "rows.jsonl"), not built


def _local(root: object, identity: Callable[[str], T]) -> T | None:
    """*identity* of *root* when it is a folder on this machine (a server's own path for its weights)."""
    return identity(root) if isinstance(root, str) and Path(root).is_dir() else None


def served_identity(served: ServedModel, env: Env, items: Sequence[PromptItem], sampling: SampleOptions, *,
                    adapter: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """What a row header's ``sampler`` says of a model behind an endpoint: ``model`` and ``adapter``
    as for a loaded one, the engine ``served``, and ``served``: the server's own account
    (:meth:`~pytest_rlgate.policy.served.ServedModel.identity`, without the URL, so replicas of one
    model write one header and their shards merge) and whether it honours ``seed`` (checked on the
    first prompt; a warning when it does not).

    Where the server's root for the weights is a folder on this machine, ``model`` (and an
    adapter's ``adapter``) is the content hash ``--model DIR`` rows carry, so a gate tells "the
    same weights on another engine" from "another model". *adapter* is the local folder an
    adapter was loaded from.
    """
    record = served.identity()
    record.pop("url", None)
    if items:
        text = prompt_text(items[0])
        record.update(served.seed_check(env.messages_for(text), sampling, prompt=text))
        warn_seed(served, record["seed"])
    parent = record.get("parent")
    model = _local(record["base"], base_identity) or {"served": parent if parent else record["id"]}
    if adapter is not None:
        adapter_id: object = adapter_identity(adapter)
    elif parent:
        adapter_id = _local(record.get("root"), adapter_identity) or {"served": record["id"]}
    else:
        adapter_id = None
    return {"model": model, "adapter": adapter_id, "backend": "served", "served": record}


def adapter_name(path: str | os.PathLike[str]) -> str:
    """The name an adapter folder is loaded into a server under: its content's, so a name means one set of weights."""
    return f"rlgate-{adapter_identity(path)[:16]}"


def adapter_identity(path: str | os.PathLike[str]) -> str:
    """SHA-256 of an adapter folder's config and weights (a handed-in adapter's cache identity)."""
    digest = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        digest.update((Path(path) / name).read_bytes())
    return digest.hexdigest()

