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

One runner may be used from several threads at once (a sweep's points, each driven by a thread):
the calls draw their tasks' places from one shared capacity (:class:`~ignite_seg.runtime.slots.Slots`,
the pool's worker count), a broken pool is rebuilt once, by the first call that sees it broken (the
others resubmit their tasks to the new pool, and charge a death only to the task that ran in the dead
worker), and once the runner is closed (an interrupt) every call raises :class:`RunnerClosed`.

Every worker ignores SIGINT (the driver handles an interrupt and stops its workers) and exits
by itself soon after the driver is gone, even when the driver was SIGKILLed.
"""
from __future__ import annotations

import functools
import itertools
import logging
import multiprocessing
import signal
import threading
import time
import traceback
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

from .flight import Flight, TaskLost
from .logs import current_label
from .slots import Slots
from .workers import (
    LIVE_WORKERS,
    TaskProgress,
    announce_and_call,
    driver_identity,
    init_trial_worker,
    kill_processes,
    other_threads,
    prestart,
    server_may_start,
    start_method,
    warm_up,
)

__all__ = [
    "TaskRunner", "TaskLost", "RunnerClosed", "prestart",
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


class RunnerClosed(KeyboardInterrupt):
    """The runner was closed while this call used it (another thread handles an interrupt)."""


class TaskRunner:
    """Runs tasks on one executor, reused across stages (and by several threads at once). Use as a
    context manager.

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
        self._lock = threading.RLock()  # the pool, its queue and its workers, between the calling threads
        self._queue: Any = None
        self._before: set[BaseProcess] = set()
        self._procs: dict[int, BaseProcess] = {}
        #: the pool's generation (+1 per rebuild), and each generation's workers by pid
        self.generation = 0
        self._gen_procs: dict[int, dict[int, BaseProcess]] = {}
        self._killed: set[BaseProcess] = set()  # workers the runner killed (timeouts)
        #: drained from the queue, by (call, task key): the worker that runs it; its progress report
        self._announced: dict[tuple[int, Hashable], int] = {}
        self._reports: dict[tuple[int, Hashable], tuple[int, int, float]] = {}
        self._pid_owner: dict[int, int] = {}  # worker pid -> the call whose task it ran last
        self._calls = itertools.count()
        self._closed = False
        #: the tasks in flight of every call together: at most the pool's workers (another executor: no limit)
        self.slots = Slots(cores if self.owned else 2**31)
        self.executor: Executor = executor if executor is not None else self._new_pool()

    # -- pool management -------------------------------------------------------------------
    def _new_pool(self) -> ProcessPoolExecutor:
        if self.method == "fork" and other_threads() and server_may_start():
            # a rebuild while other threads run (a sweep's point drivers): a thread holding a lock at the
            # fork would leave it held in the workers; the fork server is a clean process
            logger.warning("restarting the workers from the fork server, not by forking this process: other "
                           "threads run in it (%s)", ", ".join(other_threads()[:5]))
            self.method, self._ctx = "forkserver", multiprocessing.get_context("forkserver")
        prestart(self.preload, self.method)
        if self.method == "fork" and other_threads():  # started since the choice (by a loader, say)
            logger.warning("forking the workers from this process while other threads run in it (%s), "
                           "started after the start method was chosen; set IGNITE_SEG_START_METHOD=forkserver "
                           "if a run hangs", ", ".join(other_threads()[:5]))
        self._queue = self._ctx.SimpleQueue()
        self._forget_workers()
        self._gen_procs[self.generation] = self._procs
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
        """Shut the default pool down; ``abort``: kill its workers first instead of awaiting their
        tasks. The calls still running (other threads) raise :class:`RunnerClosed`."""
        self._closed = True
        if not self.owned:
            return
        if abort:
            kill_processes(list(self._procs.values()))
        with self._lock:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self._forget_workers()

    def _check_open(self) -> None:
        if self._closed:
            raise RunnerClosed("the task runner was closed (interrupted) while this call used it")

    def __enter__(self) -> TaskRunner:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(abort=exc_type is not None)

    # -- running ---------------------------------------------------------------------------
    def _submit(self, fn: Callable[[T], R], run: Flight[T], task: T) -> bool:
        """Submit ``task`` in a slot ``run`` holds; ``False`` when the pool was found broken."""
        with self._lock:
            self._check_open()
            gen = self.generation
            try:
                if self.owned:
                    fut = self.executor.submit(announce_and_call, (run.ident, run.key(task)), fn, task, current_label())
                    self._track_workers()
                else:
                    fut = self.executor.submit(fn, task)
            except BrokenProcessPool:
                # a worker died since the last wait (while the caller handled a result): the
                # task waits for the new pool; the in-flight ones fail and are sorted out later
                if not self.owned:
                    raise
                run.saw_broken(gen)
                return False
        run.add(fut, task, gen)
        fut.add_done_callback(functools.partial(_give_back, self.slots, run.ident))
        return True

    def _collect(self, run: Flight[Any]) -> None:
        """Read the queue's announcements and progress reports; take this call's own into ``run``."""
        with self._lock:
            while self._queue is not None and not self._queue.empty():
                item = self._queue.get()
                if isinstance(item, TaskProgress):
                    self._reports[item.key] = (item.done, item.total, time.monotonic())  # type: ignore[index]
                    continue
                (ident, key), pid = item
                self._announced[(ident, key)] = pid
                self._pid_owner[pid] = ident
            mine = [k for k in self._announced if k[0] == run.ident]
            run.pids.update({k[1]: self._announced.pop(k) for k in mine})
            reports = {k[1]: self._reports.pop(k) for k in [k for k in self._reports if k[0] == run.ident]}
        keys = {run.key(t) for t in run.inflight.values()}
        for key, report in reports.items():
            if key in keys:
                run.progress[key] = report
                run.progress_changed = True

    def _forget_call(self, run: Flight[Any]) -> None:
        with self._lock:
            for table in (self._announced, self._reports):
                for k in [k for k in table if k[0] == run.ident]:
                    del table[k]
        self.slots.leave(run.ident)

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
        ``at_once``: at most this many tasks in flight (default: the pool's capacity); calls from
        other threads share the pool's capacity with this one.
        ``on_progress``: called with ``{task key: (steps done, steps in all)}`` of the running tasks
        that report progress (default pool only) whenever that changes.
        """
        run: Flight[T] = Flight(deque(tasks), key, timeout, ident=next(self._calls))
        limit = self.capacity if self.owned else max(len(run.pending), 1)
        limit = min(limit, at_once) if at_once else limit
        try:
            while run.pending or run.inflight:
                yield from self._step(run, fn, limit, on_progress)
        finally:
            self._forget_call(run)

    def _step(self, run: Flight[T], fn: Callable[[T], R], limit: int,
              on_progress: Callable[[Mapping[Hashable, tuple[int, int]]], None] | None) -> Iterator[R | TaskLost[T]]:
        """One round of :meth:`map_unordered`: fill the slots, wait, sort out what finished."""
        self._check_open()
        self._fill(run, fn, limit)
        waiting: list[Future[Any]] = list(run.inflight)
        wake = self.slots.wake_up(run.ident) if run.pending else None
        if wake is not None:
            waiting.append(wake)
        done = wait(waiting, timeout=POLL_S, return_when=FIRST_COMPLETED)[0] if waiting else set()
        self._check_open()
        # read the announcements as they come: nobody else empties the queue's pipe, and once
        # it is full every worker blocks in its next announcement (after ~1000 tasks per pool)
        self._collect(run)
        broken: list[T] = []
        for fut in done:
            if fut not in run.inflight:  # the wake-up: a slot is free
                continue
            gen = run.gens[fut]
            task = run.pop(fut)
            if run.key(task) in run.timed_out and not self.owned:
                continue  # reported when it timed out; its late result is ignored
            exc = BrokenProcessPool("cancelled") if fut.cancelled() else fut.exception()
            if exc is None:
                yield fut.result()
            elif isinstance(exc, BrokenProcessPool) and self.owned:
                broken.append(task)
                run.saw_broken(gen)
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
        if broken or (run.broken_gen is not None and not run.on_broken_pool()):
            yield from self._recover(run, broken)

    def _fill(self, run: Flight[T], fn: Callable[[T], R], limit: int) -> None:
        """Submit pending tasks up to ``limit`` in flight, each in a slot of the shared capacity."""
        while run.pending and len(run.inflight) < limit and self.slots.take(run.ident):
            task = run.pending.popleft()
            if not self._submit(fn, run, task):
                self.slots.give(run.ident)
                run.pending.appendleft(task)
                return

    def _expire(self, run: Flight[T]) -> Iterator[TaskLost[T]]:
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
            with self._lock:
                proc = self._gen_procs.get(run.gens[fut], {}).get(pid) if pid is not None else None
                if proc is not None:
                    run.timed_out.add(k)
                    self._killed.add(proc)
                    logger.warning("task %r timed out after %g s: killing its worker (pid %d)", k, run.timeout, pid)
                    kill_processes([proc])

    def _warn_if_stalled(self, run: Flight[T]) -> None:
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

    def _recover(self, run: Flight[T], broken: list[T]) -> Iterator[TaskLost[T]]:
        """The pool broke: collect this call's tasks of the broken pool, sort them out; the first
        call to see that pool broken starts a new one."""
        gen = run.broken_gen if run.broken_gen is not None else self.generation
        for fut in run.on_broken_pool():
            broken.append(run.pop(fut))
        run.broken_gen = None
        self._collect(run)
        timed_out = [t for t in broken if run.key(t) in run.timed_out]
        others = [t for t in broken if run.key(t) not in run.timed_out]
        with self._lock:
            self._check_open()
            rebuild = gen == self.generation
            if rebuild:
                self.executor.shutdown(wait=True, cancel_futures=True)
            culprits = self._find_culprits(run, [run.key(t) for t in others], gen, explained=bool(timed_out))
            if rebuild:
                logger.warning("a worker process died; restarting the pool and retrying %d task(s)", len(others))
                self.generation += 1
                self.executor = self._new_pool()
            else:
                logger.warning("a worker process died; the pool was restarted, retrying %d task(s)", len(others))
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

    def _charge(self, run: Flight[T], task: T, error: str) -> TaskLost[T] | None:
        k = run.key(task)
        run.attempts[k] = run.attempts.get(k, 0) + 1
        if run.attempts[k] > self.max_retries:
            return TaskLost(task, run.attempts[k], error)
        logger.warning("retrying a task whose worker died (attempt %d): %s", run.attempts[k] + 1, error.strip())
        run.pending.append(task)
        return None

    def _find_culprits(self, run: Flight[Any], keys: list[Hashable], gen: int,
                       explained: bool = False) -> dict[Hashable, str]:
        """Which of ``run``'s broken tasks ran in a worker of pool ``gen`` that died by itself (not
        terminated by us).

        ``explained``: a worker was killed by the runner (a timeout), so when no other worker
        died by itself nobody is charged. A worker that died by itself while it ran another
        call's task explains the break too.
        """
        procs = self._gen_procs.get(gen, {})
        for proc in procs.values():
            proc.join(timeout=5)
        died = {pid: p.exitcode for pid, p in procs.items()
                if p.exitcode not in (None, 0, -signal.SIGTERM) and p not in self._killed}
        culprits: dict[Hashable, str] = {}
        for k in keys:
            pid = run.pids.get(k)
            code = died.get(pid) if pid is not None else None
            if code is not None:
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                culprits[k] = f"the worker process (pid {pid}) running it died: {how}"
        explained = explained or any(p in self._killed for p in procs.values()) or any(
            self._pid_owner.get(pid, run.ident) != run.ident for pid in died)
        if not culprits and not explained:  # cannot tell which one: charge them all
            culprits = {k: "a worker process died while it ran (which one is unknown)" for k in keys}
        return culprits


def _give_back(slots: Slots, owner: int, _fut: Future[Any]) -> None:
    """A task's future is done (a result, an error, a broken pool): its slot is free."""
    slots.give(owner)


def _is_worker_death(exc: BaseException) -> bool:
    """Dask and other executors report a dead worker with their own exception types."""
    name = type(exc).__name__
    return name in {"KilledWorker", "BrokenExecutor", "BrokenProcessPool", "CommClosedError"}
