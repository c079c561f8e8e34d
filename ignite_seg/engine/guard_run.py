"""The recipe check's worker task: a short run of a final recipe, its held-out loss before and after.

:func:`run_guard` is module-level and takes one picklable :class:`GuardTask`, like the tasks of
:mod:`ignite_seg.engine.sweeps` (whose recipe building it reuses): it builds the recipe from its loader
specs, trains on the training set less the held-out slice with the recipe's optimizer, batch size and
schedule — its shape compressed into ``steps`` optimizer steps (:func:`compressed`), held at its peak
from the step it peaks (:func:`guard_lrs`) — and measures the loss on the held-out slice before and after. It writes no file and never raises for the user's code.
:mod:`ignite_seg.tuning.guard` decides what the losses mean.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Hashable

import numpy as np
from ignite.engine import Engine, Events

from ..config.hyperparameters import FixedHyperparameters
from .handlers import DivergenceStop
from .schedules import simulate_lrs
from .sweeps import RecipeSpec, final_recipe_trainer
from .task_timing import recorded

__all__ = ["GuardTask", "GuardResult", "compressed", "run_guard"]


@dataclass(frozen=True)
class GuardTask:
    """One short run of ``hparams`` (its schedule compressed into ``steps`` steps)."""

    key: Hashable
    recipe: RecipeSpec
    hparams: FixedHyperparameters
    seed: int
    steps: int
    device_index: int = 0


@dataclass
class GuardResult:
    """Held-out loss before and after one short run."""

    key: Hashable
    status: str  # "completed" | "diverged" | "failed"
    start_loss: float = math.nan
    end_loss: float = math.nan
    iterations: int = 0
    seconds: float = 0.0
    examples: int = 0
    error: str | None = None


def compressed(hp: FixedHyperparameters) -> FixedHyperparameters:
    """``hp`` as one epoch: the cycles and the warmup as fractions of the run, so that the schedule
    built with ``iters_per_epoch = steps`` has the trial's shape in ``steps`` steps."""
    return dataclasses.replace(hp, epochs=1, cycle_size_epochs=hp.cycle_size_epochs / hp.epochs,
                               warmup_epochs=hp.warmup_epochs / hp.epochs)


def guard_lrs(hp: FixedHyperparameters, steps: int) -> np.ndarray:
    """The LR of each of a check's ``steps``: the trial's schedule compressed into them, held at its peak
    from the first step it reaches it. A trial spends long stretches near its peak; a network that learns
    at first and then dies there (ignite-simple's fashion_mnist CNN at lr 0.2-0.39: back to chance after
    1.5 epochs) passed a check that only touched the peak on the way up and down.

    Example:
        >>> hp = FixedHyperparameters(lr_start=0.1, lr_end=1.0, batch_size=8, cycle_size_epochs=4, epochs=4)
        >>> [round(float(v), 2) for v in guard_lrs(hp, 8)]  # triangular: up over half the steps, then held
        [0.1, 0.32, 0.55, 0.78, 1.0, 1.0, 1.0, 1.0]
    """
    lrs = simulate_lrs(compressed(hp), steps)
    peak = int(np.argmax(lrs))
    lrs[peak:] = lrs[peak]
    return lrs


def run_guard(task: GuardTask) -> GuardResult:
    """One short run of the recipe (a worker task): held-out loss at the start and at the end."""
    result = GuardResult(task.key, "failed")
    with recorded(result):
        hp = task.hparams
        prep, batches, optimizer, engine = final_recipe_trainer(task.recipe, hp, task.seed, task.device_index)
        result.start_loss = float(prep.scorer.measure(prep.model, prep.holdout)["loss"])
        lrs = guard_lrs(hp, task.steps)

        def set_lr(engine: Engine) -> None:
            for group in optimizer.param_groups:
                group["lr"] = float(lrs[min(engine.state.iteration, lrs.size) - 1])

        engine.add_event_handler(Events.ITERATION_STARTED, set_lr)
        stop = DivergenceStop()
        stop.attach(engine)
        state = engine.run(batches, max_iters=task.steps)
        result.iterations = int(state.iteration)
        result.examples = batches.examples(state.iteration)
        result.end_loss = math.nan if stop.diverged_at is not None else float(
            prep.scorer.measure(prep.model, prep.holdout)["loss"])
        result.status = "completed" if math.isfinite(result.end_loss) else "diverged"
    return result
