"""The figure of issue 18: each task's LR sweep against the grid, with the tuner's range marked.

One panel per task: the mean held-out loss of the sweep whose range the tuner used (at the chosen
batch size) against the learning rate, the chosen ``[lr_start, lr_end]`` shaded, each repeat's
divergence cut as a tick; on the right axis the grid's mean validation perf against the cell's peak
LR at the same batch size, its best cell marked. Reads the folders ``part_presets`` keeps
(``--keep``) and the grid JSON::

    PYTHONPATH=. python bench/tq_curves.py --runs /tmp/tqb/kept --cache bench/tune_quality_cache \\
        --preset fast --seed 0 --png bench/tune_quality_curves.png
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np


class Panel(NamedTuple):
    task: str
    lrs: np.ndarray
    loss: np.ndarray
    lr_range: tuple[float, float]
    cuts: np.ndarray
    batch: int
    grid_lrs: np.ndarray
    grid_perf: np.ndarray


def panel_info(task: str, hparams: Path, grid: dict[str, Any]) -> Panel:
    """The sweep, the chosen range and the grid's column at the chosen batch size."""
    sweep = np.load(hparams / "lr_vs_perf.npz")
    final = json.loads((hparams / "final.json").read_text())
    batch = int(final["batch_size"])
    with np.errstate(all="ignore"):
        loss = np.nanmean(sweep["holdout_losses_smoothed"], axis=0)
    col = grid["batches"].index(batch) if batch in grid["batches"] else 0
    return Panel(task, sweep["lrs"], loss, (final["lr_start"], final["lr_end"]), sweep["diverged_lr"], batch,
                 np.asarray(grid["lrs"]), np.asarray(grid["perf_mean"])[:, col])


def grid_optimum(lrs: np.ndarray, perf: np.ndarray) -> float:
    """The grid's best peak LR at one batch size, refined by a parabola in log LR through the best
    cell and its two neighbours (the grid's LRs are ~1.9x apart); the best cell's LR at an edge."""
    x, y = np.log10(lrs), np.where(np.isfinite(perf), perf, -np.inf)
    k = int(np.argmax(y))
    if k == 0 or k == len(y) - 1 or not np.isfinite(y[[k - 1, k + 1]]).all():
        return float(lrs[k])
    a, b, _ = np.polyfit(x[k - 1 : k + 2], y[k - 1 : k + 2], 2)
    return float(10 ** np.clip(-b / (2 * a), x[k - 1], x[k + 1])) if a < 0 else float(lrs[k])


def rule_table(hparams: Path, grid: dict[str, Any]) -> dict[str, float]:
    """Where candidate rules would put ``lr_end`` on one kept tune's final sweep, and the grid's
    optimum at the same batch size: the evidence for the valley rule (bench/RESULTS.md, session 6)."""
    from ignite_seg.tuning.lr_range import mean_curve

    p = panel_info("", hparams, grid)
    sweep = np.load(hparams / "lr_vs_perf.npz")
    k_min = int(np.nanargmin(mean_curve(sweep["holdout_losses_smoothed"], 0.51)))
    cut = float(np.nanmedian(np.where(np.isfinite(sweep["diverged_lr"]), sweep["diverged_lr"], p.lrs[-1])))
    return {"batch": p.batch, "chosen_lr_end": float(p.lr_range[1]), "sweep_minimum": float(p.lrs[k_min]),
            "median_cut": cut, "grid_optimum": grid_optimum(p.grid_lrs, p.grid_perf)}


def plot_panels(panels: list[Panel]):  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, p in zip(axes[0], panels):
        ax.plot(p.lrs, p.loss, color="C0", label="sweep: held-out loss (mean)")
        ax.axvspan(*p.lr_range, color="C0", alpha=0.15, label="chosen lr_start..lr_end")
        for cut in p.cuts[np.isfinite(p.cuts)]:
            ax.axvline(cut, color="C3", lw=0.6, alpha=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("learning rate (peak LR for the grid)")
        ax.set_title(f"{p.task}, batch {p.batch}")
        finite = p.loss[np.isfinite(p.loss)]
        if finite.size:
            ax.set_ylim(finite.min() - 0.05 * np.ptp(finite), finite.max() + 0.05 * np.ptp(finite))
        right = ax.twinx()
        right.plot(p.grid_lrs, p.grid_perf, "o-", color="C1", label="grid: val perf")
        if np.isfinite(p.grid_perf).any():
            k = int(np.nanargmax(p.grid_perf))
            right.plot(p.grid_lrs[k], p.grid_perf[k], "*", color="C1", ms=14, label="grid best at this batch")
            good = p.grid_perf[np.isfinite(p.grid_perf)]
            right.set_ylim(np.percentile(good, 30) - 0.02 * np.ptp(good), good.max() + 0.1 * np.ptp(good))
    handles, labels = [], []
    for ax in fig.axes[:1] + fig.axes[len(panels):len(panels) + 1]:  # the first panel and its right axis
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True, help="folder of the kept tunes (<task>_<preset>_<seed>/)")
    parser.add_argument("--cache", default="bench/tune_quality_cache")
    parser.add_argument("--tasks", default="cnn,noisy_regression,tiny,binary,sequence")
    parser.add_argument("--preset", default="fast")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--png", required=True)
    args = parser.parse_args()
    panels = []
    for task in args.tasks.split(","):
        folder = Path(args.runs) / f"{task}_{args.preset}_{args.seed}"
        grid_path = Path(args.cache) / f"grid_{task}.json"
        if folder.is_dir() and grid_path.exists():
            panels.append(panel_info(task, folder, json.loads(grid_path.read_text())))
    fig = plot_panels(panels)
    fig.savefig(args.png, dpi=70)


if __name__ == "__main__":
    main()
