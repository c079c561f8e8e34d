"""Checks of the arguments that size and place the workers: cores, executor, timeouts."""
from __future__ import annotations

import math
import os
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import psutil

from ..exceptions import ConfigError, ConfigTypeError

__all__ = [
    "resolve_cores", "usable_cpus", "check_cores", "check_executor", "check_timeout", "check_reproducible_executor",
]


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


def check_timeout(name: str, value: Any) -> float | None:
    """``None`` or a positive, finite number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigTypeError(
            f"{name} must be a number of seconds or None, got {value!r} ({type(value).__name__})."
        )
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}; use None for no limit.")
    return float(value)


def check_reproducible_executor(executor: Executor | None) -> None:
    """Refuse a ``ThreadPoolExecutor`` of several threads: its trials are not reproducible.

    Threads of one process share torch's global random number generator, so two trials running
    at once draw from one stream in an order that changes from run to run.
    """
    if isinstance(executor, ThreadPoolExecutor) and getattr(executor, "_max_workers", 2) != 1:
        raise ConfigError(
            f"executor={executor!r} runs trials in threads of this process; threads share torch's "
            "global random number generator, so concurrent trials are not reproducible, even with "
            "seed=. Pass executor=None (a local process pool, the default), a ProcessPoolExecutor, or a "
            "cluster executor (Dask, Ray); a ThreadPoolExecutor(max_workers=1) is accepted (one trial at a time)."
        )


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), or the machine's where that is unknown."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_cores(value: Any, executor: Executor | None) -> int:
    """The number of workers: ``"all"`` or at most the usable CPUs (any value with an ``executor``)."""
    n = resolve_cores(value)
    if executor is None and n > usable_cpus():
        raise ConfigError(
            f"cores={value!r} is more than the {usable_cpus()} CPU(s) this process may use; each worker "
            f"holds its own copy of the model and data, so extra ones only cost memory. Pass "
            f'cores <= {usable_cpus()} or cores="all" (or an executor of your own).'
        )
    return n


def check_executor(value: Any) -> Executor | None:
    if value is None or isinstance(value, Executor):
        return value
    if callable(getattr(value, "submit", None)):  # duck-typed executors (Ray adapters...)
        return value  # type: ignore[no-any-return]
    raise ConfigTypeError(
        f"executor must be a concurrent.futures.Executor (e.g. distributed.Client(...).get_executor()) "
        f"or None, got {value!r} ({type(value).__name__})."
    )
