"""Running tasks (LR sweeps, batch-size candidates, trials) on a ``concurrent.futures.Executor``.

The default executor is one ``ProcessPoolExecutor`` of ``cores`` workers with one torch thread
each, created once per ``train()`` and reused by every stage. Workers are forked from a fork
server that imported torch and ignite once (see :func:`start_method`; spawn where there is no
fork server). Any other ``Executor`` (``distributed.Client(...).get_executor()`` for Dask) is
used as given.

A worker that dies in the middle of a task (killed, out of memory, segfault) breaks a process
pool: :class:`TaskRunner` rebuilds the pool, retries the task that was running in the dead worker
once (``max_retries``), and reports it as lost after that. Tasks that were merely in flight in
the other workers are resubmitted without being charged.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import traceback
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Generic, Hashable, Iterable, Iterator, TypeVar

import psutil

from .exceptions import ConfigError, ConfigTypeError

__all__ = ["resolve_cores", "TaskRunner", "TaskLost", "prestart", "start_method"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_started_queue: Any = None


def resolve_cores(cores: Any) -> int:
    """``"all"`` = physical cores this process may use; else a positive int."""
    if cores == "all":
        allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        physical = psutil.cpu_count(logical=False) or allowed
        logical = psutil.cpu_count(logical=True) or allowed
        # CPU affinity counts logical CPUs; scale it down by the hyper-threading factor.
        return max(1, min(allowed * physical // max(logical, 1) or 1, physical))
    if isinstance(cores, bool) or not isinstance(cores, int):
        raise ConfigTypeError(f'cores must be a positive int or "all", got {cores!r} ({type(cores).__name__}).')
    if cores < 1:
        raise ConfigError(f'cores must be >= 1, got {cores!r}; use cores=1 to run serially or cores="all".')
    return cores


#: Modules the fork server imports once, so that every worker is born with torch and ignite loaded.
PRELOAD = ["ignite_seg.trainer"]


def start_method() -> str:
    """``forkserver`` where the platform has it (Linux, macOS), else ``spawn``.

    Both start workers from a clean, single-threaded process (``fork`` of a process running torch
    threads is unsafe). The fork server imports torch and ignite once; each worker is then a
    ``fork`` of it (milliseconds) instead of a fresh interpreter importing them (seconds).
    ``IGNITE_SEG_START_METHOD=spawn`` forces spawn.
    """
    wanted = os.environ.get("IGNITE_SEG_START_METHOD", "forkserver")
    return wanted if wanted in multiprocessing.get_all_start_methods() else "spawn"


def prestart() -> None:
    """Start the fork server now (it imports torch in the background); idempotent and cheap.

    Called by ``train()`` before it validates the recipe, so the imports overlap the validation.
    No worker exists yet and no user code runs in the server.
    """
    if start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()


def _watch_driver(pid: int, created: float, period: float = 1.0) -> None:
    """Exit this worker soon after the driver process is gone (killed, crashed).

    A pool worker blocks on its task queue forever once the driver dies (it holds both ends of
    the queue's pipe, so no EOF ever arrives): without this, a SIGKILLed run leaks its workers.
    """
    import time

    while True:
        time.sleep(period)
        try:
            alive = psutil.Process(pid).create_time() == created
        except psutil.Error:
            alive = False
        if not alive:
            os._exit(3)


def _init_worker(threads: int, started_queue: Any, driver: tuple[int, float] | None = None) -> None:
    """Worker initialiser: one torch thread, a queue on which each task announces itself, and a
    watchdog that ends the worker when the driver dies."""
    global _started_queue
    if driver is not None:
        threading.Thread(target=_watch_driver, args=driver, name="ignite_seg-watchdog", daemon=True).start()
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import torch

    torch.set_num_threads(threads)
    _started_queue = started_queue


def _warm() -> int:
    """Import the heavy modules so that the first real task starts at once."""
    from . import trainer  # noqa: F401  (imports torch and ignite)

    return os.getpid()


def _announce_and_call(key: Hashable, fn: Callable[[Any], Any], task: Any) -> Any:
    if _started_queue is not None:
        _started_queue.put((key, os.getpid()))
    return fn(task)


@dataclass
class TaskLost(Generic[T]):
    """A task whose worker died ``attempts`` times; ``error`` says how."""

    task: T
    attempts: int
    error: str


class TaskRunner:
    """Runs tasks on one executor, reused across stages. Use as a context manager."""

    def __init__(self, cores: int, executor: Executor | None = None, max_retries: int = 1) -> None:
        self.cores = cores
        self.max_retries = max_retries
        self.owned = executor is None
        self._ctx = multiprocessing.get_context(start_method())
        self._queue: Any = None
        self._procs: dict[int, Any] = {}
        self.executor: Executor = executor if executor is not None else self._new_pool()

    # -- pool management -------------------------------------------------------------------
    def _new_pool(self) -> ProcessPoolExecutor:
        prestart()
        self._queue = self._ctx.SimpleQueue()
        self._procs = {}
        pool = ProcessPoolExecutor(
            max_workers=self.cores, mp_context=self._ctx, initializer=_init_worker,
            initargs=(1, self._queue, (os.getpid(), psutil.Process().create_time())),
        )
        for _ in range(self.cores):  # spawn every worker now; they import torch in parallel
            pool.submit(_warm)
        return pool

    @property
    def capacity(self) -> int:
        """How many tasks run at once (the number of workers)."""
        return self.cores

    @property
    def task_threads(self) -> int | None:
        """Torch threads each task should use (None: leave the executor's setting alone)."""
        return 1 if self.owned else None

    def close(self) -> None:
        if self.owned:
            self.executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> TaskRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- running ---------------------------------------------------------------------------
    def _submit(self, fn: Callable[[T], R], key: Hashable, task: T) -> Future[R]:
        if self.owned:
            fut = self.executor.submit(_announce_and_call, key, fn, task)
            self._procs.update(getattr(self.executor, "_processes", None) or {})
            return fut
        return self.executor.submit(fn, task)

    def _drain_started(self) -> dict[Hashable, int]:
        """The ``(task key, worker pid)`` announcements queued so far."""
        started: dict[Hashable, int] = {}
        while self._queue is not None and not self._queue.empty():
            key, pid = self._queue.get()
            started[key] = pid
        return started

    def map_unordered(
        self, fn: Callable[[T], R], tasks: Iterable[T], key: Callable[[T], Hashable] = id
    ) -> Iterator[R | TaskLost[T]]:
        """Yield each task's result as it completes; a task whose worker kept dying yields ``TaskLost``.

        Exceptions raised by ``fn`` itself propagate (task functions catch the user's errors and
        return them as results).
        """
        pending: deque[T] = deque(tasks)
        inflight: dict[Future[R], T] = {}
        attempts: dict[Hashable, int] = {}
        pids: dict[Hashable, int] = {}
        limit = self.capacity if self.owned else max(len(pending), 1)
        while pending or inflight:
            pool_broken = False
            while pending and len(inflight) < limit:
                task = pending.popleft()
                try:
                    fut = self._submit(fn, key(task), task)
                except BrokenProcessPool:
                    # a worker died since the last wait (while the caller handled a result): the
                    # task waits for the new pool; the in-flight ones fail and are sorted out below
                    if not self.owned:
                        raise
                    pending.appendleft(task)
                    pool_broken = True
                    break
                inflight[fut] = task
            done, _ = wait(list(inflight), return_when=FIRST_COMPLETED) if inflight else (set(), set())
            # read the announcements as they come: nobody else empties the queue's pipe, and once
            # it is full every worker blocks in its next announcement (after ~1000 tasks per pool)
            pids.update(self._drain_started())
            broken: list[T] = []
            for fut in done:
                task = inflight.pop(fut)
                exc = fut.exception()
                if exc is None:
                    yield fut.result()
                elif isinstance(exc, BrokenProcessPool) and self.owned:
                    broken.append(task)
                elif _is_worker_death(exc):
                    lost = self._charge(task, key, attempts, pending, "".join(traceback.format_exception(exc)))
                    if lost is not None:
                        yield lost
                else:
                    raise exc
            if broken or (pool_broken and not inflight):
                # Every other in-flight future of this pool fails too: collect them all.
                for fut in list(inflight):
                    broken.append(inflight.pop(fut))
                pids.update(self._drain_started())
                culprits = self._find_culprits([key(t) for t in broken], pids)
                logger.warning(
                    "a worker process died; restarting the pool and retrying %d task(s)", len(broken)
                )
                self.executor.shutdown(wait=True, cancel_futures=True)
                for task in broken:
                    k = key(task)
                    if k in culprits:
                        lost = self._charge(task, key, attempts, pending, culprits[k])
                        if lost is not None:
                            yield lost
                    else:
                        pending.appendleft(task)
                self.executor = self._new_pool()

    def _charge(
        self, task: T, key: Callable[[T], Hashable], attempts: dict[Hashable, int], pending: deque[T], error: str
    ) -> TaskLost[T] | None:
        k = key(task)
        attempts[k] = attempts.get(k, 0) + 1
        if attempts[k] > self.max_retries:
            return TaskLost(task, attempts[k], error)
        logger.warning("retrying a task whose worker died (attempt %d): %s", attempts[k] + 1, error.strip())
        pending.append(task)
        return None

    def _find_culprits(self, keys: list[Hashable], pids: dict[Hashable, int]) -> dict[Hashable, str]:
        """Which of the broken tasks ran in a worker that died by itself (not terminated by us)."""
        self._procs.update(getattr(self.executor, "_processes", None) or {})
        for proc in self._procs.values():
            proc.join(timeout=5)
        culprits: dict[Hashable, str] = {}
        for k in keys:
            pid = pids.get(k)
            proc = self._procs.get(pid) if pid is not None else None
            code = proc.exitcode if proc is not None else None
            if code is not None and code != -signal.SIGTERM and code != 0:
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                culprits[k] = f"the worker process (pid {pid}) running it died: {how}"
        if not culprits:  # cannot tell which one: charge them all
            culprits = {k: "a worker process died while it ran (which one is unknown)" for k in keys}
        return culprits


def _is_worker_death(exc: BaseException) -> bool:
    """Dask and other executors report a dead worker with their own exception types."""
    name = type(exc).__name__
    return name in {"KilledWorker", "BrokenExecutor", "BrokenProcessPool", "CommClosedError"}
