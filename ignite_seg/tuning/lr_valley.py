"""The valley rule of the LR range choice (pure numpy): where the loss stops improving.

A range test's loss falls, bottoms out in a valley and rises. :func:`eligible_slopes` keeps the
range out of two traps: far below the last usable LR the loss falls because the model is young,
not because the LR is good; past the valley floor a dip after a rise is noise. When the loss does not
fall in the window at all (it crept up past its minimum without tripping a divergence rule), the range
is anchored at the centre of the valley's bottom, :func:`valley_bottom`.

A sweep that never diverges breaks the "below the last usable LR" window: when the network learns the
task within the sweep, the loss reaches its floor (~0) long before the sweep ends and then only creeps
lower. A window below the sweep's end then lies on that flat part, where the slope is meaningless (a
loss of 0.004 falling to 0.0004 per decade is "steepest" there), and the range came out on the flat top
(bench/RESULTS.md, session 8: [0.96, 3.0] on ignite-simple's mnist CNN, which then trained at chance).
So when the loss all through that window is within :data:`SETTLED_TOL` of the improvement above its
minimum (the window is flat, and it did not rise either), the window ends where the loss settled instead: where it first came within that fraction of its
minimum (the LR where it stopped improving).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["MIN_POINTS", "VALLEY_TOL", "VALLEY_BOTTOM_TOL", "SETTLED_TOL", "Window", "start_and_minimum",
           "eligible_slopes", "valley_bottom"]

#: Fewer finite points than this cannot show a range.
MIN_POINTS = 5
#: The range lies on or before the valley floor of the loss: the LRs up to where it first rises past
#: its minimum plus this fraction of the sweep's improvement.
VALLEY_TOL = 0.25
#: The bottom of the valley: the stretch around the minimum within this fraction of the improvement
#: above it; its centre (in log LR) locates the minimum of a flat valley more steadily than the argmin.
#: Measured on the benchmark's `fast` rescans (5 seeds, each the mean of 4 repeats; bench/RESULTS.md,
#: tuner session 3): on the regression task, whose bottom is flat, the lr_end CV across seeds was 28% at
#: 0.05 and 17% at 0.10; a narrow band follows the noise in the bottom, a wide one the valley's walls.
VALLEY_BOTTOM_TOL = 0.10
#: The loss has settled at its floor once it is within this fraction of the sweep's improvement above its
#: minimum (95% of the improvement made); a window settled all through is on the flat part.
SETTLED_TOL = 0.05


class Window(NamedTuple):
    """What :func:`eligible_slopes` found: the slopes with those outside the window set to ``inf``; the
    ``x`` an anchored range ends at (None: not anchored); the ``x`` where the loss settled at its floor when
    the window was moved there (None: the window is below the last usable LR, as usual)."""

    d: np.ndarray
    x_stop: float | None
    x_settled: float | None

def start_and_minimum(y: np.ndarray, window: int) -> tuple[float, int]:
    """The curve's starting level (mean of its first ``window`` points) and the index of its minimum.

    The minimum is looked for past the first half-window, where a centred average is still partial
    and a few lucky batches at the sweep's start would pass for the loss minimum (as in
    :func:`~ignite_seg.smoothing.divergence_index`).
    """
    warm = min(window // 2, y.size - MIN_POINTS)
    return float(y[: max(1, window)].mean()), warm + int(np.argmin(y[warm:]))


def valley_bottom(x: np.ndarray, y: np.ndarray, k_min: int, first: float) -> float:
    """Centre (in ``x``) of the contiguous stretch around ``y[k_min]`` (the minimum) where ``y`` is
    within :data:`VALLEY_BOTTOM_TOL` of the improvement ``first - y[k_min]`` above the minimum."""
    inside = y <= y[k_min] + VALLEY_BOTTOM_TOL * (first - y[k_min])
    lo = hi = k_min
    while lo > 0 and inside[lo - 1]:
        lo -= 1
    while hi + 1 < y.size and inside[hi + 1]:
        hi += 1
    return float(x[lo : hi + 1].mean())


def eligible_slopes(d: np.ndarray, x: np.ndarray, valley: np.ndarray, window: int,
                    window_decades: float | None) -> Window:
    """The valley rule: the slopes ``d`` (against ``x = log10 lr``) with those outside the window set to
    ``inf``: ``window_decades`` below the last usable LR (None: no window) or, when the loss at that
    whole window sits at the floor of the loss (within :data:`SETTLED_TOL`), below where it settled; and not
    past the valley floor of ``valley`` (smoothed with ``window``). When the loss did not improve in that
    window, the window is anchored at the loss minimum instead and the range ends at the centre of the
    valley's bottom (:attr:`Window.x_stop`)."""
    d = d.copy()
    if window_decades is None:
        return Window(d, None, None)
    valley_first, valley_min = start_and_minimum(valley, window)
    gain = valley_first - valley[valley_min]
    # the valley floor ends where the loss first rises above min + VALLEY_TOL x the improvement:
    # past that, a dip (after a rise that tripped no divergence rule) is not a better LR
    rise = np.flatnonzero(valley[valley_min:] > valley[valley_min] + VALLEY_TOL * gain)
    x_floor = x[valley_min + int(rise[0]) - 1] if rise.size else x[-1]
    settled = valley[valley_min] + SETTLED_TOL * gain
    x_top, x_settled = x[-1], _settled_at(x, valley, settled)
    inside = valley[x >= x_top - window_decades]
    inside = inside[np.isfinite(inside)]  # a sampled curve (NaN between samples) is judged on its samples
    if x_settled is not None and inside.size >= MIN_POINTS and np.all(inside <= settled):
        x_top = x_settled  # the whole window below the sweep's end sits at the floor: it ends where the loss settled
    else:
        x_settled = None
    outside = (x < x_top - window_decades) | (x > x_floor)
    x_stop = None
    if not _improves_within(d, outside):
        # no improvement in that window: the loss rose slowly past its minimum without tripping
        # the divergence rules; the window ends at the valley floor instead, and the range at
        # the minimum, the centre of the valley's bottom (the loss improves up to there; the
        # steepest stretch below it is the young model's, which the window avoids: it only sets lr_min)
        outside = (x < x[valley_min] - window_decades) | (x > x_floor)
        x_stop = valley_bottom(x, valley, valley_min, valley_first)
    if _improves_within(d, outside):
        d[outside] = np.inf  # not eligible: neither the steepest point nor part of the interval
    # (no improvement at all inside the window: fall back to the whole sweep)
    return Window(d, x_stop, x_settled)


def _settled_at(x: np.ndarray, y: np.ndarray, level: float) -> float | None:
    """The first ``x`` where ``y`` is at or below ``level`` (None: never, e.g. NaN)."""
    at = np.flatnonzero(y <= level)
    return float(x[at[0]]) if at.size else None


def _improves_within(d: np.ndarray, outside: np.ndarray) -> bool:
    return bool((~outside).sum() >= MIN_POINTS and np.min(d[~outside]) < 0)
