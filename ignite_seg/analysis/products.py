"""What the analysis makes: one registry, :data:`PRODUCTS`, read by the planner, the builder and the report.

A :class:`Product` says everything about one product: its output files, the settings flag that
asks for it, its inputs, its builder and how ``index.html`` shows its files. Adding a product is
one entry in :data:`PRODUCTS` (the report shows the products in this order); :func:`plan`,
:func:`build`, :func:`finish` and :func:`.report.render_index` read nothing else. A PNG figure is
one module with a :class:`~.figure_spec.FigureSpec` and one line here, ``png(module.FIGURE)``.

A product is built by :func:`build` (in this process or a worker), which returns the output
files as bytes; the caller writes them atomically. A product may split into parts (the video:
one task per scene), joined by :func:`finish` once every part is built. A product whose outputs
are all newer than its inputs, and were made with the same settings, is skipped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, NamedTuple

from ..config.analysis import AnalysisSettings
from ..storage.atomic import to_jsonable
from ..storage.run_folder import RunFolder
from . import figures, length
from ._mpl import png_bytes
from .extract import summary_of
from .figure_spec import FigureSpec
from .load import summary_inputs, video_inputs
from .snapshot import Snapshot
from .text import render_markdown, summary_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Entry", "Part", "Product", "PRODUCTS", "Task", "find", "plan", "build", "finish", "inputs_of", "FORMAT",
           "png"]

#: Bumped when the renderers change in a way that should redo existing outputs.
FORMAT = 2

#: ``(folder, settings, part) -> {file name: bytes}``; ``part`` is ``""`` for a product built in one go.
Builder = Callable[[str, AnalysisSettings, str], dict[str, bytes]]


class Entry(NamedTuple):
    """How ``index.html`` shows one output file: a figure (image, video, gif) or a navigation link."""

    file: str
    kind: Literal["image", "video", "gif", "link"]
    title: str = ""
    caption: str = ""
    #: Another output of the product linked from the caption when it exists (the MP4 of a GIF).
    also: str | None = None
    #: The caption written from the figure's info record (``snapshot -> caption``; ``None``: ``caption``).
    caption_of: Callable[[Snapshot], str | None] | None = None


class Part(NamedTuple):
    """One task of a product that splits (a scene of the video): its name and share of the cost."""

    name: str
    weight: float


def _one(outputs: list[dict[str, bytes]]) -> dict[str, bytes]:
    return outputs[0]


@dataclass(frozen=True, kw_only=True)
class Product:
    """One analysis product. ``needs`` is the flag of :class:`AnalysisSettings` that asks for it.

    ``available``: whether the run has what the product makes (from a snapshot of the run). ``cost``: rough seconds on one core, to start the long ones first. ``key``: the settings that
    shape the outputs (a change redoes them). ``parts``: the tasks it splits into (``None``: one
    task); ``join``: the outputs of the parts, in order, as the product's files.
    """

    name: str
    needs: str
    outputs: tuple[str, ...]
    inputs: Callable[[RunFolder], list[Path]]
    available: Callable[[Snapshot], bool]
    cost: float
    key: Callable[[AnalysisSettings], Any]
    build: Builder
    report: tuple[Entry, ...] = ()
    parts: Callable[[str, AnalysisSettings], list[Part]] | None = None
    join: Callable[[list[dict[str, bytes]]], dict[str, bytes]] = _one


def _always(snap: Snapshot) -> bool:
    return True


# -- settings keys ----------------------------------------------------------------------------------

def _no_key(s: AnalysisSettings) -> Any:
    return {}


def _png_key(s: AnalysisSettings) -> Any:
    return {"dpi": s.dpi}


def _anim_key(s: AnalysisSettings) -> Any:
    return {"fps": s.fps, "height": s.animation_height}


def _video_key(s: AnalysisSettings) -> Any:
    return {"fps": s.fps, "height": s.video_height, "hidden_pca": s.hidden_pca}


# -- builders ---------------------------------------------------------------------------------------

def _summary(folder: str, settings: AnalysisSettings, part: str) -> dict[str, bytes]:
    info = summary_of(Snapshot(folder))
    text = json.dumps(to_jsonable(summary_json(info)), indent=2, allow_nan=False) + "\n"
    return {"summary.md": render_markdown(info).encode("utf-8"), "summary.json": text.encode("utf-8")}


def _png(file: str, extract: Callable[[Snapshot], Any], render: Callable[..., Figure]) -> Builder:
    """A PNG product: ``extract(snapshot)`` (an info, or ``None``: nothing to draw), ``render(info, dpi=)``."""

    def build_png(folder: str, settings: AnalysisSettings, part: str) -> dict[str, bytes]:
        info = extract(Snapshot(folder))
        return {} if info is None else {file: png_bytes(render(info, dpi=settings.dpi))}

    return build_png


def png(figure: FigureSpec) -> Product:
    """The product of one PNG figure (its registry line: ``png(module.FIGURE)``)."""
    return Product(name=figure.name, needs=figure.needs, outputs=(figure.file,), inputs=figure.inputs,
                   available=figure.is_available, cost=figure.cost, key=_png_key,
                   build=_png(figure.file, figure.extract, figure.plot),
                   report=(Entry(figure.file, "image", figure.title, figure.caption,
                                 caption_of=figure.caption_for if figure.caption_of is not None else None),))


def _animation(name: str) -> Builder:
    """``<name>.mp4`` and ``<name>.gif`` of :data:`.movie.ANIMATIONS`."""

    def build_animation(folder: str, settings: AnalysisSettings, part: str) -> dict[str, bytes]:
        from .movie import render_animation

        return render_animation(folder, name, settings)

    return build_animation


def _video_parts(folder: str, settings: AnalysisSettings) -> list[Part]:
    from .scenes import scene_plan

    return [Part(s.name, s.frames / (35 * settings.fps)) for s in scene_plan(folder, settings.fps, settings.hidden_pca)]


def _video_scene(folder: str, settings: AnalysisSettings, part: str) -> dict[str, bytes]:
    from .movie import render_poster, render_video_scene

    out = {f"video.{part}.segment": render_video_scene(folder, part, settings)}
    if part == "title":  # the first frame, as the player's poster
        out[VIDEO_POSTER] = render_poster(folder, settings)
    return out


def _video_join(outputs: list[dict[str, bytes]]) -> dict[str, bytes]:
    from .movie import concat_mp4

    files = {"video.mp4": concat_mp4([data for out in outputs for name, data in out.items() if name.endswith(".segment")])}
    return files | {name: data for out in outputs for name, data in out.items() if name == VIDEO_POSTER}


#: The video's first frame (``poster`` of the report's player; :func:`.report._figure` names it so).
VIDEO_POSTER = "video.poster.png"


# -- the registry -----------------------------------------------------------------------------------

#: Every product, in the report's reading order.
PRODUCTS: tuple[Product, ...] = (
    Product(name="summary", needs="text", outputs=("summary.md", "summary.json"), inputs=summary_inputs,
            available=_always, cost=0.1, key=_no_key, build=_summary,
            report=(Entry("summary.md", "link"), Entry("summary.json", "link"))),
    Product(name="video", needs="video", outputs=("video.mp4", VIDEO_POSTER), inputs=video_inputs,
            available=_always, cost=20.0, key=_video_key, build=_video_scene,
            report=(Entry("video.mp4", "video", "Walk-through video", "The whole run in one video: LR sweep, "
                          "batch size, schedule, training, final distribution."),),
            parts=_video_parts, join=_video_join),
    png(figures.LR_SWEEP),
    Product(name="lr_sweep_anim", needs="animations", outputs=("lr_sweep.mp4", "lr_sweep.gif"),
            inputs=figures.LR_SWEEP.inputs, available=figures.LR_SWEEP.is_available, cost=4.0, key=_anim_key,
            build=_animation("lr_sweep"),
            report=(Entry("lr_sweep.gif", "gif", "Learning-rate range test, drawn progressively",
                          also="lr_sweep.mp4"),)),
    png(figures.BATCH_SIZE),
    png(figures.SCHEDULE),
    png(length.FIGURE),
    png(figures.THROUGHTIME),
    Product(name="throughtime_anim", needs="animations", outputs=("throughtime.mp4", "throughtime.gif"),
            inputs=figures.THROUGHTIME.inputs, available=figures.THROUGHTIME.is_available, cost=6.0,
            key=_anim_key, build=_animation("throughtime"),
            report=(Entry("throughtime.gif", "gif", "Training through time, drawn progressively",
                          also="throughtime.mp4"),)),
    png(figures.METRICS),
    png(figures.FINAL_PERF),
    png(figures.FINAL_PAIRS),
    png(figures.HIDDEN_PCA),
)


def find(name: str) -> Product:
    """The product of :data:`PRODUCTS` called ``name``."""
    for p in PRODUCTS:
        if p.name == name:
            return p
    raise ValueError(f"unknown analysis product {name!r}; the products are {[p.name for p in PRODUCTS]}")


def inputs_of(product: Product, rf: RunFolder) -> list[Path]:
    return [p for p in product.inputs(rf) if p.exists()]


@dataclass(frozen=True)
class Task:
    """One unit of parallel work: a product, or one part (``index`` in the product's order) of it."""

    product: str
    part: str
    index: int
    folder: str
    settings: dict[str, Any]
    cost: float


def plan(rf: RunFolder, settings: AnalysisSettings, products: list[Product]) -> list[Task]:
    """The tasks that build ``products``, the most costly first."""
    tasks = []
    folder = str(rf.path)
    sd = settings.to_dict()
    for p in products:
        parts = p.parts(folder, settings) if p.parts is not None else [Part("", 1.0)]
        tasks += [Task(p.name, part.name, i, folder, sd, p.cost * part.weight) for i, part in enumerate(parts)]
    return sorted(tasks, key=lambda t: -t.cost)


def build(task: Task) -> dict[str, bytes]:
    """Build one task: its files (name -> bytes); a part's files are joined by :func:`finish`."""
    return find(task.product).build(task.folder, AnalysisSettings.from_dict(task.settings), task.part)


def finish(product: Product, outputs: list[dict[str, bytes]]) -> dict[str, bytes]:
    """The product's files from the outputs of its tasks (in part order); only its declared outputs."""
    files = product.join(outputs)
    stray = sorted(set(files) - set(product.outputs))
    if stray:
        raise ValueError(f"analysis product {product.name!r} made {stray}, which are not among its outputs "
                         f"{list(product.outputs)}; add them to the Product's outputs")
    return files
