"""Smoothing of noisy curves (pure numpy), shared by the tuner and the collation."""
from __future__ import annotations

import numpy as np

__all__ = ["moving_average", "nanmean"]


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
