"""Worker-side task functions of tests/test_task_progress.py (importable by the pool's workers)."""
from __future__ import annotations

import time

from ignite_seg.runtime import workers


def slow(task: tuple[str, float, int]) -> str:
    """Run ``seconds`` in ``steps`` steps; ``"progress"`` reports each step, ``"silent"`` does not."""
    how, seconds, steps = task
    workers.PROGRESS_EVERY_S = 0.05  # this worker's reports, often enough for a short test
    for i in range(steps):
        time.sleep(seconds / steps)
        if how == "progress":
            workers.report_progress(i + 1, steps)
    return how


def engine_steps(task: tuple[float, int]) -> int:
    """An ignite engine of ``steps`` steps over ``seconds`` with :func:`report_steps` attached, as trials
    and sweeps attach it; returns how many progress handlers were attached."""
    from ignite.engine import Engine, Events

    from ignite_seg.engine.handlers import report_steps

    seconds, steps = task
    workers.PROGRESS_EVERY_S = 0.05
    engine = Engine(lambda e, b: time.sleep(seconds / steps))
    report_steps(engine, steps)
    report_steps(engine, steps)  # safe to call twice
    attached = len(engine._event_handlers[Events.ITERATION_COMPLETED])
    engine.run(range(steps), max_epochs=1)
    return attached
