"""Hand-built tuner files (``hparams/*.npz``, ``misc.json``) in the layout of DESIGN.md, and a run
enriched with named validation sets and a custom metric."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from ignite_seg.analysis.stats import mean_band
from ignite_seg.smoothing import moving_average
from ignite_seg.storage.atomic import write_json, write_npz


def lr_sweep_arrays(repeats: int = 2, points: int = 120, seed: int = 0) -> dict[str, np.ndarray]:
    """A range test whose loss falls fastest around lr 1e-2 and diverges near lr 1 (NaN after)."""
    rng = np.random.default_rng(seed)
    lrs = np.geomspace(1e-5, 10.0, points)
    x = np.log10(lrs)
    losses = np.empty((repeats, points))
    perfs = np.empty((repeats, points))
    diverged = np.full(repeats, np.nan)
    for r in range(repeats):
        base = 2.3 - 2.0 / (1 + np.exp(-2.5 * (x + 2.0)))
        blow = np.exp(np.clip(4.0 * (x - (-0.2 + 0.1 * r)), -50, 50))
        loss = base + 0.02 * blow + 0.03 * rng.standard_normal(points)
        perf = 0.1 + 0.85 / (1 + np.exp(-2.5 * (x + 2.0))) - 0.02 * np.minimum(blow, 30) + 0.01 * rng.standard_normal(points)
        best = int(np.argmin(loss))
        above = np.flatnonzero(loss[best:] > 4 * loss[best]) + best
        k = int(above[0]) if above.size else points
        if k < points:
            diverged[r] = lrs[k]
            loss[k + 1:] = np.nan
            perf[k + 1:] = np.nan
        losses[r], perfs[r] = loss, np.clip(perf, 0, 1)
    ls, ps = moving_average(losses, 9, axis=1), moving_average(perfs, 9, axis=1)
    mean_ls = moving_average(mean_band(ls).mean, 9)
    mean_ps = moving_average(mean_band(ps).mean, 9)
    return {
        "lrs": lrs, "losses": losses, "perfs": perfs, "losses_smoothed": ls, "perfs_smoothed": ps,
        "loss_deriv": np.gradient(mean_ls, x), "perf_deriv": np.gradient(mean_ps, x),
        "lr_range": np.array([3e-3, 5e-2]), "diverged_lr": diverged,
    }


def bs_arrays(repeats: int = 2) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    bss = np.array([16, 32, 64, 128, 256, 512], dtype=np.float64)
    perfs = np.array([[0.80, 0.86, 0.88, 0.87, 0.82, 0.74], [0.79, 0.85, 0.89, 0.86, 0.83, 0.72]])[:repeats]
    bs = {
        "bss": bss, "perfs": perfs, "perfs_smoothed": perfs.mean(axis=0), "bs_range": np.array([32.0, 128.0]),
        "noise_scale": np.array(70.0), "noise_scale_lrs": np.array([1e-3, 3e-3, 1e-2, 3e-2]),
        "noise_scale_values": np.array([55.0, 64.0, 72.0, 80.0]),
    }
    sampled = {
        "bss": np.array([32.0, 48.0, 64.0, 96.0, 128.0]),
        "scores": np.array([[0.86, 0.88, 0.90, np.nan, np.nan], [0.85, 0.89, 0.91, 0.87, np.nan]])[:repeats],
        "budget_epochs": np.array([1.0, 2.0, 2.0, 1.0, 0.5]), "chosen": np.array(64.0),
    }
    return bs, sampled


MISC = {
    "lr": {"method": "steepest sustained decrease of the smoothed loss", "lr_range": [3e-3, 5e-2],
           "repeats": 2, "diverged_lr": [0.63, None]},
    "batch": {"noise_scale": 70.0, "candidates": [32, 48, 64, 96, 128], "rounds": [[32, 48, 64, 96, 128], [48, 64]],
              "chosen": 64},
    "schedule": {"cycle_size_epochs": 2, "epochs": 4, "reason": "dataset of 96 items: min_epochs"},
}


def add_tuner_files(folder: Path, empty: bool = False) -> None:
    """Write the tuner's files into ``folder/hparams`` (``empty``: as the ``fastest`` preset might)."""
    h = Path(folder) / "hparams"
    if empty:
        write_npz(h / "lr_vs_perf.npz", lrs=np.zeros(0), losses=np.zeros((0, 0)), perfs=np.zeros((0, 0)),
                  lr_range=np.array([1e-3, 1e-2]), diverged_lr=np.zeros(0))
        write_npz(h / "bs_vs_perf.npz", bss=np.zeros(0), perfs=np.zeros((0, 0)), noise_scale=np.array(np.nan))
        return
    write_npz(h / "lr_vs_perf.npz", **lr_sweep_arrays())
    bs, sampled = bs_arrays()
    write_npz(h / "bs_vs_perf.npz", **bs)
    write_npz(h / "bs_sampled.npz", **sampled)
    write_json(h / "misc.json", MISC)


