"""Executors for clusters that do not ship a ``concurrent.futures.Executor`` of their own.

Dask needs none: pass ``distributed.Client(...).get_executor()``. Ray has no released
Executor, so :class:`RayExecutor` adapts ``ray.remote`` tasks and ``ObjectRef.future()``.
"""
from __future__ import annotations

from concurrent.futures import Executor, Future
from typing import Any, Callable

__all__ = ["RayExecutor"]


class RayExecutor(Executor):
    """A ``concurrent.futures.Executor`` running each call as a Ray task.

    Args:
        **remote_options: options of ``ray.remote`` for every task, e.g. ``num_cpus=1`` (the
            default) or ``num_gpus=1``.

    The Ray runtime must be initialised (``ray.init(...)``) by the caller, who also shuts it
    down; :meth:`shutdown` only stops accepting work (and cancels pending tasks when asked).

    Example:
        >>> import ray  # doctest: +SKIP
        >>> ray.init(num_cpus=2)  # doctest: +SKIP
        >>> ignite_seg.train(..., executor=RayExecutor())  # doctest: +SKIP
    """

    def __init__(self, **remote_options: Any) -> None:
        try:
            import ray
        except ImportError:
            raise ImportError("RayExecutor needs Ray: pip install 'ray>=2.5'") from None
        self._ray = ray
        self._options = {"num_cpus": 1, **remote_options}
        self._remote: dict[Callable[..., Any], Any] = {}
        self._refs: list[Any] = []
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._shutdown:
            raise RuntimeError("cannot submit to a RayExecutor after shutdown()")
        if not self._ray.is_initialized():
            raise RuntimeError("RayExecutor needs a running Ray: call ray.init(...) first")
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(**self._options)(fn)
        ref = remote.remote(*args, **kwargs)
        self._refs.append(ref)
        return ref.future()  # type: ignore[no-any-return]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True
        if cancel_futures:
            for ref in self._refs:
                self._ray.cancel(ref, force=True)
        elif wait and self._refs:
            self._ray.wait(self._refs, num_returns=len(self._refs))
        self._refs = []
