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

from .._io import cache, ranks
from ..data.rows import Rows, load_rows, write_rows
from ..environment.contract import Env
from ..policy.identity import adapter_identity, base_identity
from ..records import Row
from .adapters import run_lineage
from .config import RunKnobs, resolved
from .difficulty import selection_seed
from .inputs import load_prompts, versions
from .methods import trainer
from .run import RunFolder

__all__ = ["CachedRun", "cached_rows", "cached_run", "env_identity", "run_key"]

#: Knobs that name where a run lands, not what it learns, or (``env``) that the key holds
#: by identity instead of by spelling: left out of the knobs part.
_PLACEMENT = ("run_name", "runs_dir", "auto", "env")
#: Knobs that watch a run without changing what it learns: in the key only when set (such a run leaves files
#: that a cached run without them lacks), so the keys of runs that leave them unset stay what they were.
_OBSERVERS = ("save_steps", "watch_every")


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
_RUN_CODE = ("train/*.py", "watch/frame.py", "environment/contract.py", "envs/**/*.py", "policy/sampling.py",
             "data/rows.py", "gate/adapter.py", "gate/recipe_stats.py", "gate/stats.py", "data/prompts.py",
             "data/hygiene.py", "policy/load.py")


def _code_digest() -> str:
    package = Path(__file__).parent.parent
    digest = hashlib.sha256()
    for path in sorted({p for pattern in _RUN_CODE for p in package.glob(pattern)}):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def env_identity(env: Env) -> dict[str, object]:
    """What identifies an environment in a key: name, version, fingerprint, and the chat it renders
    (its system prompt is not in the fingerprint, yet it changes what a policy learns)."""
    return {**env.describe(), "chat": env.messages_for("{prompt}")}


def run_key(knobs: RunKnobs) -> str:
    """The cache key of a training run with resolved *knobs*."""
    parts = {k: v for k, v in knobs.to_dict().items() if k not in _PLACEMENT and not (k in _OBSERVERS and not v)}
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
