"""What the analysis makes: one registry, :data:`PRODUCTS`, read by the planner, the builder and the report.

A :class:`Product` says everything about one product: its output files, the settings flag that
asks for it, its inputs, its builder and how ``index.html`` shows its files. Adding a product is
one entry in :data:`PRODUCTS` (the report shows the products in this order); :func:`plan`,
:func:`build`, :func:`finish` and :func:`.report.render_index` read nothing else.

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
from ..storage.result_keys import ResultKeys
from ..storage.run_folder import RunFolder
from . import batch, captions, curves, hidden, lr, metrics, view
from ._mpl import png_bytes
from .load import HPARAM_FILES, hidden_path, read_json_or_none
from .text import render_markdown, summary_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Entry", "Part", "Product", "PRODUCTS", "Task", "find", "plan", "build", "finish", "inputs_of", "FORMAT"]

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
    #: The caption written from the figure's info record (``folder -> caption``; ``None``: ``caption``).
    caption_of: Callable[[str], str | None] | None = None


class Part(NamedTuple):
    """One task of a product that splits (a scene of the video): its name and share of the cost."""

    name: str
    weight: float


def _one(outputs: list[dict[str, bytes]]) -> dict[str, bytes]:
    return outputs[0]


@dataclass(frozen=True)
class Product:
    """One analysis product. ``needs`` is the flag of :class:`AnalysisSettings` that asks for it.

    ``cost``: rough seconds on one core, to start the long ones first. ``key``: the settings that
    shape the outputs (a change redoes them). ``parts``: the tasks it splits into (``None``: one
    task); ``join``: the outputs of the parts, in order, as the product's files.
    """

    name: str
    needs: str
    outputs: tuple[str, ...]
    inputs: Callable[[RunFolder], list[Path]]
    available: Callable[[RunFolder], bool]
    cost: float
    key: Callable[[AnalysisSettings], Any]
    build: Builder
    report: tuple[Entry, ...] = ()
    parts: Callable[[str, AnalysisSettings], list[Part]] | None = None
    join: Callable[[list[dict[str, bytes]]], dict[str, bytes]] = _one


# -- inputs and availability ------------------------------------------------------------------------

def _hp(rf: RunFolder, *names: str) -> list[Path]:
    return [rf.hparams / n for n in names]


# run.json is not an input by its mtime (train() rewrites it after the analysis, to mark the run
# complete): what the analysis reads of it is in each product's manifest stamp instead.
def _results(rf: RunFolder) -> list[Path]:
    return [rf.results, *(rf.trial(t) / "result.json" for t in rf.trial_ids())]


def _throughtimes(rf: RunFolder) -> list[Path]:
    """The curves, and the trials' records (their best checkpoints are marked on the curves)."""
    return [rf.throughtimes, *(rf.trial(t) / "result.json" for t in rf.trial_ids())]


def _hidden(rf: RunFolder) -> list[Path]:
    p = hidden_path(rf)
    return [p] if p is not None else []


def _summary_inputs(rf: RunFolder) -> list[Path]:
    return [*_results(rf), *_hp(rf, *HPARAM_FILES)]


def _video_inputs(rf: RunFolder) -> list[Path]:
    return [*_results(rf), rf.throughtimes, *_hp(rf, *HPARAM_FILES), *_hidden(rf)]


def _npz_nonempty(path: Path, key: str) -> bool:
    if not path.is_file():
        return False
    import numpy as np

    from ..storage.atomic import named_damage

    with named_damage(path), np.load(path, allow_pickle=False) as z:
        return key in z.files and z[key].size > 0


def _always(rf: RunFolder) -> bool:
    return True


def _has_results(rf: RunFolder) -> bool:
    return _npz_nonempty(rf.results, "trial_ids")


def _has_throughtimes(rf: RunFolder) -> bool:
    return _npz_nonempty(rf.throughtimes, "trial_ids")


def _has_custom_metrics(rf: RunFolder) -> bool:
    """The run recorded custom metrics (``metric_names`` in ``run.json``) and has collated trials."""
    return bool(ResultKeys.from_record(read_json_or_none(rf.run_json)).metric_names) and _has_throughtimes(rf)


def _has_lr_sweep(rf: RunFolder) -> bool:
    return _npz_nonempty(rf.hparams / "lr_vs_perf.npz", "lrs")


def _has_batch_search(rf: RunFolder) -> bool:
    return _npz_nonempty(rf.hparams / "bs_vs_perf.npz", "bss") or _npz_nonempty(rf.hparams / "bs_sampled.npz", "bss")


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
    info = view.summary_of(folder)
    text = json.dumps(to_jsonable(summary_json(info)), indent=2, allow_nan=False) + "\n"
    return {"summary.md": render_markdown(info).encode("utf-8"), "summary.json": text.encode("utf-8")}


def _png(file: str, extract: Callable[[str], Any], render: Callable[..., Figure]) -> Builder:
    """A PNG product: ``extract(folder)`` (an info, or ``None``: nothing to draw), ``render(info, dpi=)``."""

    def build_png(folder: str, settings: AnalysisSettings, part: str) -> dict[str, bytes]:
        info = extract(folder)
        return {} if info is None else {file: png_bytes(render(info, dpi=settings.dpi))}

    return build_png


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

