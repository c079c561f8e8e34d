"""The run's custom metrics through time: each metric on the training subset and every validation set."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, NamedTuple

import numpy as np

from ..storage.result_keys import Mode, ResultKeys
from ._mpl import COLORS, count_text, draw_trials, new_figure, set_color
from .curves import MINMAX_BELOW, CurveSet, curve_set, draw_best, draw_stops, draw_trial_band, trial_counts, trial_stops
from .outcomes import BestMarks

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
    #: Each trial's best checkpoint, marked on its metric's panel when chosen by a custom metric.
    best: BestMarks | None = None
    #: The early stops the trials recorded (as :attr:`.ThroughTimeInfo.recorded_stops`)
    recorded_stops: tuple[tuple[int, float], ...] | None = None

    def counts(self, metric: MetricCurves) -> np.ndarray:
        """The trials with a finite value of ``metric`` at each point (fewer after early stops)."""
        return trial_counts(*(c for _, c in metric.splits))

    def stops(self, metric: MetricCurves) -> tuple[tuple[int, float], ...]:
        """``(trial id, epoch)`` of each trial stopped early: as recorded, else where its ``metric`` curves end early."""
        if self.recorded_stops is not None:
            return self.recorded_stops
        return trial_stops(self.epochs, self.trial_ids, *(c for _, c in metric.splits))


def metrics_info(tt: Mapping[str, np.ndarray], keys: ResultKeys, best: BestMarks | None = None,
                 stops: tuple[tuple[int, float], ...] | None = None) -> MetricsInfo | None:
    """Every custom metric's curves on every split the run recorded; ``None`` without trials or metrics.

    ``best``: the trials' best checkpoints (marked when chosen by one of the custom metrics); ``stops``:
    the early stops the trials recorded (None: read off the curves)."""
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
    return MetricsInfo(epochs, ids, tuple(metrics), best, stops) if metrics else None


def _draw_metric(ax: Axes, info: MetricsInfo, metric: MetricCurves) -> None:
    n = info.trial_ids.size
    nt = count_text(info.counts(metric))
    for k, (name, cset) in enumerate(metric.splits):
        color = COLORS["train"] if k == 0 else COLORS["val"] if k == 1 else set_color(k - 2)
        draw_trials(ax, info.epochs, cset.trials, color, f"{name}: each trial (N={nt})")
        draw_trial_band(ax, info.epochs, cset, color, name, "linear", n < MINMAX_BELOW, ls="-" if k < 2 else "--")
    draw_stops(ax, info.stops(metric), top=metric.mode == "min")
    if info.best is not None and info.best.metric == metric.name:
        draw_best(ax, info.best)
    ax.set_xlim(info.epochs[0], info.epochs[-1])
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric.name)
    ax.set_title(f"{metric.name} through time ({'higher' if metric.mode == 'max' else 'lower'} is better)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=2, frameon=False)


def plot_metrics(info: MetricsInfo, dpi: float = 110) -> Figure:
    """One panel per custom metric: each trial (thin) and the mean ± 95% CI, on train and every val set."""
    cols = min(2, len(info.metrics))
    rows = -(-len(info.metrics) // cols)
    fig = new_figure(6.5 * cols, 6.0 * rows, dpi)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax, metric in zip(axes, info.metrics):
        _draw_metric(ax, info, metric)
    for ax in axes[len(info.metrics):]:
        ax.set_visible(False)
    nt = count_text(trial_counts(*(c for m in info.metrics for _, c in m.splits)))
    fig.suptitle(f"Custom metrics through time (N={nt} completed trials)\n"
                 "on fixed subsets of train and of every validation set")
    return fig
