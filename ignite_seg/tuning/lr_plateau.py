"""The plateau rule of the LR range choice (pure numpy): a loss that sits on a trivial floor.

Some sweeps' loss falls steeply, then lies flat on a floor for about a decade before it diverges, while
the held-out perf stays where it started: the network learned only its output offset (an MSE on 0/1
targets at 0.25, the loss of predicting the constant 0.5), and the real learning needs more steps than the
sweep gives it. The steepest stretch is then the fall to that trivial floor, and a range there trains
slowly: ignite-simple's ``gaussian_blobs_delayed_class`` RNN got [0.00027, 0.00087] and val perf 0.82,
where its author says it needs lr >= 0.02 (bench/RESULTS.md, session 11). Every LR on the floor is as
stable as the next, and a larger one gets further in the steps a trial has, so :func:`find_plateau` moves
the range up the floor to its top: the last LR of the valley's bottom (the loss within
:data:`~ignite_seg.tuning.lr_valley.VALLEY_BOTTOM_TOL` of the improvement above its minimum), the loss's own
mark of "still as stable as the floor", below the divergence.

It fires only when all of these hold, so a sweep where the network learned (the held-out perf rose: the
mnist CNN that learned within its sweep) or an ordinary curve (a valley, not a decade-long floor) keeps
the ordinary choice:

- the floor (the valley's bottom: the contiguous stretch around the loss minimum within
  ``VALLEY_BOTTOM_TOL`` of the improvement) is at least :data:`PLATEAU_DECADES` wide;
- the loss leaves the floor again before the last usable LR (it rises towards a divergence; a floor that
  runs to the sweep's end is the settled-window rule's case);
- the held-out perf, averaged over the floor, is no better than at the sweep's start by more than
  :data:`PLATEAU_PERF_TOL` of its starting level.

The thresholds come from ~30 distinct stored sweeps of real runs (bench/RESULTS.md, session 11): the RNN's floor
was 1.02 and 1.20 decades wide (two sweeps), every other floor that ended before the last usable LR at most
0.56 but one (2.99, whose perf rose from 0.51 to 1.0); the RNN's perf moved by -5% and +7% (which constant the
network predicted: the slice's two class shares), the real learners' by +5% to +1470%, so the width decides
those with a small perf gain and the perf the wide floor of a network that learned.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .lr_valley import MIN_POINTS, VALLEY_BOTTOM_TOL, start_and_minimum

__all__ = ["PLATEAU_DECADES", "PLATEAU_PERF_TOL", "Plateau", "find_plateau", "moved_to_plateau"]

#: The floor must be at least this wide (decades of LR) to be a plateau.
PLATEAU_DECADES = 0.8
#: The held-out perf on the floor "did not improve" when its mean there exceeds its starting level by at
#: most this fraction of that level (binary chance 0.47 -> 0.52: a constant output scores either class's
#: share of the held-out slice, and the noise of a 512-item slice is ~0.02).
PLATEAU_PERF_TOL = 0.10


class Plateau(NamedTuple):
    """A floor the loss sat on, in ``x = log10 lr``, and the held-out perf at the sweep's start and on it."""

    x_lo: float
    x_hi: float
    perf_start: float
    perf_on: float


def find_plateau(x: np.ndarray, loss: np.ndarray, perf: np.ndarray | None, window: int) -> Plateau | None:
    """The trivial floor of ``loss`` (smoothed, against ``x = log10 lr``, finite), or None when the rule does not fire.

    ``perf`` is the smoothed mean held-out perf on the same points (higher is better); without it, or where
    it is not finite on the floor, the rule does not fire.

    Example:
        >>> x = np.linspace(-4, -1, 151)
        >>> loss = 0.25 + 0.75 / (1 + np.exp((x + 3.4) / 0.1)) + np.where(x > -2, (x + 2) ** 2, 0.0)
        >>> p = find_plateau(x, loss, np.full(x.size, 0.5), 5)
        >>> round(p.x_hi, 2)
        -1.74
    """
    if perf is None or x.size < MIN_POINTS:
        return None
    first, k_min = start_and_minimum(loss, window)
    level = loss[k_min] + VALLEY_BOTTOM_TOL * (first - loss[k_min])
    lo = hi = k_min
    while lo > 0 and loss[lo - 1] <= level:
        lo -= 1
    while hi + 1 < loss.size and loss[hi + 1] <= level:
        hi += 1
    if hi == loss.size - 1 or x[hi] - x[lo] < PLATEAU_DECADES:
        return None  # no floor, or one that runs to the last usable LR (nothing rose after it)
    on = perf[lo : hi + 1]
    perf_start = float(np.mean(perf[: max(1, window)]))
    if not (np.isfinite(on).all() and np.isfinite(perf_start)):
        return None
    perf_on = float(np.mean(on))
    if perf_on - perf_start > PLATEAU_PERF_TOL * abs(perf_start):
        return None  # the held-out perf improved: the network learned something on the way down
    return Plateau(float(x[lo]), float(x[hi]), perf_start, perf_on)


def moved_to_plateau(plateau_lrs: tuple[float, float] | None, plateau_perfs: tuple[float, float] | None) -> str:
    """The log's clause saying that the plateau rule moved the range ("" when it did not).

    Example:
        >>> moved_to_plateau((0.00048, 0.0051), (0.467, 0.497))[:44]
        "; moved to the top of the loss's floor (lr 0"
    """
    if plateau_lrs is None or plateau_perfs is None:
        return ""
    (lo, hi), (p0, p_on) = plateau_lrs, plateau_perfs
    return (f"; moved to the top of the loss's floor (lr {lo:.3g} -> {hi:.3g}), where the held-out perf did not "
            f"improve ({p0:.3g} at the start, {p_on:.3g} on the floor): the plateau rule")
