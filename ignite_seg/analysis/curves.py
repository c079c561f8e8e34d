"""The final trials: loss and perf through time, and the distribution of the final metrics."""
from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

import numpy as np

from ..storage.result_keys import ResultKeys
from ._mpl import COLORS, band_phrase, count_text, draw_trials, fmt, new_figure, note_space, perf_label, set_color
from .outcomes import BestMarks
from .stats import Band, Mode, Space, Stats, describe, interval_name, mean_band, space_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "CurveSet", "SetCurves", "ThroughTimeInfo", "throughtime_info", "plot_throughtime", "draw_throughtime_panel",
    "trial_counts", "trial_stops", "draw_trial_band", "draw_stops", "draw_best",
    "FinalInfo", "final_info", "plot_final_distribution", "draw_final_distribution",
    "FinalPanelsInfo", "final_panels_info", "plot_final_panels",
    "FinalPairsInfo", "final_pairs_info", "plot_final_pairs",
]


#: Below this many trials the bands are the min–max spread, not the t-interval (t = 12.7 for N = 2 hides the data).
MINMAX_BELOW = 3


class CurveSet(NamedTuple):
    trials: np.ndarray
    band: Band


class SetCurves(NamedTuple):
    """Loss and perf through time on one more validation set, under its name."""

    name: str
    loss: CurveSet
    perf: CurveSet


class ThroughTimeInfo(NamedTuple):
    epochs: np.ndarray
    trial_ids: np.ndarray
    loss_train: CurveSet
    loss_val: CurveSet
    perf_train: CurveSet
    perf_val: CurveSet
    perf_label: str
    #: The primary validation set's label (``val``, or ``val (<name>)``), and every other validation set.
    val_label: str = "val"
    more_val: tuple[SetCurves, ...] = ()
    #: Each trial's best checkpoint (``train(best_metric=...)``), marked on the loss or perf panel.
    best: BestMarks | None = None
    #: The early stops the trials recorded (``result.json``; the summary counts the same); ``None``: read
    #: them off the curves (a trial whose curves end before the last point; misses the one that ends last)
    recorded_stops: tuple[tuple[int, float], ...] | None = None
    #: The best constant output's loss on the trials' training subsets (their ``result.json``
    #: ``constant_loss_train``, the median; None: not recorded): a training curve on it learned nothing.
    constant_train: float | None = None
    #: Where the loss and the perf bands are valid (:func:`.space_of` over every split's curves).
    loss_space: Space = "log"
    perf_space: Space = "unit"

    @property
    def counts(self) -> np.ndarray:
        """The trials with a finite value at each point: fewer after a trial stopped early."""
        return trial_counts(self.loss_train, self.loss_val, self.perf_train, self.perf_val)

    @property
    def stops(self) -> tuple[tuple[int, float], ...]:
        """``(trial id, epoch)`` of each trial stopped early: as recorded, else where its curves end early."""
        if self.recorded_stops is not None:
            return self.recorded_stops
        return trial_stops(self.epochs, self.trial_ids, self.loss_train, self.loss_val, self.perf_train, self.perf_val)


def _finite(sets: tuple[CurveSet, ...]) -> np.ndarray:
    """``(T, S)``: whether a trial has a finite value at a point in any of ``sets``."""
    return np.logical_or.reduce([np.isfinite(c.trials) for c in sets])


def trial_counts(*sets: CurveSet) -> np.ndarray:
    """How many trials have a finite value at each point, in any of ``sets`` (one count per point)."""
    return _finite(sets).sum(axis=0).astype(np.int64)


def trial_stops(epochs: np.ndarray, trial_ids: np.ndarray, *sets: CurveSet) -> tuple[tuple[int, float], ...]:
    """The trials whose curves end before the last point (a trial stopped early: NaN-padded by the
    collation), each with the epoch of its last finite point, in trial order."""
    out = []
    for tid, row in zip(trial_ids, _finite(sets)):
        k = np.flatnonzero(row)
        if k.size and k[-1] < row.size - 1:
            out.append((int(tid), float(epochs[k[-1]])))
    return tuple(out)


def curve_set(tt: Mapping[str, np.ndarray], key: str, space: Space | None = None) -> CurveSet:
    """The ``(T, S)`` curves of ``key`` and their mean ± 95% band, valid in ``space`` (default: the key's,
    :func:`.space_of`)."""
    ids, epochs = np.asarray(tt["trial_ids"]), np.asarray(tt["epochs"])
    y = np.asarray(tt[key], dtype=np.float64).reshape(ids.size, epochs.size)
    return CurveSet(y, mean_band(y, space or space_of(key, y)))


