"""The pool's capacity shared by the callers of one :class:`~ignite_seg.runtime.tasks.TaskRunner`.

A sweep drives its points from several threads, each calling ``map_unordered`` on the one
runner: every task in flight holds one of the pool's ``capacity`` slots, so the pool is never
asked for more than it has workers (a task queued inside the pool would start its timeout clock
early and be out of the caller's hands). A free slot goes to the waiting caller that holds the
fewest (ties: whoever asks first), so no caller starves the others; a waiting caller is woken
through a ``Future`` that it waits on together with its tasks.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Hashable

__all__ = ["Slots"]


class Slots:
    """``capacity`` slots; ``take(owner)`` one, ``give(owner)`` it back (from any thread)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._held: dict[Hashable, int] = {}
        #: by owner: the future that wakes it when a slot is given back (it waits for one)
        self._waiting: dict[Hashable, Future[None]] = {}

    @property
    def used(self) -> int:
        with self._lock:
            return sum(self._held.values())

    def take(self, owner: Hashable) -> bool:
        """A slot for ``owner`` when one is free and no waiting caller holds fewer; otherwise
        ``owner`` waits (:meth:`wake_up` is the future to wait on) and ``False``."""
        with self._lock:
            mine = self._held.get(owner, 0)
            behind = any(self._held.get(w, 0) < mine for w in self._waiting if w != owner)
            if sum(self._held.values()) < self.capacity and not behind:
                self._held[owner] = mine + 1
                self._waiting.pop(owner, None)
                return True
            wake = self._waiting.get(owner)
            if wake is None or wake.done():
                self._waiting[owner] = Future()
            return False

    def wake_up(self, owner: Hashable) -> Future[None] | None:
        """The future set when a slot is given back, while ``owner`` waits for one."""
        with self._lock:
            return self._waiting.get(owner)

    def give(self, owner: Hashable) -> None:
        """``owner``'s task is over: its slot is free, and every waiting caller is woken."""
        with self._lock:
            self._held[owner] -= 1
            if not self._held[owner]:
                del self._held[owner]
        self._wake_all()

    def leave(self, owner: Hashable) -> None:
        """``owner`` waits no more (its call ended); the others may take what it would have."""
        with self._lock:
            gone = self._waiting.pop(owner, None)
        if gone is not None:
            self._wake_all()

    def _wake_all(self) -> None:
        with self._lock:
            waiting = list(self._waiting.values())
        for wake in waiting:
            try:
                wake.set_result(None)
            except Exception:  # set already (InvalidStateError): that caller is awake
                pass
