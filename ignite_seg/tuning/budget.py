"""What a tune costs: the size of its sweeps and batch-size runs, and the held-out curve's sampling.

Pure functions of the settings and the dataset size (issue 25): a sweep lasts ``lr_sweep_len``
epochs but sees at most ``lr_sweep_max_examples`` examples (never fewer than ``lr_sweep_min_iters``
steps; a cap in examples, not steps, so a rescan at a smaller batch takes proportionally more
steps: a range test's LRs depend on the progress made at each LR), its held-out slice is measured at most
``lr_holdout_evals`` times, and a batch-size candidate's first run sees ``batch_sweep_len`` epochs
but at most ``batch_sweep_max_examples`` examples, so tuning stops growing with the dataset once a
dataset is large enough to hit the caps. The held-out values between two measured points are
interpolated linearly in log LR (:func:`fill_sampled`), so the curves the range rule reads keep
the length of the LR grid and their slope between samples.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..config.hyperparameters import HyperparameterSettings

__all__ = ["SweepPlan", "sweep_plan", "batch_budget_epochs", "holdout_measured_at", "fill_sampled"]


class SweepPlan(NamedTuple):
    """One LR sweep repeat's size: its iterations and how often the held-out slice is measured."""

    iterations: int
    #: the held-out slice is measured after iteration 1, every ``holdout_every`` iterations and at the end
    holdout_every: int
    #: True when ``lr_sweep_max_examples`` cut the sweep short of ``lr_sweep_len`` epochs
    capped: bool

    @property
    def holdout_evals(self) -> int:
        """Held-out measurements of a repeat that runs to the end."""
        return int(holdout_measured_at(self.iterations, self.holdout_every).sum())


def sweep_plan(s: HyperparameterSettings, n_fit: int, batch_size: int) -> SweepPlan:
    """The iterations of a sweep over ``n_fit`` items at ``batch_size``, and its held-out sampling.

    Example:
        >>> from ignite_seg.config.presets import get_preset
        >>> sweep_plan(get_preset("fast"), 18_000, 16)
        SweepPlan(iterations=500, holdout_every=17, capped=True)
        >>> sweep_plan(get_preset("fast"), 18_000, 8).iterations  # the same examples at batch 8
        1000
    """
    iters_per_epoch = max(1, math.ceil(n_fit / batch_size))
    by_epochs = max(s.lr_sweep_min_iters, int(round(s.lr_sweep_len * iters_per_epoch)))
    cap = s.lr_sweep_max_examples
    iterations = by_epochs if cap is None else min(by_epochs, max(math.ceil(cap / batch_size), s.lr_sweep_min_iters))
    evals = s.lr_holdout_evals
    every = 1 if evals is None else max(1, math.ceil((iterations - 1) / max(evals - 1, 1)))
    return SweepPlan(iterations, every, iterations < by_epochs)


def batch_budget_epochs(s: HyperparameterSettings, n_fit: int) -> float:
    """The first rung's budget of a batch-size candidate, in epochs of ``n_fit`` items:
    ``batch_sweep_len``, or ``batch_sweep_max_examples`` examples when that is fewer. Every
    candidate gets the same number of examples (never the same steps: that would favour big batches)."""
    cap = s.batch_sweep_max_examples
    return float(s.batch_sweep_len) if cap is None else min(float(s.batch_sweep_len), cap / max(n_fit, 1))


def holdout_measured_at(iterations: int, every: int) -> np.ndarray:
    """Which iterations (0-based positions) of a sweep of ``iterations`` measure the held-out slice:
    the first, every ``every``-th after it, and the last."""
    measured = np.zeros(iterations, dtype=bool)
    measured[::max(1, every)] = True
    if iterations:
        measured[-1] = True
    return measured


def fill_sampled(values: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Each row of ``values`` (R, P) with its unmeasured points interpolated linearly between the
    measured points around them (by position: on a geometric LR grid, linearly in log LR).

    ``measured`` (R, P) is 1 where a value was measured, 0 where it was not, NaN past a row's end.
    A measured NaN (a model that returned NaN) stays NaN; an unmeasured point past the row's last
    finite measurement stays NaN (nothing to interpolate to).
    """
    out = np.array(values, dtype=np.float64, copy=True)
    for row, mask in zip(out, np.asarray(measured)):
        gaps = mask == 0
        known = np.flatnonzero((mask == 1) & np.isfinite(row))
        if not gaps.any() or known.size == 0:
            continue
        pos = np.flatnonzero(gaps)
        inside = (pos > known[0]) & (pos < known[-1])
        row[pos] = np.nan
        row[pos[inside]] = np.interp(pos[inside], known, row[known])
    return out