def _kind_space(tt: Mapping[str, np.ndarray], kind: str) -> Space:
    """One space for every split's curves of ``kind`` (``losses`` or ``perfs``), so a panel's bands and its legend
    agree: linear for all where any of them leaves the kind's own space (:func:`.space_of`)."""
    values = [np.asarray(v, dtype=np.float64).ravel() for k, v in tt.items() if k.startswith(f"{kind}_")]
    return space_of(kind, np.concatenate(values) if values else None)


def throughtime_info(tt: Mapping[str, np.ndarray], accuracy_style: str = "classification",
                     keys: ResultKeys | None = None, best: BestMarks | None = None,
                     stops: tuple[tuple[int, float], ...] | None = None,
                     constant_train: float | None = None) -> ThroughTimeInfo | None:
    """Curves of every completed trial with their mean ± 95% band; ``None`` without completed trials.

    ``keys``: the run's validation sets (default: one, ``val``); those without curves are left out.
    ``best``: the trials' best checkpoints (marked when chosen by ``loss`` or ``perf``).
    ``stops``: the early stops the trials recorded (None: read off the curves).
    ``constant_train``: the best constant output's loss on the training subsets (a line on the loss panel).
    """
    epochs = np.asarray(tt.get("epochs", np.zeros(0)), dtype=np.float64)
    ids = np.asarray(tt.get("trial_ids", np.zeros(0)), dtype=np.int64)
    if epochs.size == 0 or ids.size == 0:
        return None
    keys = keys or ResultKeys()
    loss_space, perf_space = _kind_space(tt, "losses"), _kind_space(tt, "perfs")
    losses = functools.partial(curve_set, tt, space=loss_space)
    perfs = functools.partial(curve_set, tt, space=perf_space)
    more = tuple(SetCurves(keys.label(s), losses(f"losses_{s}"), perfs(f"perfs_{s}"))
                 for s in keys.val_splits[1:] if f"losses_{s}" in tt and f"perfs_{s}" in tt)
    return ThroughTimeInfo(epochs, ids, losses("losses_train"), losses("losses_val"), perfs("perfs_train"),
                           perfs("perfs_val"),
                           perf_label(accuracy_style, loss_space != "log"), keys.label("val"), more, best, stops,
                           constant_train, loss_space, perf_space)


def _upto(cset: CurveSet, upto: int | None) -> CurveSet:
    return CurveSet(cset.trials[:, :upto], Band(*(a[:upto] for a in cset.band)))


def draw_trial_band(ax: Axes, x: np.ndarray, cset: CurveSet, color: str, name: str, space: Space,
                    minmax: bool, **kw: Any) -> None:
    """The mean of the trials and a band, where they mean something: the mean where at least 2 trials
    remain (everywhere for a one-trial run), the min–max band (``minmax``) where 2 do, the 95% CI where
    :data:`MINMAX_BELOW` do. The legend says how many trials the points average (``4``, or ``4→2``
    after early stops)."""
    n = cset.band.n
    nt = count_text(n)
    many = bool(n.size) and int(n.max()) > 1
    kind = "geometric mean" if space == "log" and many else "mean"
    ax.plot(x, np.where(n >= 2, cset.band.mean, np.nan) if many else cset.band.mean, color=color, lw=2,
            label=f"{name}: {kind} of {nt} {'trial' if nt == '1' else 'trials'}", **kw)
    if not many:
        return
    if minmax:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns after every trial stopped
            low, high = np.nanmin(cset.trials, axis=0), np.nanmax(cset.trials, axis=0)
    else:
        low, high = cset.band.low, cset.band.high
    ok = n >= (2 if minmax else MINMAX_BELOW)
    ax.fill_between(x, np.where(ok, low, np.nan), np.where(ok, high, np.nan), color=color, alpha=0.25, lw=0,
                    label=f"{name}: {band_phrase(nt, 'trials', minmax)}")


def draw_stops(ax: Axes, stops: tuple[tuple[int, float], ...], upto: float = np.inf, top: bool = True) -> None:
    """A thin dotted line where trials stopped early (the count of trials drops after it), named at the
    ``top`` or the bottom of the axes (where the curves are not: a loss falls, a perf rises) when there
    are few such places."""
    at: dict[float, list[int]] = {}
    for tid, epoch in stops:
        if epoch <= upto:
            at.setdefault(epoch, []).append(tid)
    for k, (epoch, ids) in enumerate(sorted(at.items())):
        ax.axvline(epoch, color="dimgrey", lw=0.9, ls=":", zorder=1,
                   label="a trial stopped early (N drops after)" if k == 0 else None)
        if len(at) <= 6:
            who = f"trial {ids[0]}" if len(ids) == 1 else (f"trials {', '.join(map(str, ids))}" if len(ids) <= 3
                                                            else f"{len(ids)} trials")
            ax.text(epoch, 0.98 if top else 0.02, f"{who} stopped", transform=ax.get_xaxis_transform(), rotation=90,
                    ha="right", va="top" if top else "bottom", fontsize=7, color="dimgrey", clip_on=True,
                    bbox={"facecolor": "white", "alpha": 0.75, "lw": 0, "pad": 1})


