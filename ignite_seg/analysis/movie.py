"""Rendering and encoding: scenes (:mod:`.scenes`) drawn frame by frame into MP4 (and GIF).

Each scene is laid out and drawn once; every frame then blits only the artists that change over
the cached background and pipes the canvas's RGBA buffer to the ffmpeg binary of the
``imageio-ffmpeg`` wheel (``imageio_ffmpeg.write_frames``, H.264, yuv420p). matplotlib's
``FFMpegWriter.grab_frame`` would ``savefig`` (a full redraw, constrained layout included) per
frame: ~0.5 s a frame here, 100 s for a draft video instead of ~10 s. A GIF takes the same frames.
"""
from __future__ import annotations

import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..config.analysis import AnalysisSettings
from ..exceptions import AnalysisUnavailableError
from ._mpl import new_figure
from .scenes import BUILDERS, Scene, scene_plan
from .snapshot import Snapshot

if TYPE_CHECKING:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure, SubFigure

__all__ = ["ffmpeg_exe", "FrameSink", "render_scene", "render_animation", "render_video_scene", "concat_mp4",
           "movie_size", "draw_caption", "ANIMATIONS"]

FIG_W, FIG_H = 8.0, 4.5  # inches; the pixel size comes from the dpi (16:9)
#: The caption strip's font size, the smallest it may shrink to, and its margin on each side (a fraction of the frame)
CAPTION_PT, CAPTION_MIN_PT, CAPTION_MARGIN = 9.5, 7.0, 0.03




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


def draw_caption(strip: Figure | SubFigure, text: str) -> Any:
    """``text`` centred in the caption ``strip``, wrapped so that every line keeps :data:`CAPTION_MARGIN` of the
    frame's width clear on both sides, its font shrunk (down to :data:`CAPTION_MIN_PT`) until the lines fit the
    strip's height. (matplotlib's own ``wrap=True`` wraps a centred text to the whole frame's width: the lines ran
    to within a few pixels of its edges.)"""
    renderer = strip.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    width, height = strip.bbox.width * (1 - 2 * CAPTION_MARGIN), strip.bbox.height * 0.9
    artist = strip.text(0.5, 0.5, text, ha="center", va="center", fontsize=CAPTION_PT)
    size = CAPTION_PT
    while True:
        artist.set_fontsize(size)
        artist.set_text(text)
        one_line = artist.get_window_extent(renderer).width
        chars = max(10, int(len(text) * width / max(one_line, 1.0)))
        while True:  # the estimate from the mean character width, then narrower until every line fits
            artist.set_text("\n".join(textwrap.wrap(text, chars)))
            box = artist.get_window_extent(renderer)
            if box.width <= width or chars <= 10:
                break
            chars -= 1
        if box.height <= height or size <= CAPTION_MIN_PT:
            return artist
        size = max(CAPTION_MIN_PT, size - 0.5)


def render_scene(snap: Snapshot, scene: Scene, settings: AnalysisSettings, out: Path, caption: bool = True,
                 gif: Path | None = None, gif_every: int = 1) -> int:
    """Render one scene to ``out`` (MP4) and optionally ``gif``; returns the number of frames.

    The scene's final picture is laid out once (constrained layout), then the layout is frozen,
    the static part is cached and each frame blits the dynamic artists over it.
    """
    dpi, width, height = movie_size(settings.video_height if caption else settings.animation_height)
    fig = new_figure(FIG_W, FIG_H, dpi)
    canvas = cast("FigureCanvasAgg", fig.canvas)  # new_figure draws with Agg: blitting and RGBA buffer
    top: Figure | SubFigure = fig
    if caption and scene.caption:
        top, bottom = cast("list[SubFigure]", fig.subfigures(2, 1, height_ratios=[5.2, 1]))
        bottom.set_facecolor("#f2f2f2")
        draw_caption(bottom, scene.caption)
    anim = BUILDERS[scene.name](top, snap, scene.frames)
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
        render_scene(Snapshot(folder), scene, settings, mp4, caption=False, gif=gif, gif_every=2 if settings.fps > 15 else 1)
        return {f"{name}.mp4": mp4.read_bytes(), f"{name}.gif": gif.read_bytes()}


def render_video_scene(folder: str, scene_name: str, settings: AnalysisSettings) -> bytes:
    """One scene of the walk-through video as an MP4 segment (bytes)."""
    snap = Snapshot(folder)
    plan = {s.name: s for s in scene_plan(snap, settings.fps, settings.hidden_pca)}
    with tempfile.TemporaryDirectory(prefix="ignite_seg_video_") as tmp:
        out = Path(tmp) / f"{scene_name}.mp4"
        render_scene(snap, plan[scene_name], settings, out, caption=True)
        return out.read_bytes()


def render_poster(folder: str, settings: AnalysisSettings) -> bytes:
    """The video's first frame (the title card) as a PNG, for the ``poster`` of the report's player."""
    from ._mpl import png_bytes

    dpi, _width, _height = movie_size(settings.video_height)
    fig = new_figure(FIG_W, FIG_H, dpi)
    BUILDERS["title"](fig, Snapshot(folder), 1)
    return png_bytes(fig)


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
