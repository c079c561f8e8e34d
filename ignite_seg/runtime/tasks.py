"""Running tasks (LR sweeps, batch-size candidates, trials) on a ``concurrent.futures.Executor``.

The default executor is one ``ProcessPoolExecutor`` of ``cores`` workers with one torch thread
each, created once per ``train()`` and reused by every stage. Workers are forked from the caller
where that is safe, else from a fork server; either has imported the caller's ``preload`` modules
once (see :func:`start_method`; spawn where there is no fork server). Any other ``Executor`` (``distributed.Client(...).get_executor()`` for
Dask) is used as given.

A worker that dies in the middle of a task (killed, out of memory, segfault) breaks a process
pool: :class:`TaskRunner` rebuilds the pool, retries the task that was running in the dead worker
once (``max_retries``), and reports it as lost after that. Tasks that were merely in flight in
the other workers are resubmitted without being charged. A task past its ``timeout`` has its
worker killed and is reported as lost (timed out), not retried.

Every worker ignores SIGINT (the driver handles an interrupt and stops its workers) and exits
by itself soon after the driver is gone, even when the driver was SIGKILLed.
"""
from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import time
import traceback
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any, Callable, Generic, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

from .workers import (
    LIVE_WORKERS,
    TaskProgress,
    announce_and_call,
    driver_identity,
    init_trial_worker,
    kill_processes,
    other_threads,
    prestart,
    start_method,
    warm_up,
)

