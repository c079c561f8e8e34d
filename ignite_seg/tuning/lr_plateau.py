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

**A schedule that holds its peak ends the range lower, at the floor's quiet top** (session 26). On such a floor the
held-out loss creeps up with the LR long before the divergence (the adding problem: 2% above the constant's loss by lr
0.005-0.03, 10-19% above it by lr 0.1-2, diverging at 2-4), and the floor's top is where the short sweep still
tolerates a rate, not where a whole run learns at it: a constant schedule at the top of the adding problem's floor
(peaks 0.5-5) trained to 0.72-0.79 against an untuned Adam's 0.87, and the grid's best constant peaks were 0.006-0.04
(0.9995); on the multiplication problem with raw targets (:mod:`bench.tq_plateau_tasks`) the top's centre 0.22
trained to the constant's level and the grid's best lay at 0.003-0.03. A decaying schedule leaves the top behind and
trains well from there (AdamW cosine on the adding problem: 0.997-0.9995). So :attr:`Plateau.x_quiet` is the last LR
above the floor's lowest point where the loss is still within :data:`CONSTANT_TOL` of the constant's (or of its
minimum, if higher), and :class:`~ignite_seg.tuning.lr_range.RangeRule`'s ``plateau_top="quiet"`` ends the range there
for the schedules of :data:`~ignite_seg.tuning.schedule.HELD_PEAK`, whose peak is then that top
(:func:`~ignite_seg.tuning.schedule.schedule_lrs`). A sweep whose loss never fell, on the constant's loss from its
start until it diverged, is such a floor too (:func:`flat_floor`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..engine.constant_output import CONSTANT_TOL, at_constant
from .lr_valley import MIN_POINTS, VALLEY_BOTTOM_TOL, start_and_minimum

__all__ = ["PLATEAU_DECADES", "PLATEAU_PERF_TOL", "CONSTANT_TOL", "Plateau", "find_plateau", "flat_floor",
           "moved_to_plateau"]

#: The floor must be at least this wide (decades of LR) to be a plateau.
PLATEAU_DECADES = 0.8
#: The held-out perf on the floor "did not improve" when its mean there exceeds its starting level by at
#: most this fraction of that level (binary chance 0.47 -> 0.52: a constant output scores either class's
#: share of the held-out slice, and the noise of a 512-item slice is ~0.02).
PLATEAU_PERF_TOL = 0.10


class Plateau(NamedTuple):
    """A floor the loss sat on, in ``x = log10 lr``, and the held-out perf at the sweep's start and on it (NaN:
    not measured); ``constant_loss``: the best constant output's loss when the floor was judged trivial by it, and
    ``x_quiet`` the top of the floor's quiet part then (the loss within :data:`CONSTANT_TOL` of that level)."""

    x_lo: float
    x_hi: float
    perf_start: float
    perf_on: float
    constant_loss: float | None = None
    x_quiet: float | None = None


def _quiet_top(loss: np.ndarray, start: int, hi: int, constant_loss: float) -> int:
    """The last index from ``start`` (the floor's lowest point) up to ``hi`` before ``loss`` first rises more than
    :data:`CONSTANT_TOL` of the constant's loss above that loss, or above ``loss[start]`` where that lies higher."""
    level = max(constant_loss, float(loss[start])) + CONSTANT_TOL * abs(constant_loss)
    top = start
    while top < hi and loss[top + 1] <= level:
        top += 1
    return top


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
        quiet = min(float(x[_quiet_top(loss, k_min, hi, constant_loss)]), x_hi)
        return Plateau(float(x[lo]), x_hi, perf_start, perf_on, float(constant_loss), quiet)
    if not (math.isfinite(perf_start) and math.isfinite(perf_on)):
        return None
    if perf_on - perf_start > PLATEAU_PERF_TOL * abs(perf_start):
        return None  # the held-out perf improved: the network learned something on the way down
    return Plateau(float(x[lo]), x_hi, perf_start, perf_on)


def flat_floor(x: np.ndarray, loss: np.ndarray, constant_loss: float | None,
               x_diverged: float | None) -> Plateau | None:
    """The trivial floor of a sweep whose ``loss`` (smoothed, against ``x = log10 lr``, finite) never fell by what the
    range rule needs (the caller's test): it sat at the best constant output's loss from the sweep's start until it
    diverged, or None when it did not.

    A network whose output starts at the targets' mean (standardised regression targets, balanced classes under
    cross-entropy) has no offset to learn, so a late learner's sweep shows no fall onto the floor, only the floor, and
    the range rule finds no improvement to choose on. Session 26 (bench/RESULTS.md): a multiplication problem's LSTM
    with standardised targets sat at the constant's loss from lr 1e-4 to its divergence, the tuner stopped with "the
    loss did not improve" while the untuned Adam 1e-3 trained to 0.54 and constant peaks 0.03-0.1 to 0.99. It is the
    plateau rule's floor with its fall below the sweep's start (or within it: an output that starts a little off the
    mean falls 1-2% onto the floor): it starts at the sweep's first LR and ends where the loss, past its lowest point,
    first rises more than :data:`CONSTANT_TOL` of the constant's above it (its quiet top, ``x_quiet`` too), below the
    first divergence; at least :data:`PLATEAU_DECADES` wide. Its lowest loss must be at the constant's
    (:func:`~ignite_seg.engine.constant_output.at_constant`). A sweep that never diverged is not one (its floor may go
    on: widen the sweep).

    Example:
        >>> x = np.linspace(-4, 1, 251)
        >>> flat = 1.0 + np.where(x > 0, x, 0.0)  # the constant's loss until it rises at lr 1, diverged at 3
        >>> flat_floor(x, flat, 1.0, x_diverged=0.5)[:2]
        (-4.0, 0.0)
        >>> flat_floor(x, flat, 1.0, x_diverged=None) is None, flat_floor(x, flat - 0.1, 1.0, 0.5) is None
        (True, True)
    """
    if x_diverged is None or constant_loss is None or not math.isfinite(constant_loss) or x.size < MIN_POINTS:
        return None
    k_min = int(np.argmin(loss))
    if not at_constant(float(loss[k_min]), constant_loss):
        return None  # it fell below the constant's loss: it learned something, not this floor
    x_hi = min(float(x[_quiet_top(loss, k_min, loss.size - 1, constant_loss)]), x_diverged)
    if x_hi - float(x[0]) < PLATEAU_DECADES:
        return None
    return Plateau(float(x[0]), x_hi, math.nan, math.nan, float(constant_loss), x_hi)


def moved_to_plateau(plateau_lrs: tuple[float, float] | None, plateau_perfs: tuple[float, float] | None,
                     constant_loss: float | None = None, quiet_lr: float | None = None) -> str:
    """The log's clause saying that the plateau rule moved the range ("" when it did not), and why: the held-out
    perf did not improve, or (``constant_loss``) the loss stayed at the best constant output's; ``quiet_lr``: the
    range ended at the floor's quiet top there instead (a schedule that holds its peak).

    Example:
        >>> moved_to_plateau((0.00048, 0.0051), (0.467, 0.497))[:44]
        "; moved to the top of the loss's floor (lr 0"
        >>> moved_to_plateau((0.001, 1.9), (0.45, 0.84), 0.167)[-63:]
        " stayed at the best constant output's (0.167): the plateau rule"
        >>> moved_to_plateau((0.001, 1.9), (0.45, 0.84), 0.167, quiet_lr=0.01)[:83]
        "; moved to the quiet top of the loss's floor (lr 0.001 -> 1.9; within 2% up to 0.01"
    """
    if plateau_lrs is None or plateau_perfs is None:
        return ""
    (lo, hi), (p0, p_on) = plateau_lrs, plateau_perfs
    why = (f"the held-out loss stayed at the best constant output's ({constant_loss:.3g})" if constant_loss is not None
           else f"the held-out perf did not improve ({p0:.3g} at the start, {p_on:.3g} on the floor)")
    if quiet_lr is not None:
        return (f"; moved to the quiet top of the loss's floor (lr {lo:.3g} -> {hi:.3g}; within {CONSTANT_TOL:.0%} up "
                f"to {quiet_lr:.3g}: a schedule that holds its peak ends there), where {why}: the plateau rule")
    return f"; moved to the top of the loss's floor (lr {lo:.3g} -> {hi:.3g}), where {why}: the plateau rule"
