"""Re-evaluate a finished run: the same policy, the same holdout, the same environment, a chosen seed."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..data.prompts import fingerprint, read_prompts
from ..environment.contract import Env
from ..errors import DataError, UsageError
from ..policy.served import ServedModel, adapter_name
from .adapters import attach_adapter, load_base, merge_adapter
from .config import RunKnobs, renamed
from .pipeline import HOLDOUT_PROMPTS, holdout_rows
from .run import RunFolder

if TYPE_CHECKING:
    from ..data.rows import Rows
    from ..policy.handles import Model, Tokenizer

__all__ = ["load_run_policy", "resample_run"]


def load_run_policy(folder: RunFolder) -> tuple[Model, Tokenizer]:
    """(model, tokenizer) of a finished run: base, lineage merged, the run's adapter on top."""
    config = folder.config
    model, tokenizer = load_base(config["knobs"]["base_model"], flag="--run (its base_model)")
    for step in config.get("lineage", []):
        model = merge_adapter(model, step["adapter"], flag="--run (its lineage)")
    return attach_adapter(model, folder.adapter, flag="--run"), tokenizer


def resample_run(folder: RunFolder, *, seed: int | None = None, progress: bool | None = None,
                 env: Env | None = None, served: ServedModel | None = None) -> Rows:
    """Sample the run's holdout with its trained policy at *seed* (default: the run's) into rows.

    The rows are graded by the environment the run recorded (*env* overrides it; either way
    its fingerprint must match the run's, see :meth:`RunFolder.environment`). *served* (the
    run's base on a server) samples there: the run's adapter is loaded into it, sampled by name
    and unloaded; a run trained on a merged lineage (``--from-run``) has no one adapter to load.
    """
    if served is not None and folder.config.get("lineage"):
        raise UsageError(f"--base-url: {folder.path} was trained on top of merged adapters (--from-run), so no one "
                         "adapter on the served base reproduces it; evaluate it without --base-url")
    environment = folder.environment(env)
    path = folder.path / HOLDOUT_PROMPTS
    if not path.is_file():
        raise DataError(f"{HOLDOUT_PROMPTS} is missing; re-run `rlgate train` for this run", path=folder.path)
    holdout = read_prompts(path, env=environment)
    recorded = folder.config["prompts"]["holdout_fingerprint"]
    if fingerprint(holdout) != recorded:
        raise DataError(f"holdout fingerprint {fingerprint(holdout)} differs from config.json's {recorded}; "
                        "the file was edited - re-run `rlgate train`", path=path)
    names = {f.name for f in dataclasses.fields(RunKnobs) if f.init}
    knobs = RunKnobs(**{k: v for k, v in renamed(folder.config["knobs"]).items() if k in names})
    knobs = dataclasses.replace(knobs, env=environment)
    seed = knobs.sample_seed if seed is None else seed
    if served is not None:
        with served.loaded(adapter_name(folder.adapter), folder.adapter) as adapter:
            return holdout_rows(adapter, None, holdout, knobs, seed=seed, policy=folder.name, eval_run=f"eval-{seed}",
                                progress=progress, desc=f"sampling holdout (eval, seed {seed}, served)")
    model, tok = load_run_policy(folder)
    return holdout_rows(model, tok, holdout, knobs, seed=seed, policy=folder.name, eval_run=f"eval-{seed}",
                        progress=progress, desc=f"sampling holdout (eval, seed {seed})")
