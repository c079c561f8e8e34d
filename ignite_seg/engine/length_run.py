"""The length check's worker task: a final recipe trained its full length, the held-out slice scored each epoch.

:func:`run_length` is module-level and takes one picklable :class:`LengthTask`, like the tasks of
:mod:`ignite_seg.engine.sweeps` (whose recipe building it reuses): it trains on the training set less
the task's held-out slice exactly as a trial trains (the recipe's optimizer, batch size, schedule with
its warmup, clipping, AMP and EMA, :func:`~ignite_seg.engine.schedules.build_scheduler` over the trial's
epochs) and measures loss and perf on the slice at every epoch's end. :class:`StopWhenFallen` ends the
run once the perf has clearly fallen from its best (the rest of the run would only confirm it). It
writes no file and never raises for the user's code; :mod:`ignite_seg.tuning.length` decides what the
curves mean.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable

import numpy as np
from ignite.engine import Engine, Events

from ..config.hyperparameters import FixedHyperparameters
from ..smoothing import smooth_epochs
from .ema import attach_ema
from .handlers import DivergenceStop, report_steps
from .schedules import build_scheduler
from .sweeps import RecipeSpec, final_recipe_trainer
from .task_timing import recorded

__all__ = ["LengthTask", "LengthResult", "StopWhenFallen", "run_length"]


@dataclass(frozen=True)
class LengthTask:
    """One full-length run of ``hparams`` with ``recipe.holdout`` held out and scored each epoch.

    The run ends early once its smoothed held-out perf has stayed more than ``stop_rel_tol`` x |best| +
    ``stop_steps`` of the perf's smallest step on the slice (:meth:`~ignite_seg.engine.scoring.Scorer.perf_grain`:
    one item, token or label of an accuracy; 0 for a continuous perf) below its best for ``stop_patience``
    epochs (:class:`StopWhenFallen`).
    """

    key: Hashable
    recipe: RecipeSpec
    hparams: FixedHyperparameters
    seed: int
    stop_rel_tol: float
    stop_steps: float
    stop_patience: int
    device_index: int = 0


@dataclass
class LengthResult:
    """Held-out loss and perf at the end of each epoch run (``arrays``: ``losses``, ``perfs``); ``abs_tol``: the
    tolerance's absolute part (``stop_steps`` x the perf's grain on the slice)."""

    key: Hashable
    status: str  # "completed" | "stopped" (fell clearly) | "diverged" | "failed"
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    epochs: int = 0
    abs_tol: float = 0.0
    seconds: float = 0.0
    examples: int = 0
    error: str | None = None

    @property
    def usable(self) -> bool:
        """Whether the run scored its slice after at least one epoch and ended as a run may: completed, or stopped
        once its perf had clearly fallen (not diverged or failed)."""
        return self.status in ("completed", "stopped") and self.epochs > 0

    @property
    def end(self) -> float:
        """The held-out perf at the run's end on the 3-epoch mean the length check reads
        (:func:`~ignite_seg.smoothing.smooth_epochs`: the mean of its last two epochs); NaN when not :attr:`usable`.

        Example:
            >>> LengthResult(0, "completed", {"perfs": np.array([0.7, 0.76, 0.75])}, 3).end
            0.755
            >>> math.isnan(LengthResult(0, "diverged", {"perfs": np.array([0.7])}, 1).end)
            True
        """
        if not self.usable:
            return math.nan
        return float(smooth_epochs(np.asarray(self.arrays["perfs"]))[-1])


class StopWhenFallen:
    """Terminate the trainer once the held-out perf, on a 3-epoch moving mean
    (:func:`~ignite_seg.smoothing.smooth_epochs`), has been more than ``rel_tol`` x |best| + ``abs_tol``
    below its best for ``patience`` epochs in a row.

    ``perfs`` is the list the caller appends to at each epoch end (before this handler runs).

    Example:
        >>> stop = StopWhenFallen([], rel_tol=0.02, abs_tol=0.03, patience=2)
        >>> [stop.fallen(p) for p in ([0.5, 0.9, 0.9], [0.5, 0.9, 0.9, 0.7, 0.6, 0.6])]
        [False, True]
    """

    def __init__(self, perfs: list[float], rel_tol: float, abs_tol: float, patience: int) -> None:
        self.perfs, self.rel_tol, self.abs_tol, self.patience = perfs, rel_tol, abs_tol, patience

    def fallen(self, perfs: list[float]) -> bool:
        if len(perfs) < self.patience + 2:
            return False
        sm = smooth_epochs(np.asarray(perfs))
        best = int(np.argmax(sm))
        floor = sm[best] - (self.rel_tol * abs(sm[best]) + self.abs_tol)
        return bool(np.all(sm[-self.patience:] < floor) and best < sm.size - self.patience)

    def __call__(self, engine: Engine) -> None:
        if self.fallen(self.perfs):
            engine.terminate()


def run_length(task: LengthTask) -> LengthResult:
    """One full-length run of the recipe (a worker task): held-out loss and perf after every epoch."""
    result = LengthResult(task.key, "failed")
    with recorded(result):
        hp = task.hparams
        prep, batches, optimizer, engine = final_recipe_trainer(task.recipe, hp, task.seed, task.device_index)
        engine.add_event_handler(Events.ITERATION_STARTED, build_scheduler(hp, len(batches), optimizer))
        eval_model = attach_ema(engine, prep.model, hp.ema_decay)  # scored as the trials are
        diverged = DivergenceStop()
        diverged.attach(engine)
        losses: list[float] = []
        perfs: list[float] = []
        stop = StopWhenFallen(perfs, task.stop_rel_tol, 0.0, task.stop_patience)  # its abs_tol set by the first score

        def score(engine: Engine) -> None:
            scores = prep.scorer.measure(eval_model, prep.holdout)
            losses.append(float(scores["loss"]))
            perfs.append(float(scores["perf"]))
            if len(perfs) == 1:  # the grain is the slice's, known once it has been scored
                stop.abs_tol = result.abs_tol = task.stop_steps * prep.scorer.perf_grain()
            if not (math.isfinite(losses[-1]) and math.isfinite(perfs[-1])):
                engine.terminate()

        engine.add_event_handler(Events.EPOCH_COMPLETED, score)
        engine.add_event_handler(Events.EPOCH_COMPLETED, stop)
        report_steps(engine, hp.epochs * len(batches))
        state = engine.run(batches, max_epochs=hp.epochs)
        result.arrays = {"losses": np.asarray(losses), "perfs": np.asarray(perfs)}
        result.epochs = len(perfs)
        result.examples = batches.examples(state.iteration)
        finite = bool(perfs) and math.isfinite(perfs[-1]) and math.isfinite(losses[-1])
        if diverged.diverged_at is not None or not finite:
            result.status = "diverged"
        else:
            result.status = "stopped" if len(perfs) < hp.epochs else "completed"
    return result
