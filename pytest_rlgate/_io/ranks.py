"""Which process of a torchrun / accelerate job this is, and the few collectives rlgate needs.

Under ``torchrun --nproc_per_node N`` (or ``accelerate launch``) every process runs the
same command. Without care each one samples the whole holdout, trains, and races the
others to publish the same run folder. So: sampling is sharded across the ranks and
gathered (:func:`gather`), only the main process (rank 0) publishes and writes files, and
only once every rank has said its part succeeded (:func:`agree`); the others wait for it
(:func:`wait_for_main`) and leave with its exit code (:func:`broadcast`). A rank that the
launcher stops (it sends SIGTERM to the survivors when one rank fails) leaves through the
same clean-up as an exception (:func:`stopped_cleanly`), so its temporary files go with it.
A SIGKILLed rank cannot clean up; its leftovers carry its owner token and the next writer
sweeps them (:mod:`pytest_rlgate._io.stale`).

:func:`rank` and :func:`world_size` describe the launch (the group's, else the launcher's
``RANK`` / ``WORLD_SIZE``); the collectives ask ``torch.distributed`` only once a process
group is initialised (:func:`group_size` > 1) and are no-ops otherwise, so a one-process
run never imports torch for them. :func:`init_from_launcher` starts the group a launcher
asked for: gloo on CPU, NCCL on GPUs. Objects travel through a gloo group of their own, so
gathering Python objects works whatever the training backend is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, TypeVar, cast

from ..errors import RankError, RlgateError

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

__all__ = ["agree", "barrier", "broadcast", "finish", "gather", "group_size", "init_from_launcher", "is_main_process",
           "rank", "run_everywhere", "stopped_cleanly", "together", "wait_for_main", "world_size"]

T = TypeVar("T")
_objects_group: list[ProcessGroup] = []  # the gloo group for object collectives, made on first use
_started_here: list[bool] = []


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _dist() -> ModuleType | None:
    """``torch.distributed`` when this process is one of an initialised group, else None."""
    torch = sys.modules.get("torch")  # never imported here: a group exists only if torch is loaded
    if torch is None:
        return None
    dist: ModuleType | None = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def rank() -> int:
    """This process's rank: the initialised group's, else the launcher's ``RANK``, else 0."""
    dist = _dist()
    return int(dist.get_rank()) if dist is not None else _env_int("RANK", 0)


def world_size() -> int:
    """How many processes the launch has: the group's size, else ``WORLD_SIZE``, else 1."""
    dist = _dist()
    return int(dist.get_world_size()) if dist is not None else max(1, _env_int("WORLD_SIZE", 1))


def group_size() -> int:
    """How many processes share work through collectives: the initialised group's size, else 1."""
    dist = _dist()
    return int(dist.get_world_size()) if dist is not None else 1


def is_main_process() -> bool:
    """True for rank 0 (and for a process that is not part of a launch)."""
    return rank() == 0


def init_from_launcher() -> None:
    """Join the process group a launcher set up (``WORLD_SIZE`` > 1); a no-op otherwise or when up.

    Commands that sample or train call it at the door, before anything is loaded.
    """
    if _env_int("WORLD_SIZE", 1) <= 1 or _dist() is not None:
        return
    import torch
    import torch.distributed as dist

    # Imported before the group exists: it binds `group.WORLD` as a default argument when
    # imported, and transformers imports it while loading a model. Bound to a live group, it
    # keeps the group alive past `finish()`, and the group's worker threads then race the
    # interpreter's shutdown (an abort after the command's work is done).
    import torch.distributed.nn

    if torch.cuda.is_available():
        local = _env_int("LOCAL_RANK", 0)
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


def _group(dist: ModuleType) -> ProcessGroup | None:
    if dist.get_backend() == "gloo":
        return None  # the default group already moves objects on the CPU
    if not _objects_group:
        _objects_group.append(dist.new_group(backend="gloo"))
    return _objects_group[0]


def barrier() -> None:
    """Wait until every rank gets here (a no-op without a group)."""
    dist = _dist()
    if dist is not None:
        dist.barrier(group=_group(dist))


def gather(obj: T) -> list[T]:
    """Every rank's *obj*, in rank order, on every rank (``[obj]`` without a group)."""
    dist = _dist()
    if dist is None:
        return [obj]
    out: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj, group=_group(dist))
    return cast("list[T]", out)


def broadcast(obj: T) -> T:
    """The main process's *obj*, on every rank (*obj* itself without a group)."""
    dist = _dist()
    if dist is None:
        return obj
    box: list[object] = [obj]
    dist.broadcast_object_list(box, src=0, group=_group(dist))
    return cast(T, box[0])


def agree(ok: bool) -> bool:
    """True when *ok* holds on every rank (*ok* itself without a group).

    Every rank must call it (a rank that died instead makes the collective fail, which the
    caller treats as disagreement; the launcher then stops the rest).
    """
    if group_size() == 1:
        return ok
    try:
        return all(gather(bool(ok)))
    except (RuntimeError, ValueError):  # a peer is gone
        return False


def wait_for_main() -> None:
    """Block until rank 0 is done publishing (a barrier), where there is a group to wait with."""
    if group_size() > 1:
        with contextlib.suppress(RuntimeError, ValueError):
            barrier()


@contextlib.contextmanager
def stopped_cleanly() -> Iterator[None]:
    """Within the block, SIGTERM (a launcher stopping the survivors of a failed rank, or a plain
    ``kill``) raises ``SystemExit(143)``, so ``finally`` and ``__exit__`` clean-ups run. Only in
    the main thread (where Python delivers signals); the old handler is put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _outcome(work: Callable[[], T]) -> tuple[str, object]:
    try:
        return "ok", work()
    except Exception as exc:
        if group_size() == 1:
            raise  # one process: the original exception, untouched
        if isinstance(exc, RlgateError):
            return "error", str(exc)
        return "bug", f"{type(exc).__name__}: {exc}"


def _raise_first(statuses: Sequence[tuple[str, object]]) -> None:
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
    if group_size() > 1:
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
