"""What the tuner's steps share: the tune's context, the seeds of its tasks and running them.

Every parallel piece of a tune (sweep repeats, candidate runs) is a task of :mod:`ignite_seg.engine.sweeps`
run on the caller's :class:`~ignite_seg.runtime.tasks.TaskRunner` through :func:`run_tasks`, which
charges the compute to a stage of ``misc.json``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..config.hyperparameters import HyperparameterSettings
from ..engine.sweeps import RecipeSpec
from ..runtime.tasks import TaskLost, TaskRunner
from ..storage.schemas import MiscLog

__all__ = ["derive_seed", "TuneRun", "run_tasks", "last_line"]


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


def run_tasks(
    t: TuneRun, fn: Callable[[Any], Any], tasks: Sequence[Any], desc: str, stage: str, failed: Callable[[Any, str], Any],
) -> dict[Hashable, Any]:
    """Run ``tasks`` on the runner with a progress bar; lost tasks become ``failed(task, error)``."""
    t0 = time.perf_counter()
    out: dict[Hashable, Any] = {}
    with tqdm(total=len(tasks), desc=desc, unit="run", mininterval=0.5, leave=False) as bar:
        for item in t.runner.map_unordered(fn, tasks, key=lambda task: task.key):
            res = failed(item.task, item.error) if isinstance(item, TaskLost) else item
            out[res.key] = res
            bar.update(1)
    t.misc.charge(stage, sum(r.seconds for r in out.values()), sum(r.examples for r in out.values()),
                  time.perf_counter() - t0)
    return out


def last_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[-1] if (text or "").strip() else "unknown error"
