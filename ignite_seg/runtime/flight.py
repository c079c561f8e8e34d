"""The state of one :meth:`~ignite_seg.runtime.tasks.TaskRunner.map_unordered` call, and a lost task."""
from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Hashable, TypeVar

__all__ = ["Flight", "TaskLost"]

T = TypeVar("T")


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
class Flight(Generic[T]):
    """The state of one :meth:`TaskRunner.map_unordered` call: its tasks pending and in flight
    (with the generation of the pool each was submitted to), their workers, attempts and progress."""

    pending: deque[T]
    key: Callable[[T], Hashable]
    timeout: float | None
    #: the call's own number on its runner (several calls may run at once, from several threads)
    ident: int = 0
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
    #: by in-flight future: the generation of the pool it was submitted to
    gens: dict[Future[Any], int] = field(default_factory=dict)
    #: the newest pool generation this call saw broken, until it recovered from it
    broken_gen: int | None = None

    def add(self, fut: Future[Any], task: T, gen: int = 0) -> None:
        if not self.inflight:  # nothing ran since the last finish (waiting for a slot is not a stall)
            self.last_done = time.monotonic()
        self.inflight[fut] = task
        self.gens[fut] = gen
        self.started[fut] = time.monotonic()

    def saw_broken(self, gen: int) -> None:
        self.broken_gen = gen if self.broken_gen is None else max(gen, self.broken_gen)

    def on_broken_pool(self) -> list[Future[Any]]:
        """The in-flight futures of the broken pool(s) (newer pools' ones run on)."""
        gen = -1 if self.broken_gen is None else self.broken_gen
        return [f for f in self.inflight if self.gens[f] <= gen]

    def pop(self, fut: Future[Any]) -> T:
        now = time.monotonic()
        self.longest = max(self.longest, now - self.started.pop(fut, now))
        self.running.discard(fut)
        self.gens.pop(fut, None)
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
