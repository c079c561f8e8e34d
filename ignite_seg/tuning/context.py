"""What the tuner's steps share: the tune's context, the seeds of its tasks and running them.

Every parallel piece of a tune (sweep repeats, candidate runs) is a task of :mod:`ignite_seg.engine.sweeps`
run on the caller's :class:`~ignite_seg.runtime.tasks.TaskRunner` through :func:`run_tasks`, which
charges the compute to a stage of ``misc.json``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..config.hyperparameters import HyperparameterSettings
from ..engine.sweeps import RecipeSpec
from ..runtime.logs import tagged
from ..runtime.tasks import TaskLost, TaskRunner
from ..storage.schemas import MiscLog
from .task_store import TaskStore

__all__ = ["derive_seed", "TuneRun", "run_tasks", "last_line"]

logger = logging.getLogger(__name__)
#: Seconds between two log lines of the running tasks' steps (the bar shows every report).
STEPS_LOG_EVERY_S = 60.0


def derive_seed(seed: int, *path: int | str) -> int:
    """A seed for one tuning task, from the run's seed and the task's place (not the worker)."""
    words = [int(seed)] + [p if isinstance(p, int) else int.from_bytes(p.encode(), "little") % (2**32) for p in path]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


@dataclass(frozen=True)
class TuneRun:
    """What every step of one tune shares."""

    runner: TaskRunner
    s: HyperparameterSettings
    recipe: RecipeSpec
    seed: int
    n_train: int
    #: training items the tuning runs train on (the held-out slice left out)
    n_fit: int
    misc: MiscLog
    hparams: Path
    #: finished tasks of this folder's tunes: a tune killed half way resumes from them
    store: TaskStore | None = None


def run_tasks(
    t: TuneRun, fn: Callable[[Any], Any], tasks: Sequence[Any], desc: str, stage: str, failed: Callable[[Any, str], Any],
) -> dict[Hashable, Any]:
    """Run ``tasks`` on the runner with a progress bar; lost tasks become ``failed(task, error)``.

    A task whose identical twin already finished in this folder (``t.store``: a tune killed half way)
    is not run again: its kept result is used, and only the tasks run now are charged to ``stage``.
    """
    t0 = time.perf_counter()
    kept = {task.key: t.store.load(task) for task in tasks} if t.store is not None else {}
    out: dict[Hashable, Any] = {k: r for k, r in kept.items() if r is not None}
    todo = [task for task in tasks if task.key not in out]
    by_key = {task.key: task for task in todo}
    ran: list[Any] = []
    with tqdm(total=len(todo), desc=tagged(desc), unit="run", mininterval=0.5, leave=False) as bar:
        shown = _StepsShown(bar, desc)
        for item in t.runner.map_unordered(fn, todo, key=lambda task: task.key, on_progress=shown):
            res = failed(item.task, item.error) if isinstance(item, TaskLost) else item
            out[res.key] = res
            ran.append(res)
            if t.store is not None:
                t.store.save(by_key[res.key], res)
            bar.update(1)
    if len(todo) < len(tasks):
        logger.info("%s: %d of %d task(s) finished before (kept in %s), not run again", desc,
                    len(tasks) - len(todo), len(tasks), t.store.folder if t.store else "")
    t.misc.charge(stage, sum(r.seconds for r in ran), sum(r.examples for r in ran), time.perf_counter() - t0)
    return out


class _StepsShown:
    """Shows the running tasks' steps (``done/total``) on the stage's bar, and in the log at most
    every :data:`STEPS_LOG_EVERY_S` seconds (a long sweep repeat otherwise shows nothing for minutes)."""

    def __init__(self, bar: Any, desc: str) -> None:
        self.bar, self.desc, self.logged = bar, desc, time.monotonic()

    def __call__(self, progress: Mapping[Hashable, tuple[int, int]]) -> None:
        if not progress:
            self.bar.set_postfix_str("", refresh=False)
            return
        done, total = sum(d for d, _ in progress.values()), sum(n for _, n in progress.values())
        self.bar.set_postfix_str(f"steps {done}/{total} in {len(progress)} running", refresh=False)
        now = time.monotonic()
        if now - self.logged >= STEPS_LOG_EVERY_S:
            self.logged = now
            logger.info("%s: %d of %d steps done in the %d running task(s) that report them", self.desc, done,
                        total, len(progress))


def last_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[-1] if (text or "").strip() else "unknown error"
