"""A sweep's points on one :class:`~ignite_seg.runtime.tasks.TaskRunner`, overlapping.

Each point's whole pipeline (:func:`ignite_seg.api.run_validated`: probe, lock, tune, trials,
collate) is driven by a thread of its own, at most ``at_once`` points at a time, and every point
submits its tasks to the one shared runner: the runner's slots (its worker count) are shared out
between the points, so the tuning and the trials of point ``k + 1`` fill the cores that point ``k``
leaves idle (its last round of trials, a tuning stage whose repeats do not divide the cores).

What does not change with the overlap: a point's run folder, lock and seeds are its own, so a
point's results are the same whether it overlapped others or not. The pool is started in the
calling thread before any driver thread exists (forked workers are forked from a process with
no other thread). Ctrl-C reaches the calling thread: it kills the workers, and every driver then
stops at its next use of the runner (:class:`~ignite_seg.runtime.tasks.RunnerClosed`), releasing
its point's lock; a second Ctrl-C exits at once. A point that fails stops the points not started
yet; those running finish, and the first error is raised.
"""
from __future__ import annotations

import logging
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Callable, Sequence

from ..api import WORKER_PRELOAD, run_validated
from ..run_config import RunConfig
from ..run_plan import TrainResult
from ..runtime.logs import labelled
from ..runtime.tasks import TaskRunner
from ..runtime.workers import second_interrupt_exits
from .points import SweepPoint

__all__ = ["run_points"]

logger = logging.getLogger("ignite_seg")

#: How often the calling thread looks at its driver threads while it waits (an interrupt is
#: delivered to it at once in any case).
_POLL_S = 0.5


def run_points(pts: Sequence[SweepPoint], cfgs: Sequence[RunConfig], at_once: int,
               finished: Callable[[RunConfig], TrainResult | None]) -> list[TrainResult]:
    """Every point's run, in point order: ``finished(cfg)`` ones read back, the others run (or
    continued), ``at_once`` of them overlapping on one task runner."""
    first = cfgs[0]
    with TaskRunner(first.cores, first.executor, preload=WORKER_PRELOAD) as runner:  # workers start here
        if at_once == 1 or len(pts) == 1:
            return [_drive(p, cfg, runner, len(pts), finished) for p, cfg in zip(pts, cfgs)]
        logger.info("sweep: %d point(s), up to %d at a time on %d worker(s)", len(pts), at_once, runner.capacity)
        with second_interrupt_exits():  # a second Ctrl-C while the drivers stop exits at once
            return _overlapped(pts, cfgs, runner, at_once, finished)


def _overlapped(pts: Sequence[SweepPoint], cfgs: Sequence[RunConfig], runner: TaskRunner, at_once: int,
                finished: Callable[[RunConfig], TrainResult | None]) -> list[TrainResult]:
    drivers = ThreadPoolExecutor(min(at_once, len(pts)), thread_name_prefix="ignite_seg-point")
    futs = [drivers.submit(_drive, p, cfg, runner, len(pts), finished) for p, cfg in zip(pts, cfgs)]
    try:
        _await(futs, drivers)
    except BaseException:  # an interrupt: stop every point now (their workers killed, locks released)
        drivers.shutdown(wait=False, cancel_futures=True)
        runner.close(abort=True)
        drivers.shutdown(wait=True)
        raise
    drivers.shutdown(wait=True)
    return [f.result() for f in futs]


def _await(futs: list[Future[TrainResult]], drivers: ThreadPoolExecutor) -> None:
    """Wait for every point; after a point's error, start no other point, let the running ones
    finish, and raise the first error."""
    pending: set[Future[TrainResult]] = set(futs)
    error: BaseException | None = None
    while pending:
        done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_EXCEPTION)
        for fut in (f for f in futs if f in done and not f.cancelled()):
            exc = fut.exception()
            if exc is not None and error is None:
                error = exc
                logger.error("a sweep point failed (%s: %s); no other point starts, the running ones finish",
                             type(exc).__name__, exc)
                drivers.shutdown(wait=False, cancel_futures=True)
    if error is not None:
        raise error


def _drive(p: SweepPoint, cfg: RunConfig, runner: TaskRunner, n_points: int,
           finished: Callable[[RunConfig], TrainResult | None]) -> TrainResult:
    """One point: kept when it finished before, else run (or continued) on the shared runner; its
    log lines and progress bars say which point."""
    with labelled(f"point {p.index} ({p.label})"):
        done = finished(cfg)
        if done is not None:
            logger.info("finished before, kept")
            return done
        logger.info("sweep point %d of %d", p.index + 1, n_points)
        return run_validated(cfg, "sweep", runner=runner)
