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

**The floor at the best constant's loss** (session 20). Where the perf is a function of the loss (a regression's
``inv-loss``), learning the offset raises it, and the perf test cannot fire: the adding problem's LSTM (MSE)
sat at the loss of predicting the targets' mean from lr 0.001 to its divergence near 2, and the range went to
the fall onto that floor (0.0002-0.0013, the settled rule), where AdamW trained to 0.870 in 15 epochs; peaks
0.004-0.8 train it to 0.994-0.9998 (bench/RESULTS.md, session 20). So the sweep also measures the held-out loss
of the best constant output (:func:`~ignite_seg.engine.constant_output.constant_output_loss`), and a floor whose
lowest loss is less than :data:`~ignite_seg.engine.constant_output.CONSTANT_TOL` below that level is trivial whatever the perf says. Such a floor
may run into the divergence (the network never learned more within the sweep; the settled rule's "learned
within the sweep" does not hold): it then ends at the first repeat's divergence.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..engine.constant_output import CONSTANT_TOL, at_constant
from .lr_valley import MIN_POINTS, VALLEY_BOTTOM_TOL, start_and_minimum

__all__ = ["PLATEAU_DECADES", "PLATEAU_PERF_TOL", "CONSTANT_TOL", "Plateau", "find_plateau", "moved_to_plateau"]

#: The floor must be at least this wide (decades of LR) to be a plateau.
PLATEAU_DECADES = 0.8
#: The held-out perf on the floor "did not improve" when its mean there exceeds its starting level by at
#: most this fraction of that level (binary chance 0.47 -> 0.52: a constant output scores either class's
#: share of the held-out slice, and the noise of a 512-item slice is ~0.02).
PLATEAU_PERF_TOL = 0.10


class Plateau(NamedTuple):
    """A floor the loss sat on, in ``x = log10 lr``, and the held-out perf at the sweep's start and on it (NaN:
    not measured); ``constant_loss``: the best constant output's loss when the floor was judged trivial by it."""

    x_lo: float
    x_hi: float
    perf_start: float
    perf_on: float
    constant_loss: float | None = None


def find_plateau(x: np.ndarray, loss: np.ndarray, perf: np.ndarray | None, window: int, *,
                 constant_loss: float | None = None, x_diverged: float | None = None) -> Plateau | None:
    """The trivial floor of ``loss`` (smoothed, against ``x = log10 lr``, finite), or None when the rule does not fire.

    ``perf`` is the smoothed mean held-out perf on the same points (higher is better); ``constant_loss`` the
    held-out loss of the best constant output (None or NaN: unknown); ``x_diverged`` the ``x`` of the first
    repeat's divergence when the usable points end in one (None: they run to the sweep's end). Without a
    perf finite on the floor or a constant loss, the rule does not fire.

    Example:
        >>> x = np.linspace(-4, -1, 151)
        >>> loss = 0.25 + 0.75 / (1 + np.exp((x + 3.4) / 0.1)) + np.where(x > -2, (x + 2) ** 2, 0.0)
        >>> p = find_plateau(x, loss, np.full(x.size, 0.5), 5)
        >>> round(p.x_hi, 2)
        -1.74
        >>> flat = 0.25 + 0.75 / (1 + np.exp((x + 3.4) / 0.1))  # the floor runs into the divergence at x = -1
        >>> find_plateau(x, flat, np.linspace(0.3, 0.9, x.size), 5, constant_loss=0.25, x_diverged=-1.2).x_hi
        -1.2
    """
    if x.size < MIN_POINTS:
        return None
    first, k_min = start_and_minimum(loss, window)
    level = loss[k_min] + VALLEY_BOTTOM_TOL * (first - loss[k_min])
    lo = hi = k_min
    while lo > 0 and loss[lo - 1] <= level:
        lo -= 1
    while hi + 1 < loss.size and loss[hi + 1] <= level:
        hi += 1
    trivial = at_constant(float(loss[k_min]), constant_loss)
    x_hi = float(x[hi])
    if hi == loss.size - 1:  # a floor that runs to the last usable LR (nothing rose after it)...
        if not (trivial and x_diverged is not None):
            return None  # ... is the settled rule's case (a network that learned within the sweep)
        x_hi = min(x_hi, x_diverged)  # ... or, trivial, ran into the divergence: it ends below the first one
    if x_hi - x[lo] < PLATEAU_DECADES:
        return None  # no floor
    perf_start, perf_on = math.nan, math.nan
    if perf is not None and np.isfinite(perf[lo : hi + 1]).all():
        perf_start, perf_on = float(np.mean(perf[: max(1, window)])), float(np.mean(perf[lo : hi + 1]))
    if trivial and constant_loss is not None:
        return Plateau(float(x[lo]), x_hi, perf_start, perf_on, float(constant_loss))
    if not (math.isfinite(perf_start) and math.isfinite(perf_on)):
        return None
    if perf_on - perf_start > PLATEAU_PERF_TOL * abs(perf_start):
        return None  # the held-out perf improved: the network learned something on the way down
    return Plateau(float(x[lo]), x_hi, perf_start, perf_on)


def moved_to_plateau(plateau_lrs: tuple[float, float] | None, plateau_perfs: tuple[float, float] | None,
                     constant_loss: float | None = None) -> str:
    """The log's clause saying that the plateau rule moved the range ("" when it did not), and why: the held-out
    perf did not improve, or (``constant_loss``) the loss stayed at the best constant output's.

    Example:
        >>> moved_to_plateau((0.00048, 0.0051), (0.467, 0.497))[:44]
        "; moved to the top of the loss's floor (lr 0"
        >>> moved_to_plateau((0.001, 1.9), (0.45, 0.84), 0.167)[-63:]
        " stayed at the best constant output's (0.167): the plateau rule"
    """
    if plateau_lrs is None or plateau_perfs is None:
        return ""
    (lo, hi), (p0, p_on) = plateau_lrs, plateau_perfs
    why = (f"the held-out loss stayed at the best constant output's ({constant_loss:.3g})" if constant_loss is not None
           else f"the held-out perf did not improve ({p0:.3g} at the start, {p_on:.3g} on the floor)")
    return f"; moved to the top of the loss's floor (lr {lo:.3g} -> {hi:.3g}), where {why}: the plateau rule"
