"""Animations and the walk-through video: scenes drawn frame by frame into MP4 (and GIF).

A *scene* is a function ``draw(fig, k, n)`` that draws frame ``k`` of ``n`` into a (sub)figure.
:func:`scene_plan` decides which scenes a run has and how many frames each gets, so the frame
count of a video is known before it is rendered (the tests read it back).

Each scene is laid out and drawn once; every frame then blits only the artists that change over
the cached background and pipes the canvas's RGBA buffer to the ffmpeg binary of the
``imageio-ffmpeg`` wheel (``imageio_ffmpeg.write_frames``, H.264, yuv420p). matplotlib's
``FFMpegWriter.grab_frame`` would ``savefig`` (a full redraw, constrained layout included) per
frame: ~0.5 s a frame here, 100 s for a draft video instead of ~10 s. A GIF takes the same frames.
"""
from __future__ import annotations

import math
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np

from ..exceptions import AnalysisUnavailableError
from . import view
from ._mpl import COLORS, fmt, new_figure
from .batch import draw_batch_size
from .curves import draw_final_distribution, draw_throughtime_panel
from .hidden import draw_pca
from .lr import draw_lr_sweep_panel, style_schedule_axes
from .settings import AnalysisSettings

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure

__all__ = ["ffmpeg_exe", "FrameSink", "Scene", "scene_plan", "SCENE_SECONDS", "render_scene", "render_animation",
           "concat_mp4", "movie_size", "ANIMATIONS"]

#: Length of each scene of the walk-through video, in seconds.
SCENE_SECONDS = {"title": 3.0, "lr_sweep": 6.0, "batch_size": 4.0, "schedule": 3.0, "training": 8.0,
                 "final": 4.0, "hidden": 8.0}
#: Fraction of a progressive scene spent drawing; the rest holds the finished picture.
REVEAL = 0.75
FIG_W, FIG_H = 8.0, 4.5  # inches; the pixel size comes from the dpi (16:9)
LEGEND = 7.5  # points: about 8 pixels high in a 360p draft


def ffmpeg_exe() -> str:
    """The ffmpeg binary of the ``imageio-ffmpeg`` wheel (no system ffmpeg needed)."""
    try:
        import imageio_ffmpeg
    except ImportError:
        raise AnalysisUnavailableError(
            "animations and videos need the ffmpeg binary of the imageio-ffmpeg wheel: "
            "pip install imageio-ffmpeg (or pip install 'ignite_seg[video]')"
        ) from None
    return str(imageio_ffmpeg.get_ffmpeg_exe())


def movie_size(height: int) -> tuple[float, int, int]:
    """``(dpi, width, height)`` of 16:9 frames ``height`` pixels tall (both sides even, for yuv420p)."""
    height = int(2 * round(height / 18) * 9)
    dpi = height / FIG_H
    return dpi, int(round(FIG_W * dpi)), height


class FrameSink:
    """Writes RGBA frames to an MP4 (H.264, yuv420p) and optionally to a GIF.

    Frames come from the figure's Agg canvas (see :func:`render_scene`, which blits); they are
    piped to the ffmpeg binary of the ``imageio-ffmpeg`` wheel. Use as a context manager.
    """

    def __init__(self, size: tuple[int, int], mp4: Path, fps: int, gif: Path | None = None, gif_every: int = 1) -> None:
        ffmpeg_exe()
        self.size, self.mp4, self.fps, self.gif, self.gif_every = size, mp4, fps, gif, max(1, gif_every)
        self.frames = 0
        self._gif_frames: list[Any] = []
        self._writer: Any = None

    def __enter__(self) -> FrameSink:
        import imageio_ffmpeg

        self._writer = imageio_ffmpeg.write_frames(
            str(self.mp4), self.size, fps=self.fps, pix_fmt_in="rgba", pix_fmt_out="yuv420p", codec="libx264",
            macro_block_size=2, output_params=["-preset", "veryfast", "-crf", "23", "-movflags", "+faststart"],
            ffmpeg_log_level="error",
        )
        self._writer.send(None)
        return self

    def write(self, rgba: Any) -> None:
        """One frame: an (H, W, 4) uint8 array or buffer of the sink's size."""
        frame = np.asarray(rgba)
        if frame.shape[:2] != (self.size[1], self.size[0]):
            raise ValueError(f"frame of shape {frame.shape} does not match the movie size {self.size}")
        self._writer.send(frame.tobytes())
        if self.gif is not None and self.frames % self.gif_every == 0:
            from PIL import Image

            self._gif_frames.append(Image.fromarray(frame[..., :3].copy()).quantize(colors=128, method=2))
        self.frames += 1

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._writer.close()
        if exc_type is None and self.gif is not None and self._gif_frames:
            first, *rest = self._gif_frames
            first.save(self.gif, save_all=True, append_images=rest,
                       duration=int(round(1000 * self.gif_every / self.fps)), loop=0)


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


