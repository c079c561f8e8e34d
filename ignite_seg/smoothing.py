"""Smoothing of noisy curves (pure numpy) and the online divergence test on an EMA of a loss.

Shared by the tuner, the engine's handlers and the collation; imports nothing of the package.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["moving_average", "smooth_epochs", "deepest_dip", "nanmean", "DivergenceMonitor", "REGAIN_MIN_IMPROVEMENT",
           "above_ratio", "divergence_index"]

#: The regain rule of :func:`divergence_index` applies once the loss improved by this fraction:
#: before that, what it "gives back" is mostly batch-to-batch noise.
REGAIN_MIN_IMPROVEMENT = 0.3


def above_ratio(values: np.ndarray | float, best: np.ndarray | float, factor: float) -> np.ndarray:
    """The ratio rule of a divergence: ``values`` above ``factor`` times the minimum so far, ``best``, where that
    minimum is not below zero.

    A ratio measures a rise from a floor at zero. A loss that goes below zero (a Poisson or Gaussian negative
    log-likelihood) has no such floor: ``factor`` times a negative minimum lies *below* it, so every later value read
    as diverged and a sweep ended where its loss crossed zero (fastai's finder had the same flaw, its issue #962).
    Below zero the regain rule (the rise against the improvement made) and a non-finite loss end a sweep.

    Example:
        >>> above_ratio(np.array([0.5, 2.5, -0.1]), np.array([0.5, 1.0, -0.2]), 2.0).tolist()
        [False, True, False]
    """
    best = np.asarray(best, dtype=np.float64)
    return (best >= 0) & (np.asarray(values, dtype=np.float64) > factor * best)


def moving_average(y: np.ndarray, window: int, axis: int = -1) -> np.ndarray:
    """Centered moving average of ``y`` along ``axis`` over ``window`` points.

    Near the ends the window shrinks symmetrically, so the result has the shape of ``y``, no
    lag, and keeps the end values' level. NaNs are ignored within a window (a window that holds
    only NaN gives NaN). ``window <= 1`` returns a copy.

    Example:
        >>> moving_average(np.array([0.0, 3.0, 0.0, 3.0, 0.0]), 3).tolist()
        [0.0, 1.0, 2.0, 1.0, 0.0]
    """
    y = np.asarray(y, dtype=np.float64)
    if window <= 1 or y.shape[axis] == 0:
        return y.copy()
    y = np.moveaxis(y, axis, -1)
    n = y.shape[-1]
    half = window // 2
    valid = np.isfinite(y)
    filled = np.where(valid, y, 0.0)
    zero = np.zeros(y.shape[:-1] + (1,))
    csum = np.concatenate([zero, np.cumsum(filled, axis=-1)], axis=-1)
    ccount = np.concatenate([zero, np.cumsum(valid, axis=-1)], axis=-1)
    idx = np.arange(n)
    h = np.minimum(np.minimum(idx, n - 1 - idx), half)  # symmetric, shrinking at the ends
    lo, hi = idx - h, idx + h + 1
    total = csum[..., hi] - csum[..., lo]
    count = ccount[..., hi] - ccount[..., lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return np.moveaxis(out, -1, axis)


def smooth_epochs(y: np.ndarray) -> np.ndarray:
    """A once-an-epoch curve on a centred 3-epoch moving mean, each end the mean of its two epochs
    (an end alone would be one noisy measurement; the length check judges the end).

    Example:
        >>> smooth_epochs(np.array([0.0, 3.0, 0.0, 3.0])).tolist()
        [1.5, 1.0, 2.0, 1.5]
    """
    y = np.asarray(y, dtype=np.float64)
    if y.size < 3:
        return np.full(y.shape, y.mean()) if y.size else y.copy()
    out = moving_average(y, 3)
    out[0], out[-1] = y[:2].mean(), y[-2:].mean()
    return out


def deepest_dip(y: np.ndarray) -> tuple[int, float]:
    """Where a curve (higher is better) lay furthest below its best so far, and by how much ``(index, depth)``;
    ``(0, 0.0)`` when it never fell. Non-finite points are no dip.

    Example:
        >>> k, depth = deepest_dip(np.array([0.5, 0.7, 0.6, 0.4, 0.8]))
        >>> k, round(depth, 3)
        (3, 0.3)
    """
    y = np.asarray(y, dtype=np.float64)
    below = np.fmax.accumulate(y) - y if y.size else y
    below = np.where(np.isfinite(below), below, -np.inf)
    k = int(np.argmax(below)) if below.size else 0
    return (k, float(below[k])) if below.size and below[k] > 0 else (0, 0.0)


def nanmean(a: np.ndarray, axis: int = 0, min_count: int = 1) -> np.ndarray:
    """Mean along ``axis`` over the finite values, NaN where fewer than ``min_count`` are finite.

    Unlike ``np.nanmean`` it does not warn on an all-NaN slice (a repeat that stopped early is normal).

    Example:
        >>> nanmean(np.array([[1.0, np.nan, np.nan], [3.0, 2.0, np.nan]])).tolist()
        [2.0, 2.0, nan]
    """
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    count = finite.sum(axis=axis)
    total = np.where(finite, a, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count >= max(1, min_count), total / np.maximum(count, 1), np.nan)


def divergence_index(smoothed: np.ndarray, diverge_th: float, regain: float | None = None,
                     min_improvement: float = REGAIN_MIN_IMPROVEMENT, warmup: int = 0,
                     zero_floor: bool = True) -> int | None:
    """First index where the curve diverges, or is not finite; ``None`` when it never does.

    Diverging means exceeding ``diverge_th`` times the running minimum (:func:`above_ratio`) or, with ``regain``,
    giving back more than that fraction of the improvement made so far (once the improvement is at least
    ``min_improvement`` of the first value). The second rule catches losses that saturate: a
    cross-entropy that fell from 2.3 to 1.5 and climbs back to 2.3 never reaches twice its minimum.
    Both rules start after ``warmup`` points (where a centred smoothing window is still partial,
    one lucky batch would set the minimum); a non-finite value counts anywhere.

    ``zero_floor=False`` (the loss is known to go below zero: a raw value was negative) leaves the ratio rule out
    altogether: while such a loss nears zero from above its minimum is tiny, and a little noise reads as twice it
    (a Poisson NLL's smoothed training loss was cut at 0.1 on its way from 1.0 to -0.2).

    Example:
        >>> divergence_index(np.array([2.3, 1.5, 1.6, 2.0, 2.3]), 2.0, regain=0.5)
        3
    """
    y = np.asarray(smoothed, dtype=np.float64)
    if y.size == 0:
        return None
    bad = ~np.isfinite(y)
    w = min(max(int(warmup), 0), y.size - 1)
    tail, tail_bad = y[w:], bad[w:]
    running_min = np.minimum.accumulate(np.where(tail_bad, np.inf, tail))
    hit = tail_bad | (above_ratio(tail, running_min, diverge_th) & zero_floor)
    if regain is not None and np.isfinite(tail[0]):
        gained = tail[0] - running_min
        hit |= (gained >= min_improvement * abs(tail[0])) & (tail - running_min > regain * gained)
    hits = np.concatenate([np.flatnonzero(bad[:w]), w + np.flatnonzero(hit)])
    return int(hits[0]) if hits.size else None


class DivergenceMonitor:
    """Online divergence test for a running sweep, on an EMA of the loss (the online twin of
    :func:`divergence_index`).

    ``update(loss)`` returns ``True`` once the EMA (weight ``smooth_f`` on the newest loss,
    bias-corrected) exceeds ``diverge_th`` times the smallest EMA seen (:func:`above_ratio`; no longer once a loss
    below zero arrived: :func:`divergence_index`'s ``zero_floor``), or gives back more than
    ``regain`` of its improvement, on ``patience + 1`` consecutive updates (default patience:
    ``ceil(1 / smooth_f) - 1``, the EMA's memory), or the loss is not finite (at once). The first
    ``ceil(1 / smooth_f)`` losses only warm the EMA up.

    The patience is what separates a divergence from one heavy-tailed batch: a single large loss
    lifts the EMA by ``smooth_f`` times its excess and decays within the EMA's memory, while a
    diverging loss keeps the EMA up. Without it, one bad batch early in a sweep (where the
    "improvement" is itself mostly noise) ended the repeat, and a range test with two repeats
    then chose its range from the first fraction of a decade.

    Example:
        >>> m = DivergenceMonitor(diverge_th=2.0, smooth_f=1.0)
        >>> [m.update(v) for v in (3.0, 1.0, 1.5, 2.5)]
        [False, False, False, True]
    """

    def __init__(self, diverge_th: float, smooth_f: float, regain: float | None = None,
                 min_improvement: float = REGAIN_MIN_IMPROVEMENT, patience: int | None = None) -> None:
        if not diverge_th > 1:
            raise ValueError(f"diverge_th must be > 1, got {diverge_th!r}")
        if not 0 < smooth_f <= 1:
            raise ValueError(f"smooth_f must be in (0, 1], got {smooth_f!r}")
        self.diverge_th, self.smooth_f, self.regain, self.min_improvement = diverge_th, smooth_f, regain, min_improvement
        self._ema = 0.0
        self._weight = 0.0
        self._seen = 0
        self.warmup = math.ceil(1 / smooth_f) - 1
        self.patience = self.warmup if patience is None else int(patience)
        if self.patience < 0:
            raise ValueError(f"patience must be >= 0, got {patience!r}")
        self._over = 0  # consecutive updates on which a divergence rule held
        self.first = math.nan
        self.best = math.inf
        self.value = math.nan
        self.zero_floor = True  # until a loss below zero arrives

    def update(self, loss: float) -> bool:
        if not math.isfinite(loss):
            return True
        self.zero_floor = self.zero_floor and loss >= 0
        self._ema = (1 - self.smooth_f) * self._ema + self.smooth_f * loss
        self._weight = (1 - self.smooth_f) * self._weight + self.smooth_f
        self.value = self._ema / self._weight
        self._seen += 1
        if self._seen <= self.warmup:
            return False
        if math.isnan(self.first):
            self.first = self.value
        self.best = min(self.best, self.value)
        gained = self.first - self.best
        over = (self.zero_floor and bool(above_ratio(self.value, self.best, self.diverge_th))) or (
            self.regain is not None
            and gained >= self.min_improvement * abs(self.first)
            and self.value - self.best > self.regain * gained
        )
        self._over = self._over + 1 if over else 0
        return self._over > self.patience
