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
