"""Statistics across trials and repeats (pure numpy): summaries and mean ± 95% bands."""
from __future__ import annotations

import math
from typing import Any, Literal, Mapping, NamedTuple

import numpy as np

__all__ = ["Stats", "Band", "Mode", "Space", "t975", "describe", "mean_band", "space_of", "loss_left_log", "interval_name",
           "SPACE_NOTES"]

#: Which end of a metric is best.
Mode = Literal["min", "max"]
#: Where an interval is valid: anywhere (``linear``), above 0 (``log``: losses, computed on log values,
#: so the mean is the geometric mean) or in [0, 1] (``unit``: perf and accuracies, clipped).
Space = Literal["linear", "log", "unit"]
#: How a legend or a table states the space of its intervals.
SPACE_NOTES = {"linear": "", "log": "geometric mean, 95% CI in log space", "unit": "95% CI clipped to [0, 1]"}


def interval_name(space: Space) -> str:
    """How a legend names the interval of a mean computed in ``space``."""
    return {"log": "95% CI (log space)", "unit": "95% CI (clipped to [0, 1])"}.get(space, "95% CI of the mean")


def loss_left_log(results: Mapping[str, Any]) -> bool:
    """Whether a final loss of ``results`` (``final_loss_*``) lies at or below zero, outside its log space
    (:func:`space_of`): the ``inv-loss`` perf then passes 1, and its name says the form it takes there."""
    return any(space_of(k, v) != "log" for k, v in results.items() if k.startswith("final_loss_"))


def space_of(key: str, values: np.ndarray | None = None) -> Space:
    """The space of a results/through-time key: losses ``log``, perf ``unit``, custom metrics ``linear``.

    ``values``: the data the interval is for. A loss at or below zero (a Poisson or Gaussian likelihood goes there)
    has no log, and the ``inv-loss`` perf of such a loss exceeds 1: their intervals are ``linear`` (a geometric mean
    left every point below zero out, and a band clipped to [0, 1] lay below its own mean).
    """
    name = key.split("_", 2)
    space: Space = "linear"
    if name[0] in ("loss", "losses") or key.startswith("final_loss_"):
        space = "log"
    elif name[0] in ("perf", "perfs") or key.startswith("final_perf_"):
        space = "unit"
    if values is not None and space != "linear":
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if (v <= 0).any() if space == "log" else ((v < 0) | (v > 1)).any():
            return "linear"
    return space


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


def describe(values: np.ndarray, trial_ids: np.ndarray, mode: Mode, space: Space = "linear") -> Stats:
    """Count, mean, sample std, 95% t-interval of the mean, best and worst (by ``mode``).

    Non-finite values are left out. With one value the std and interval are NaN. The interval is
    valid in ``space``: ``log``, the t-interval of the log values mapped back (of the geometric
    mean, never <= 0; the mean stays arithmetic); ``unit``, clipped to [0, 1].

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
    low, high = _interval(v, space)
    ib, iw = (int(np.argmax(v)), int(np.argmin(v))) if mode == "max" else (int(np.argmin(v)), int(np.argmax(v)))
    return Stats(n, mean, std, low, high, float(v[ib]), float(v[iw]), int(ids[ib]), int(ids[iw]), mode)


def _interval(v: np.ndarray, space: Space) -> tuple[float, float]:
    """The 95% t-interval of the mean of the finite ``v`` (NaN below two values), valid in ``space``."""
    n = v.size
    if space == "log":
        if n < 2 or (v <= 0).any():
            return math.nan, math.nan
        lo, hi = _interval(np.log(v), "linear")
        return math.exp(lo), math.exp(hi)
    if n < 2:
        return math.nan, math.nan
    mean, half = float(v.mean()), t975(n - 1) * float(v.std(ddof=1)) / math.sqrt(n)
    if space == "unit":
        return max(mean - half, 0.0), min(mean + half, 1.0)
    return mean - half, mean + half


class Band(NamedTuple):
    """Mean of ``(N, S)`` curves per column with its 95% t-interval; ``n`` finite values per column."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: np.ndarray


def mean_band(curves: np.ndarray, space: Space = "linear") -> Band:
    """Column-wise mean ± 95% t-interval of the mean of ``curves`` (N, S), ignoring NaN.

    Columns with one finite value get that value as mean and NaN bounds; none gives NaN. The band
    is valid in ``space``: ``log`` (losses), the band of the log values mapped back: the mean is
    the geometric mean and the band stays above 0 (values <= 0 are left out); ``unit`` (perf),
    clipped to [0, 1].
    """
    y = np.asarray(curves, dtype=np.float64)
    if y.ndim != 2:
        raise ValueError(f"mean_band expects (N, S) curves, got shape {y.shape}")
    if space == "log":
        with np.errstate(invalid="ignore", divide="ignore"):
            logs = mean_band(np.log(np.where(y > 0, y, np.nan)))
        return Band(np.exp(logs.mean), np.exp(logs.low), np.exp(logs.high), logs.n)
    if space == "unit":
        band = mean_band(y)
        return Band(band.mean, np.clip(band.low, 0.0, 1.0), np.clip(band.high, 0.0, 1.0), band.n)
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