def draw_best(ax: Axes, marks: BestMarks, upto: float = np.inf) -> None:
    """A star at each trial's best checkpoint (its epoch and the value measured there)."""
    keep = marks.epochs <= upto
    what = "each trial's best checkpoint" if marks.trial_ids.size > 1 else "best checkpoint"
    ax.plot(marks.epochs[keep], marks.values[keep], "*", ls="none", color=COLORS["chosen"], ms=12, mec="k", mew=0.6,
            zorder=5, clip_on=False, label=f"{what} (by {marks.label}, {marks.mode})")


def draw_throughtime_panel(ax: Axes, info: ThroughTimeInfo, which: str, upto: int | None = None) -> None:
    """Loss (``which="loss"``) or perf, train and val, every trial and the mean band, to ``upto`` points;
    where trials stopped early, and the best checkpoints when chosen by this panel's metric."""
    x = info.epochs[:upto]
    n = info.trial_ids.size
    nt = count_text(info.counts[:upto])
    pair = (info.loss_train, info.loss_val) if which == "loss" else (info.perf_train, info.perf_val)
    space = info.loss_space if which == "loss" else info.perf_space
    for split, name, cset in zip(("train", "val"), ("train", info.val_label), pair):
        draw_trials(ax, x, cset.trials[:, :upto], COLORS[split], f"{name}: each trial (N={nt})")
        # below 3 trials the t-interval of the mean (t = 12.7 for N = 2) hides the data: show min-max
        draw_trial_band(ax, x, _upto(cset, upto), COLORS[split], name, space, n < MINMAX_BELOW)
    for k, more in enumerate(info.more_val):  # the other validation sets: mean and band only
        cset = more.loss if which == "loss" else more.perf
        draw_trial_band(ax, x, _upto(cset, upto), set_color(k), more.name, space, n < MINMAX_BELOW, ls="--")
    if n >= MINMAX_BELOW:
        note_space(ax, space)
    end = float(x[-1]) if x.size else -np.inf
    draw_stops(ax, info.stops, end, top=which == "loss")
    if info.best is not None and info.best.metric == which:
        draw_best(ax, info.best, end)
    shown = (*pair, *((m.loss if which == "loss" else m.perf) for m in info.more_val))
    ax.set_xlim(info.epochs[0], info.epochs[-1])
    ax.set_xlabel("epoch")
    if which == "loss":
        constant = [] if info.constant_train is None else [info.constant_train]
        if constant:
            ax.axhline(constant[0], color="grey", ls="--", lw=1, label=f"best constant output, train ({fmt(constant[0])})")
        every = np.concatenate([c.trials.ravel() for c in shown] + [np.asarray(constant, dtype=np.float64)])
        every = every[np.isfinite(every)]
        if every.size and every.min() > 0 and every.max() / every.min() > 20:
            ax.set_yscale("log")
            ax.set_ylabel("loss (log scale)")
        else:
            ax.set_ylabel("loss")
        if every.size:
            lo, hi = float(every.min()), float(every.max())
            ax.set_ylim(*((lo / 1.3, hi * 1.3) if ax.get_yscale() == "log" else (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))))
    else:
        ax.set_ylabel(info.perf_label)
        every = np.concatenate([c.trials.ravel() for c in shown])
        every = every[np.isfinite(every)]
        if every.size:
            lo, hi = float(every.min()), float(every.max())
            ax.set_ylim(lo - 0.05 * (hi - lo or 1), hi + 0.05 * (hi - lo or 1))
    ax.grid(True, alpha=0.3)


def plot_throughtime(info: ThroughTimeInfo, dpi: float = 110) -> Figure:
    """Train/val loss and perf through time: each trial and the mean ± 95% CI across trials."""
    fig = new_figure(12, 6.2, dpi)
    axes = fig.subplots(1, 2)
    for ax, which in zip(axes, ("loss", "perf")):
        draw_throughtime_panel(ax, info, which)
        ax.set_title(f"{'Loss' if which == 'loss' else info.perf_label.capitalize()} through time")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=2, frameon=False)
    stopped = f", {len(info.stops)} stopped early" if info.stops else ""
    fig.suptitle(f"Final trials through time (N={count_text(info.counts)} completed trials{stopped}; "
                 "fixed subsets of train/val)")
    return fig


