"""Worker processes: how they start, what guards them, and how an interrupt stops them.

Every worker of ignite_seg (the trial pool's, the analysis pool's) ignores SIGINT, so that only
the driver handles an interrupt and stops its workers itself, and watches the driver: it exits
within a second or so once the driver is gone, even when the driver was SIGKILLed. The fork
server dies with the driver too (the kernel's parent-death signal, on Linux), reaped or not.
"""
from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager, nullcontext
from multiprocessing.process import BaseProcess
from typing import Any, Callable, Hashable, Iterable, Iterator, NamedTuple, Sequence

import psutil

from .logs import labelled

__all__ = [
    "StartMethod", "choose_start_method", "other_threads", "start_method", "prestart", "driver_identity", "guard_worker", "worker_pool", "kill_processes",
    "second_interrupt_exits", "server_may_start", "LIVE_WORKERS", "init_trial_worker", "warm_up", "announce_and_call", "die_with_parent",
    "TaskProgress", "report_progress", "reports_progress", "PROGRESS_EVERY_S",
]

logger = logging.getLogger(__name__)
#: Preloaded first by the fork server: it asks to die with the driver (the pid in this variable).
SERVER_GUARD = "ignite_seg.runtime.server_guard"
SERVER_GUARD_ENV = "IGNITE_SEG_FORKSERVER_PARENT"
_started_queue: Any = None
_warned_cuda = False
#: Worker processes of the live pools of this process (by pid), killed by a second interrupt.
LIVE_WORKERS: dict[int, BaseProcess] = {}


class StartMethod(NamedTuple):
    """How the default pool starts its workers (``fork``, ``forkserver`` or ``spawn``) and why."""

    method: str
    reason: str


def choose_start_method(wanted: str | None, available: Sequence[str], platform: str, cuda_initialized: bool,
                        other_threads: Sequence[str]) -> StartMethod:
    """The start method of the default pool, from the facts of the calling process (pure).

    ``wanted``: ``IGNITE_SEG_START_METHOD`` (``None``: unset); ``available``: this platform's
    methods; ``other_threads``: names of the caller's threads other than the calling one (tqdm's
    monitor left out, see :func:`other_threads`).

    Unset, workers are forked from the caller when that is safe: on Linux, with CUDA not
    initialised in the caller (a forked child cannot use it), and with no other thread running (a
    thread that holds a lock at the fork leaves it locked forever in the child). Torch's intra-op
    threads are not Python threads: a process forked after an OpenMP parallel region of two
    threads hangs in its next parallel region of two or more, so every worker sets one torch thread
    before any tensor op. Otherwise the fork server (a clean, single-threaded process), or spawn
    where there is none. A variable's value is obeyed, except ``fork`` with CUDA initialised.
    """
    server = "forkserver" if "forkserver" in available else "spawn"
    if wanted is not None:
        if wanted not in available:
            return StartMethod("spawn", f"IGNITE_SEG_START_METHOD={wanted} is not available here "
                                        f"(this platform has {', '.join(available)})")
        if wanted == "fork" and cuda_initialized:
            return StartMethod(server, "IGNITE_SEG_START_METHOD=fork, but CUDA is initialised in this process "
                                       "and a forked worker cannot use it")
        return StartMethod(wanted, f"IGNITE_SEG_START_METHOD={wanted}")
    if not platform.startswith("linux") or "fork" not in available:
        return StartMethod(server, f"workers are forked from the caller only on Linux (this is {platform})")
    if cuda_initialized:
        return StartMethod(server, "CUDA is initialised in this process, and a forked worker cannot use it")
    if other_threads:
        shown = ", ".join(repr(n) for n in list(other_threads)[:5])
        return StartMethod(server, f"{len(other_threads)} other thread(s) run in this process ({shown}); "
                                   "forking it could leave a lock held in the workers")
    return StartMethod("fork", "Linux, no CUDA initialised and no other thread in this process")


def other_threads() -> list[str]:
    """Names of this process's live threads other than the calling one; tqdm's monitor thread is
    left out (it sleeps on an event and touches only tqdm's own lock, which workers never use)."""
    try:
        from tqdm import TMonitor
    except ImportError:  # pragma: no cover - tqdm is a dependency
        TMonitor = ()  # noqa: N806
    me = threading.current_thread()
    return [t.name for t in threading.enumerate() if t is not me and not isinstance(t, TMonitor)]


