"""Learning-rate range test maths (pure numpy): sweep, smoothing, divergence, range choice.

The range test trains while the learning rate grows geometrically; the loss at each LR is
recorded. :func:`choose_lr_range` smooths the curves, cuts each repeat at its divergence,
averages the repeats, differentiates against ``log10(lr)`` and returns the interval of steepest
*sustained* improvement: the contiguous stretch where the slope stays at least ``steep_frac``
of the steepest slope, chosen by how much loss it removes (so a single noisy dip does not win).

Example:
    >>> import numpy as np
    >>> lrs = geometric_lrs(1e-4, 10.0, 200)
    >>> x = np.log10(lrs)
    >>> loss = 2.0 - 1.8 / (1.0 + np.exp(-(x + 1.0) / 0.3))  # steepest at lr = 0.1
    >>> choice = choose_lr_range(lrs, loss[None, :], RangeRule(window=5))
    >>> bool(choice.lr_min < 0.1 < choice.lr_max)
    True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..exceptions import TuningError
from ..smoothing import divergence_index, moving_average, nanmean
from .lr_plateau import find_plateau, flat_floor
from .lr_valley import MIN_POINTS, eligible_slopes, start_and_minimum
from .schedule import HELD_PEAK

if TYPE_CHECKING:
    from ..config.hyperparameters import HyperparameterSettings

__all__ = [
    "geometric_lrs",
    "smooth_curves",
    "divergence_index",
    "log_lr_derivative",
    "mean_curve",
    "LRRangeChoice",
    "LossDidNotImprove",
    "RangeRule",
    "choose_lr_range",
]


def geometric_lrs(lr_start: float, lr_end: float, n: int) -> np.ndarray:
    """``n`` learning rates growing geometrically from ``lr_start`` to ``lr_end`` (both included)."""
    if not (lr_start > 0 and lr_end > lr_start):
        raise ValueError(f"need 0 < lr_start < lr_end, got lr_start={lr_start!r}, lr_end={lr_end!r}")
    if n < 2:
        raise ValueError(f"need n >= 2 learning rates, got n={n!r}")
    return np.geomspace(lr_start, lr_end, n)


def smooth_curves(curves: np.ndarray, window: int) -> np.ndarray:
    """Centered moving average of each row over ``window`` points; NaN stays NaN.

    Rows are repeats that stopped at different points (NaN afterwards); the smoothing never
    extends a curve past its last measured point.
    """
    curves = np.atleast_2d(np.asarray(curves, dtype=np.float64))
    out = moving_average(curves, window, axis=-1)
    out[~np.isfinite(curves)] = np.nan
    return out


def log_lr_derivative(y: np.ndarray, lrs: np.ndarray, window: int = 3) -> np.ndarray:
    """``dy / dlog10(lr)`` over the finite prefix of ``y`` (NaN elsewhere).

    The slope at each point is the least-squares slope of ``y`` against ``log10(lr)`` over a
    centred window of ``window`` points (truncated at the ends), a Savitzky-Golay first
    derivative: unlike a difference of neighbours it stays calm at the ends of a noisy curve.
    """
    y = np.asarray(y, dtype=np.float64)
    out = np.full_like(y, np.nan)
    n = _finite_prefix(y)
    if n < 2:
        return out
    x = np.log10(np.asarray(lrs, dtype=np.float64)[:n])
    yy = y[:n]
    half = max(1, int(window) // 2)
    idx = np.arange(n)
    lo, hi = np.maximum(idx - half, 0), np.minimum(idx + half + 1, n)
    c = lambda v: np.concatenate([[0.0], np.cumsum(v)])  # noqa: E731
    sx, sy, sxx, sxy = c(x), c(yy), c(x * x), c(x * yy)
    k = (hi - lo).astype(np.float64)
    mx, my = (sx[hi] - sx[lo]) / k, (sy[hi] - sy[lo]) / k
    vxx = (sxx[hi] - sxx[lo]) / k - mx * mx
    cxy = (sxy[hi] - sxy[lo]) / k - mx * my
    with np.errstate(invalid="ignore", divide="ignore"):
        out[:n] = np.where(vxx > 0, cxy / vxx, np.nan)
    return out


def mean_curve(curves: np.ndarray, min_frac: float = 0.5) -> np.ndarray:
    """Mean over repeats (rows) where at least ``min_frac`` of them are finite, NaN elsewhere."""
    curves = np.atleast_2d(np.asarray(curves, dtype=np.float64))
    return nanmean(curves, axis=0, min_count=math.ceil(min_frac * curves.shape[0]))


def _finite_prefix(y: np.ndarray) -> int:
    bad = np.flatnonzero(~np.isfinite(y))
    return int(bad[0]) if bad.size else int(y.size)


class LossDidNotImprove(TuningError):
    """The sweep's loss improved by less than ``min_improvement``: the curve is too flat to choose on
    (a longer sweep may show the drop; a sweep that diverged at once raises a plain TuningError)."""


@dataclass(frozen=True)
class LRRangeChoice:
    """The chosen interval and the evidence for it (arrays have the sweep's length ``P``)."""

    lr_min: float
    lr_max: float
    steepest_lr: float
    steepest_slope: float
    #: smoothed loss per repeat, cut at each repeat's divergence (R, P)
    smoothed: np.ndarray
    #: mean of the smoothed repeats (P,)
    mean: np.ndarray
    #: derivative of ``mean`` against log10(lr), a local least-squares slope over ``window`` points (P,)
    deriv: np.ndarray
    #: LR at which each repeat diverged, NaN if it did not (R,)
    diverged_lr: np.ndarray
    #: number of leading points used for the choice
    n_valid: int
    #: relative loss improvement over the sweep, (first - min) / |first|
    improvement: float
    #: True when the chosen interval runs up to the last usable point (no divergence seen above it)
    hit_end: bool
    #: True when the loss did not improve in the window below the last usable LR (it rose past its
    #: minimum without diverging), so the window was anchored at the minimum and ``lr_max`` is the
    #: centre of the valley's bottom
    anchored_at_minimum: bool = False
    #: True when the valley was located on ``valley_curves`` (given, and finite where used)
    valley_on_other_curves: bool = False
    #: the LR where the loss settled at its floor, when the window was moved below it because the loss
    #: below the last usable LR was already flat (a task learned within the sweep); None otherwise
    settled_lr: float | None = None
    #: ``(first, last)`` LR of the floor the loss sat on without the held-out perf improving, when the range
    #: was moved to its top (:mod:`~ignite_seg.tuning.lr_plateau`); None otherwise
    plateau_lrs: tuple[float, float] | None = None
    #: the held-out perf at the sweep's start and its mean on that floor (None: the rule did not fire; NaN: not measured)
    plateau_perfs: tuple[float, float] | None = None
    #: the best constant output's held-out loss, when the plateau rule judged the floor trivial by it (else None)
    plateau_constant_loss: float | None = None
    #: the top of that floor's quiet part (:mod:`~ignite_seg.tuning.lr_plateau`; None: not judged by the constant)
    plateau_quiet_lr: float | None = None
    #: where the plateau range ended: "floor" (its top) or "quiet" (its quiet top); None: no plateau
    plateau_top: str | None = None


@dataclass(frozen=True)
class RangeRule:
    """How :func:`choose_lr_range` chooses: the smoothing, the divergence cut and the range's rules.

    Attributes:
        window: moving-average window (points) for the losses and the derivative.
        diverge_th: a repeat is cut where its smoothed loss exceeds this times its minimum...
        regain: ... or gives back more than this fraction of its improvement (None: no such rule).
        steep_frac: the interval is where the slope is at least this fraction of the steepest.
        min_improvement: smallest relative loss improvement that counts as learning.
        window_decades: look for the interval only this many decades below the last usable LR
            (the divergence, or the sweep's end), and never past the valley floor (where the loss
            first rises :data:`~ignite_seg.tuning.lr_valley.VALLEY_TOL` of the improvement above its minimum: a dip after a rise
            that tripped no divergence rule is noise, not a better LR); when the loss does not fall
            there at all, this many decades below the loss minimum. Far below it, a sweep's loss falls
            because the model is young, not because the LR is good (the range test's known confound:
            the first phase of training always looks steep). ``None``: the whole sweep.
        min_span_decades: an interval narrower than this is widened downwards (``lr_max`` kept),
            so that a cycle between the bounds still spans a useful range.
        plateau_span_decades: when the plateau rule fires (``perf_curves`` given), the range is this many
            decades (at least ``min_span_decades``) ending at the floor's top, and never below its start.
        plateau_top: where that range ends on a floor at the constant's loss: ``"floor"``, its top; ``"quiet"``, its
            quiet top (:mod:`~ignite_seg.tuning.lr_plateau`), for a schedule that holds its peak.
        flat_floor: a loss that sat on the constant's loss from the sweep's start until it diverged is the plateau
            rule's floor (:func:`~ignite_seg.tuning.lr_plateau.flat_floor`), not :class:`LossDidNotImprove`. Not for
            SGD (:meth:`from_settings`): its step scales with a plateau's small gradient, so such a sweep says SGD may
            not move at any rate (bench/RESULTS.md sessions 19, 26), and the error says which optimizer to try.
    """

    window: int
    diverge_th: float = 2.0
    regain: float | None = 0.8
    steep_frac: float = 0.5
    min_improvement: float = 0.02
    window_decades: float | None = None
    min_span_decades: float = 0.0
    plateau_span_decades: float = 0.5
    plateau_top: Literal["floor", "quiet"] = "floor"
    flat_floor: bool = True

    @classmethod
    def from_settings(cls, s: HyperparameterSettings, window: int) -> RangeRule:
        """The settings' rule: the quiet top for a schedule that holds its peak (:data:`.schedule.HELD_PEAK`)."""
        return cls(window=window, diverge_th=s.diverge_th, regain=s.diverge_regain, steep_frac=s.lr_steep_frac,
                   window_decades=s.lr_window_decades, min_span_decades=s.lr_min_span_decades,
                   plateau_top="quiet" if s.schedule in HELD_PEAK else "floor", flat_floor=s.optimizer != "sgd")


def choose_lr_range(
    lrs: np.ndarray,
    losses: np.ndarray,
    rule: RangeRule,
    *,
    curves: np.ndarray | None = None,
    valley_curves: np.ndarray | None = None,
    perf_curves: np.ndarray | None = None,
    constant_loss: float | None = None,
) -> LRRangeChoice:
    """Choose ``[lr_min, lr_max]``, the interval of steepest sustained loss improvement.

    Args:
        lrs: the sweep's learning rates, increasing (P,).
        losses: training loss per repeat and LR (R, P); NaN after a repeat stopped.
        rule: the smoothing window, the divergence cut and the range's rules.
        curves: the curves (R, P) to choose the range on, if not ``losses`` themselves: the tuner
            passes the loss on a fixed held-out slice, measured after every step, which carries no
            batch-to-batch noise. Each repeat is still cut where its training loss (``losses``)
            diverged, or where either curve is not finite.
        valley_curves: curves (R, P) to locate the valley on (the loss minimum, the valley floor and
            the bottom an anchored range ends at) when the range is chosen on noisier ones: the
            tuner passes the held-out loss when it chooses on the training loss. On a flat, noisy
            training loss the minimum can fall anywhere in the valley; on the benchmark's regression
            it anchored 2 of 10 ``fastest`` ranges a decade too low (bench/RESULTS.md, tuner session 3).
            Ignored where their mean is not finite.
        perf_curves: the held-out perf (R, P; higher is better), cut like the others: with it, the plateau
            rule (:mod:`~ignite_seg.tuning.lr_plateau`) moves the range to the top of a floor that the
            loss sat on for ``PLATEAU_DECADES`` (0.8) decades or more before diverging while the perf did not improve.
        constant_loss: the loss of the best constant output on the curves' held-out slice (the valley's curves'):
            a floor at that level is trivial for the plateau rule whatever the perf says, and may run into the
            divergence (None or NaN: not measured).

    Raises:
        TuningError: the loss is not finite from the start, diverges at once, or never improves.
    """
    lrs, losses, curves, valley_curves = _checked(lrs, losses, rule, curves, valley_curves)
    perf_curves = _like(perf_curves, losses, "perf_curves")
    lo_lr, hi_lr = float(lrs[0]), float(lrs[-1])
    smoothed, diverged_lr, alive = _cut_at_divergence(lrs, losses, curves, rule)
    mean = mean_curve(smoothed, min_frac=0.51)  # where most repeats still run: one stray repeat is not the mean
    n_valid = _finite_prefix(mean)
    if n_valid < MIN_POINTS:
        at = lrs[min(n_valid, lrs.size - 1)]
        raise TuningError(
            f"the loss diverged almost at once (after {n_valid} of {lrs.size} points, lr ~ {at:.3g}); "
            f"lower lr_start (now {lo_lr:.3g}) so that the sweep starts where training is stable, e.g. "
            f"hyperparameters=dataclasses.replace(ignite_seg.get_preset('fast'), lr_start={lo_lr / 100:.3g})."
        )
    valid = mean[:n_valid]
    first, k_min = start_and_minimum(valid, rule.window)
    improvement = (first - float(valid[k_min])) / max(abs(first), 1e-12)
    # the valley (its minimum, floor and bottom) is located on valley_curves where they were measured
    valley = _valley_curve(valid, alive, valley_curves, rule.window)
    deriv = np.full(lrs.size, np.nan)
    deriv[:n_valid] = log_lr_derivative(valid, lrs[:n_valid], max(rule.window, 3))
    x = np.log10(lrs[:n_valid])
    d, x_stop, x_settled = eligible_slopes(deriv[:n_valid], x, valley, rule.window, rule.window_decades)
    k = int(np.argmin(d))
    cut = diverged_lr[np.isfinite(diverged_lr)]
    x_diverged = float(np.log10(cut.min())) if n_valid < lrs.size and cut.size else None
    flat = None
    if improvement < rule.min_improvement or not d[k] < 0:
        # no fall to choose on: a loss on the constant's floor until it diverged is still the plateau rule's floor
        flat = flat_floor(x, valley, constant_loss, x_diverged) if rule.flat_floor else None
        if flat is None:
            raise LossDidNotImprove(
                f"the loss did not improve over the sweep lr {lo_lr:.3g} -> {hi_lr:.3g} (relative "
                f"improvement {improvement:.3g} < {rule.min_improvement}). Widen the sweep (raise lr_end or lower "
                "lr_start), sweep for longer (lr_sweep_len), or check that the model can learn the data; e.g. "
                f"hyperparameters=dataclasses.replace(ignite_seg.get_preset('fast'), lr_start={lo_lr / 10:.3g}, "
                f"lr_end={hi_lr * 10:.3g}, lr_sweep_len=12.0)."
            )
    perf = None if perf_curves is None else mean_curve(_smooth_alive(perf_curves, alive, rule.window), 0.51)[:n_valid]
    plateau = flat or find_plateau(x, valley, perf, rule.window, constant_loss=constant_loss, x_diverged=x_diverged)
    x_quiet = plateau.x_quiet if plateau is not None and rule.plateau_top == "quiet" else None
    if plateau is None:
        x_lo, x_hi, hit_end = _interval(d, x, k, rule, x_stop)
    else:  # the floor's top, a span below it: no longer the steep fall to the trivial floor
        x_hi, hit_end, x_stop, x_settled = plateau.x_hi if x_quiet is None else x_quiet, False, None, None
        x_lo = max(x_hi - max(rule.plateau_span_decades, rule.min_span_decades), plateau.x_lo)
    return LRRangeChoice(
        lr_min=float(10**x_lo), lr_max=float(10**x_hi), steepest_lr=float(lrs[k]), steepest_slope=float(d[k]),
        smoothed=smoothed, mean=mean, deriv=deriv, diverged_lr=diverged_lr, n_valid=n_valid,
        improvement=float(improvement), hit_end=hit_end, anchored_at_minimum=x_stop is not None,
        valley_on_other_curves=valley is not valid,
        settled_lr=None if x_settled is None else float(10**x_settled),
        plateau_lrs=None if plateau is None else (float(10**plateau.x_lo), float(10**plateau.x_hi)),
        plateau_perfs=None if plateau is None else (plateau.perf_start, plateau.perf_on),
        plateau_constant_loss=None if plateau is None else plateau.constant_loss,
        plateau_quiet_lr=None if plateau is None or plateau.x_quiet is None else float(10**plateau.x_quiet),
        plateau_top=None if plateau is None else "floor" if x_quiet is None else "quiet",
    )


_Arrays = tuple[np.ndarray, np.ndarray, "np.ndarray | None", "np.ndarray | None"]


def _checked(lrs: np.ndarray, losses: np.ndarray, rule: RangeRule, curves: np.ndarray | None,
             valley_curves: np.ndarray | None) -> _Arrays:
    """The arguments of :func:`choose_lr_range` as float arrays, checked."""
    lrs = np.asarray(lrs, dtype=np.float64)
    losses = np.atleast_2d(np.asarray(losses, dtype=np.float64))
    if lrs.ndim != 1 or losses.shape[1] != lrs.size:
        raise ValueError(f"lrs (P,) and losses (R, P) disagree: {lrs.shape} vs {losses.shape}")
    if lrs.size < MIN_POINTS or not np.all(np.diff(lrs) > 0) or not lrs[0] > 0:
        raise ValueError(f"lrs must be >= {MIN_POINTS} positive increasing values, got {lrs.size} values")
    if not 0 < rule.steep_frac < 1:
        raise ValueError(f"steep_frac must be in (0, 1), got {rule.steep_frac!r}")
    if not np.isfinite(losses[:, 0]).any():
        raise TuningError(
            f"the loss is not finite even at the sweep's first learning rate {lrs[0]:.3g}: the model or "
            "loss produces NaN/inf before any training. Check the loss and the data (and lower lr_start "
            "if the model is very sensitive)."
        )
    return lrs, losses, _like(curves, losses, "curves"), _like(valley_curves, losses, "valley_curves")


def _like(other: np.ndarray | None, losses: np.ndarray, name: str) -> np.ndarray | None:
    """``other`` as a float array of the shape of ``losses`` (or ``None``)."""
    if other is None:
        return None
    other = np.atleast_2d(np.asarray(other, dtype=np.float64))
    if other.shape != losses.shape:
        raise ValueError(f"{name} {other.shape} and losses {losses.shape} disagree")
    return other


def _cut_at_divergence(lrs: np.ndarray, losses: np.ndarray, curves: np.ndarray | None,
                       rule: RangeRule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The smoothed curves (``curves``, else ``losses``), each repeat cut (NaN) where its training loss
    diverged or either curve is not finite; the LR of each cut (NaN: not cut); and where each repeat still
    ran (R, P), to cut the other curves of the sweep alike.

    A repeat is cut before it is smoothed: a centred average over the points just below the cut would
    otherwise take in the blown-up values past it (half a window of them), and a floor the loss sat on
    right up to the divergence would look like a rise (bench/RESULTS.md, session 19: that lifted the
    held-out floor of a task learned within the sweep, the settled rule missed it, and 1 ``fastest`` range
    in 4 came out on the flat top, up to 50x the steep part)."""
    if curves is not None:
        losses = np.where(np.isfinite(curves), losses, np.nan)  # a non-finite held-out loss cuts too
    train_smoothed = smooth_curves(losses, rule.window)  # the divergence is judged on the training loss
    zero_floor = not bool((losses < 0).any())  # a loss below zero anywhere: no floor for the ratio rule
    diverged_lr = np.full(losses.shape[0], np.nan)
    alive = np.ones(losses.shape, dtype=bool)
    for r in range(losses.shape[0]):
        stop = divergence_index(train_smoothed[r], rule.diverge_th, rule.regain, warmup=rule.window // 2,
                                zero_floor=zero_floor)
        raw_stop = _finite_prefix(losses[r])
        if raw_stop < losses.shape[1]:
            stop = raw_stop if stop is None else min(stop, raw_stop)
        if stop is not None:
            diverged_lr[r] = lrs[stop]
            alive[r, stop:] = False
    return _smooth_alive(losses if curves is None else curves, alive, rule.window), diverged_lr, alive


def _smooth_alive(curves: np.ndarray, alive: np.ndarray, window: int) -> np.ndarray:
    """``curves`` smoothed over the points where their repeat still ran (NaN past its cut)."""
    return smooth_curves(np.where(alive, curves, np.nan), window)


def _valley_curve(valid: np.ndarray, alive: np.ndarray, valley_curves: np.ndarray | None,
                  window: int) -> np.ndarray:
    """The mean curve to locate the valley on: ``valley_curves`` cut where their repeat stopped (``alive``)
    where their mean is finite over the ``valid`` points, else ``valid`` itself."""
    if valley_curves is None:
        return valid
    valley_mean = mean_curve(_smooth_alive(valley_curves, alive, window), min_frac=0.51)[: valid.size]
    return valley_mean if np.isfinite(valley_mean).all() else valid


def _interval(d: np.ndarray, x: np.ndarray, k: int, rule: RangeRule, x_stop: float | None) -> tuple[float, float, bool]:
    """``(log10 lr_min, log10 lr_max, whether it runs to the last point)``: the best stretch where the slope
    is at least ``steep_frac`` of the steepest ``d[k]``, ends interpolated, extended to ``x_stop``."""
    thr = rule.steep_frac * d[k]
    lo, hi = _best_segment(d, x, thr)
    n = d.size
    x_lo = _crossing(x, d, lo - 1, lo, thr) if lo > 0 and np.isfinite(d[lo - 1]) else x[lo]
    x_hi = _crossing(x, d, hi, hi + 1, thr) if hi < n - 1 else x[hi]
    if x_hi - x_lo < 1e-9:  # a one-point interval: widen to the neighbouring sweep points
        x_lo, x_hi = x[max(lo - 1, 0)], x[min(hi + 1, n - 1)]
    if x_stop is not None and x_stop > x_hi:
        x_hi = x_stop
    x_lo = max(min(x_lo, x_hi - rule.min_span_decades), float(x[0]))
    return float(x_lo), float(x_hi), hi == n - 1


def _best_segment(d: np.ndarray, x: np.ndarray, thr: float) -> tuple[int, int]:
    """The contiguous run of ``d < thr`` that removes the most loss (integral of -d over x)."""
    steep = d < thr
    best, best_drop = (0, 0), -np.inf
    i, n = 0, d.size
    while i < n:
        if not steep[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and steep[j + 1]:
            j += 1
        seg = slice(i, j + 1)
        drop = float(-np.trapezoid(d[seg], x[seg])) if j > i else float(-d[i] * _step(x, i))
        if drop > best_drop:
            best, best_drop = (i, j), drop
        i = j + 1
    return best


def _step(x: np.ndarray, i: int) -> float:
    return float(x[min(i + 1, x.size - 1)] - x[max(i - 1, 0)]) / 2 or 1.0


def _crossing(x: np.ndarray, d: np.ndarray, i: int, j: int, thr: float) -> float:
    """Where the line through ``(x[i], d[i])`` and ``(x[j], d[j])`` crosses ``thr``."""
    if d[j] == d[i]:
        return float(x[j])
    t = float(np.clip((thr - d[i]) / (d[j] - d[i]), 0.0, 1.0))
    return float(x[i] + t * (x[j] - x[i]))