class FinalInfo(NamedTuple):
    trial_ids: np.ndarray
    values: np.ndarray
    stats: Stats
    label: str
    n_failed: int
    n_diverged: int
    #: where the interval of the mean is valid (:func:`.stats.space_of` of the key)
    space: Space = "linear"


def final_info(results: Mapping[str, np.ndarray], key: str = "final_perf_val", label: str = "final val perf",
               n_failed: int = 0, n_diverged: int = 0, mode: Mode | None = None) -> FinalInfo | None:
    """One final metric of the completed trials and its statistics (``mode`` by default from the name)."""
    ids = np.asarray(results.get("trial_ids", np.zeros(0)), dtype=np.int64)
    if ids.size == 0:
        return None
    values = np.asarray(results[key], dtype=np.float64)
    mode = mode or ("min" if "loss" in key else "max")
    space = space_of(key, values)
    return FinalInfo(ids, values, describe(values, ids, mode, space), label, int(n_failed), int(n_diverged), space)


class FinalPanelsInfo(NamedTuple):
    """The final perf on every validation set, then every custom metric on every validation set."""

    panels: tuple[FinalInfo, ...]


def final_panels_info(results: Mapping[str, np.ndarray], keys: ResultKeys, perf_label: str = "perf",
                      n_failed: int = 0, n_diverged: int = 0) -> FinalPanelsInfo | None:
    """One panel per validation set (perf) and per custom metric and validation set; ``None`` without trials.

    A plain run's one panel is labelled ``final val <perf>`` as before; keys absent from ``results``
    are left out.
    """
    wanted: list[tuple[str, str, Mode]] = [(f"final_perf_{split}", f"final {keys.label(split)} {perf_label}", "max") for split in keys.val_splits]
    for m in keys.metric_names:
        wanted += [(f"final_metric_{m}_{split}", f"final {m} on {keys.label(split)}", keys.mode(m))
                   for split in keys.val_splits]
    panels = [final_info(results, key, label, n_failed, n_diverged, mode) for key, label, mode in wanted
              if key in results]
    shown = tuple(p for p in panels if p is not None)
    return FinalPanelsInfo(shown) if shown else None


def _jitter(n: int) -> np.ndarray:
    """Deterministic offsets in [-0.3, 0.3] (golden-ratio sequence) so the figure is reproducible."""
    return (np.mod(np.arange(n) * 0.6180339887, 1.0) - 0.5) * 0.6


def draw_final_distribution(ax: Axes, info: FinalInfo, upto: int | None = None) -> None:
    """Strip plot of the trials' values with the mean, its 95% CI and the best/worst trials."""
    v = info.values[:upto]
    s = info.stats
    y = _jitter(info.values.size)[:upto]
    finite = info.values[np.isfinite(info.values)]
    if finite.size >= 10:
        counts, edges = np.histogram(finite, bins="auto")
        ax2 = ax.twinx()
        ax2.stairs(counts, edges, fill=True, color="grey", alpha=0.18, label="histogram")
        ax2.set_ylabel("trials per bin", color="grey")
        ax2.set_zorder(ax.get_zorder() - 1)
        ax.patch.set_visible(False)
    ax.plot(v, y, "o", color=COLORS["val"], ms=8, alpha=0.8, mec="k", mew=0.5, label=f"one trial (N={s.n})")
    if upto is None or upto >= info.values.size:
        if s.n > 1:
            ax.axvspan(s.ci_low, s.ci_high, color=COLORS["val"], alpha=0.18, lw=0,
                       label=f"{interval_name(info.space)} [{fmt(s.ci_low, 4)}, {fmt(s.ci_high, 4)}]")
        ax.axvline(s.mean, color="k", lw=1.5, label=f"mean {fmt(s.mean, 4)} (std {fmt(s.std, 2)})")
        if s.best_trial is not None:
            k = int(np.flatnonzero(info.trial_ids == s.best_trial)[0])
            ax.annotate(f"best: trial {s.best_trial}", (s.best, y[k]), textcoords="offset points",
                        xytext=(0, 10), ha="center", fontsize=8)
            k = int(np.flatnonzero(info.trial_ids == s.worst_trial)[0])
            if s.worst_trial != s.best_trial:
                ax.annotate(f"worst: trial {s.worst_trial}", (s.worst, y[k]), textcoords="offset points",
                            xytext=(0, -14), ha="center", fontsize=8)
    ax.set_ylim(-1, 1.2)
    ax.set_yticks([])
    if finite.size:  # the dots and the interval drawn from them
        ends = np.array([finite.min(), finite.max(), s.ci_low, s.ci_high])
        lo, hi = float(np.nanmin(ends)), float(np.nanmax(ends))
        pad = max(0.08 * (hi - lo), 1e-3 * max(abs(hi), 1e-12), 1e-9)
        ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel(info.label)
    ax.grid(True, axis="x", alpha=0.3)


