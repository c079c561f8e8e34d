"""Statistics across trials and repeats (pure numpy): summaries and mean ± 95% bands."""
from __future__ import annotations

import math
from typing import Literal, NamedTuple

import numpy as np

__all__ = ["Stats", "Band", "Mode", "t975", "describe", "mean_band"]

#: Which end of a metric is best.
Mode = Literal["min", "max"]

# Two-sided 95% quantiles of Student's t (0.975 quantile) for 1..30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (NaN for ``df < 1``).

    Tabulated to 30; beyond, the series ``z + (z^3 + z) / (4 df)`` (error < 1e-3).
    """
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df)


class Stats(NamedTuple):
    """Summary of one final metric across trials. ``best``/``worst`` follow ``mode``."""

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float
    best: float
    worst: float
    best_trial: int | None
    worst_trial: int | None
    mode: str

    def to_dict(self) -> dict[str, float | int | str | None]:
        return dict(self._asdict())


def describe(values: np.ndarray, trial_ids: np.ndarray, mode: Mode) -> Stats:
    """Count, mean, sample std, 95% t-interval of the mean, best and worst (by ``mode``).

    Non-finite values are left out. With one value the std and interval are NaN.

    Example:
        >>> describe(np.array([1.0, 3.0]), np.array([0, 1]), "max").best_trial
        1
    """
    v = np.asarray(values, dtype=np.float64)
    ids = np.asarray(trial_ids)
    keep = np.isfinite(v)
    v, ids = v[keep], ids[keep]
    n = int(v.size)
    if n == 0:
        return Stats(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, None, None, mode)
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if n > 1 else math.nan
    half = t975(n - 1) * std / math.sqrt(n) if n > 1 else math.nan
    ib, iw = (int(np.argmax(v)), int(np.argmin(v))) if mode == "max" else (int(np.argmin(v)), int(np.argmax(v)))
    return Stats(n, mean, std, mean - half, mean + half, float(v[ib]), float(v[iw]), int(ids[ib]), int(ids[iw]), mode)


class Band(NamedTuple):
    """Mean of ``(N, S)`` curves per column with its 95% t-interval; ``n`` finite values per column."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: np.ndarray


def mean_band(curves: np.ndarray) -> Band:
    """Column-wise mean ± 95% t-interval of the mean of ``curves`` (N, S), ignoring NaN.

    Columns with one finite value get that value as mean and NaN bounds; none gives NaN.
    """
    y = np.asarray(curves, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError(f"mean_band expects (N, S) curves, got shape {y.shape}")
    finite = np.isfinite(y)
    n = finite.sum(axis=0)
    filled = np.where(finite, y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, filled.sum(axis=0) / np.maximum(n, 1), np.nan)
        dev = np.where(finite, y - mean, 0.0)
        var = np.where(n > 1, (dev**2).sum(axis=0) / np.maximum(n - 1, 1), np.nan)
        t = np.array([t975(int(k) - 1) for k in n], dtype=np.float64)
        half = t * np.sqrt(var) / np.sqrt(np.maximum(n, 1))
    return Band(mean, mean - half, mean + half, n.astype(np.int64))
