"""The PNG figures of the analysis, one :class:`~.figure_spec.FigureSpec` each (extractor, plot, report entry).

Each is registered by one line of :data:`.products.PRODUCTS` (``png(figures.LR_SWEEP)``); a new
figure can equally live in a module of its own with its info record, extractor and plot.
"""
from __future__ import annotations

from typing import Any

from ..storage.names import BS_NPZ, FINAL_JSON, MISC_JSON, SAMPLED_NPZ
from . import batch, captions, curves, extract, hidden, lr, metrics
from .figure_spec import FigureSpec
from .load import hidden_inputs, hparams_inputs, results_inputs, throughtimes_inputs
from .snapshot import Snapshot

__all__ = ["LR_SWEEP", "BATCH_SIZE", "SCHEDULE", "THROUGHTIME", "METRICS", "FINAL_PERF", "FINAL_PAIRS", "HIDDEN_PCA"]


def _nonempty(arrays: Any, key: str) -> bool:
    return arrays is not None and key in arrays and arrays[key].size > 0


def has_results(snap: Snapshot) -> bool:
    return _nonempty(snap.results, "trial_ids")


def has_throughtimes(snap: Snapshot) -> bool:
    return _nonempty(snap.throughtimes, "trial_ids")


def has_custom_metrics(snap: Snapshot) -> bool:
    """The run recorded custom metrics (``metric_names`` in ``run.json``) and has collated trials."""
    return bool(snap.keys.metric_names) and has_throughtimes(snap)


def has_lr_sweep(snap: Snapshot) -> bool:
    return snap.lr_sweep is not None and snap.lr_sweep.lrs.size > 0


def has_batch_search(snap: Snapshot) -> bool:
    return any(f is not None and f.bss.size > 0 for f in (snap.batch_sweep, snap.batch_sampled))


LR_SWEEP = FigureSpec(
    name="lr_sweep_png", file="lr_sweep.png", needs="images_min", cost=0.8,
    inputs=lambda rf: hparams_inputs(rf, "lr_vs_perf.npz"), available=has_lr_sweep,
    extract=extract.lr_of, plot=lr.plot_lr_sweep, caption_of=captions.lr_caption,
    title="Learning-rate range test",
    caption="Loss and perf against the LR (log scale) for each repeat, with their mean and min–max; green: the "
            "chosen range; red dotted: divergence. Bottom: the derivatives used to choose the range.",
)
BATCH_SIZE = FigureSpec(
    name="batch_size_png", file="batch_size.png", needs="images", cost=0.6,
    inputs=lambda rf: hparams_inputs(rf, FINAL_JSON, BS_NPZ, SAMPLED_NPZ, MISC_JSON),
    available=has_batch_search, extract=extract.batch_of, plot=batch.plot_batch_size, title="Batch size",
    caption="Perf against batch size, the gradient noise scale B_simple, and the candidates at the held-out score "
            "the rule ranks (pruned ones at their score when cut), with the tie rule when it decided.",
)
SCHEDULE = FigureSpec(
    name="schedule_png", file="lr_schedule.png", needs="images", cost=0.3,
    inputs=lambda rf: hparams_inputs(rf, FINAL_JSON), available=lambda snap: (snap.rf.hparams / FINAL_JSON).is_file(),
    extract=extract.schedule_of, plot=lr.plot_schedule, title="Schedule of the final trials",
    caption="Learning rate (log scale) of every final trial.",
    caption_of=lambda info: f"The final trials' learning rate: {captions.schedule_caption(info)}.",
)
THROUGHTIME = FigureSpec(
    name="throughtime_png", file="throughtime.png", needs="images_min", cost=0.8,
    inputs=throughtimes_inputs, available=has_throughtimes, extract=extract.throughtime_of,
    plot=curves.plot_throughtime, caption_of=captions.throughtime_caption, title="Training through time",
    caption="Loss and perf on fixed train/val subsets: each trial (thin) and their mean with a band across trials.",
)
METRICS = FigureSpec(
    name="metrics_png", file="metrics.png", needs="images", cost=0.8,
    inputs=throughtimes_inputs, available=has_custom_metrics, extract=extract.metrics_of,
    plot=metrics.plot_metrics, caption_of=captions.metrics_caption, title="Custom metrics through time",
    caption="Each custom metric on the fixed train subset and on every validation set: each trial (thin) and the "
            "mean ± 95% CI across trials; the title says which direction is better.",
)
FINAL_PERF = FigureSpec(
    name="final_perf_png", file="final_perf.png", needs="images_min", cost=0.4,
    inputs=results_inputs, available=has_results, extract=extract.final_panels_of, plot=curves.plot_final_panels,
    title="Final validation perf across trials",
    caption="One dot per completed trial, the mean and its 95% confidence interval; one row per validation set, "
            "then per custom metric and validation set, when the run has them.",
)
FINAL_PAIRS = FigureSpec(
    name="final_pairs_png", file="final_train_vs_val.png", needs="images", cost=0.4,
    inputs=results_inputs, available=has_results, extract=extract.final_pairs_of, plot=curves.plot_final_pairs,
    title="Generalisation gap",
    caption="Final train and val loss and perf of each trial, joined by a line per trial; the mean gap val − train "
            "is written under each panel.",
)
HIDDEN_PCA = FigureSpec(
    name="hidden_png", file="hidden_pca.png", needs="images", cost=0.6,
    inputs=hidden_inputs, available=lambda snap: snap.hidden_path is not None, extract=extract.pca_of,
    plot=hidden.plot_hidden_pca, title="Hidden representations",
    caption="3D PCA of a hidden layer's representation of validation points, at the start and end of training.",
)
