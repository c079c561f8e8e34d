"""Layer 2, running tasks in worker processes: the task runner (fork server, retries, timeouts), the
worker start-up and the checks of the arguments that size and place the workers."""
from __future__ import annotations

from .._lazy import lazy_exports

#: What the layer exposes: name -> its module (imported on first use).
_EXPORTS = {
    "TaskRunner": "tasks",
    "TaskLost": "tasks",
    "prestart": "tasks",
    "start_method": "tasks",
    "resolve_cores": "checks",
    "check_cores": "checks",
    "check_executor": "checks",
    "check_timeout": "checks",
    "RayExecutor": "executors",
    "ensure_logging": "logs",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
