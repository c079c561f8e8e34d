"""The scenes of the walk-through video and of the animations: what each draws, frame by frame.

A *scene* is drawn by a builder ``(fig, snap, n) -> Animated`` (``snap``: the run, read once, :class:`.snapshot.Snapshot`): it draws the scene's final
picture into a (sub)figure once and returns the artists that change and ``update(k)``, which sets
them up for frame ``k`` of ``n``. :func:`scene_plan` decides which scenes a run has and how many
frames each gets, so the frame count of a video is known before it is rendered (the tests read it
back). :mod:`.movie` lays the scenes out, blits the frames and encodes them.
"""
from __future__ import annotations

import math
import textwrap
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, cast

import numpy as np

from ..engine.constant_output import CONSTANT_TOL
from ..storage.schemas import LRRangeStep, MiscFile
from . import extract
from ._mpl import BELOW_ZERO_FORM, COLORS, fmt
from .batch import BatchInfo, draw_batch_size
from .captions import schedule_caption, throughtime_caption
from .curves import draw_final_distribution, draw_throughtime_panel
from .hidden import draw_pca, pca_at, pca_limit
from .lr import LRSweepInfo, draw_lr_sweep_panel, mark_constant, mark_range_and_divergence, style_schedule_axes
from .snapshot import Snapshot

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure
    from mpl_toolkits.mplot3d.axes3d import Axes3D

__all__ = ["Scene", "scene_plan", "SCENE_SECONDS", "Animated", "Builder", "BUILDERS", "LEGEND", "card_lines", "CARD_WIDTH",
           "CARD_LINES"]

#: Length of each scene of the walk-through video, in seconds.
SCENE_SECONDS = {"title": 3.0, "lr_sweep": 6.0, "batch_size": 4.0, "schedule": 3.0, "training": 8.0,
                 "final": 4.0, "hidden": 8.0, "closing": 4.0}
#: Fraction of a progressive scene spent drawing; the rest holds the finished picture.
REVEAL = 0.75
LEGEND = 7.5  # points: about 8 pixels high in a 360p draft


class Scene(NamedTuple):
    name: str
    frames: int
    caption: str


def _frames(name: str, fps: int) -> int:
    return max(1, int(round(SCENE_SECONDS[name] * fps)))


def _progress(k: int, n: int) -> float:
    """0..1 over the reveal part of a scene, then 1 (hold)."""
    reveal = max(1, int(math.ceil(n * REVEAL)) - 1)
    return min(1.0, k / reveal)


def batch_caption(bs: BatchInfo) -> str:
    """The batch-size scene's caption: the noise scale or that it could not be measured, and whether
    candidate runs decided."""
    measured = np.isfinite(bs.noise_scale) and bs.noise_scale > 0
    ns = f"noise scale B_simple ≈ {fmt(bs.noise_scale)}; " if measured else \
        "the noise scale could not be measured, so the initial batch size stood in for it; "
    runs = "candidates scored with short runs (successive halving)" if bs.cand_bss.size else "no candidate runs"
    return f"Batch size: {ns}{runs}; chosen {fmt(bs.final_batch_size)}."


def lr_scene_caption(lr: LRSweepInfo, used: LRRangeStep | None) -> str:
    """The LR scene's caption: the sweep, and the chosen range with the rule that put it there (``used``: the
    range test whose range was used, from ``misc.json``; None in a folder without it)."""
    lo, hi = lr.lr_range
    where = ("where the smoothed loss falls fastest" if used is None or not used.plateau_lr
             else "the top of the floor the loss sat on before diverging (the plateau rule)"
             if used.range_top != "quiet"
             else "the top of the quiet part of the floor the loss sat on, where it lay within "
                  f"{CONSTANT_TOL:.0%} of the best constant output's (the plateau rule, for a schedule that holds its "
                  "peak)")
    constant = (f" Grey dashed: the held-out loss of the best constant output ({fmt(lr.constant_loss)})."
                if lr.constant_loss is not None else "")
    return (f"LR range test: the LR grows geometrically from {fmt(lr.lrs[0])} to {fmt(lr.lrs[-1])} "
            f"({lr.n_repeats} repeats). Green: the chosen range [{fmt(lo)}, {fmt(hi)}], {where}.{constant}")


