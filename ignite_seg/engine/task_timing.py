"""What every tuning worker task does around its work: time it and keep a failure as text.

A worker task (:func:`~ignite_seg.engine.sweeps.run_lr_sweep`, :func:`~ignite_seg.engine.sweeps.run_batch_trial`,
:func:`~ignite_seg.engine.guard_run.run_guard`, :func:`~ignite_seg.engine.length_run.run_length`) returns a result
for whatever the user's code does: an exception becomes the result's ``error`` (its traceback) and its
``status`` stays the one it was created with (``"failed"``); the tuner decides what a failed task means.
"""
from __future__ import annotations

import time
import traceback
from contextlib import contextmanager
from typing import Iterator, Protocol

__all__ = ["TaskRecord", "recorded"]


class TaskRecord(Protocol):
    """A worker task's result: the seconds it took and the traceback of what failed."""

    seconds: float
    error: str | None


@contextmanager
def recorded(result: TaskRecord) -> Iterator[float]:
    """Run the body for ``result``: its seconds into ``result.seconds``, an exception's traceback into
    ``result.error`` (not raised). Yields the start time (``time.perf_counter()``).

    Example:
        >>> from types import SimpleNamespace
        >>> r = SimpleNamespace(seconds=0.0, error=None)
        >>> with recorded(r):
        ...     raise ValueError("the user's dataset")
        >>> r.error.splitlines()[-1], r.seconds >= 0
        ("ValueError: the user's dataset", True)
    """
    t0 = time.perf_counter()
    try:
        yield t0
    except Exception:
        result.error = traceback.format_exc()
    finally:
        result.seconds = time.perf_counter() - t0