_LR_CAPTION = ("Loss and perf against the LR (log scale) for each repeat, with their mean and min–max; green: the "
               "chosen range; red dotted: divergence. Bottom: the derivatives used to choose the range.")

#: Every product, in the report's reading order.
PRODUCTS: tuple[Product, ...] = (
    Product("summary", "text", ("summary.md", "summary.json"), _summary_inputs, _always, 0.1, _no_key, _summary,
            report=(Entry("summary.md", "link"), Entry("summary.json", "link"))),
    Product("video", "video", ("video.mp4", VIDEO_POSTER), _video_inputs, _always, 20.0, _video_key, _video_scene,
            report=(Entry("video.mp4", "video", "Walk-through video", "The whole run in one video: LR sweep, "
                          "batch size, schedule, training, final distribution."),),
            parts=_video_parts, join=_video_join),
    Product("lr_sweep_png", "images_min", ("lr_sweep.png",), lambda rf: _hp(rf, "lr_vs_perf.npz"), _has_lr_sweep,
            0.8, _png_key, _png("lr_sweep.png", view.lr_of, lr.plot_lr_sweep),
            report=(Entry("lr_sweep.png", "image", "Learning-rate range test", _LR_CAPTION,
                          caption_of=captions.lr_caption_of),)),
    Product("lr_sweep_anim", "animations", ("lr_sweep.mp4", "lr_sweep.gif"), lambda rf: _hp(rf, "lr_vs_perf.npz"),
            _has_lr_sweep, 4.0, _anim_key, _animation("lr_sweep"),
            report=(Entry("lr_sweep.gif", "gif", "Learning-rate range test, drawn progressively",
                          also="lr_sweep.mp4"),)),
    Product("batch_size_png", "images", ("batch_size.png",),
            lambda rf: _hp(rf, "final.json", "bs_vs_perf.npz", "bs_sampled.npz", "misc.json"), _has_batch_search, 0.6, _png_key,
            _png("batch_size.png", view.batch_of, batch.plot_batch_size),
            report=(Entry("batch_size.png", "image", "Batch size", "Perf against batch size, the gradient noise "
                          "scale B_simple, and the candidates at the held-out score the rule ranks (pruned ones at "
                          "their score when cut), with the tie rule when it decided."),)),
    Product("schedule_png", "images", ("lr_schedule.png",), lambda rf: _hp(rf, "final.json"),
            lambda rf: (rf.hparams / "final.json").is_file(), 0.3, _png_key,
            _png("lr_schedule.png", view.schedule_of, lr.plot_schedule),
            report=(Entry("lr_schedule.png", "image", "Schedule of the final trials",
                          "Learning rate (log scale) of every final trial.",
                          caption_of=captions.schedule_caption_of),)),
    Product("throughtime_png", "images_min", ("throughtime.png",), _throughtimes, _has_throughtimes, 0.8, _png_key,
            _png("throughtime.png", view.throughtime_of, curves.plot_throughtime),
            report=(Entry("throughtime.png", "image", "Training through time", "Loss and perf on fixed train/val "
                          "subsets: each trial (thin) and their mean with a band across trials.",
                          caption_of=captions.throughtime_caption_of),)),
    Product("throughtime_anim", "animations", ("throughtime.mp4", "throughtime.gif"), _throughtimes,
            _has_throughtimes, 6.0, _anim_key, _animation("throughtime"),
            report=(Entry("throughtime.gif", "gif", "Training through time, drawn progressively",
                          also="throughtime.mp4"),)),
    Product("metrics_png", "images", ("metrics.png",), _throughtimes, _has_custom_metrics, 0.8, _png_key,
            _png("metrics.png", view.metrics_of, metrics.plot_metrics),
            report=(Entry("metrics.png", "image", "Custom metrics through time", "Each custom metric on the fixed "
                          "train subset and on every validation set: each trial (thin) and the mean ± 95% CI "
                          "across trials; the title says which direction is better.",
                          caption_of=captions.metrics_caption_of),)),
    Product("final_perf_png", "images_min", ("final_perf.png",), _results, _has_results, 0.4, _png_key,
            _png("final_perf.png", view.final_panels_of, curves.plot_final_panels),
            report=(Entry("final_perf.png", "image", "Final validation perf across trials",
                          "One dot per completed trial, the mean and its 95% confidence interval; one row per "
                          "validation set, then per custom metric and validation set, when the run has them."),)),
    Product("final_pairs_png", "images", ("final_train_vs_val.png",), _results, _has_results, 0.4, _png_key,
            _png("final_train_vs_val.png", view.final_pairs_of, curves.plot_final_pairs),
            report=(Entry("final_train_vs_val.png", "image", "Generalisation gap",
                          "Final train and val loss and perf of each trial, joined by a line per trial; the mean gap "
                          "val − train is written under each panel."),)),
    Product("hidden_png", "images", ("hidden_pca.png",), _hidden, lambda rf: bool(_hidden(rf)), 0.6, _png_key,
            _png("hidden_pca.png", view.pca_of, hidden.plot_hidden_pca),
            report=(Entry("hidden_pca.png", "image", "Hidden representations", "3D PCA of a hidden layer's "
                          "representation of validation points, at the start and end of training."),)),
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
