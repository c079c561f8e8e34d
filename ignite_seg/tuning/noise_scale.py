"""The gradient noise scale ``B_simple = tr(Σ) / |G|²`` (McCandlish et al. 2018), pure numpy.

With ``G_B`` the mean gradient of a random batch of ``B`` examples, ``E|G_B|² = |G|² + tr(Σ)/B``.
Squared norms measured at two batch sizes ``B_small < B_big`` give unbiased estimates of both
terms (appendix A of the paper)::

    |G|²  ≈ (B_big |G_big|² - B_small |G_small|²) / (B_big - B_small)
    tr(Σ) ≈ (|G_small|² - |G_big|²) / (1/B_small - 1/B_big)

Each single estimate is very noisy (and can be negative), so the numerator and the denominator
are averaged separately (an EMA along a sweep, a plain mean over an interval) before dividing.

Example:
    >>> g2, tr = two_batch_estimates(np.array([5.0]), np.array([2.0]), 10, 40)
    >>> round(float(g2[0]), 6), round(float(tr[0]), 6)
    (1.0, 40.0)
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "two_batch_estimates", "ema", "running_noise_scale", "noise_scale", "typical_noise_scale", "pooled_noise_scale",
]


def two_batch_estimates(
    sq_small: np.ndarray, sq_big: np.ndarray, b_small: float | np.ndarray, b_big: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased estimates ``(|G|², tr(Σ))`` from squared gradient norms at two batch sizes."""
    sq_small = np.asarray(sq_small, dtype=np.float64)
    sq_big = np.asarray(sq_big, dtype=np.float64)
    b_small = np.asarray(b_small, dtype=np.float64)
    b_big = np.asarray(b_big, dtype=np.float64)
    if np.any(b_big <= b_small) or np.any(b_small <= 0):
        raise ValueError(f"need 0 < b_small < b_big, got b_small={b_small!r}, b_big={b_big!r}")
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)
    trace = (sq_small - sq_big) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


def ema(values: np.ndarray, beta: float) -> np.ndarray:
    """Bias-corrected exponential moving average (weight ``1 - beta`` on the newest value).

    NaN values are skipped (the average carries over); leading NaNs stay NaN.

    Example:
        >>> np.round(ema(np.array([1.0, np.nan, 3.0]), 0.5), 4).tolist()
        [1.0, 1.0, 2.3333]
    """
    if not 0 <= beta < 1:
        raise ValueError(f"beta must be in [0, 1), got {beta!r}")
    values = np.asarray(values, dtype=np.float64)
    out = np.full_like(values, np.nan)
    acc, weight = 0.0, 0.0
    for i, v in enumerate(values):
        if np.isfinite(v):
            acc = beta * acc + (1 - beta) * v
            weight = beta * weight + (1 - beta)
        if weight > 0:
            out[i] = acc / weight
    return out


def running_noise_scale(
    sq_small: np.ndarray, sq_big: np.ndarray, b_small: float | np.ndarray, b_big: float | np.ndarray, beta: float
) -> np.ndarray:
    """The noise scale along a sweep: EMA of ``tr(Σ)`` over EMA of ``|G|²``, NaN where ``|G|² <= 0``."""
    g2, trace = two_batch_estimates(sq_small, sq_big, b_small, b_big)
    num, den = ema(trace, beta), ema(g2, beta)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def noise_scale(
    sq_small: np.ndarray,
    sq_big: np.ndarray,
    b_small: float | np.ndarray,
    b_big: float | np.ndarray,
    mask: np.ndarray | None = None,
) -> float:
    """One estimate from many measurements: mean ``tr(Σ)`` over mean ``|G|²`` (where ``mask``).

    Returns NaN when no finite measurement is selected or the mean ``|G|²`` is not positive
    (the gradient is all noise at this precision).
    """
    g2, trace = two_batch_estimates(sq_small, sq_big, b_small, b_big)
    keep = np.isfinite(g2) & np.isfinite(trace)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    if not keep.any():
        return float("nan")
    den = float(g2[keep].mean())
    return float(trace[keep].mean() / den) if den > 0 else float("nan")


def typical_noise_scale(running: np.ndarray, mask: np.ndarray | None = None) -> float:
    """The median of a running estimate (where ``mask``, finite and positive); NaN if none.

    The noise scale grows as training proceeds (``|G|²`` shrinks), and near a minimum the
    denominator approaches zero, so a ratio of means over a stretch is dominated by its last
    points; the median of the running estimate is the noise scale typical of the stretch.

    Example:
        >>> typical_noise_scale(np.array([np.nan, 10.0, 20.0, 5000.0, -3.0]))
        20.0
    """
    running = np.asarray(running, dtype=np.float64)
    keep = np.isfinite(running) & (running > 0)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    return float(np.median(running[keep])) if keep.any() else float("nan")


def pooled_noise_scale(
    sq_small: np.ndarray, sq_big: np.ndarray, b_small: float, b_big: float, beta: float, mask: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Noise scale from several sweeps ``(R, P)``: each repeat's running estimate, then one median.

    Each repeat (row) gets its own running estimate (:func:`running_noise_scale`: its own EMA of
    numerator and denominator), and the value is the median over every repeat's points (where
    ``mask``, finite and positive, and where the repeat measured: NaN padding after a repeat
    stopped does not count). Averaging the squared norms of repeats from different
    initialisations before dividing would let the repeat with the largest ``|G|²`` (the one
    whose initialisation lies furthest from a minimum) set the denominator for all of them.
    Returns the per-point median over repeats (P,) and the value (NaN if no point qualifies).

    Example:
        Two repeats with ``tr(Σ) = 40``, one with ``|G|² = 1`` (noise scale 40), one with ``|G|² = 10`` (4):

        >>> sq_s = np.array([[5.0, 5.0], [14.0, 14.0]]); sq_b = np.array([[2.0, 2.0], [11.0, 11.0]])
        >>> curve, value = pooled_noise_scale(sq_s, sq_b, 10, 40, 0.5)
        >>> round(value, 2), np.round(curve, 2).tolist()
        (22.0, [22.0, 22.0])
        >>> round(float(running_noise_scale(sq_s.mean(0), sq_b.mean(0), 10, 40, 0.5)[0]), 2)  # mean norms
        7.27
    """
    sq_small = np.atleast_2d(np.asarray(sq_small, dtype=np.float64))
    sq_big = np.atleast_2d(np.asarray(sq_big, dtype=np.float64))
    running = np.vstack([running_noise_scale(s, b, b_small, b_big, beta) for s, b in zip(sq_small, sq_big)])
    # a point counts where its repeat measured there (the EMA carries over NaN padding after a stop)
    keep = np.isfinite(running) & (running > 0) & np.isfinite(sq_small) & np.isfinite(sq_big)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)[None, :]
    curve = np.full(running.shape[1], np.nan)
    cols = keep.any(axis=0)
    curve[cols] = np.nanmedian(np.where(keep, running, np.nan)[:, cols], axis=0)
    return curve, typical_noise_scale(running, keep)