def scene_plan(folder: str | Snapshot, fps: int, hidden: bool = True) -> list[Scene]:
    """The walk-through video's scenes for this run, with frame counts and captions."""
    snap = folder if isinstance(folder, Snapshot) else Snapshot(folder)
    scenes = [Scene("title", _frames("title", fps), "")]
    lr = extract.lr_of(snap)
    if lr is not None:
        steps = (MiscFile.from_json(snap.misc) if isinstance(snap.misc, Mapping) else MiscFile()).steps
        scenes.append(Scene("lr_sweep", _frames("lr_sweep", fps), lr_scene_caption(lr, steps.used_lr_range)))
    bs = extract.batch_of(snap)
    if bs is not None:
        scenes.append(Scene("batch_size", _frames("batch_size", fps), batch_caption(bs)))
    sched = extract.schedule_of(snap)
    if sched is not None:
        scenes.append(Scene("schedule", _frames("schedule", fps), f"Final trials: {schedule_caption(sched)}."))
    tt = extract.throughtime_of(snap)
    if tt is not None:
        scenes.append(Scene("training", _frames("training", fps), f"{tt.trial_ids.size} final trials through time. "
                            + throughtime_caption(tt)))
    fin = extract.final_of(snap)
    if fin is not None:
        s = fin.stats
        ci = f" (95% CI [{fmt(s.ci_low, 4)}, {fmt(s.ci_high, 4)}])" if s.n > 1 else ""
        scenes.append(Scene("final", _frames("final", fps),
                            f"{fin.label.capitalize()}: mean {fmt(s.mean, 4)}{ci}; best {fmt(s.best, 4)} "
                            f"(trial {s.best_trial}) of {s.n} completed trials."))
    if hidden:
        pca = extract.pca_of(snap)
        if pca is not None:
            scenes.append(Scene("hidden", _frames("hidden", fps),
                                f"Hidden representation of {pca.labels.size} val points ({pca.layer_title()}), 3D PCA at each epoch, "
                                f"{'coloured by class' if pca.categorical else 'coloured by target'}."))
    scenes.append(Scene("closing", _frames("closing", fps), ""))
    return scenes


# -- scenes ---------------------------------------------------------------------------------------
#
# A scene builder draws the scene's final picture into a (sub)figure and returns the artists
# that change (``dynamic``) and ``update(k)``, which sets them up for frame k. The rest of the
# picture (axes, ticks, labels, layout) is drawn once and blitted; ``redraw=True`` (the rotating
# 3D view) redraws everything each frame.


class Animated(NamedTuple):
    dynamic: list[Any]
    update: Callable[[int], None]
    redraw: bool = False


Builder = Callable[["Figure | SubFigure", Snapshot, int], Animated]


def _new_artists(ax: Any, draw: Callable[[], object]) -> list[Any]:
    before = set(map(id, ax.get_children()))
    draw()
    return [a for a in ax.get_children() if id(a) not in before]


class _Reveal:
    """Shows the data artists of some axes left of a moving x position (a clip box per axes)."""

    def __init__(self) -> None:
        self.groups: list[tuple[Any, list[Any]]] = []

    def add(self, ax: Any, artists: list[Any]) -> None:
        self.groups.append((ax, artists))

    def to(self, x: float) -> None:
        from matplotlib.transforms import Bbox

        for ax, artists in self.groups:
            box = ax.bbox
            px = float(ax.transData.transform((x, 1.0))[0]) if np.isfinite(x) else box.x1
            clip = Bbox.from_extents(box.x0, box.y0, min(max(px, box.x0), box.x1) + 1, box.y1)
            for a in artists:
                a.set_clip_box(clip)


def _static(fig: Figure | SubFigure, draw: Callable[[], object]) -> Animated:
    draw()
    return Animated([], lambda k: None)


