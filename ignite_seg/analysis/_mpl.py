"""Matplotlib helpers shared by the renderers: figures without pyplot, bands, PNG bytes.

Figures are ``matplotlib.figure.Figure`` objects created directly (no pyplot, so no global
figure registry, no GUI backend and nothing to close); saving goes through the Agg canvas.
"""
from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import numpy as np

from .stats import SPACE_NOTES, Band, Space

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["new_figure", "png_bytes", "wide_log_axis", "draw_band", "note_space", "draw_trials", "COLORS", "PERF_LABELS",
           "BELOW_ZERO_FORM", "perf_label", "fmt", "set_color", "band_phrase", "count_text"]

COLORS = {"train": "#1f77b4", "val": "#ff7f0e", "range": "#2ca02c", "diverged": "#d62728", "chosen": "#9467bd"}
#: Colours of the validation sets after the primary one (none of :data:`COLORS`).
SET_COLORS = ("#17becf", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f")


def set_color(k: int) -> str:
    """The colour of the ``k``-th validation set after the primary one."""
    return SET_COLORS[k % len(SET_COLORS)]

PERF_LABELS = {
    "classification": "accuracy",
    "multiclass": "accuracy (multi-label, threshold 0.5)",
    "inv-loss": "perf = 1 / (1 + loss)",
}


#: What :func:`perf_label` adds to an ``inv-loss`` perf's name where the loss went below zero.
BELOW_ZERO_FORM = "; 2 − 1/(1 − loss) below 0"


def perf_label(style: str, loss_below_zero: bool = False) -> str:
    """:data:`PERF_LABELS`' name of ``style``'s perf; for an ``inv-loss`` run whose loss went below zero, with the form
    it takes there (:func:`~ignite_seg.engine.scoring.inv_loss_perf`: its values pass 1)."""
    label = PERF_LABELS.get(style, "perf")
    return label + BELOW_ZERO_FORM if style == "inv-loss" and loss_below_zero else label


def new_figure(width: float, height: float, dpi: float = 100) -> Figure:
    """A figure (inches) with constrained layout, drawn by the Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure, dpi: float | None = None) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi if dpi is not None else fig.dpi)
    return buf.getvalue()


def wide_log_axis(axis: Any, lo: float, hi: float) -> None:
    """No minor ticks on a log ``axis`` whose limits ``lo..hi`` span 2 decades or more.

    Its major ticks and gridlines (one per decade) carry the labels; the 8 minor ticks per decade
    are what matplotlib spends most of such a figure's drawing on (40% of the LR sweep figure's CPU:
    0.74 -> 0.45 s). A narrower axis keeps them: there they may be the only labelled ticks.
    """
    from matplotlib.ticker import NullLocator

    if lo > 0 and hi > 0 and abs(np.log10(hi / lo)) >= 2:
        axis.set_minor_locator(NullLocator())


def fmt(x: float | None, digits: int = 3) -> str:
    """A short human number: 3 significant digits, no exponent for ordinary magnitudes."""
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.{digits}g}"


def band_phrase(n: int | str, unit: str, minmax: bool) -> str:
    """What a band of ``n`` curves is, as the legends write it (``n`` may be a count's range, ``4→2``)."""
    return f"min–max of {n} {unit}" if minmax else f"95% CI of the mean (N={n})"


def count_text(counts: np.ndarray) -> str:
    """How many curves a figure's points average: ``4`` when every point has 4, ``4→2`` when the count
    only falls (trials stopped early), ``2–4`` otherwise; points without any finite value are left out.

    Example:
        >>> count_text(np.array([4, 4, 3, 2, 0]))
        '4→2'
    """
    n = np.asarray(counts, dtype=np.int64)
    n = n[n > 0]
    if n.size == 0:
        return "0"
    if n.min() == n.max():
        return str(int(n[0]))
    if (np.diff(n) <= 0).all():
        return f"{int(n[0])}→{int(n[-1])}"
    return f"{int(n.min())}–{int(n.max())}"


def draw_band(ax: Axes, x: np.ndarray, band: Band, color: str, what: str, unit: str,
              curves: np.ndarray | None = None, space: Space = "linear", **kw: Any) -> None:
    """Mean line and a shaded band, labelled with what it is and N.

    The band is the 95% CI of the mean, computed in ``space`` (the legend says which, and that the
    mean is geometric in ``log`` space); given ``curves`` it is their min–max spread instead (for a
    handful of tuner repeats, whose t-interval would dwarf the data), around the same mean.
    """
    n = int(band.n.max()) if band.n.size else 0
    kind = "geometric mean" if space == "log" and n > 1 else "mean"
    units = unit[:-1] if n == 1 and unit.endswith("s") else unit
    label = f"{what}: {kind} of {n} {units}" if n > 1 else f"{what}: the only {units}, no mean"
    ax.plot(x, band.mean, color=color, lw=2, label=label, **kw)
    if n > 1:
        if curves is not None:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns after divergence
                low, high = np.nanmin(curves, axis=0), np.nanmax(curves, axis=0)
            ax.fill_between(x, low, high, color=color, alpha=0.25, lw=0, label=f"{what}: min–max of {n} {unit}")
            # (captions.band_phrase writes the same words for the report)
        else:
            ax.fill_between(x, band.low, band.high, color=color, alpha=0.25, lw=0,
                            label=f"{what}: 95% CI of the mean (N={n})")


def note_space(ax: Axes, space: Space) -> None:
    """A legend line saying where the bands' intervals were computed (nothing for ``linear``)."""
    if SPACE_NOTES[space]:
        ax.fill_between([], [], [], color="none", label=f"bands: {SPACE_NOTES[space]}")


def draw_trials(ax: Axes, x: np.ndarray, curves: np.ndarray, color: str, label: str | None) -> None:
    """One thin line per row of ``curves``; one legend entry for all of them."""
    for k, row in enumerate(np.atleast_2d(curves)):
        ax.plot(x, row, color=color, lw=0.7, alpha=0.35, label=label if k == 0 else None)