def scene_plan(folder: str, fps: int, hidden: bool = True) -> list[Scene]:
    """The walk-through video's scenes for this run, with frame counts and captions."""
    scenes = [Scene("title", _frames("title", fps), "")]
    lr = view.lr_of(folder)
    if lr is not None:
        lo, hi = lr.lr_range
        scenes.append(Scene("lr_sweep", _frames("lr_sweep", fps),
                            f"LR range test: the LR grows geometrically from {fmt(lr.lrs[0])} to {fmt(lr.lrs[-1])} "
                            f"({lr.n_repeats} repeats). Green: the chosen range [{fmt(lo)}, {fmt(hi)}], where the "
                            "smoothed loss falls fastest."))
    bs = view.batch_of(folder)
    if bs is not None:
        ns = f"noise scale B_simple ≈ {fmt(bs.noise_scale)}; " if np.isfinite(bs.noise_scale) else ""
        scenes.append(Scene("batch_size", _frames("batch_size", fps),
                            f"Batch size: {ns}candidates scored with short runs (successive halving); "
                            f"chosen {fmt(bs.final_batch_size)}."))
    sched = view.schedule_of(folder)
    if sched is not None:
        scenes.append(Scene("schedule", _frames("schedule", fps),
                            f"Final trials: triangular cyclical LR between {fmt(sched.lr_start)} and "
                            f"{fmt(sched.lr_end)}, cycle {fmt(sched.cycle_size_epochs)} epochs, "
                            f"{fmt(sched.n_epochs)} epochs."))
    tt = view.throughtime_of(folder)
    if tt is not None:
        scenes.append(Scene("training", _frames("training", fps),
                            f"{tt.trial_ids.size} trials through time on fixed train/val subsets: thin lines are "
                            "single trials, bands the mean ± 95% CI across trials."))
    fin = view.final_of(folder)
    if fin is not None:
        s = fin.stats
        ci = f" (95% CI [{fmt(s.ci_low, 4)}, {fmt(s.ci_high, 4)}])" if s.n > 1 else ""
        scenes.append(Scene("final", _frames("final", fps),
                            f"{fin.label.capitalize()}: mean {fmt(s.mean, 4)}{ci}; best {fmt(s.best, 4)} "
                            f"(trial {s.best_trial}) of {s.n} completed trials."))
    if hidden:
        pca = view.pca_of(folder)
        if pca is not None:
            scenes.append(Scene("hidden", _frames("hidden", fps),
                                f"Hidden representation of {pca.labels.size} val points (layer '{pca.layer_name}' "
                                f"of trial {view.hidden_trial_of(folder)}), 3D PCA at each epoch, "
                                f"{'coloured by class' if pca.categorical else 'coloured by target'}."))
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


Builder = Callable[["Figure | SubFigure", str, int], Animated]


def _new_artists(ax: Any, draw: Callable[[], None]) -> list[Any]:
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


def _static(fig: Figure | SubFigure, draw: Callable[[], None]) -> Animated:
    draw()
    return Animated([], lambda k: None)