#: The names :func:`add_val_sets_and_metric` gives a run: a primary set and one more, one custom metric.
RICH = {"val_names": ("clean", "noisy"), "metric_names": ("iou",)}


def add_val_sets_and_metric(folder: Path) -> None:
    """Turn a plain run into one with two named validation sets and a custom metric ``iou``, as the
    trainer records them (docs/usage.md, "Keys"), and collate it again.

    Known answers: on ``noisy`` loss is val loss + 0.5 and perf val perf - 0.2; ``iou`` is 0.8 x perf
    on each split.
    """
    from ignite_seg.storage.collate import Collator
    from ignite_seg.storage.run_folder import RunFolder

    rf = RunFolder(folder)
    rf.write_run(dataclasses.replace(rf.read_run(), **RICH))
    collator = Collator({"snapshots_per_epoch": 4}, smooth_window=5)  # as train() collates the tiny run
    for tid, res in rf.finished_trials():
        if not res.completed:
            continue
        tt = rf.read_throughtime(tid)
        tt.update(losses_val_noisy=tt["losses_val"] + 0.5, perfs_val_noisy=tt["perfs_val"] - 0.2)
        for split in ("train", "val", "val_noisy"):
            tt[f"metric_iou_{split}"] = 0.8 * tt[f"perfs_{split}"]
        metrics = dict(res.metrics)
        metrics.update(loss_val_noisy=res.metric("loss_val") + 0.5, perf_val_noisy=res.metric("perf_val") - 0.2)
        for split in ("train", "val", "val_noisy"):
            metrics[f"metric_iou_{split}"] = 0.8 * metrics[f"perf_{split}"]
        _rewrite_trial(rf, collator, tid, dataclasses.replace(res, metrics=metrics), tt)
    _write_collated(rf, collator)


def stop_and_keep_best(folder: Path, stops: dict[int, int], best: dict[int, int], metric: str = "loss",
                       mode: str = "min") -> dict[int, tuple[float, float]]:
    """Turn a plain run into one whose trials kept a best checkpoint by ``metric`` (on the primary val
    set) and some of which a handler stopped early, as the trainer records them, and collate it again.

    ``stops``: trial -> how many snapshots it kept (its curves end there; ``stopped_epoch`` is the last
    one's epoch). ``best``: trial -> the snapshot index of its best checkpoint. Returns trial ->
    ``(best epoch, best value)``: the epoch and the value of the trial's curve at that snapshot.
    """
    from ignite_seg.storage.collate import Collator
    from ignite_seg.storage.result_keys import BestRecord, StopRecord
    from ignite_seg.storage.run_folder import RunFolder

    rf = RunFolder(folder)
    rf.write_run(dataclasses.replace(rf.read_run(), best_metric=metric, best_mode=mode,
                                     handlers=("ignite.handlers:EarlyStopping(...)",)))
    curve = {"loss": "losses_val", "perf": "perfs_val"}.get(metric, f"metric_{metric}_val")
    collator = Collator({"snapshots_per_epoch": 4}, smooth_window=5)  # as train() collates the tiny run
    chosen = {}
    for tid, res in rf.finished_trials():
        tt = rf.read_throughtime(tid)
        k = stops.get(tid, tt["epochs"].size)
        tt = {key: (v[:k] if isinstance(v, np.ndarray) and v.ndim == 1 and v.size == tt["epochs"].size else v)
              for key, v in tt.items()}
        chosen[tid] = (float(tt["epochs"][best[tid]]), float(tt[curve][best[tid]]))
        res = dataclasses.replace(res, best=BestRecord(metric, "min" if mode == "min" else "max", *chosen[tid]),
                                  stop=StopRecord(float(tt["epochs"][-1]) if tid in stops else None))
        _rewrite_trial(rf, collator, tid, res, tt)
    _write_collated(rf, collator)
    return chosen


def _rewrite_trial(rf: Any, collator: Any, tid: int, res: Any, tt: dict[str, Any]) -> None:
    write_npz(rf.trial(tid) / "throughtime.npz", **tt)
    write_json(rf.trial(tid) / "result.json", res.to_json())
    collator.add(tid, res, tt)


def _write_collated(rf: Any, collator: Any) -> None:
    results, tt = collator.arrays()
    write_npz(rf.results, **results)
    write_npz(rf.throughtimes, **tt)