def start_method(announce: bool = False) -> str:
    """How the default pool starts its workers: :func:`choose_start_method` on this process's facts.

    ``fork`` (the default where it is safe) forks the workers from the calling process, which has
    torch imported already: the first task starts seconds sooner than from a fork server, which
    imports torch and ignite once per process (3-4 s on a small machine). ``forkserver`` and
    ``spawn`` start workers from a clean, single-threaded process. ``announce``: log the choice
    and its reason (``train()`` does, once per call); ``IGNITE_SEG_START_METHOD=fork`` refused
    because CUDA is initialised is a warning, once per process.
    """
    wanted, cuda = os.environ.get("IGNITE_SEG_START_METHOD"), _cuda_initialized()
    choice = choose_start_method(wanted, multiprocessing.get_all_start_methods(), sys.platform, cuda, other_threads())
    if wanted == "fork" and cuda:
        global _warned_cuda
        if not _warned_cuda:
            _warned_cuda = True
            logger.warning("IGNITE_SEG_START_METHOD=fork: CUDA is initialised in this process, and a forked "
                           "worker cannot use it; starting workers from the fork server instead")
    elif announce:
        logger.info("workers start by %s: %s", _METHOD_WORDS.get(choice.method, choice.method), choice.reason)
    return choice.method


_METHOD_WORDS = {"fork": "forking this process", "forkserver": "the fork server", "spawn": "spawning"}


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")  # not imported: nothing initialised
    return bool(torch is not None and torch.cuda.is_initialized())


def prestart(preload: Sequence[str] = (), method: str | None = None) -> None:
    """Get ready to start workers by ``method`` (default: :func:`start_method`); idempotent.

    ``forkserver``: start the fork server now, importing ``preload`` in the background (called by
    ``train()`` before it checks the recipe, so the imports overlap the check; the preload list
    counts only for the call that starts the server). ``fork``: import ``preload`` in this
    process, once, so that every worker forked from it has them (seconds each otherwise, e.g.
    ``torch._dynamo``, which the first optimizer of a process imports). No user code runs here.
    """
    method = method or start_method()
    if method == "fork":
        for name in preload:
            importlib.import_module(name)
        return
    if method != "forkserver":
        return
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([SERVER_GUARD, *preload])
    if threading.current_thread() is threading.main_thread():  # the signal comes when this *thread* ends
        os.environ[SERVER_GUARD_ENV] = str(os.getpid())  # the server it starts dies with this process
    forkserver.ensure_running()


def server_may_start() -> bool:
    """Whether workers may come from the fork server now: it exists here, and they would not import the
    calling script (hidden by ``runtime.main_module.workers_skip_main``, or none)."""
    main = sys.modules.get("__main__")
    return "forkserver" in multiprocessing.get_all_start_methods() and getattr(main, "__file__", None) is None


def driver_identity() -> tuple[int, float]:
    """``(pid, creation time)`` of this process: what a worker's watchdog checks."""
    return os.getpid(), psutil.Process().create_time()


def _watch_driver(pid: int, created: float, parent: int, period: float = 1.0) -> None:
    """Exit this worker soon after the driver process is gone (killed, crashed), reaped or not.

    A pool worker blocks on its task queue forever once the driver dies (it holds both ends of
    the queue's pipe, so no EOF ever arrives): without this, a SIGKILLed run leaks its workers.
    A dead driver that its own parent has not reaped yet is a zombie whose creation time still
    reads, so the watch also counts a zombie as gone, and a change of this process's parent
    (``parent``: the fork server, or the driver itself) as the end of it. The parent-death
    signal (:func:`die_with_parent`) usually ends the worker first; this watch covers the
    platforms without it.
    """
    while True:
        time.sleep(period)
        if os.getppid() != parent or not _alive(pid, created):
            os._exit(3)


