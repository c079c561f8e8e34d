"""The learning rate: the LR range test (``lr_vs_perf.npz``) and the schedule of the final trials."""
from __future__ import annotations

import textwrap
import warnings
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..engine.schedule_text import PEAK_ONLY
from ..storage.schemas import LRSweepFile
from ._mpl import COLORS, draw_band, draw_trials, fmt, new_figure, wide_log_axis
from .stats import Band, mean_band

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["LRSweepInfo", "lr_sweep_info", "plot_lr_sweep", "ScheduleInfo", "schedule_info", "plot_schedule",
           "draw_lr_sweep_panel", "mark_range_and_divergence", "mark_constant"]


class LRSweepInfo(NamedTuple):
    lrs: np.ndarray
    losses: np.ndarray
    perfs: np.ndarray
    loss_band: Band
    perf_band: Band
    loss_smoothed: np.ndarray
    perf_smoothed: np.ndarray
    loss_deriv: np.ndarray
    perf_deriv: np.ndarray
    lr_range: tuple[float, float]
    diverged_lr: np.ndarray
    n_repeats: int
    #: what the loss panel shows: the curve the range was chosen on
    loss_label: str = "training loss"
    #: the held-out slice's loss under the best constant output, drawn when the panel shows that slice (else, or
    #: not finite, None)
    constant_loss: float | None = None


def _rows(a: Any, p: int) -> np.ndarray:
    a = np.asarray(a if a is not None else np.zeros((0, p)), dtype=np.float64)
    return a.reshape(-1, p) if a.size else np.zeros((0, p))


def lr_sweep_info(sweep: LRSweepFile | Mapping[str, np.ndarray]) -> LRSweepInfo | None:
    """The LR range test's curves (from its record, or its arrays); ``None`` when the sweep is empty."""
    rec = LRSweepFile.from_npz(sweep) if isinstance(sweep, Mapping) else sweep
    lrs = np.asarray(rec.lrs, dtype=np.float64).ravel()
    p = lrs.size
    if p == 0:
        return None
    losses, perfs = _rows(rec.losses, p), _rows(rec.perfs, p)
    ls, ps = _rows(rec.losses_smoothed, p), _rows(rec.perfs_smoothed, p)
    label = "training loss"
    if rec.chosen_on_holdout:
        # the range was chosen on the held-out loss: show that curve (and its derivative below)
        losses, ls = _rows(rec.holdout_losses, p), _rows(rec.holdout_losses_smoothed, p)
        label = "loss on the held-out slice of the train set"
    nan = np.full(p, np.nan)
    with warnings.catch_warnings():  # all-NaN columns (every repeat diverged) give NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        loss_sm = np.nanmean(ls, axis=0) if ls.shape[0] else nan
        perf_sm = np.nanmean(ps, axis=0) if ps.shape[0] else nan
    rng = np.asarray(rec.lr_range if rec.lr_range is not None else [np.nan, np.nan], dtype=np.float64).ravel()
    return LRSweepInfo(
        lrs=lrs, losses=losses, perfs=perfs, loss_band=mean_band(losses), perf_band=mean_band(perfs),
        loss_smoothed=loss_sm, perf_smoothed=perf_sm,
        loss_deriv=_flat(rec.loss_deriv, nan), perf_deriv=_flat(rec.perf_deriv, nan),
        lr_range=(float(rng[0]), float(rng[1])) if rng.size >= 2 else (np.nan, np.nan),
        diverged_lr=_flat(rec.diverged_lr, np.zeros(0)),
        n_repeats=int(max(losses.shape[0], perfs.shape[0])), loss_label=label,
        constant_loss=_finite_or_none(rec.constant_loss) if rec.chosen_on_holdout else None,
    )


def _finite_or_none(v: float | None) -> float | None:
    return v if v is not None and np.isfinite(v) else None


def _flat(a: np.ndarray | None, default: np.ndarray) -> np.ndarray:
    return np.asarray(a if a is not None else default, dtype=np.float64).ravel()


