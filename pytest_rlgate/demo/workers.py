"""Independent trainings side by side: spawned worker processes, one torch thread each.

``rlgate demo`` trains runs that do not depend on each other (each is a cached run keyed by
its knobs; the base runs they share are cached rows that one process samples under a file
lock while the others wait for them), so on a machine with N cores N of them can train at
once. A worker is a fresh interpreter (multiprocessing's ``spawn``: no state of the parent,
no forked threads), so a run trained in a worker is the run the parent would have trained,
byte for byte: every trainer is seeded by its own knobs and every sampled reply by (seed,
rollout, chat). Only the wall time changes.

Each worker imports the training stack once when it starts (while the parent prepares), runs
one torch thread, keeps third-party chatter quiet as the CLI does, and writes nothing to
standard output: the parent's standard output is the story.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from .._io import ranks
from .._io.progress import third_party_quiet
from ..errors import RlgateError

__all__ = ["Workers", "available_cores", "side_by_side"]

_Result = TypeVar("_Result")
#: What a worker keeps open for its whole life (the CLI's quiet settings).
_KEPT = contextlib.ExitStack()


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS tells, else the count)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def side_by_side(jobs: int | None, runs: int) -> int:
    """How many processes train at once: *jobs* (None: one per available core), at most *runs*,
    and 1 inside a torchrun / accelerate job, whose processes train every run together."""
    if ranks.group_size() > 1:
        return 1
    wanted = available_cores() if jobs is None else jobs
    return max(1, min(wanted, runs))


def _start(verbose: bool) -> None:
    """A worker's start: one thread, the CLI's quiet, no standard output, the trainers imported."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _KEPT.enter_context(third_party_quiet(verbose=verbose))
    sys.stdout = sys.stderr  # trainers print their log dicts; the parent's standard output is the story
    import torch

    torch.set_num_threads(1)
    from ..train import dpo, grpo  # noqa: F401  (imported now, while the parent prepares)


def _started() -> int:
    return os.getpid()


class Workers:
    """*jobs* spawned worker processes; ``submit(fn, *args)`` runs a picklable call in one of them.

    Calls are taken in the order they are submitted, each by the first free worker. Used as a
    context manager; leaving it cancels what has not started and waits for what has, or, when
    it is left by an exception (Ctrl-C), stops the workers at once (a run's cache entry is
    published atomically, so a stopped run leaves nothing that looks finished).
    """

    def __init__(self, jobs: int, *, verbose: bool = False) -> None:
        self.jobs = jobs
        self._pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start,
            initargs=(verbose,))
        # every worker starts now and imports the trainers while the caller prepares
        self._ready = [self._pool.submit(_started) for _ in range(jobs)]

    def submit(self, fn: Callable[..., _Result], *args: object) -> concurrent.futures.Future[_Result]:
        return self._pool.submit(fn, *args)

    @staticmethod
    def result(future: concurrent.futures.Future[_Result]) -> _Result:
        """What a submitted call returned (its exception raised here); a worker that died is one line."""
        try:
            return future.result()
        except concurrent.futures.process.BrokenProcessPool:
            raise RlgateError("a worker process died before its run finished (out of memory, or killed); rerun "
                              "with --jobs 1 to train one run at a time") from None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if error is not None:  # an interrupt or an error here: a worker's half-trained run is not waited for
            for process in list(getattr(self._pool, "_processes", {}).values()):
                process.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)
