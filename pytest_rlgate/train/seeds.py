"""One recipe at several trainer seeds: a cached run per seed, and the recipe gate beside them.

A run's gate answers "is this adapter worse?"; whether the *training change* breaks a
category needs the run-to-run spread of training too, which one seed cannot show (the same
unbalanced GRPO regressed no-id at seed 18 and passed at 17). ``train_seeds`` trains the
recipe once per trainer seed (``sample_seed``: it seeds the trainer and the after sample)
through the run cache the fixtures and the demo share, copies each run to
``runs/<name>-seed<S>/``, and gates the recipe across them
(:func:`pytest_rlgate.gate.recipe.compare_seeds`) into ``runs/<name>-recipe/``:
``recipe.json`` (the seeds, their run folders, the knobs and the gate) and ``recipe.txt``.

The before side is the first seed's base runs: every seed samples the same holdout, so
each seed's after rows pair with them unit for unit.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io.atomic import atomic_write
from ..errors import UsageError
from ..gate.recipe import RecipeGateResult, compare_seeds
from .baseline import run_rows
from .cached import cached_run
from .config import RunKnobs
from .run import CONFIG, RECIPE_FILE, REPORT_NAME, RunFolder, write_json

__all__ = ["RECIPE_FILE", "RECIPE_TEXT", "SeedRun", "SeedRuns", "check_seeds", "publish_copy", "recipe_gate",
           "recipe_name", "seed_run_name", "train_seeds", "write_recipe"]

#: The recipe gate as text, beside ``recipe.json`` (the gate with the runs it read).
RECIPE_TEXT = "recipe.txt"
RECIPE_FORMAT = 1


def seed_run_name(name: str, seed: int) -> str:
    """``<name>-seed17``: the run folder of one trainer seed (``-s<N>`` already names the prompt seed)."""
    return f"{name}-seed{seed}"


def recipe_name(name: str) -> str:
    """``<name>-recipe``: the folder of the recipe gate over every seed's run."""
    return f"{name}-recipe"


def check_seeds(seeds: Sequence[int], *, flag: str = "--seeds") -> tuple[int, ...]:
    """*seeds* as a tuple of distinct integers, or a one-line UsageError naming *flag*."""
    values = tuple(seeds) if isinstance(seeds, (list, tuple)) else ()
    if not values or any(isinstance(s, bool) or not isinstance(s, int) for s in values):
        raise UsageError(f"{flag} {seeds!r}: give a list of integer trainer seeds, e.g. (17, 18, 19)")
    if len(set(values)) != len(values):
        raise UsageError(f"{flag} {list(values)!r}: each seed once (a repeated seed is the same run twice)")
    return values


def publish_copy(folder: RunFolder, dest: Path) -> RunFolder:
    """Copy a cached run folder to *dest* (replacing an older copy) and open it there.

    The cache names every run "run"; the copy is named after *dest*. Only placement knobs
    change (they are not part of what the run learned, nor of its cache key), and a report
    rendered for the cached folder is dropped so it cannot describe the wrong place.
    """
    tmp = dest.parent / f".{dest.name}.copy-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(folder.path, tmp)
    config = json.loads((tmp / CONFIG).read_text(encoding="utf-8"))
    config.setdefault("knobs", {}).update(run_name=dest.name, runs_dir=str(dest.parent))
    config["cache_source"] = str(folder.path)
    write_json(tmp / CONFIG, config)
    for stale in (tmp / REPORT_NAME, *tmp.glob("report-*.png")):
        stale.unlink(missing_ok=True)
    if dest.exists():
        old = dest.parent / f".{dest.name}.old-{os.getpid()}"
        os.replace(dest, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, dest)
    return RunFolder.open(dest)


@dataclass(frozen=True)
class SeedRun:
    """One trainer seed's finished run, copied to its own folder."""

    seed: int
    run: RunFolder
    from_cache: bool
    seconds: float


@dataclass(frozen=True)
class SeedRuns:
    """Every seed's run and the recipe gate over them, written to ``folder``."""

    name: str
    runs: tuple[SeedRun, ...]
    result: RecipeGateResult
    folder: Path


def recipe_gate(runs: Mapping[int, RunFolder]) -> RecipeGateResult:
    """The recipe gate over finished runs of one recipe (seed -> run), guarding their environment's markers.

    The before side is the first run's base runs; each run's after rows are one seed.
    """
    first = next(iter(runs.values()))
    afters = {seed: run_rows(run, "after") for seed, run in runs.items()}
    return compare_seeds(run_rows(first, "before"), afters, env=first.environment())


def write_recipe(folder: Path, result: RecipeGateResult, runs: Sequence[SeedRun], knobs: RunKnobs) -> Path:
    """``recipe.json`` and ``recipe.txt`` in *folder*; returns the JSON's path.

    The knobs are the recipe's (the first seed's, without its seed and folder name), so the
    file says what was trained, where each seed's run is, and what the gate found.
    """
    folder.mkdir(parents=True, exist_ok=True)
    recipe = {k: v for k, v in knobs.to_dict().items() if k not in ("sample_seed", "run_name", "runs_dir")}
    record = {
        "format_version": RECIPE_FORMAT,
        "kind": "recipe",
        "method": knobs.method,
        "env": knobs.environment.describe(),
        "knobs": recipe,
        "seeds": [r.seed for r in runs],
        "runs": {str(r.seed): os.path.relpath(r.run.path, folder) for r in runs},
        "gate": result.to_dict(),
    }
    atomic_write(folder / RECIPE_TEXT, result.report(verbose=True) + "\n")
    return atomic_write(folder / RECIPE_FILE, json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")


def train_seeds(
    knobs: RunKnobs,
    seeds: Sequence[int],
    *,
    overwrite: bool = False,
    progress: bool | None = None,
    say: Callable[[str], None] = print,
) -> SeedRuns:
    """Train *knobs* once per trainer seed (cached), copy each run beside the others, gate the recipe.

    The runs land in ``<runs_dir>/<name>-seed<S>/`` and the gate in ``<runs_dir>/<name>-recipe/``
    (*name* is the knobs' run name). Existing folders are a UsageError unless *overwrite*,
    checked before anything trains. *say* gets one line per seed; *progress* is
    :func:`~pytest_rlgate.train.cached.cached_run`'s.
    """
    seeds = check_seeds(seeds)
    knobs = knobs.resolve()
    name, root = str(knobs.run_name), Path(knobs.runs_dir)
    targets = [root / seed_run_name(name, s) for s in seeds] + [root / recipe_name(name)]
    taken = [str(t) for t in targets if t.exists()]
    if taken and not overwrite:
        raise UsageError(f"--run-name {name!r}: {', '.join(taken)} already exist(s); pick another --run-name, "
                         "pass --overwrite, or delete them")
    runs = []
    for seed, dest in zip(seeds, targets):
        seeded = dataclasses.replace(knobs, sample_seed=seed, run_name=dest.name).resolve()
        started = time.perf_counter()
        served = cached_run(seeded, progress=progress)
        seconds = time.perf_counter() - started
        run = SeedRun(seed, publish_copy(served.run, dest), served.hit, seconds)
        how = "served from the cache" if served.hit else f"trained in {seconds:.0f} s"
        own = "PASSED" if run.run.gate.get("passed") else "FAILED"
        say(f"seed {seed}: {how} -> {run.run.path} (its own gate against its base runs {own})")
        runs.append(run)
    result = recipe_gate({r.seed: r.run for r in runs})
    folder = targets[-1]
    write_recipe(folder, result, runs, knobs)
    return SeedRuns(name, tuple(runs), result, folder)
