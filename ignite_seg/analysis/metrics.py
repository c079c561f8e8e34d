"""The run's custom metrics through time: each metric on the training subset and every validation set."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, NamedTuple

import numpy as np

from ..storage.result_keys import Mode, ResultKeys
from ._mpl import COLORS, draw_band, draw_trials, new_figure, set_color
from .curves import CurveSet, curve_set

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["MetricCurves", "MetricsInfo", "metrics_info", "plot_metrics"]


class MetricCurves(NamedTuple):
    """One custom metric: its direction and its curves per split (``(label, curves)``, train first)."""

    name: str
    mode: Mode
    splits: tuple[tuple[str, CurveSet], ...]


class MetricsInfo(NamedTuple):
    epochs: np.ndarray
    trial_ids: np.ndarray
    metrics: tuple[MetricCurves, ...]


def metrics_info(tt: Mapping[str, np.ndarray], keys: ResultKeys) -> MetricsInfo | None:
    """Every custom metric's curves on every split the run recorded; ``None`` without trials or metrics."""
    epochs = np.asarray(tt.get("epochs", np.zeros(0)), dtype=np.float64)
    ids = np.asarray(tt.get("trial_ids", np.zeros(0)), dtype=np.int64)
    if epochs.size == 0 or ids.size == 0:
        return None
    metrics = []
    for m in keys.metric_names:
        splits = tuple((keys.label(s), curve_set(tt, f"metric_{m}_{s}")) for s in keys.splits
                       if f"metric_{m}_{s}" in tt)
        if splits:
            metrics.append(MetricCurves(m, keys.mode(m), splits))
    return MetricsInfo(epochs, ids, tuple(metrics)) if metrics else None


def _draw_metric(ax: Axes, info: MetricsInfo, metric: MetricCurves) -> None:
    n = info.trial_ids.size
    for k, (name, cset) in enumerate(metric.splits):
        color = COLORS["train"] if k == 0 else COLORS["val"] if k == 1 else set_color(k - 2)
        draw_trials(ax, info.epochs, cset.trials, color, f"{name}: each trial (N={n})")
        draw_band(ax, info.epochs, cset.band, color, name, "trials", curves=cset.trials if n < 3 else None,
                  ls="-" if k < 2 else "--")
    ax.set_xlim(info.epochs[0], info.epochs[-1])
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric.name)
    ax.set_title(f"{metric.name} through time ({'higher' if metric.mode == 'max' else 'lower'} is better)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best", framealpha=0.85)


def plot_metrics(info: MetricsInfo, dpi: float = 110) -> Figure:
    """One panel per custom metric: each trial (thin) and the mean ± 95% CI, on train and every val set."""
    cols = min(2, len(info.metrics))
    rows = -(-len(info.metrics) // cols)
    fig = new_figure(6.5 * cols, 4.6 * rows, dpi)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax, metric in zip(axes, info.metrics):
        _draw_metric(ax, info, metric)
    for ax in axes[len(info.metrics):]:
        ax.set_visible(False)
    fig.suptitle(f"Custom metrics through time (N={info.trial_ids.size} completed trials)\n"
                 "on fixed subsets of train and of every validation set")
    return fig