__all__ = [
    "TaskRunner", "TaskLost", "prestart",
    "start_method",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Seconds without any finished task after which the runner logs a warning (or twice the longest
#: task so far, when that is longer); repeated after each further such interval. Tasks that
#: reported progress (``runtime.workers.report_progress``) within that time are not suspected.
STALL_WARNING_S = 60.0
#: How often the runner wakes up while it waits (timeouts, stall warnings).
POLL_S = 1.0



@dataclass
class TaskLost(Generic[T]):
    """A task whose worker died ``attempts`` times, or that ran past its timeout; ``error`` says how."""

    task: T
    attempts: int
    error: str
    timed_out: bool = False

    @property
    def message(self) -> str:
        """One line for the task's record."""
        return self.error if self.timed_out else f"lost after {self.attempts} attempts: {self.error}"


@dataclass
class _Flight(Generic[T]):
    """The state of one :meth:`TaskRunner.map_unordered` call."""

    pending: deque[T]
    key: Callable[[T], Hashable]
    timeout: float | None
    inflight: dict[Future[Any], T] = field(default_factory=dict)
    started: dict[Future[Any], float] = field(default_factory=dict)
    running: set[Future[Any]] = field(default_factory=set)
    attempts: dict[Hashable, int] = field(default_factory=dict)
    pids: dict[Hashable, int] = field(default_factory=dict)
    timed_out: set[Hashable] = field(default_factory=set)
    last_done: float = field(default_factory=time.monotonic)
    next_warning: float = 0.0
    longest: float = 0.0
    #: by task key: (steps done, steps in all, when reported) of the running tasks that report progress
    progress: dict[Hashable, tuple[int, int, float]] = field(default_factory=dict)
    progress_changed: bool = False

    def add(self, fut: Future[Any], task: T) -> None:
        self.inflight[fut] = task
        self.started[fut] = time.monotonic()

    def pop(self, fut: Future[Any]) -> T:
        now = time.monotonic()
        self.longest = max(self.longest, now - self.started.pop(fut, now))
        self.running.discard(fut)
        self.last_done = now
        task = self.inflight.pop(fut)
        self.progress_changed |= self.progress.pop(self.key(task), None) is not None
        return task

    def expired(self) -> list[Future[Any]]:
        """In-flight futures past the timeout; the clock starts when the future reports running
        (executors that never report it: at submission)."""
        now = time.monotonic()
        for fut in self.inflight:
            if fut not in self.running and fut.running():
                self.running.add(fut)
                self.started[fut] = now
        if self.timeout is None:
            return []
        return [f for f, t in self.inflight.items()
                if now - self.started[f] > self.timeout and self.key(t) not in self.timed_out]

    def timeout_lost(self, task: T) -> TaskLost[T]:
        return TaskLost(task, self.attempts.get(self.key(task), 0) + 1, f"timed out after {self.timeout:g} s",
                        timed_out=True)


class TaskRunner:
    """Runs tasks on one executor, reused across stages. Use as a context manager.

    Args:
        cores: worker processes of the default pool (and the runner's capacity).
        executor: the caller's executor, used as given; ``None`` makes a local process pool.
        max_retries: retries of a task whose worker died.
        preload: modules each worker of the default pool imports before its first task (the
            fork server, or the caller forked, imports them once for all workers).
        method: how the default pool starts its workers (default: :func:`start_method`), the
            same for every pool of this runner (a restart after a worker died included).
    """

    def __init__(self, cores: int, executor: Executor | None = None, max_retries: int = 1,
                 preload: Sequence[str] = (), method: str | None = None) -> None:
        self.cores = cores
        self.max_retries = max_retries
        self.preload = tuple(preload)
        self.owned = executor is None
        self.method = (method or start_method(announce=True)) if self.owned else None
        self._ctx = multiprocessing.get_context(self.method)
        self._queue: Any = None
        self._before: set[BaseProcess] = set()
        self._procs: dict[int, BaseProcess] = {}
        self.executor: Executor = executor if executor is not None else self._new_pool()

    # -- pool management -------------------------------------------------------------------
    def _new_pool(self) -> ProcessPoolExecutor:
        prestart(self.preload, self.method)
        if self.method == "fork" and other_threads():  # started since the choice (by a loader, say)
            logger.warning("forking the workers from this process while other threads run in it (%s), "
                           "started after the start method was chosen; set IGNITE_SEG_START_METHOD=forkserver "
                           "if a run hangs", ", ".join(other_threads()[:5]))
        self._queue = self._ctx.SimpleQueue()
        self._forget_workers()
        self._before = set(multiprocessing.active_children())
        by_main = threading.current_thread() is threading.main_thread()  # the workers are started by this thread
        pool = ProcessPoolExecutor(
            max_workers=self.cores, mp_context=self._ctx, initializer=init_trial_worker,
            initargs=(1, self._queue, driver_identity(), self.preload, by_main),
        )
        for _ in range(self.cores):  # spawn every worker now; they import torch in parallel
            pool.submit(warm_up)
        self._track_workers()
        return pool

    def _track_workers(self) -> None:
        """Record the pool's worker processes (they are started by ``submit``, in this thread)."""
        for proc in multiprocessing.active_children():
            if proc not in self._before and proc.pid is not None:
                self._procs.setdefault(proc.pid, proc)
                LIVE_WORKERS[proc.pid] = proc

    def _forget_workers(self) -> None:
        for pid in self._procs:
            LIVE_WORKERS.pop(pid, None)
        self._procs = {}

    @property
    def capacity(self) -> int:
        """How many tasks run at once (the number of workers)."""
        return self.cores

    @property
    def task_threads(self) -> int | None:
        """Torch threads each task should use (None: leave the executor's setting alone)."""
        return 1 if self.owned else None

    def close(self, abort: bool = False) -> None:
        """Shut the default pool down; ``abort``: kill its workers first instead of awaiting their tasks."""
        if not self.owned:
            return
        if abort:
            kill_processes(self._procs.values())
        self.executor.shutdown(wait=True, cancel_futures=True)
        self._forget_workers()

    def __enter__(self) -> TaskRunner:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(abort=exc_type is not None)

    # -- running ---------------------------------------------------------------------------
    def _submit(self, fn: Callable[[T], R], key: Hashable, task: T) -> Future[R]:
        if self.owned:
            fut = self.executor.submit(announce_and_call, key, fn, task)
            self._track_workers()
            return fut
        return self.executor.submit(fn, task)

    def _drain_started(self, run: _Flight[Any] | None = None) -> dict[Hashable, int]:
        """The ``(task key, worker pid)`` announcements queued so far; the progress reports go to
        ``run.progress``."""
        started: dict[Hashable, int] = {}
        while self._queue is not None and not self._queue.empty():
            item = self._queue.get()
            if isinstance(item, TaskProgress):
                if run is not None and item.key in {run.key(t) for t in run.inflight.values()}:
                    run.progress[item.key] = (item.done, item.total, time.monotonic())
                    run.progress_changed = True
                continue
            key, pid = item
            started[key] = pid
        return started

    def map_unordered(
        self, fn: Callable[[T], R], tasks: Iterable[T], key: Callable[[T], Hashable] = id,
        timeout: float | None = None, at_once: int | None = None,
        on_progress: Callable[[Mapping[Hashable, tuple[int, int]]], None] | None = None,
    ) -> Iterator[R | TaskLost[T]]:
        """Yield each task's result as it completes; a task whose worker kept dying, or that ran
        longer than ``timeout`` seconds, yields ``TaskLost``.

        A timed-out task of the default pool has its worker killed (the other tasks in flight
        are resubmitted). The caller's executor cannot kill a task: the task is reported lost
        at once and its result, if it ever comes, is ignored. Exceptions raised by ``fn``
        itself propagate (task functions catch the user's errors and return them as results).
        ``at_once``: at most this many tasks in flight (default: the pool's capacity).
        ``on_progress``: called with ``{task key: (steps done, steps in all)}`` of the running tasks
        that report progress (default pool only) whenever that changes.
        """
        run: _Flight[T] = _Flight(deque(tasks), key, timeout)
        limit = self.capacity if self.owned else max(len(run.pending), 1)
        limit = min(limit, at_once) if at_once else limit
        while run.pending or run.inflight:
            pool_broken = self._fill(run, fn, limit)
            done, _ = wait(list(run.inflight), timeout=POLL_S, return_when=FIRST_COMPLETED) \
                if run.inflight else (set(), set())
            # read the announcements as they come: nobody else empties the queue's pipe, and once
            # it is full every worker blocks in its next announcement (after ~1000 tasks per pool)
            run.pids.update(self._drain_started(run))
            broken: list[T] = []
            for fut in done:
                task = run.pop(fut)
                exc = fut.exception()
                if key(task) in run.timed_out and not self.owned:
                    continue  # reported when it timed out; its late result is ignored
                if exc is None:
                    yield fut.result()
                elif isinstance(exc, BrokenProcessPool) and self.owned:
                    broken.append(task)
                elif _is_worker_death(exc):
                    lost = self._charge(run, task, "".join(traceback.format_exception(exc)))
                    if lost is not None:
                        yield lost
                else:
                    raise exc
            yield from self._expire(run)
            if on_progress is not None and run.progress_changed:
                run.progress_changed = False
                on_progress({k: (d, n) for k, (d, n, _) in run.progress.items()})
            self._warn_if_stalled(run)
            if broken or (pool_broken and not run.inflight):
                yield from self._recover(run, broken)

    def _fill(self, run: _Flight[T], fn: Callable[[T], R], limit: int) -> bool:
        """Submit pending tasks up to ``limit`` in flight; whether the pool was found broken."""
        while run.pending and len(run.inflight) < limit:
            task = run.pending.popleft()
            try:
                fut = self._submit(fn, run.key(task), task)
            except BrokenProcessPool:
                # a worker died since the last wait (while the caller handled a result): the
                # task waits for the new pool; the in-flight ones fail and are sorted out later
                if not self.owned:
                    raise
                run.pending.appendleft(task)
                return True
            run.add(fut, task)
        return False

    def _expire(self, run: _Flight[T]) -> Iterator[TaskLost[T]]:
        """Stop the tasks past the timeout: kill their workers (the default pool), or give them
        up (another executor)."""
        for fut in run.expired():
            task = run.inflight[fut]
            k = run.key(task)
            if not self.owned:
                run.timed_out.add(k)
                fut.cancel()
                run.pop(fut)
                logger.warning("task %r timed out after %g s; its result will be ignored", k, run.timeout)
                yield run.timeout_lost(task)
                continue
            pid = run.pids.get(k)
            if pid is not None and pid in self._procs:
                run.timed_out.add(k)
                logger.warning("task %r timed out after %g s: killing its worker (pid %d)", k, run.timeout, pid)
                kill_processes([self._procs[pid]])

    def _warn_if_stalled(self, run: _Flight[T]) -> None:
        now = time.monotonic()
        quiet = now - run.last_done
        threshold = max(STALL_WARNING_S, 2 * run.longest)
        if not (run.inflight and quiet > threshold and now >= run.next_warning):
            return
        run.next_warning = now + threshold
        keys = [run.key(t) for t in run.inflight.values()]
        # a task that reported progress within the interval is working, not hanging
        silent = sorted(str(k) for k in keys if now - run.progress.get(k, (0, 0, -threshold))[2] > threshold)
        if not silent:
            return
        busy = len(keys) - len(silent)
        logger.warning(
            "no task has finished for %.0f s and %d running task(s) reported no progress in that time (%s)%s; "
            "a task that hangs can be stopped with train(..., trial_timeout=seconds)", quiet, len(silent),
            ", ".join(silent[:10]), f"; {busy} other(s) are making progress" if busy else "",
        )

    def _recover(self, run: _Flight[T], broken: list[T]) -> Iterator[TaskLost[T]]:
        """The pool broke: collect every in-flight task, sort them out, start a new pool."""
        for fut in list(run.inflight):
            broken.append(run.pop(fut))
        run.pids.update(self._drain_started(run))
        timed_out = [t for t in broken if run.key(t) in run.timed_out]
        others = [t for t in broken if run.key(t) not in run.timed_out]
        culprits = self._find_culprits([run.key(t) for t in others], run.pids, explained=bool(timed_out))
        logger.warning("a worker process died; restarting the pool and retrying %d task(s)", len(others))
        self.executor.shutdown(wait=True, cancel_futures=True)
        for task in timed_out:
            yield run.timeout_lost(task)
        for task in others:
            k = run.key(task)
            if k in culprits:
                lost = self._charge(run, task, culprits[k])
                if lost is not None:
                    yield lost
            else:
                run.pending.appendleft(task)
        self.executor = self._new_pool()

    def _charge(self, run: _Flight[T], task: T, error: str) -> TaskLost[T] | None:
        k = run.key(task)
        run.attempts[k] = run.attempts.get(k, 0) + 1
        if run.attempts[k] > self.max_retries:
            return TaskLost(task, run.attempts[k], error)
        logger.warning("retrying a task whose worker died (attempt %d): %s", run.attempts[k] + 1, error.strip())
        run.pending.append(task)
        return None

    def _find_culprits(self, keys: list[Hashable], pids: dict[Hashable, int],
                       explained: bool = False) -> dict[Hashable, str]:
        """Which of the broken tasks ran in a worker that died by itself (not terminated by us).

        ``explained``: a worker was killed by the runner (a timeout), so when no other worker
        died by itself nobody is charged.
        """
        for proc in self._procs.values():
            proc.join(timeout=5)
        culprits: dict[Hashable, str] = {}
        for k in keys:
            pid = pids.get(k)
            worker = self._procs.get(pid) if pid is not None else None
            code = worker.exitcode if worker is not None else None
            if code is not None and code != -signal.SIGTERM and code != 0:
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                culprits[k] = f"the worker process (pid {pid}) running it died: {how}"
        if not culprits and not explained:  # cannot tell which one: charge them all
            culprits = {k: "a worker process died while it ran (which one is unknown)" for k in keys}
        return culprits


def _is_worker_death(exc: BaseException) -> bool:
    """Dask and other executors report a dead worker with their own exception types."""
    name = type(exc).__name__
    return name in {"KilledWorker", "BrokenExecutor", "BrokenProcessPool", "CommClosedError"}