def _alive(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return bool(proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent ends (Linux ``PR_SET_PDEATHSIG``).

    Asked by the fork server of a driver's main thread (:mod:`ignite_seg.runtime.server_guard`)
    and by the workers it forks: a SIGKILLed driver, reaped or not, takes its whole tree along
    within milliseconds. The signal is sent when the *thread* that started this process ends, so
    it is not asked where that thread may end before the run (a driver's other threads; workers
    started by the driver itself, with ``spawn`` or ``fork``): there the watch of
    :func:`guard_worker` (a second at most) remains. Elsewhere than Linux a no-op.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def guard_worker(driver: tuple[int, float], started_by_main_thread: bool = False) -> None:
    """Initialiser of every worker: ignore SIGINT (the driver stops its workers itself), die with
    the parent process, and exit when the driver ``(pid, creation time)`` is gone.

    ``started_by_main_thread``: the driver's main thread started this worker (``fork`` or
    ``spawn`` from ``train()`` in the main thread), which lives as long as the driver, so the
    parent-death signal is asked for here too.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    if parent != driver[0] or started_by_main_thread:  # the fork server (one thread), or the driver's main thread
        die_with_parent()
    if not _alive(*driver):  # it died before the signal was asked for
        os._exit(3)
    threading.Thread(target=_watch_driver, args=(*driver, parent), name="ignite_seg-watchdog", daemon=True).start()


def init_trial_worker(threads: int, started_queue: Any, driver: tuple[int, float], preload: Sequence[str] = (),
                      started_by_main_thread: bool = False) -> None:
    """Trial-pool initialiser: :func:`guard_worker`, one torch thread, the ``preload`` modules
    (already there when the fork server or the forked caller imported them), and a queue on which
    each task announces itself."""
    global _started_queue
    guard_worker(driver, started_by_main_thread)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    import torch

    torch.set_num_threads(threads)
    for name in preload:
        importlib.import_module(name)
    _started_queue = started_queue


def warm_up() -> int:
    """A first task that makes the pool start a worker now (the initialiser does the imports)."""
    return os.getpid()


#: Seconds between two progress reports of one task (:func:`report_progress`).
PROGRESS_EVERY_S = 2.0
_current_key: Hashable | None = None
_last_report = 0.0


class TaskProgress(NamedTuple):
    """A running task's report on the announcement queue: ``done`` of its ``total`` steps."""

    key: Hashable
    done: int
    total: int


def announce_and_call(key: Hashable, fn: Callable[[Any], Any], task: Any, label: str | None = None) -> Any:
    """A task of the default pool: announced (key, pid), then run; ``label``: the submitting thread's
    (a sweep's point, :func:`~ignite_seg.runtime.logs.labelled`), which the task's log lines carry too."""
    global _current_key, _last_report
    if _started_queue is not None:
        _started_queue.put((key, os.getpid()))
    _current_key, _last_report = key, time.monotonic()
    try:
        with labelled(label) if label else nullcontext():
            return fn(task)
    finally:
        _current_key = None


def reports_progress() -> bool:
    """Whether this is a task of the default pool, whose :func:`report_progress` reaches the driver."""
    return _started_queue is not None and _current_key is not None


def report_progress(done: int, total: int) -> None:
    """Called from inside a task of the default pool: ``done`` of ``total`` steps are done.

    Sent to the driver at most every :data:`PROGRESS_EVERY_S` seconds (the driver shows it and
    does not take a task that reports for a hung one); elsewhere (another executor, the caller's
    own process) a no-op.
    """
    global _last_report
    if _started_queue is None or _current_key is None:
        return
    now = time.monotonic()
    if now - _last_report < PROGRESS_EVERY_S:
        return
    _last_report = now
    _started_queue.put(TaskProgress(_current_key, int(done), int(total)))


def kill_processes(procs: Iterable[BaseProcess]) -> None:
    for proc in procs:
        if proc.exitcode is None:
            try:
                proc.kill()
            except (OSError, ValueError):
                pass


@contextmanager
def worker_pool(workers: int, ctx: Any) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` whose workers are guarded (:func:`guard_worker`); when the block
    ends by an exception (an interrupt included) the workers are killed, not awaited."""
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=guard_worker,
                               initargs=(driver_identity(),))
    try:
        yield pool
    except BaseException:
        kill_processes(set(multiprocessing.active_children()) - before)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _exit_now(signum: int, frame: Any) -> None:
    """The second interrupt: kill this process's workers and exit at once (status 130)."""
    kill_processes(list(LIVE_WORKERS.values()))
    sys.stderr.write("ignite_seg: interrupted twice, exiting now\n")
    sys.stderr.flush()
    os._exit(130)


@contextmanager
def second_interrupt_exits() -> Iterator[None]:
    """A first SIGINT raises ``KeyboardInterrupt`` as usual (the run then stops its workers and
    releases its lock); a second one while that cleanup runs exits the process at once.

    Only in the main thread and only where SIGINT has Python's default handler.
    """
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def first(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, _exit_now)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)

