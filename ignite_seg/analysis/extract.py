"""Extraction: each ``*_of(snap)`` turns a run :class:`~.snapshot.Snapshot` into a figure's info record.

They read no file themselves (the snapshot read each one once); the ``*_info`` functions they call
are pure.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..storage.schemas import BatchSizeStep, MiscFile, Rung
from .batch import BatchInfo, batch_info
from .curves import (
    FinalInfo,
    FinalPairsInfo,
    FinalPanelsInfo,
    ThroughTimeInfo,
    final_info,
    final_pairs_info,
    final_panels_info,
    throughtime_info,
)
from .hidden import PCAInfo, pca_info
from .lr import LRSweepInfo, ScheduleInfo, lr_sweep_info, schedule_info
from .metrics import MetricsInfo, metrics_info
from .snapshot import Snapshot
from .text import SummaryInfo, TunerFiles, summary_info

__all__ = ["lr_of", "batch_of", "schedule_of", "throughtime_of", "metrics_of", "final_of", "final_panels_of",
           "final_pairs_of", "pca_of", "summary_of", "hidden_trial_of", "run_title"]


def lr_of(snap: Snapshot) -> LRSweepInfo | None:
    return lr_sweep_info(snap.lr_sweep) if snap.lr_sweep is not None else None


def batch_of(snap: Snapshot) -> BatchInfo | None:
    final = snap.final
    by, tie = "loss", ""
    misc = snap.misc
    step = MiscFile.from_json(misc).steps.batch_size if isinstance(misc, dict) else None
    if isinstance(step, BatchSizeStep) and step.rungs:
        last = step.rungs[-1]
        if isinstance(last, Rung):
            by, tie = last.ranked_by or by, last.tie or ""
    return batch_info(snap.batch_sweep, snap.batch_sampled,
                      float(final.batch_size) if final is not None else np.nan, by, tie)


def schedule_of(snap: Snapshot) -> ScheduleInfo | None:
    final = snap.final
    run = snap.run_or_none  # a tune-only folder may have none
    n_train = run.n_train if run is not None else None  # absent in older runs: 40 steps an epoch
    ipe = -(-int(n_train) // int(final.batch_size)) if final is not None and n_train else None
    return schedule_info(final, iters_per_epoch=ipe) if final is not None else None


def throughtime_of(snap: Snapshot) -> ThroughTimeInfo | None:
    tt = snap.throughtimes
    if tt is None:
        return None
    ids = set(np.asarray(tt.get("trial_ids", ())).tolist())
    constants = [r.constant_loss_train for r in snap.trial_records
                 if r.trial_id in ids and r.constant_loss_train is not None and math.isfinite(r.constant_loss_train)]
    return throughtime_info(tt, snap.style, snap.keys, snap.best_marks, snap.completed_stops(tt),
                            float(np.median(constants)) if constants else None)


def metrics_of(snap: Snapshot) -> MetricsInfo | None:
    tt = snap.throughtimes
    return metrics_info(tt, snap.keys, snap.best_marks, snap.completed_stops(tt)) if tt is not None else None


def final_of(snap: Snapshot) -> FinalInfo | None:
    if snap.results is None:
        return None
    from ._mpl import perf_label
    from .stats import loss_left_log

    label = "final val " + perf_label(snap.style, loss_left_log(snap.results))
    c = snap.counts
    return final_info(snap.results, "final_perf_val", label, c.get("failed", 0), c.get("diverged", 0))


def final_panels_of(snap: Snapshot) -> FinalPanelsInfo | None:
    if snap.results is None:
        return None
    from ._mpl import perf_label
    from .stats import loss_left_log

    c = snap.counts
    return final_panels_info(snap.results, snap.keys, perf_label(snap.style, loss_left_log(snap.results)),
                             c.get("failed", 0), c.get("diverged", 0))


def final_pairs_of(snap: Snapshot) -> FinalPairsInfo | None:
    return final_pairs_info(snap.results, snap.style) if snap.results is not None else None


def hidden_trial_of(snap: Snapshot) -> int | None:
    return int(snap.hidden_path.parent.name) if snap.hidden_path is not None else None


def pca_of(snap: Snapshot) -> PCAInfo | None:
    if snap.hidden_path is None:
        return None
    arrays = snap.hidden
    return pca_info(arrays, trial=int(snap.hidden_path.parent.name)) if arrays else None


def run_title(path: Path) -> str:
    """The folder's last two path components (``digits/current``): ``current`` alone says little."""
    parts = path.resolve().parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else str(path)


def summary_of(snap: Snapshot) -> SummaryInfo:
    final = snap.final
    return summary_info(
        snap.run, final.to_dict() if final is not None else None, snap.results, snap.trial_records,
        TunerFiles(snap.misc, snap.lr_sweep, snap.batch_sweep, snap.batch_sampled),
        title=run_title(snap.rf.path), throughtimes=snap.throughtimes,
    )
