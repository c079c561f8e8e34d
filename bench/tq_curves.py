"""The figure of issue 18: each task's LR sweep against the grid, with the tuner's range marked.

One panel per task: the mean held-out loss of the sweep whose range the tuner used (at the chosen
batch size) against the learning rate, the chosen ``[lr_start, lr_end]`` shaded, where each
repeat stopped (diverged) as a red line; on the right axis the grid's mean validation perf against the cell's peak
LR at the same batch size, its best cell marked. Reads the folders ``part_presets`` keeps
(``--keep``) and the grid JSON::

    PYTHONPATH=. python bench/tq_curves.py --runs /tmp/tqb/kept --cache bench/tune_quality_cache \\
        --preset fast --seed 0 --png bench/tune_quality_curves.png
"""
from __future__ import annotations

import argparse
import json
import warnings
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
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # LRs past every repeat's cut: an empty mean, NaN
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
    cuts = _rule_and_choice(hparams)[1].diverged_lr  # where each repeat's training loss diverged (the cut)
    cut = float(np.nanmedian(np.where(np.isfinite(cuts), cuts, p.lrs[-1])))
    return {"batch": p.batch, "chosen_lr_end": float(p.lr_range[1]), "sweep_minimum": float(p.lrs[k_min]),
            "median_cut": cut, "grid_optimum": grid_optimum(p.grid_lrs, p.grid_perf)}


def _rule_and_choice(hparams: Path) -> tuple[Any, Any]:
    """The ``fast`` preset's range rule and its choice on a kept tune's final sweep."""
    from ignite_seg.config.presets import get_preset
    from ignite_seg.tuning.lr_range import RangeRule, choose_lr_range

    sweep = np.load(hparams / "lr_vs_perf.npz")
    s, lrs = get_preset("fast"), sweep["lrs"]
    rule = RangeRule(window=max(1, int(round(s.lr_smooth_frac * lrs.size))) | 1, diverge_th=s.diverge_th,
                     regain=s.diverge_regain, steep_frac=s.lr_steep_frac, window_decades=s.lr_window_decades,
                     min_span_decades=s.lr_min_span_decades)
    return rule, choose_lr_range(lrs, sweep["losses"], rule, curves=sweep["holdout_losses"])


def variants(hparams: Path) -> dict[str, float]:
    """``lr_end`` that the range rule gives on one kept tune's final sweep when one of its parts changes:
    the hypotheses of issue 18 (the valley rule, the held-out slice, the divergence cut) tested offline."""
    import dataclasses

    from ignite_seg.tuning.lr_range import choose_lr_range

    sweep = np.load(hparams / "lr_vs_perf.npz")
    lrs, train, held = sweep["lrs"], sweep["losses"], sweep["holdout_losses"]
    rule = _rule_and_choice(hparams)[0]
    out = {
        "as chosen (held-out, cut, window)": choose_lr_range(lrs, train, rule, curves=held).lr_max,
        "training loss instead of held-out": choose_lr_range(lrs, train, rule, valley_curves=held).lr_max,
        "no regain cut, 4x divergence": choose_lr_range(
            lrs, train, dataclasses.replace(rule, regain=None, diverge_th=4.0), curves=held).lr_max,
        "steep_frac 0.1 (wider stretch)": choose_lr_range(
            lrs, train, dataclasses.replace(rule, steep_frac=0.1), curves=held).lr_max,
        "no window (whole sweep)": choose_lr_range(
            lrs, train, dataclasses.replace(rule, window_decades=None), curves=held).lr_max,
    }
    return {k: float(v) for k, v in out.items()}


def plot_panels(panels: list[Panel]):  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, p in zip(axes[0], panels):
        ax.plot(p.lrs, p.loss, color="C0", label="sweep: held-out loss (mean)")
        ax.axvspan(*p.lr_range, color="C0", alpha=0.15, label="chosen lr_start..lr_end")
        for i, cut in enumerate(p.cuts[np.isfinite(p.cuts)]):
            ax.axvline(cut, color="C3", lw=0.6, alpha=0.6, label="a repeat stopped (diverged)" if i == 0 else None)
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
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)
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
    for folder in sorted(Path(args.runs).iterdir()):
        task = next((t for t in args.tasks.split(",") if folder.name.startswith(t + "_")), None)
        if task and (Path(args.cache) / f"grid_{task}.json").exists():
            row = rule_table(folder, json.loads((Path(args.cache) / f"grid_{task}.json").read_text()))
            print(folder.name, " ".join(f"{k} {v:.3g}" for k, v in row.items()), flush=True)
            print("   ", "; ".join(f"{k}: {v:.3g}" for k, v in variants(folder).items()), flush=True)


if __name__ == "__main__":
    main()
