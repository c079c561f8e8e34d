"""What the analysis makes: each product's outputs, inputs, preset and builder.

A product is built by :func:`build` (in this process or a worker), which returns the output
files as bytes; the caller writes them atomically. A product whose outputs are all newer than
its inputs, and were made with the same settings, is skipped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..fileio import to_jsonable
from ..folder import RunFolder
from . import batch, curves, hidden, lr, view
from ._mpl import png_bytes
from .settings import AnalysisSettings
from .text import render_markdown, summary_json

__all__ = ["Product", "PRODUCTS", "Task", "plan", "build", "inputs_of", "FORMAT"]

#: Bumped when the renderers change in a way that should redo existing outputs.
FORMAT = 1


def _hp(rf: RunFolder, *names: str) -> list[Path]:
    return [rf.hparams / n for n in names]


def _trial_results(rf: RunFolder) -> list[Path]:
    return [rf.trial(t) / "result.json" for t in rf.trial_ids()]


def _hidden(rf: RunFolder) -> list[Path]:
    from .load import hidden_path

    p = hidden_path(rf)
    return [p] if p is not None else []


def _npz_nonempty(path: Path, key: str) -> bool:
    if not path.is_file():
        return False
    import numpy as np

    with np.load(path) as z:
        return key in z.files and z[key].size > 0


@dataclass(frozen=True)
class Product:
    """One analysis product. ``needs`` is the flag of :class:`AnalysisSettings` that asks for it."""

    name: str
    needs: str
    outputs: tuple[str, ...]
    inputs: Callable[[RunFolder], list[Path]]
    available: Callable[[RunFolder], bool]
    cost: float  # rough seconds on one core, to start the long ones first
    key: Callable[[AnalysisSettings], Any]


def _png_key(s: AnalysisSettings) -> Any:
    return {"dpi": s.dpi}


def _anim_key(s: AnalysisSettings) -> Any:
    return {"fps": s.fps, "height": s.animation_height}


def _video_key(s: AnalysisSettings) -> Any:
    return {"fps": s.fps, "height": s.video_height, "hidden_pca": s.hidden_pca}


_ALL = lambda rf: True  # noqa: E731
_RESULTS = lambda rf: [rf.run_json, rf.results, *_trial_results(rf)]  # noqa: E731

PRODUCTS: tuple[Product, ...] = (
    Product("summary", "text", ("summary.md", "summary.json"),
            lambda rf: [*_RESULTS(rf), *_hp(rf, "final.json", "misc.json", "lr_vs_perf.npz", "bs_vs_perf.npz",
                                             "bs_sampled.npz")],
            _ALL, 0.1, lambda s: {}),
    Product("throughtime_png", "images_min", ("throughtime.png",), lambda rf: [rf.run_json, rf.throughtimes],
            lambda rf: _npz_nonempty(rf.throughtimes, "trial_ids"), 0.8, _png_key),
    Product("final_perf_png", "images_min", ("final_perf.png",), _RESULTS,
            lambda rf: _npz_nonempty(rf.results, "trial_ids"), 0.4, _png_key),
    Product("lr_sweep_png", "images_min", ("lr_sweep.png",), lambda rf: _hp(rf, "lr_vs_perf.npz"),
            lambda rf: _npz_nonempty(rf.hparams / "lr_vs_perf.npz", "lrs"), 0.8, _png_key),
    Product("batch_size_png", "images", ("batch_size.png",),
            lambda rf: _hp(rf, "final.json", "bs_vs_perf.npz", "bs_sampled.npz"),
            lambda rf: _npz_nonempty(rf.hparams / "bs_vs_perf.npz", "bss")
            or _npz_nonempty(rf.hparams / "bs_sampled.npz", "bss"), 0.6, _png_key),
    Product("schedule_png", "images", ("lr_schedule.png",), lambda rf: _hp(rf, "final.json"),
            lambda rf: (rf.hparams / "final.json").is_file(), 0.3, _png_key),
    Product("final_pairs_png", "images", ("final_train_vs_val.png",), _RESULTS,
            lambda rf: _npz_nonempty(rf.results, "trial_ids"), 0.4, _png_key),
    Product("hidden_png", "images", ("hidden_pca.png",), _hidden, lambda rf: bool(_hidden(rf)), 0.6, _png_key),
    Product("throughtime_anim", "animations", ("throughtime.mp4", "throughtime.gif"),
            lambda rf: [rf.run_json, rf.throughtimes], lambda rf: _npz_nonempty(rf.throughtimes, "trial_ids"),
            6.0, _anim_key),
    Product("lr_sweep_anim", "animations", ("lr_sweep.mp4", "lr_sweep.gif"), lambda rf: _hp(rf, "lr_vs_perf.npz"),
            lambda rf: _npz_nonempty(rf.hparams / "lr_vs_perf.npz", "lrs"), 4.0, _anim_key),
    Product("video", "video", ("video.mp4",),
            lambda rf: [*_RESULTS(rf), rf.throughtimes, *_hp(rf, "final.json", "misc.json", "lr_vs_perf.npz",
                                                           "bs_vs_perf.npz", "bs_sampled.npz"), *_hidden(rf)],
            _ALL, 20.0, _video_key),
)

BY_NAME = {p.name: p for p in PRODUCTS}


def inputs_of(product: Product, rf: RunFolder) -> list[Path]:
    return [p for p in product.inputs(rf) if p.exists()]


@dataclass(frozen=True)
class Task:
    """One unit of parallel work: a product, or one scene (``part``) of the video."""

    product: str
    part: str
    folder: str
    settings: dict[str, Any]
    cost: float


def plan(rf: RunFolder, settings: AnalysisSettings, products: list[Product]) -> list[Task]:
    """The tasks that build ``products`` (the video splits into one task per scene)."""
    tasks = []
    folder = str(rf.path)
    sd = settings.to_dict()
    for p in products:
        if p.name == "video":
            from .scenes import scene_plan

            for scene in scene_plan(folder, settings.fps, settings.hidden_pca):
                tasks.append(Task(p.name, scene.name, folder, sd, p.cost * scene.frames / (35 * settings.fps)))
        else:
            tasks.append(Task(p.name, "", folder, sd, p.cost))
    return sorted(tasks, key=lambda t: -t.cost)


def build(task: Task) -> dict[str, bytes]:
    """Build one task: the output files (name -> bytes); the video's scenes come back as segments."""
    settings = AnalysisSettings.from_dict(task.settings)
    folder = task.folder
    dpi = settings.dpi
    if task.product == "summary":
        info = view.summary_of(folder)
        text = json.dumps(to_jsonable(summary_json(info)), indent=2, allow_nan=False) + "\n"
        return {"summary.md": render_markdown(info).encode("utf-8"), "summary.json": text.encode("utf-8")}
    if task.product in _PNGS:
        extract, render, name = _PNGS[task.product]
        info = extract(folder)
        if info is None:
            return {}
        return {name: png_bytes(render(info, dpi=dpi))}
    if task.product in ("throughtime_anim", "lr_sweep_anim"):
        from .movie import render_animation

        return render_animation(folder, task.product[: -len("_anim")], settings)
    if task.product == "video":
        from .movie import render_video_scene

        return {f"video.{task.part}.segment": render_video_scene(folder, task.part, settings)}
    raise ValueError(f"unknown analysis product {task.product!r}")


#: PNG products: extract (folder -> info or None), render (info -> Figure), file name.
_PNGS: dict[str, tuple[Callable[[str], Any], Callable[..., Any], str]] = {
    "throughtime_png": (view.throughtime_of, curves.plot_throughtime, "throughtime.png"),
    "final_perf_png": (view.final_of, curves.plot_final_distribution, "final_perf.png"),
    "lr_sweep_png": (view.lr_of, lr.plot_lr_sweep, "lr_sweep.png"),
    "batch_size_png": (view.batch_of, batch.plot_batch_size, "batch_size.png"),
    "schedule_png": (view.schedule_of, lr.plot_schedule, "lr_schedule.png"),
    "final_pairs_png": (view.final_pairs_of, curves.plot_final_pairs, "final_train_vs_val.png"),
    "hidden_png": (view.pca_of, hidden.plot_hidden_pca, "hidden_pca.png"),
}
