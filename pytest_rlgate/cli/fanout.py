"""``rlgate sample --ray [ADDRESS]``: the shards of one run as Ray tasks, merged into one row file.

Each task runs what one job of a SLURM array runs, ``rlgate sample <the same flags> --shard
I/N``, in a Ray worker (against ``--base-url``, or loading ``--model`` itself where
``--ray-gpus`` reserves it a GPU), and hands back its shard file's bytes. The driver keeps
each finished shard in ``<out>.shards/`` (a rerun samples only the missing ones; ``--restart``
starts over) and joins them with :func:`~pytest_rlgate.data.shards.merge_shards`, the merge
``rlgate merge`` runs, so the row file is byte-identical to one unsharded run. Ray schedules,
retries a task whose worker died, and runs on a laptop or a cluster alike; rlgate has no
scheduler of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .._io.atomic import atomic_write
from ..data.rows import write_rows
from ..data.shards import Shard, merge_shards
from ..errors import UsageError
from .merge import read_shards

__all__ = ["sample_on_ray", "shard_argv"]

#: Ray's own retries of a task whose worker process died (a task that fails cleanly is not retried).
TASK_RETRIES = 2


def shard_argv(argv: Sequence[str], shard: Shard) -> list[str]:
    """The command of one shard: *argv* without ``--ray`` (and its address), then ``--shard`` (argparse
    keeps the last of a repeated flag; the task adds its own ``--out``)."""
    kept: list[str] = []
    skip = False
    for position, token in enumerate(argv):
        if skip:
            skip = False
            continue
        if token == "--ray":
            following = argv[position + 1] if position + 1 < len(argv) else None
            skip = following is not None and not following.startswith("-")
            continue
        if token.startswith("--ray="):
            continue
        kept.append(token)
    return [*kept, "--shard", str(shard)]


def _sample_shard(argv: list[str]) -> tuple[int, str, bytes]:
    """In a Ray worker: run one shard's ``rlgate sample``; (exit code, its error line, the file's bytes)."""
    from pytest_rlgate.cli import main

    with tempfile.TemporaryDirectory(prefix="rlgate-shard-") as folder:
        out = str(Path(folder) / "shard.jsonl")
        said = io.StringIO()
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            code = main([*argv, "--out", out])
        lines = [line for line in said.getvalue().splitlines() if line.strip()]
        error = next((line for line in reversed(lines) if "error" in line), lines[-1] if lines else "")
        return code, error, Path(out).read_bytes() if code == 0 else b""


def _tasks(ray: object, args: argparse.Namespace) -> int:
    count = getattr(args, "ray_tasks", None)
    if count:
        return int(count)
    resources = ray.cluster_resources()  # type: ignore[attr-defined]
    if args.ray_gpus:
        gpus = int(resources.get("GPU", 0) // args.ray_gpus)
        if gpus < 1:
            raise UsageError(f"--ray-gpus {args.ray_gpus:g}: the Ray cluster has {resources.get('GPU', 0):g} GPU(s); "
                             "lower --ray-gpus, or sample a served model (--base-url) on CPU tasks")
        return gpus
    return max(1, int(resources.get("CPU", 1)))


def sample_on_ray(args: argparse.Namespace) -> int:
    """Sample the run's shards as Ray tasks and write the merged rows to ``args.out``."""
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'pytest-rlgate[ray]'") from None
    if args.shard is not None:
        raise UsageError("--ray runs every shard itself; drop --shard (or drop --ray and run one shard per job)")
    if args.until_decided is not None:
        raise UsageError("--ray and --until-decided: a sample until decided gates the whole holdout at each look")
    out = Path(args.out)
    folder = out.with_name(out.name + ".shards")
    if args.restart and folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    address = args.ray or None
    ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    count = _tasks(ray, args)
    task = ray.remote(num_cpus=1, num_gpus=args.ray_gpus, max_retries=TASK_RETRIES)(_sample_shard)
    paths = {index: folder / f"shard-{index}-of-{count}.jsonl" for index in range(count)}
    todo = {task.remote(shard_argv(args.argv, Shard(index, count))): index
            for index, path in paths.items() if not path.exists()}
    kept = count - len(todo)
    where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
    print(f"sampling {count} shard(s) as Ray tasks on {where}" + (f" ({kept} kept from a rerun)" if kept else ""))
    try:
        while todo:
            ready, _ = ray.wait(list(todo), num_returns=1)
            index = todo.pop(ready[0])
            try:
                code, error, data = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                raise UsageError(f"shard {index}/{count} (a Ray task) failed: {' '.join(str(exc).split())[:300]}; "
                                 f"the finished shards stay in {folder}, a rerun samples the rest") from None
            if code != 0:
                raise UsageError(f"shard {index}/{count} (a Ray task) failed: {error or f'exit {code}'}")
            atomic_write(paths[index], data)
            print(f"shard {index}/{count} done")
    finally:
        for ref in todo:
            ray.cancel(ref)
    header, rows = _merged(paths)
    write_rows(out, rows, header=header)
    shutil.rmtree(folder, ignore_errors=True)
    print(f"sampled {count} shard(s) as Ray tasks and merged {len(rows)} rows -> {out}")
    return 0


def _merged(paths: dict[int, Path]) -> tuple[dict[str, object], list[dict[str, object]]]:
    header, rows = merge_shards(read_shards([str(paths[index]) for index in sorted(paths)]))
    return dict(header), [dict(row) for row in rows]
