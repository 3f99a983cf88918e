"""Which process of a torchrun / accelerate job this is, and the few collectives rlgate needs.

Under ``torchrun --nproc_per_node N`` (or ``accelerate launch``) every process runs the
same command. Without care each one samples the whole holdout, trains, and races the
others to publish the same run folder. So: sampling is sharded across the ranks and
gathered (:func:`gather`), only the main process writes files (:func:`is_main`), the
others wait for it (:func:`barrier`) and leave with its exit code (:func:`broadcast`).

Everything here asks ``torch.distributed`` only once a process group is initialised, and
is a no-op otherwise, so a one-process run (the default, and every library call outside a
launcher) never imports torch for it. :func:`init_from_launcher` starts the group a
launcher asked for (``WORLD_SIZE`` > 1): gloo on CPU, NCCL on GPUs. Objects travel through
a gloo group of their own, so gathering Python objects works whatever the training
backend is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..errors import RankError, RlgateError

__all__ = ["barrier", "broadcast", "finish", "gather", "init_from_launcher", "is_main", "launched_world_size", "rank",
           "run_everywhere", "together", "world_size"]

T = TypeVar("T")
_objects_group: list[Any] = []  # the gloo group for object collectives, made on first use
_started_here: list[bool] = []


def _dist() -> Any:
    """``torch.distributed`` when a process group is up, else None (torch not imported for it)."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def launched_world_size() -> int:
    """The number of processes a launcher started (``WORLD_SIZE``; 1 outside a launcher)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def init_from_launcher() -> None:
    """Join the process group a launcher set up (``WORLD_SIZE`` > 1); a no-op otherwise or when up.

    Commands that sample or train call it at the door, before anything is loaded.
    """
    if launched_world_size() <= 1 or _dist() is not None:
        return
    import torch
    import torch.distributed as dist

    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group(backend="nccl", device_id=torch.device("cuda", local))
    else:
        dist.init_process_group(backend="gloo")
    _started_here.append(True)


def finish() -> None:
    """Leave the process group this module started (the launcher's job ends cleanly)."""
    dist = _dist()
    if dist is not None and _started_here:
        _objects_group.clear()
        dist.destroy_process_group()
        _started_here.clear()


def rank() -> int:
    """This process's rank (0 without a process group)."""
    dist = _dist()
    return dist.get_rank() if dist is not None else 0


def world_size() -> int:
    """The number of processes in the job (1 without a process group)."""
    dist = _dist()
    return dist.get_world_size() if dist is not None else 1


def is_main() -> bool:
    """True on the process that writes files: rank 0, or the only one."""
    return rank() == 0


def _group() -> Any:
    dist = _dist()
    if dist.get_backend() == "gloo":
        return None  # the default group already moves objects on the CPU
    if not _objects_group:
        _objects_group.append(dist.new_group(backend="gloo"))
    return _objects_group[0]


def barrier() -> None:
    """Wait until every rank gets here (a no-op in one process)."""
    dist = _dist()
    if dist is not None:
        dist.barrier(group=_group())


def gather(obj: T) -> list[T]:
    """Every rank's *obj*, in rank order, on every rank (``[obj]`` in one process)."""
    dist = _dist()
    if dist is None:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj, group=_group())
    return out


def broadcast(obj: T) -> T:
    """The main process's *obj*, on every rank (*obj* itself in one process)."""
    dist = _dist()
    if dist is None:
        return obj
    box: list[Any] = [obj]
    dist.broadcast_object_list(box, src=0, group=_group())
    return box[0]


def _outcome(work: Callable[[], T]) -> tuple[str, Any]:
    try:
        return "ok", work()
    except Exception as exc:
        if world_size() == 1:
            raise  # one process: the original exception, untouched
        if isinstance(exc, RlgateError):
            return "error", str(exc)
        return "bug", f"{type(exc).__name__}: {exc}"


def _raise_first(statuses: list[tuple[str, str]]) -> None:
    for index, (status, message) in enumerate(statuses):
        if status != "ok":
            raise RankError(f"rank {index} of {len(statuses)} failed: {message}", rank=index,
                            internal=status == "bug")


def together(work: Callable[[], T]) -> T:
    """Run *work* on every rank and return this rank's result, once every rank has finished it;
    when any rank failed, every rank raises the same :class:`~pytest_rlgate.errors.RankError`
    naming the first that failed.

    What the main process alone does (publish a run, write a cache entry) goes through here,
    so the others neither run ahead nor wait forever when it fails.
    """
    status, value = _outcome(work)
    if world_size() > 1:
        _raise_first(gather((status, "" if status == "ok" else value)))
    return cast(T, value)


def run_everywhere(work: Callable[[], T]) -> list[T]:
    """Run *work* on every rank and gather the results (every rank gets all of them); when any
    rank fails, every rank raises the same :class:`~pytest_rlgate.errors.RankError`.

    A rank that raised would otherwise leave the others waiting in the next collective.
    """
    status, value = _outcome(work)
    results = gather((status, value))
    _raise_first([(s, "" if s == "ok" else v) for s, v in results])
    return [cast(T, v) for _s, v in results]