def mark_range_and_divergence(ax: Axes, info: LRSweepInfo, legend: bool) -> None:
    """Shade the chosen LR range and draw a dotted line at each repeat's divergence LR."""
    lo, hi = info.lr_range
    if np.isfinite(lo) and np.isfinite(hi):
        ax.axvspan(lo, hi, color=COLORS["range"], alpha=0.15, lw=0,
                   label=f"chosen range [{fmt(lo)}, {fmt(hi)}]" if legend else None)
    div = info.diverged_lr[np.isfinite(info.diverged_lr)]
    for k, d in enumerate(div):
        ax.axvline(d, color=COLORS["diverged"], ls=":", lw=1.5,
                   label=(f"diverged ({div.size} of {info.n_repeats} repeats)" if legend and k == 0 else None))


def mark_constant(ax: Axes, info: LRSweepInfo, legend: bool = True) -> None:
    """The held-out loss of the best constant output, a grey dashed line (nothing when it was not measured): a floor at
    this level is the trivial one (the plateau rule), the network learned only its offset."""
    if info.constant_loss is not None:
        ax.axhline(info.constant_loss, color="grey", ls="--", lw=1,
                   label=f"best constant output ({fmt(info.constant_loss)})" if legend else None)


def _loss_ylim(ax: Axes, info: LRSweepInfo) -> None:
    finite = info.losses[np.isfinite(info.losses)]
    if finite.size:
        start = np.nanmax(info.losses[:, : max(1, info.lrs.size // 20)])
        top = min(float(finite.max()), 1.6 * float(start)) if np.isfinite(start) else float(finite.max())
        bottom = float(finite.min())
        if info.constant_loss is not None:
            bottom = min(bottom, info.constant_loss)  # its line in view (a curve may sit just above it)
        pad = 0.05 * (top - bottom if top > bottom else 1.0)
        ax.set_ylim(bottom - pad, top + pad)


def draw_lr_sweep_panel(ax: Axes, info: LRSweepInfo, which: str, upto: int | None = None, legend: bool = True,
                        marks: bool = True) -> None:
    """One panel (``which`` = loss | perf) of the sweep; ``upto`` draws only the first points.

    ``marks`` adds the chosen range and the divergence points.
    """
    x = info.lrs[:upto]
    curves = (info.losses if which == "loss" else info.perfs)[:, :upto]
    band = info.loss_band if which == "loss" else info.perf_band
    band = Band(*(a[:upto] for a in band))
    color = COLORS["train"] if which == "loss" else COLORS["val"]
    draw_trials(ax, x, curves, color, f"each repeat (N={info.n_repeats})")
    # the mean and its band end where most repeats have diverged, as the range rule's mean does: past
    # there a "mean of N" would be the few repeats left (the thin lines go on)
    most = band.n > info.n_repeats / 2
    band = Band(np.where(most, band.mean, np.nan), np.where(most, band.low, np.nan), np.where(most, band.high, np.nan),
                band.n)
    draw_band(ax, x, band, color, "repeats", "repeats", curves=np.where(most, curves, np.nan))
    if not most.all() and legend:
        ax.plot([], [], " ", label="mean and band end where most repeats diverged")
    if marks:
        mark_range_and_divergence(ax, info, legend)
        if which == "loss":
            mark_constant(ax, info, legend)
    ax.set_xscale("log")
    ax.set_xlim(info.lrs[0], info.lrs[-1])
    wide_log_axis(ax.xaxis, info.lrs[0], info.lrs[-1])
    ax.set_xlabel("learning rate (log scale)")
    label = info.loss_label if which == "loss" else "perf (held-out slice of the train set)"
    ax.set_ylabel(textwrap.fill(label, 28))  # two short lines fit a video frame's height
    if which == "loss":
        _loss_ylim(ax, info)
    ax.grid(True, which="major", alpha=0.3)


def plot_lr_sweep(info: LRSweepInfo, dpi: float = 110) -> Figure:
    """LR range test: loss and perf against LR (log x), with the derivatives used to choose the range."""
    fig = new_figure(12, 7.5, dpi)
    axes = fig.subplots(2, 2, sharex="col", height_ratios=[2.2, 1])
    for col, which in enumerate(("loss", "perf")):
        ax = axes[0, col]
        draw_lr_sweep_panel(ax, info, which)
        ax.set_xlabel("")
        ax.set_title(f"LR range test: {which} vs learning rate")
        # where the curves leave room: a loss that falls at once and stays low for decades (an RNN's
        # plateau) fills the lower left corner a falling loss usually leaves free
        ax.legend(fontsize=8, loc="best", framealpha=0.85)
        dax = axes[1, col]
        deriv = info.loss_deriv if which == "loss" else info.perf_deriv
        if deriv.size == info.lrs.size:
            dax.plot(info.lrs, deriv, color="k", lw=1.2, label=f"d {which} / d log10(lr), smoothed mean")
        dax.axhline(0, color="grey", lw=0.8)
        mark_range_and_divergence(dax, info, legend=False)
        dax.set_xscale("log")
        wide_log_axis(dax.xaxis, info.lrs[0], info.lrs[-1])
        dax.set_xlabel("learning rate (log scale)")
        dax.set_ylabel(f"d {which} / d log10(lr)")
        dax.legend(fontsize=8, loc="best", framealpha=0.85)
        dax.grid(True, alpha=0.3)
        finite = deriv[np.isfinite(deriv)]
        if finite.size:
            lo, hi = np.percentile(finite, [2, 98])
            # at most 3x the largest slope up to the chosen range's top (the steepest fall is there): a loss
            # that blows up before the divergence cut has slopes of 1e9 that would flatten the rest to a line
            near = finite if deriv.size != info.lrs.size else deriv[np.isfinite(deriv) & (info.lrs <= info.lr_range[1])]
            if near.size and np.max(np.abs(near)) > 0:
                cap = 3 * float(np.max(np.abs(near)))
                lo, hi = max(lo, -cap), min(hi, cap)
            pad = 0.1 * (hi - lo if hi > lo else 1.0)
            dax.set_ylim(min(lo, 0) - pad, max(hi, 0) + pad)
    fig.suptitle(f"Learning-rate range test ({info.n_repeats} repeat{'s' if info.n_repeats != 1 else ''}, "
                 f"{info.lrs.size} points, geometric LR growth)")
    return fig


class ScheduleInfo(NamedTuple):
    epochs: np.ndarray
    lrs: np.ndarray
    lr_start: float
    lr_end: float
    cycle_size_epochs: float
    n_epochs: float
    schedule: str = "triangular"
    warmup_epochs: float = 0.0
    #: the warmup as given in optimizer steps (``warmup_steps``; drawn as ``warmup_epochs``), else 0
    warmup_steps: int = 0


def schedule_info(hp: FixedHyperparameters | Mapping[str, Any], points_per_half_cycle: int = 40,
                  iters_per_epoch: int | None = None) -> ScheduleInfo:
    """The final trials' LR per epoch.

    The default triangular schedule without warmup (ignite's ``LinearCyclicalScheduler``) is drawn
    from its closed form: the LR goes from ``lr_start`` to ``lr_end`` in half a cycle and back in the other half. The
    curve is sampled ``points_per_half_cycle`` times per half cycle (so it also reads right on a
    log axis) and at the last epoch. ``hp``: the recipe, or a mapping with its four schedule fields.
    Any other schedule (``schedule``, ``warmup_epochs``) is the trainer's scheduler simulated
    (:func:`ignite_seg.engine.schedules.simulate_lrs`), ``points_per_half_cycle`` steps per epoch; a
    warmup of ``warmup_steps`` is drawn as the epochs it spans at the run's ``iters_per_epoch``
    (unknown: the drawing's own steps).
    """
    h = SimpleNamespace(**hp) if isinstance(hp, Mapping) else hp
    steps = int(getattr(h, "warmup_steps", 0) or 0)
    if getattr(h, "schedule", "triangular") != "triangular" or getattr(h, "warmup_epochs", 0.0) > 0 or steps:
        info = _simulated_schedule(h, points_per_half_cycle, steps / (iters_per_epoch or points_per_half_cycle))
        return info._replace(warmup_steps=steps)
    start, end = float(h.lr_start), float(h.lr_end)
    cycle, total = float(h.cycle_size_epochs), float(h.epochs)
    step = cycle / 2 / points_per_half_cycle
    n = int(np.floor(total / step + 1e-9))
    x = np.arange(n + 1) * step
    if x[-1] < total - 1e-9:
        x = np.append(x, total)
    progress = np.mod(x / cycle, 1.0)
    progress = np.where(np.isclose(progress, 1.0), 0.0, progress)
    w = np.abs(progress - 0.5) * 2  # 1 at the cycle's ends (lr_start), 0 in its middle (lr_end)
    lrs = w * start + (1 - w) * end
    return ScheduleInfo(x, lrs, start, end, cycle, total)


def _simulated_schedule(h: Any, points_per_epoch: int, warmup_steps_epochs: float = 0.0) -> ScheduleInfo:
    """Any schedule, warmup included: the trainer's own scheduler simulated step by step on a dummy
    optimizer, ``points_per_epoch`` steps per epoch; a warmup in steps as ``warmup_steps_epochs`` epochs."""
    fields = {"batch_size": 1, **vars(h)}
    if warmup_steps_epochs > 0:  # the trainer keeps 2 steps after any warmup: so does the drawing
        fields.update(warmup_steps=0, warmup_epochs=min(warmup_steps_epochs, float(h.epochs) * 0.99))
    fresh = isinstance(h, FixedHyperparameters) and not warmup_steps_epochs
    hp = h if fresh else FixedHyperparameters.from_dict(fields)
    from ..engine.schedules import simulate_lrs  # torch and ignite: only a non-triangular schedule needs them

    lrs = simulate_lrs(hp, points_per_epoch)
    epochs = np.arange(lrs.size) / points_per_epoch
    return ScheduleInfo(epochs, lrs, hp.lr_start, hp.lr_end, hp.cycle_size_epochs, float(hp.epochs), hp.schedule,
                        hp.warmup_epochs)


def style_schedule_axes(ax: Any, info: ScheduleInfo) -> None:
    """Log LR axis with room above the curve for the legend, epochs on x, labelled."""
    ax.set_yscale("log")
    positive = info.lrs[info.lrs > 0]  # a warmup starts at 0, off the log axis
    marks = (info.lr_end,) if info.schedule in PEAK_ONLY else (info.lr_start, info.lr_end)  # lr_start unread there
    lo = min(*marks, *(positive.min(),) if positive.size else ())
    hi = max(marks)
    ax.set_ylim(lo / 1.6, hi * 2.2)
    ax.set_xlim(0, info.n_epochs)
    ax.set_xlabel("epoch")
    ax.set_ylabel("learning rate (log scale)")


def plot_schedule(info: ScheduleInfo, dpi: float = 110, lr_range: tuple[float, float] | None = None) -> Figure:
    """The learning rate of the final trials through training (log y)."""
    fig = new_figure(8, 3.6, dpi)
    ax = fig.subplots()
    ax.plot(info.epochs, info.lrs, color=COLORS["chosen"], lw=2, label="learning rate of every final trial")
    if info.schedule not in PEAK_ONLY:  # a constant or noam schedule does not read lr_start
        ax.axhline(info.lr_start, color="grey", ls="--", lw=0.8, label=f"lr_start = {fmt(info.lr_start)}")
    ax.axhline(info.lr_end, color="grey", ls=":", lw=0.8, label=f"lr_end = {fmt(info.lr_end)}")
    style_schedule_axes(ax, info)
    ax.set_title(_schedule_title(info), fontsize=11)
    ax.legend(fontsize=8, loc="upper right", ncols=3, framealpha=0.9)
    ax.grid(True, alpha=0.3)
    return fig


def _schedule_title(info: ScheduleInfo) -> str:
    span = f"{info.warmup_steps} steps" if info.warmup_steps else f"{fmt(info.warmup_epochs)} epochs"
    warmup = f", linear warmup from 0 over {span}" if info.warmup_epochs > 0 else ""
    if info.schedule == "noam":
        warmup = f", up to lr_end over {span}, then lr_end·sqrt(W/k)"
    if info.schedule != "triangular":
        return f"{info.schedule} schedule: {fmt(info.n_epochs)} epochs\n({warmup.lstrip(', ') or 'no warmup'}; drawn on a log axis)"
    n_cycles = info.n_epochs / info.cycle_size_epochs
    cycles = f"{fmt(n_cycles)} cycle{'' if np.isclose(n_cycles, 1) else 's'}"
    return (f"Triangular cyclical schedule: {fmt(info.n_epochs)} epochs, {cycles} of "
            f"{fmt(info.cycle_size_epochs)} epochs\n(linear ramps{warmup}, drawn on a log axis)")