def _title(fig: Figure | SubFigure, folder: str, n: int) -> Animated:
    run = view.run_of(folder)
    summary = view.summary_of(folder)
    hp = summary.final_hp
    loaders = run.get("loaders", {})
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
        fig.text(0.5, 0.72, f"{summary.created or ''}   seed {run.get('seed', '?')}", ha="center", va="center",
                 fontsize=10, color="grey")
        fig.text(0.5, 0.38, "\n".join(lines), ha="center", va="center", fontsize=10, linespacing=1.5)

    return _static(fig, draw)


def _lr_sweep(fig: Figure | SubFigure, folder: str, n: int) -> Animated:
    from .lr import _mark_range_and_divergence

    info = view.lr_of(folder)
    assert info is not None
    axes = fig.subplots(1, 2)
    reveal, marks = _Reveal(), []
    for ax, which in zip(axes, ("loss", "perf")):
        reveal.add(ax, _new_artists(ax, lambda ax=ax, which=which: draw_lr_sweep_panel(ax, info, which, marks=False)))
        marks += _new_artists(ax, lambda ax=ax: _mark_range_and_divergence(ax, info, legend=True))
        ax.set_title(f"{which} vs learning rate", fontsize=10)
        ax.legend(fontsize=LEGEND, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)
    log_lrs = np.log(info.lrs)

    def update(k: int) -> None:
        p = _progress(k, n)
        reveal.to(float(np.exp(log_lrs[0] + p * (log_lrs[-1] - log_lrs[0]))))
        for m in marks:
            m.set_visible(p >= 1.0)

    return Animated([a for _, arts in reveal.groups for a in arts] + marks, update)


def _batch_size(fig: Figure | SubFigure, folder: str, n: int) -> Animated:
    info = view.batch_of(folder)
    assert info is not None
    return _static(fig, lambda: draw_batch_size(fig, info, legend_size=LEGEND, compact=True))


def _schedule(fig: Figure | SubFigure, folder: str, n: int) -> Animated:
    info = view.schedule_of(folder)
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


def _training(fig: Figure | SubFigure, folder: str, n: int) -> Animated:
    info = view.throughtime_of(folder)
    assert info is not None
    axes = fig.subplots(1, 2)
    reveal = _Reveal()
    for ax, which in zip(axes, ("loss", "perf")):
        reveal.add(ax, _new_artists(ax, lambda ax=ax, which=which: draw_throughtime_panel(ax, info, which)))
        ax.set_title(f"{'loss' if which == 'loss' else info.perf_label} through time", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=LEGEND, frameon=False)
    # a loss curve starts high: the lower left corner of the loss panel stays free
    clock = axes[0].text(0.02, 0.03, "", transform=axes[0].transAxes, fontsize=10, weight="bold")

    def update(k: int) -> None:
        x = info.epochs[0] + _progress(k, n) * (info.epochs[-1] - info.epochs[0])
        reveal.to(x)
        clock.set_text(f"epoch {x:.1f}")

    return Animated([a for _, arts in reveal.groups for a in arts] + [clock], update)


def _final(fig: Figure | SubFigure, folder: str, n: int) -> Animated:
    info = view.final_of(folder)
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


def _hidden(fig: Figure | SubFigure, folder: str, n: int) -> Animated:
    from .hidden import pca_at, pca_limit

    info = view.pca_of(folder)
    assert info is not None
    last = info.coords.shape[0] - 1
    ax = fig.add_subplot(projection="3d")
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
                                "schedule": _schedule, "training": _training, "final": _final, "hidden": _hidden}