def _title(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    run = snap.run
    summary = extract.summary_of(snap)
    hp = summary.final_hp
    loaders = run.loaders
    c = summary.counts
    s = summary.stats["final_perf_val"]
    lines = [
        f"model: {loaders.get('model', {}).get('describe', '?')}",
        f"data: {loaders.get('dataset', {}).get('describe', '?')}",
        f"loss: {loaders.get('loss', {}).get('describe', '?')}",
        "",
        f"hyperparameters ({summary.hp_kind}): lr {fmt(hp.get('lr_start', math.nan))} → "
        f"{fmt(hp.get('lr_end', math.nan))}, batch {hp.get('batch_size', '?')}, {hp.get('epochs', '?')} epochs",
        f"trials: {c.get('completed', 0)} completed, {c.get('diverged', 0)} diverged, {c.get('failed', 0)} failed",
        f"final val perf: mean {fmt(s.mean, 4)}, best {fmt(s.best, 4)}" if s.n else "no completed trial",
    ]

    def draw() -> None:
        fig.text(0.5, 0.82, f"ignite_seg run: {summary.title}", ha="center", va="center", fontsize=18, weight="bold")
        fig.text(0.5, 0.72, f"{summary.created or ''}   seed {'?' if run.seed is None else run.seed}", ha="center", va="center",
                 fontsize=10, color="grey")
        fig.text(0.5, 0.38, "\n".join(lines), ha="center", va="center", fontsize=10, linespacing=1.5)

    return _static(fig, draw)


#: The closing card's text: each decision's headline (what was decided, not why) in lines of at most
#: ``CARD_WIDTH`` characters, at most ``CARD_LINES`` of them; the reasons are in the report the card names.
CARD_WIDTH, CARD_LINES = 100, 2


def card_lines(decisions: list[str]) -> list[str]:
    """The closing card's lines from the summary's decision lines (``- **name**: what — why``).

    Example:
        >>> card_lines(["- **batch size**: 32 — best held-out loss of the 2 candidate(s)"])
        ['batch size: 32']
    """
    out: list[str] = []
    for line in decisions:
        head = line[2:].replace("**", "").replace("`", "").split(" — ", 1)[0]
        out += textwrap.wrap(head, CARD_WIDTH, subsequent_indent="    ", max_lines=CARD_LINES, placeholder=" …")
    return out


def _closing(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    """The closing card: the run's decisions and result, as the summary states them."""
    from .text import decision_lines

    lines = card_lines(decision_lines(extract.summary_of(snap)))

    def draw() -> None:
        fig.text(0.5, 0.85, "Result", ha="center", va="center", fontsize=18, weight="bold")
        fig.text(0.5, 0.45, "\n".join(lines), ha="center", va="center", fontsize=9, linespacing=1.5)
        fig.text(0.5, 0.06, "details: analysis/index.html and summary.md", ha="center", fontsize=9, color="grey")

    return _static(fig, draw)


def _shared_sweep_legend(fig: Figure | SubFigure, axes: Any) -> None:
    """One legend under both panels (two side by side ran into each other and off the frame's
    edges): the loss panel's entries, with the perf panel's mean beside the loss mean."""
    handles, labels = axes[0].get_legend_handles_labels()
    for h, label in zip(*axes[1].get_legend_handles_labels()):
        if label.startswith("repeats: mean") and label in labels:
            i = labels.index(label)
            labels[i] = f"loss: {label}"
            handles.insert(i + 1, h)
            labels.insert(i + 1, f"perf: {label}")
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=LEGEND, frameon=False)


def _lr_sweep(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    info = extract.lr_of(snap)
    assert info is not None
    axes = fig.subplots(1, 2)
    reveal, marks = _Reveal(), []
    for ax, which in zip(axes, ("loss", "perf")):
        reveal.add(ax, _new_artists(ax, partial(draw_lr_sweep_panel, ax, info, which, marks=False)))
        if which == "loss":  # measured before the sweep starts: in view from the first frame
            mark_constant(ax, info)
        marks += _new_artists(ax, partial(mark_range_and_divergence, ax, info, legend=True))
        ax.set_title(f"{which} vs learning rate", fontsize=10)
    _shared_sweep_legend(fig, axes)
    log_lrs = np.log(info.lrs)

    def update(k: int) -> None:
        p = _progress(k, n)
        reveal.to(float(np.exp(log_lrs[0] + p * (log_lrs[-1] - log_lrs[0]))))
        for m in marks:
            m.set_visible(p >= 1.0)

    return Animated([a for _, arts in reveal.groups for a in arts] + marks, update)


def _batch_size(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    info = extract.batch_of(snap)
    assert info is not None
    return _static(fig, lambda: draw_batch_size(fig, info, legend_size=LEGEND, compact=True))


def _schedule(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    info = extract.schedule_of(snap)
    assert info is not None
    ax = fig.subplots()
    reveal = _Reveal()
    reveal.add(ax, _new_artists(ax, lambda: ax.plot(info.epochs, info.lrs, color=COLORS["chosen"], lw=2,
                                                    label="learning rate of every trial")))
    (dot,) = ax.plot([info.epochs[-1]], [info.lrs[-1]], "o", color=COLORS["chosen"])
    style_schedule_axes(ax, info)
    ax.set_title("Schedule of the final trials", fontsize=10)
    ax.legend(fontsize=LEGEND, loc="upper right")  # above the curve: ylim leaves room over max(lr)
    ax.grid(True, alpha=0.3)

    def update(k: int) -> None:
        x = _progress(k, n) * info.n_epochs
        reveal.to(x)
        dot.set_data([x], [np.interp(x, info.epochs, info.lrs)])

    return Animated(reveal.groups[0][1] + [dot], update)


def _training(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    info = extract.throughtime_of(snap)
    assert info is not None
    axes = fig.subplots(1, 2)
    reveal = _Reveal()
    for ax, which in zip(axes, ("loss", "perf")):
        arts = _new_artists(ax, partial(draw_throughtime_panel, ax, info, which))
        for a in arts:  # revealed with the curves (the best checkpoints' stars are unclipped on the still figure)
            a.set_clip_on(True)
        reveal.add(ax, arts)
        name = info.perf_label.removesuffix(BELOW_ZERO_FORM)  # the form below zero: on the y axis (narrow panels)
        ax.set_title(f"{'loss' if which == 'loss' else name} through time", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=LEGEND, frameon=False)
    # a loss curve starts high: the lower left corner of the loss panel stays free
    clock = axes[0].text(0.02, 0.03, "", transform=axes[0].transAxes, fontsize=10, weight="bold", zorder=5,
                         bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1.5})  # over any line

    def update(k: int) -> None:
        x = info.epochs[0] + _progress(k, n) * (info.epochs[-1] - info.epochs[0])
        reveal.to(x)
        clock.set_text(f"epoch {x:.1f}")

    return Animated([a for _, arts in reveal.groups for a in arts] + [clock], update)


def _final(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    info = extract.final_of(snap)
    assert info is not None
    ax = fig.subplots()
    arts = _new_artists(ax, lambda: draw_final_distribution(ax, info))
    ax.legend(fontsize=LEGEND, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2, frameon=False)
    ax.set_title(f"{info.label.capitalize()} of {info.values.size} completed trials", fontsize=10)
    title = ax.text(0.01, 0.97, "", transform=ax.transAxes, fontsize=8, va="top")
    dots = next(a for a in arts if getattr(a, "get_label", lambda: "")().startswith("one trial"))
    x_all, y_all = (np.asarray(v) for v in dots.get_data())
    rest = [a for a in arts if a is not dots]

    def update(k: int) -> None:
        p = _progress(k, n)
        shown = max(1, int(math.ceil(p * x_all.size)))
        dots.set_data(x_all[:shown], y_all[:shown])
        for a in rest:
            a.set_visible(p >= 1.0)
        title.set_text(f"{shown} of {x_all.size} trials")

    return Animated([dots, *rest, title], update)


def _hidden(fig: Figure | SubFigure, snap: Snapshot, n: int) -> Animated:
    info = extract.pca_of(snap)
    assert info is not None
    last = info.coords.shape[0] - 1
    ax = cast("Axes3D", fig.add_subplot(projection="3d"))
    draw_pca(ax, info, float(last), azim=-60, legend=False)
    groups = [(sc, np.flatnonzero(m)) for sc, m in zip(ax.collections, _class_masks(info))]
    if info.categorical and np.unique(info.labels).size <= 20:
        fig.legend(*ax.get_legend_handles_labels(), loc="outside right upper", fontsize=LEGEND, title="colour",
                   title_fontsize=LEGEND, frameon=False)
    title = ax.set_title("", fontsize=10)

    def update(k: int) -> None:
        position = _progress(k, n) * last
        c = pca_at(info, position)
        for sc, idx in groups:
            sc._offsets3d = (c[idx, 0], c[idx, 1], c[idx, 2])  # the documented way to move 3D points
        lim = pca_limit(info, position)
        for setter in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
            setter(-lim, lim)
        ax.view_init(elev=20, azim=-60 + 360.0 * k / n)
        ep = float(np.interp(position, np.arange(last + 1), info.epochs))
        title.set_text(f"epoch {ep:.1f} of {info.epochs[-1]:g}")

    # The whole 3D axes changes (the view turns), so it is the dynamic artist; the rest is cached.
    return Animated([ax], update)


def _class_masks(info: Any) -> list[np.ndarray]:
    if info.categorical:
        return [info.labels == cl for cl in np.unique(info.labels)]
    return [np.ones(info.labels.size, dtype=bool)]


BUILDERS: dict[str, Builder] = {"title": _title, "lr_sweep": _lr_sweep, "batch_size": _batch_size,
                                "schedule": _schedule, "training": _training, "final": _final, "hidden": _hidden,
                                "closing": _closing}
