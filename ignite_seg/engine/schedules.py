"""The learning-rate schedule of a trial, built from ignite's own schedulers.

How the recipe's ``[lr_start, lr_end]`` maps onto each ``schedule`` (``N`` optimizer steps after the
warmup, step ``k`` counted from 0):

* ``triangular`` (default): ``LinearCyclicalScheduler``, ``lr_start -> lr_end -> lr_start`` every
  ``cycle_size_epochs`` epochs;
* ``one-cycle``: ``PiecewiseLinear``, up ``lr_start -> lr_end`` over the first 30% of the steps,
  then down to ``lr_start / 100`` at the last step;
* ``cosine``: ``CosineAnnealingScheduler``, ``lr_end + (lr_start - lr_end) (1 - cos(pi k / N)) / 2``
  (from ``lr_end`` down towards ``lr_start``);
* ``inv-sqrt``: ``LRScheduler`` over a torch ``LambdaLR``, ``lr_end / sqrt(1 + c k)`` with ``c`` such
  that the LR reaches ``lr_start`` after ``N`` steps;
* ``constant``: ``lr_end`` throughout;
* ``noam`` (the Transformer's, peak and warmup): ``lr = lr_end * min(k / W, sqrt(W / k))`` at step
  ``k = 1, 2, ...``, linear up to the peak ``lr_end`` at step ``W`` (the warmup), then ``1 / sqrt``
  down; ``W`` is ``warmup_steps`` or ``warmup_epochs`` in steps, and the schedule is its own warmup
  (no linear warmup is added). ``lr_start`` is not used.

Warmup (``warmup_epochs > 0`` or ``warmup_steps > 0``, ``W`` steps, at least 2): ignite's ``create_lr_scheduler_with_warmup``,
linear from 0 to the schedule's first value over steps ``0 .. W - 1``
(``lr = first * k / (W - 1)``); the schedule then runs its ``N`` steps from step ``W - 1`` on.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from ignite.handlers import (
    CosineAnnealingScheduler,
    LinearCyclicalScheduler,
    LRScheduler,
    ParamScheduler,
    PiecewiseLinear,
    create_lr_scheduler_with_warmup,
)
from torch.optim.lr_scheduler import LambdaLR

from ..config.hyperparameters import FixedHyperparameters

__all__ = ["ONE_CYCLE_PEAK", "ONE_CYCLE_FINAL_DIV", "build_scheduler", "warmup_steps", "simulate_lrs"]

#: Fraction of the steps a one-cycle schedule spends going up to ``lr_end``.
ONE_CYCLE_PEAK = 0.3
#: A one-cycle schedule ends at ``lr_start`` divided by this.
ONE_CYCLE_FINAL_DIV = 100.0


def warmup_steps(hp: FixedHyperparameters, iters_per_epoch: int) -> int:
    """Optimizer steps of the warmup: 0 without one, else at least 2 and at most all steps but 2."""
    total = hp.epochs * iters_per_epoch
    if (hp.warmup_epochs <= 0 and hp.warmup_steps <= 0) or total < 4:
        return 0
    return min(max(2, _warmup_length(hp, iters_per_epoch)), total - 2)


def _warmup_length(hp: FixedHyperparameters, iters_per_epoch: int) -> int:
    """The warmup as the recipe gives it, in optimizer steps: ``warmup_steps``, else ``warmup_epochs`` in steps."""
    return hp.warmup_steps if hp.warmup_steps > 0 else int(round(hp.warmup_epochs * iters_per_epoch))


def build_scheduler(hp: FixedHyperparameters, iters_per_epoch: int, optimizer: torch.optim.Optimizer) -> ParamScheduler:
    """The scheduler of a trial, to attach on ``Events.ITERATION_STARTED`` (see the module doc)."""
    if hp.schedule == "noam":  # its own warmup
        return _noam(hp, iters_per_epoch, optimizer)
    warmup = warmup_steps(hp, iters_per_epoch)
    steps = hp.epochs * iters_per_epoch - max(warmup - 1, 0)
    scheduler = _SCHEDULES[hp.schedule](hp, iters_per_epoch, steps, optimizer)
    if not warmup:
        return scheduler
    first = scheduler.get_param()  # the schedule's own first value (float-equal, so no step repeats it)
    return create_lr_scheduler_with_warmup(scheduler, warmup_start_value=0.0, warmup_duration=warmup,
                                           warmup_end_value=float(first))  # type: ignore[arg-type]


def simulate_lrs(hp: FixedHyperparameters, iters_per_epoch: int) -> np.ndarray:
    """The LR of every optimizer step of a trial, from :func:`build_scheduler` on a dummy optimizer."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=hp.lr_start)
    scheduler = build_scheduler(hp, iters_per_epoch, optimizer)
    lrs = np.empty(hp.epochs * iters_per_epoch)
    for k in range(lrs.size):
        scheduler(None)
        lrs[k] = optimizer.param_groups[0]["lr"]
    return lrs


def _triangular(hp: FixedHyperparameters, ipe: int, steps: int, opt: torch.optim.Optimizer) -> ParamScheduler:
    cycle = max(2, int(round(hp.cycle_size_epochs * ipe)))
    return LinearCyclicalScheduler(opt, "lr", start_value=hp.lr_start, end_value=hp.lr_end, cycle_size=cycle)


def _one_cycle(hp: FixedHyperparameters, ipe: int, steps: int, opt: torch.optim.Optimizer) -> ParamScheduler:
    last = max(steps - 1, 2)
    peak = min(max(1, int(round(ONE_CYCLE_PEAK * last))), last - 1)
    milestones = [(0, hp.lr_start), (peak, hp.lr_end), (last, hp.lr_start / ONE_CYCLE_FINAL_DIV)]
    return PiecewiseLinear(opt, "lr", milestones_values=milestones)


def _cosine(hp: FixedHyperparameters, ipe: int, steps: int, opt: torch.optim.Optimizer) -> ParamScheduler:
    return CosineAnnealingScheduler(opt, "lr", start_value=hp.lr_end, end_value=hp.lr_start,
                                    cycle_size=max(steps, 2))


def _inv_sqrt(hp: FixedHyperparameters, ipe: int, steps: int, opt: torch.optim.Optimizer) -> ParamScheduler:
    c = ((hp.lr_end / hp.lr_start) ** 2 - 1) / max(steps, 1)
    for group in opt.param_groups:
        group["lr"] = hp.lr_end
    return LRScheduler(LambdaLR(opt, lambda k: 1 / math.sqrt(1 + c * k)))


def _constant(hp: FixedHyperparameters, ipe: int, steps: int, opt: torch.optim.Optimizer) -> ParamScheduler:
    return PiecewiseLinear(opt, "lr", milestones_values=[(0, hp.lr_end), (1, hp.lr_end)])


def _noam(hp: FixedHyperparameters, ipe: int, opt: torch.optim.Optimizer) -> ParamScheduler:
    """``lr_end * min(k / W, sqrt(W / k))`` at the ``k``-th step (``k`` from 1; ``LambdaLR`` counts from 0)."""
    w = max(1, _warmup_length(hp, ipe))
    for group in opt.param_groups:
        group["lr"] = hp.lr_end
    return LRScheduler(LambdaLR(opt, lambda k: min((k + 1) / w, math.sqrt(w / (k + 1)))))


_SCHEDULES: dict[str, Callable[[FixedHyperparameters, int, int, torch.optim.Optimizer], ParamScheduler]] = {
    "triangular": _triangular,
    "one-cycle": _one_cycle,
    "cosine": _cosine,
    "inv-sqrt": _inv_sqrt,
    "constant": _constant,
}