def plot_final_distribution(info: FinalInfo, dpi: float = 110) -> Figure:
    """Distribution of a final metric across trials (one dot per trial)."""
    fig = new_figure(8, 3.8, dpi)
    ax = fig.subplots()
    draw_final_distribution(ax, info)
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9, ncols=2)
    extra = []
    if info.n_failed:
        extra.append(f"{info.n_failed} failed")
    if info.n_diverged:
        extra.append(f"{info.n_diverged} diverged")
    note = f"; not shown: {', '.join(extra)}" if extra else ""
    ax.set_title(f"{info.label.capitalize()} across {info.stats.n} completed trials{note}")
    return fig


def plot_final_panels(info: FinalPanelsInfo, dpi: float = 110) -> Figure:
    """Distribution of each final metric across trials, one row each (one row: as
    :func:`plot_final_distribution`)."""
    if len(info.panels) == 1:
        return plot_final_distribution(info.panels[0], dpi)
    fig = new_figure(8, 0.4 + 2.6 * len(info.panels), dpi)
    for ax, panel in zip(fig.subplots(len(info.panels), 1, squeeze=False)[:, 0], info.panels):
        draw_final_distribution(ax, panel)
        ax.legend(fontsize=7, loc="upper left", framealpha=0.9, ncols=2)
        ax.set_title(f"{panel.label.capitalize()} (best: {'highest' if panel.stats.mode == 'max' else 'lowest'})",
                     fontsize=10)
    first = info.panels[0]
    extra = [f"{n} {what}" for n, what in ((first.n_failed, "failed"), (first.n_diverged, "diverged")) if n]
    note = f"; not shown: {', '.join(extra)}" if extra else ""
    fig.suptitle(f"Final metrics across {first.stats.n} completed trials, on every validation set{note}")
    return fig


class FinalPairsInfo(NamedTuple):
    trial_ids: np.ndarray
    loss_train: np.ndarray
    loss_val: np.ndarray
    perf_train: np.ndarray
    perf_val: np.ndarray
    perf_label: str


def final_pairs_info(results: Mapping[str, np.ndarray], accuracy_style: str = "classification") -> FinalPairsInfo | None:
    ids = np.asarray(results.get("trial_ids", np.zeros(0)), dtype=np.int64)
    if ids.size == 0:
        return None
    g = lambda k: np.asarray(results[k], dtype=np.float64)  # noqa: E731
    return FinalPairsInfo(ids, g("final_loss_train"), g("final_loss_val"), g("final_perf_train"),
                          g("final_perf_val"), perf_label(accuracy_style))


def plot_final_pairs(info: FinalPairsInfo, dpi: float = 110) -> Figure:
    """Final train and val loss and perf of each trial, joined per trial: the generalisation gap."""
    fig = new_figure(10, 4.4, dpi)
    axes = fig.subplots(1, 2)
    n = info.trial_ids.size
    for ax, (name, tr, va) in zip(axes, (("loss", info.loss_train, info.loss_val),
                                         (info.perf_label, info.perf_train, info.perf_val))):
        for k in range(n):
            ax.plot([0, 1], [tr[k], va[k]], "-", color="grey", lw=0.8, alpha=0.6,
                    label=f"one trial (N={n})" if k == 0 else None)
        ax.plot(np.zeros(n), tr, "o", color=COLORS["train"], ms=7, mec="k", mew=0.5, label="train")
        ax.plot(np.ones(n), va, "o", color=COLORS["val"], ms=7, mec="k", mew=0.5, label="val")
        gap = va - tr
        gap = gap[np.isfinite(gap)]
        if gap.size:
            ax.text(0.5, 0.02, f"mean gap val − train: {fmt(float(gap.mean()), 3)}", transform=ax.transAxes,
                    ha="center", va="bottom", fontsize=9)
        ax.set_xticks([0, 1], ["final train", "final val"])
        ax.set_xlim(-0.4, 1.4)
        ax.set_ylabel(f"final {name}")
        ax.set_title(f"Final {name}: train → val per trial")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="best", framealpha=0.9)
    fig.suptitle(f"Generalisation gap of the {n} completed trials (full train and val sets)")
    return fig