def render_scene(folder: str, scene: Scene, settings: AnalysisSettings, out: Path, caption: bool = True,
                 gif: Path | None = None, gif_every: int = 1) -> int:
    """Render one scene to ``out`` (MP4) and optionally ``gif``; returns the number of frames.

    The scene's final picture is laid out once (constrained layout), then the layout is frozen,
    the static part is cached and each frame blits the dynamic artists over it.
    """
    dpi, width, height = movie_size(settings.video_height if caption else settings.animation_height)
    fig = new_figure(FIG_W, FIG_H, dpi)
    canvas = fig.canvas
    if caption and scene.caption:
        top, bottom = fig.subfigures(2, 1, height_ratios=[5.2, 1])
        bottom.set_facecolor("#f2f2f2")
        bottom.text(0.5, 0.5, scene.caption, ha="center", va="center", fontsize=9.5, wrap=True)
    else:
        top = fig
    anim = BUILDERS[scene.name](top, folder, scene.frames)
    anim.update(scene.frames - 1)
    canvas.draw()  # lays out the final picture
    fig.set_layout_engine("none")
    background = None
    if not anim.redraw:
        for a in anim.dynamic:
            a.set_animated(True)
        canvas.draw()
        background = canvas.copy_from_bbox(fig.bbox)
    with FrameSink((width, height), out, settings.fps, gif=gif, gif_every=gif_every) as sink:
        still = None
        for k in range(scene.frames):
            if anim.redraw:
                anim.update(k)
                canvas.draw()
            elif anim.dynamic:
                anim.update(k)
                canvas.restore_region(background)
                for a in anim.dynamic:
                    if a.get_visible():
                        fig.draw_artist(a)
            elif still is None:
                still = np.asarray(canvas.buffer_rgba()).copy()
            sink.write(still if still is not None else canvas.buffer_rgba())
    return sink.frames


#: Standalone animations: name -> scene drawn without caption, and the seconds it lasts.
ANIMATIONS = {"throughtime": ("training", 6.0), "lr_sweep": ("lr_sweep", 5.0)}


def render_animation(folder: str, name: str, settings: AnalysisSettings) -> dict[str, bytes]:
    """``<name>.mp4`` and ``<name>.gif`` of a progressively drawn figure, as bytes."""
    scene_name, seconds = ANIMATIONS[name]
    scene = Scene(scene_name, max(2, int(round(seconds * settings.fps))), "")
    with tempfile.TemporaryDirectory(prefix="ignite_seg_anim_") as tmp:
        mp4, gif = Path(tmp) / f"{name}.mp4", Path(tmp) / f"{name}.gif"
        render_scene(folder, scene, settings, mp4, caption=False, gif=gif, gif_every=2 if settings.fps > 15 else 1)
        return {f"{name}.mp4": mp4.read_bytes(), f"{name}.gif": gif.read_bytes()}


def render_video_scene(folder: str, scene_name: str, settings: AnalysisSettings) -> bytes:
    """One scene of the walk-through video as an MP4 segment (bytes)."""
    plan = {s.name: s for s in scene_plan(folder, settings.fps, settings.hidden_pca)}
    with tempfile.TemporaryDirectory(prefix="ignite_seg_video_") as tmp:
        out = Path(tmp) / f"{scene_name}.mp4"
        render_scene(folder, plan[scene_name], settings, out, caption=True)
        return out.read_bytes()


def concat_mp4(segments: list[bytes]) -> bytes:
    """Join MP4 segments of identical encoding into one file (ffmpeg's concat demuxer, no re-encoding)."""
    if len(segments) == 1:
        return segments[0]
    with tempfile.TemporaryDirectory(prefix="ignite_seg_concat_") as tmp:
        listing = []
        for i, seg in enumerate(segments):
            p = Path(tmp) / f"seg{i:03d}.mp4"
            p.write_bytes(seg)
            listing.append(f"file '{p.name}'")
        (Path(tmp) / "list.txt").write_text("\n".join(listing) + "\n")
        out = Path(tmp) / "video.mp4"
        proc = subprocess.run(
            [ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "concat", "-safe", "0", "-i", "list.txt", "-c", "copy",
             "-movflags", "+faststart", out.name],
            cwd=tmp, capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ffmpeg could not join the video segments: {proc.stderr.strip()[-500:]}")
        return out.read_bytes()
