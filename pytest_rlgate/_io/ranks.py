"""Which process of a multi-process launch (``torchrun --nproc_per_node N``) may publish, and when.

Under a launcher every rank runs the same command, so every rank would write the same run
folder. Only the main process (rank 0) publishes; it does so only once every rank has said
that its part succeeded (a collective over ``torch.distributed`` when it is initialised), and
a rank that the launcher stops (it sends SIGTERM to the survivors when one rank fails) leaves
through the same clean-up as an exception, so its temporary files go with it. A SIGKILLed
rank cannot clean up; its leftovers carry its owner token and the next writer sweeps them
(:mod:`pytest_rlgate._io.stale`). Without a launcher all of this is one process, and free.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["agree", "is_main_process", "rank", "stopped_cleanly", "wait_for_main", "world_size"]


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _dist() -> object | None:
    """``torch.distributed`` when this process is one of an initialised group, else None."""
    torch = sys.modules.get("torch")  # never imported here: a group exists only if torch is loaded
    if torch is None:
        return None
    dist: object | None = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():  # type: ignore[attr-defined]
        return None
    return dist


def rank() -> int:
    """This process's rank: the initialised group's, else the launcher's ``RANK``, else 0."""
    dist = _dist()
    return int(dist.get_rank()) if dist is not None else _env_int("RANK", 0)  # type: ignore[attr-defined]


def world_size() -> int:
    """How many processes the launch has: the group's size, else ``WORLD_SIZE``, else 1."""
    dist = _dist()
    return int(dist.get_world_size()) if dist is not None else _env_int("WORLD_SIZE", 1)  # type: ignore[attr-defined]


def is_main_process() -> bool:
    """True for rank 0 (and for a process that is not part of a launch)."""
    return rank() == 0


def agree(ok: bool) -> bool:
    """True when *ok* holds on every rank: a MIN over the group, or *ok* itself alone.

    Every rank must call it (a rank that died instead makes the collective fail, which the
    caller treats as disagreement; the launcher then stops the rest).
    """
    dist = _dist()
    if dist is None or world_size() == 1:
        return ok
    import torch

    flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
    try:
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # type: ignore[attr-defined]
    except (RuntimeError, ValueError):  # a peer is gone
        return False
    return bool(flag.item())


def wait_for_main() -> None:
    """Block until rank 0 is done publishing (a barrier), where there is a group to wait with."""
    dist = _dist()
    if dist is not None and world_size() > 1:
        with contextlib.suppress(RuntimeError, ValueError):
            dist.barrier()  # type: ignore[attr-defined]


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
