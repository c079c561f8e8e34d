"""The valley rule of the LR range choice (pure numpy): where the loss stops improving.

A range test's loss falls, bottoms out in a valley and rises. :func:`eligible_slopes` keeps the
range out of two traps: far below the last usable LR the loss falls because the model is young,
not because the LR is good; past the valley floor a dip after a rise is noise. When the loss does not
fall in the window at all (it crept up past its minimum without tripping a divergence rule), the range
is anchored at the centre of the valley's bottom, :func:`valley_bottom`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["MIN_POINTS", "VALLEY_TOL", "VALLEY_BOTTOM_TOL", "start_and_minimum", "eligible_slopes", "valley_bottom"]

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



def start_and_minimum(y: np.ndarray, window: int) -> tuple[float, int]:
    """The curve's starting level (mean of its first ``window`` points) and the index of its minimum.

    The minimum is looked for past the first half-window, where a centred average is still partial
    and a few lucky batches at the sweep's start would pass for the loss minimum (as in
    :func:`~ignite_seg.tuning.lr_range.divergence_index`).
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
                    window_decades: float | None) -> tuple[np.ndarray, float | None]:
    """The valley rule: the slopes ``d`` (against ``x = log10 lr``) with those outside the window set to
    ``inf``: ``window_decades`` below the last usable LR (None: no window), and not past the valley floor
    of ``valley`` (smoothed with ``window``). When the loss did not improve in that window, the window is
    anchored at the loss minimum instead and the range ends at the centre of the valley's bottom: that
    ``x`` comes second (else None)."""
    d = d.copy()
    if window_decades is None:
        return d, None
    valley_first, valley_min = start_and_minimum(valley, window)
    # the valley floor ends where the loss first rises above min + VALLEY_TOL x the improvement:
    # past that, a dip (after a rise that tripped no divergence rule) is not a better LR
    band = valley[valley_min] + VALLEY_TOL * (valley_first - valley[valley_min])
    rise = np.flatnonzero(valley[valley_min:] > band)
    x_floor = x[valley_min + int(rise[0]) - 1] if rise.size else x[-1]
    outside = (x < x[-1] - window_decades) | (x > x_floor)
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
    return d, x_stop


def _improves_within(d: np.ndarray, outside: np.ndarray) -> bool:
    return bool((~outside).sum() >= MIN_POINTS and np.min(d[~outside]) < 0)
