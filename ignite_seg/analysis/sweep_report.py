"""The report of a parameter sweep (``sweep.npz``): extract -> render -> the caller writes.

- :func:`sweep_info`: the record -> :class:`SweepInfo` (pure; per point the trial statistics of
  the final perf and loss, and the tuned recipe);
- :func:`plot_sweep_perf`: final train/val perf vs the parameter, mean and 95% interval of the
  mean over the trials, each trial a dot;
- :func:`plot_sweep_hparams`: the tuned LR range and batch size vs the parameter;
- :func:`sweep_markdown`: ``summary.md``, one table row per point;
- :func:`build_sweep_report`: the three as ``{file name: bytes}``.

The x axis is the parameter's value when the points differ in one numeric parameter (log scale
when its values span a factor 10 or more); otherwise the points in order, labelled.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..storage.sweep_file import SweepRecord
from ._mpl import COLORS, fmt, new_figure, png_bytes
from .stats import Space, Stats, describe, space_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["SweepInfo", "sweep_info", "plot_sweep_perf", "plot_sweep_hparams", "sweep_markdown",
           "build_sweep_report"]


class SweepInfo(NamedTuple):
    """What the sweep report draws; one entry per point in every sequence."""

    labels: tuple[str, ...]
    #: the x of each point, its axis name, and whether it is numeric (else: point positions)
    x: np.ndarray
    x_name: str
    numeric: bool
    log_x: bool
    perf_train: tuple[Stats, ...]
    perf_val: tuple[Stats, ...]
    loss_val: tuple[Stats, ...]
    #: per point the trials' final perfs (NaN pads), for the dots
    perf_val_trials: np.ndarray
    lr_start: np.ndarray
    lr_end: np.ndarray
    batch_size: np.ndarray


def _axis(record: SweepRecord) -> tuple[np.ndarray, str, bool, bool]:
    values = record.param_values
    varying = [j for j in range(values.shape[1]) if len({repr(v) for v in values[:, j]}) > 1]
    if len(varying) == 1 and np.isfinite(values[:, varying[0]]).all():
        x = values[:, varying[0]].astype(float)
        log_x = bool((x > 0).all() and x.max() >= 10 * x.min())
        return x, str(record.param_names[varying[0]]), True, log_x
    return np.arange(record.n_points, dtype=float), "point", False, False


def sweep_info(record: SweepRecord) -> SweepInfo:
    """The report's numbers from the record (pure)."""
    x, name, numeric, log_x = _axis(record)

    def stats(key: str, mode: str, space: Space) -> tuple[Stats, ...]:
        table = getattr(record, key)
        space = space_of(key, table) if space == "log" else space  # a loss below zero has no log
        return tuple(describe(row, record.trial_ids[k], mode, space)  # type: ignore[arg-type]
                     for k, row in enumerate(table))

    return SweepInfo(
        labels=tuple(str(s) for s in record.point_labels), x=x, x_name=name, numeric=numeric, log_x=log_x,
        perf_train=stats("final_perf_train", "max", "linear"), perf_val=stats("final_perf_val", "max", "linear"),
        loss_val=stats("final_loss_val", "min", "log"), perf_val_trials=np.asarray(record.final_perf_val, float),
        lr_start=np.asarray(record.lr_start, float), lr_end=np.asarray(record.lr_end, float),
        batch_size=np.asarray(record.batch_size, float),
    )


def _x_axis(ax: Axes, info: SweepInfo) -> None:
    ax.set_xlabel(info.x_name)
    if info.log_x:
        ax.set_xscale("log")
    if not info.numeric:
        ax.set_xticks(info.x, [label if len(label) <= 24 else label[:21] + "..." for label in info.labels],
                      rotation=20, ha="right")


def plot_sweep_perf(info: SweepInfo) -> Figure:
    """Final perf vs the parameter: train and val means with their 95% intervals, val trials as dots."""
    fig = new_figure(7, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    for what, series in (("train", info.perf_train), ("val", info.perf_val)):
        mean = np.array([s.mean for s in series])
        low = np.array([s.ci_low for s in series])
        high = np.array([s.ci_high for s in series])
        n = max((s.n for s in series), default=0)
        ax.plot(info.x, mean, "o-", color=COLORS[what], lw=2, label=f"{what}: mean over trials")
        if np.isfinite(low).any():
            ax.fill_between(info.x, low, high, color=COLORS[what], alpha=0.2, lw=0,
                            label=f"{what}: 95% CI of the mean (N≤{n})")
    for k, row in enumerate(info.perf_val_trials):
        row = row[np.isfinite(row)]
        ax.scatter(np.full(row.size, info.x[k]), row, s=12, color=COLORS["val"], alpha=0.5,
                   label="val: one trial" if k == 0 else None)
    _x_axis(ax, info)
    ax.set_ylabel("final perf")
    ax.set_title("Final performance across the sweep")
    ax.legend(fontsize=8)
    return fig


def plot_sweep_hparams(info: SweepInfo) -> Figure:
    """The tuned LR range (start to end) and batch size of each point."""
    fig = new_figure(7, 6)
    ax_lr, ax_bs = fig.subplots(2, 1, sharex=True)
    ax_lr.vlines(info.x, info.lr_start, info.lr_end, color=COLORS["range"], lw=4, alpha=0.6, label="LR range")
    ax_lr.plot(info.x, info.lr_start, "v", color=COLORS["range"], label="lr_start")
    ax_lr.plot(info.x, info.lr_end, "^", color=COLORS["chosen"], label="lr_end")
    ax_lr.set_yscale("log")
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_title("Tuned recipe across the sweep")
    ax_lr.legend(fontsize=8)
    ax_bs.plot(info.x, info.batch_size, "o-", color=COLORS["train"])
    ax_bs.set_ylabel("batch size")
    ax_bs.set_yscale("log", base=2)
    _x_axis(ax_bs, info)
    return fig


def sweep_markdown(info: SweepInfo) -> str:
    """``summary.md`` of the sweep: one row per point; the best point by mean val perf named."""
    lines = ["# Sweep summary", "", f"{len(info.labels)} point(s); intervals are 95% t-intervals of the mean "
             "over the point's completed trials.", "",
             "| point | trials | val perf mean [95% CI] | train perf mean | val loss mean | lr_start | lr_end | batch |",
             "|---|---|---|---|---|---|---|---|"]
    for k, label in enumerate(info.labels):
        pv, pt, lv = info.perf_val[k], info.perf_train[k], info.loss_val[k]
        lines.append(f"| {label} | {pv.n} | {fmt(pv.mean, 4)} [{fmt(pv.ci_low, 4)}, {fmt(pv.ci_high, 4)}] | "
                     f"{fmt(pt.mean, 4)} | {fmt(lv.mean, 4)} | {fmt(info.lr_start[k])} | {fmt(info.lr_end[k])} | "
                     f"{int(info.batch_size[k])} |")
    means = np.array([s.mean for s in info.perf_val])
    if np.isfinite(means).any():
        best = int(np.nanargmax(means))
        lines += ["", f"Best point by mean val perf: **{info.labels[best]}** ({fmt(means[best], 4)})."]
    return "\n".join(lines) + "\n"


def build_sweep_report(record: SweepRecord) -> dict[str, bytes]:
    """The report's files as bytes: ``sweep_perf.png``, ``sweep_hparams.png``, ``summary.md``."""
    info = sweep_info(record)
    return {
        "sweep_perf.png": png_bytes(plot_sweep_perf(info)),
        "sweep_hparams.png": png_bytes(plot_sweep_hparams(info)),
        "summary.md": sweep_markdown(info).encode("utf-8"),
    }
