"""The user's script and the worker processes: no worker re-runs a script it does not need.

``multiprocessing`` (spawn, fork server) imports the parent's ``__main__`` in every new worker,
so a script that calls ``train()`` without an ``if __name__ == "__main__":`` guard would start
training again inside each worker. When no loader comes from the script, :func:`workers_skip_main`
hides the script from ``multiprocessing`` while the workers start, and such a script works as is.
When a loader does come from the script, :func:`check_main_guard` refuses an unguarded call
before any worker starts, with the fix.
"""
from __future__ import annotations

import ast
import contextlib
import sys
import threading
from types import FrameType
from typing import Iterator

from ..exceptions import ConfigError

__all__ = ["unguarded_call_line", "check_main_guard", "workers_skip_main"]

_GUARD = "if __name__ == \"__main__\":"


def _is_main_test(node: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either order)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)):
        return False
    sides = [node.left, node.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _guarded_lines(source: str) -> list[tuple[int, int]]:
    """Line ranges (first, last) of the module-level ``if __name__ == "__main__":`` bodies."""
    ranges = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and _is_main_test(node.test):
            ranges.append((node.lineno, node.end_lineno or node.lineno))
    return ranges


def _main_module_frame() -> FrameType | None:
    """The frame running the main script's top level, when this call comes from it."""
    main = sys.modules.get("__main__")
    frame = sys._getframe(1)
    while frame is not None:
        if main is not None and frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def unguarded_call_line() -> int | None:
    """The line of the main script's top level that leads to this call when it is outside an
    ``if __name__ == "__main__":`` block; ``None`` when guarded, or not called from a script file
    (an interactive session, a notebook, a thread, a function called later)."""
    frame = _main_module_frame()
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if frame is None or not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            ranges = _guarded_lines(fh.read())
    except (OSError, SyntaxError, ValueError):
        return None  # no readable source: assume the script knows what it does
    line = frame.f_lineno
    return None if any(first <= line <= last for first, last in ranges) else line


def check_main_guard(entry: str, uses_main: bool) -> None:
    """Refuse an unguarded top-level call whose loaders the workers can only get from the script.

    Raises:
        ConfigError: a loader comes from the running script and ``entry`` is called at its top
            level without the guard; the workers would each run the script, and ``entry``, again.
    """
    if not uses_main:
        return
    line = unguarded_call_line()
    if line is None:
        return
    path = getattr(sys.modules["__main__"], "__file__", "the script")
    raise ConfigError(
        f"{entry}() is called at the top level of {path} (line {line}) without an "
        f"'{_GUARD}' guard, and a loader comes from that script: every worker process imports the "
        f"script to get the loader, and would run {entry}() again. Put the call under '{_GUARD}' "
        f"(or move the loaders into a module of their own)."
    )


@contextlib.contextmanager
def workers_skip_main(skip: bool) -> Iterator[None]:
    """While inside, workers started by ``multiprocessing`` (spawn, fork server) do not import
    the running script (``skip``); the script's ``__spec__`` and ``__file__`` are restored after.

    Reentrant across threads (a sweep's points): the first to enter saves them, the last to
    leave restores them.
    """
    main = sys.modules.get("__main__")
    if not skip or main is None:
        yield
        return
    global _skip_depth, _skip_saved
    with _skip_lock:
        if _skip_depth == 0:
            _skip_saved = {name: vars(main).get(name, _MISSING) for name in ("__spec__", "__file__")}
            main.__spec__ = None
            vars(main).pop("__file__", None)
        _skip_depth += 1
    try:
        yield
    finally:
        with _skip_lock:
            _skip_depth -= 1
            if _skip_depth == 0:
                for name, value in _skip_saved.items():
                    if value is _MISSING:
                        vars(main).pop(name, None)
                    else:
                        setattr(main, name, value)


_MISSING = object()
_skip_lock = threading.Lock()
_skip_depth = 0
_skip_saved: dict[str, object] = {}
