"""Re-evaluate a finished run: the same policy, the same holdout, a chosen seed."""

from __future__ import annotations

from typing import Any

from ..errors import DataError

__all__ = ["load_run_policy", "resample_run"]


def load_run_policy(folder: Any) -> tuple[Any, Any]:
    """(model, tokenizer) of a finished run: base, lineage merged, the run's adapter on top."""
    from .adapters import attach_adapter, load_base, merge_adapter

    config = folder.config
    model, tokenizer = load_base(config["knobs"]["base_model"], flag="--run (its base_model)")
    for step in config.get("lineage", []):
        model = merge_adapter(model, step["adapter"], flag="--run (its lineage)")
    return attach_adapter(model, folder.adapter, flag="--run"), tokenizer


def resample_run(folder: Any, *, seed: int | None = None, progress: bool = False) -> list[dict[str, Any]]:
    """Sample the run's holdout with its trained policy at *seed* (default: the run's) into rows."""
    from ..prompts import fingerprint, read_prompts
    from .config import RunKnobs
    from .pipeline import HOLDOUT_PROMPTS, holdout_rows

    path = folder.path / HOLDOUT_PROMPTS
    if not path.is_file():
        raise DataError(f"{HOLDOUT_PROMPTS} is missing; re-run `rlgate train` for this run", path=folder.path)
    holdout = read_prompts(path)
    recorded = folder.config["prompts"]["holdout_fingerprint"]
    if fingerprint(holdout) != recorded:
        raise DataError(f"holdout fingerprint {fingerprint(holdout)} differs from config.json's {recorded}; "
                        "the file was edited - re-run `rlgate train`", path=path)
    names = {f for f in RunKnobs.__dataclass_fields__ if RunKnobs.__dataclass_fields__[f].init}
    knobs = RunKnobs(**{k: v for k, v in folder.config["knobs"].items() if k in names})
    model, tok = load_run_policy(folder)
    seed = knobs.sample_seed if seed is None else seed
    return holdout_rows(model, tok, holdout, knobs, seed=seed, policy=folder.name, eval_run=f"eval-{seed}",
                        progress=progress)
