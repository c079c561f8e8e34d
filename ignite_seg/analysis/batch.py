"""The batch size: perf against batch size, the noise-scale estimate and the scored candidates."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

import numpy as np

from ..storage.schemas import BatchSampledFile, BatchSweepFile
from ._mpl import COLORS, draw_band, draw_trials, fmt, new_figure
from .stats import Band, mean_band

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure

__all__ = ["BatchInfo", "batch_info", "plot_batch_size", "draw_batch_size"]


class BatchInfo(NamedTuple):
    bss: np.ndarray
    perfs: np.ndarray
    band: Band
    perfs_smoothed: np.ndarray
    bs_range: tuple[float, float]
    noise_scale: float
    noise_scale_lrs: np.ndarray
    noise_scale_values: np.ndarray
    cand_bss: np.ndarray
    cand_scores: np.ndarray
    cand_band: Band
    cand_budget: np.ndarray
    chosen: float
    final_batch_size: float


def _arr(a: Any) -> np.ndarray:
    return np.zeros(0) if a is None else np.asarray(a, dtype=np.float64)


def batch_info(bs_vs_perf: BatchSweepFile | Mapping[str, Any] | None, bs_sampled: BatchSampledFile | Mapping[str, Any] | None,
               final_batch_size: float = float("nan")) -> BatchInfo | None:
    """Evidence for the batch size from ``bs_vs_perf.npz`` and ``bs_sampled.npz`` (either may be absent).

    Each comes as its record or its arrays. ``None`` when neither holds any batch size.
    """
    bs, sampled = BatchSweepFile.coerce(bs_vs_perf), BatchSampledFile.coerce(bs_sampled)
    bss = _arr(bs.bss if bs else None).ravel()
    cand = _arr(sampled.bss if sampled else None).ravel()
    if bss.size == 0 and cand.size == 0:
        return None
    perfs = _arr(bs.perfs).reshape(-1, bss.size) if bs and bss.size else np.zeros((0, 0))
    scores = _arr(sampled.scores).reshape(-1, cand.size) if sampled and cand.size else np.zeros((0, 0))
    rng = _arr(bs.bs_range if bs else None).ravel()
    smoothed = _arr(bs.perfs_smoothed if bs else None).ravel()
    chosen = sampled.chosen if sampled else None
    return BatchInfo(
        bss=bss, perfs=perfs, band=mean_band(perfs), perfs_smoothed=smoothed if smoothed.size == bss.size else
        np.full(bss.size, np.nan),
        bs_range=(float(rng[0]), float(rng[1])) if rng.size >= 2 else (np.nan, np.nan),
        noise_scale=bs.noise_scale if bs else float("nan"),
        noise_scale_lrs=_arr(bs.noise_scale_lrs if bs else None).ravel(),
        noise_scale_values=_arr(bs.noise_scale_values if bs else None).ravel(),
        cand_bss=cand, cand_scores=scores, cand_band=mean_band(scores),
        cand_budget=_arr(sampled.budget_epochs if sampled else None).ravel(),
        chosen=float(chosen) if chosen is not None else float("nan"), final_batch_size=float(final_batch_size),
    )


def _batch_ticks(ax: Any, values: np.ndarray) -> None:
    """Log-2 x axis labelled with the batch sizes themselves (16, 32, ...), not powers of two."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    v = np.unique(values[np.isfinite(values)])
    if v.size > 10:
        v = v[:: int(np.ceil(v.size / 10))]
    ax.xaxis.set_major_locator(FixedLocator(v.tolist()))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{x:g}" for x in v])


def _panels(info: BatchInfo) -> list[str]:
    return [p for p, present in (("sweep", info.bss.size > 0), ("candidates", info.cand_bss.size > 0),
                                 ("noise", info.noise_scale_values.size > 0)) if present]


def plot_batch_size(info: BatchInfo, dpi: float = 110) -> Figure:
    """Perf vs batch size with the noise scale B_simple, the candidates' scores and the estimates."""
    fig = new_figure(4.6 * len(_panels(info)) + 1, 4.4, dpi)
    draw_batch_size(fig, info)
    return fig


def draw_batch_size(fig: Figure | SubFigure, info: BatchInfo, legend_size: float = 8, compact: bool = False) -> None:
    """The batch-size panels drawn into ``fig`` (a figure or a subfigure).

    ``compact`` (the video) leaves out the noise-scale estimates panel when there are others.
    """
    panels = _panels(info)
    if compact and len(panels) > 1:
        panels = [p for p in panels if p != "noise"]
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    chosen = info.final_batch_size if np.isfinite(info.final_batch_size) else info.chosen
    for ax, panel in zip(axes, panels):
        if panel == "sweep":
            draw_trials(ax, info.bss, info.perfs, COLORS["val"], f"each repeat (N={info.perfs.shape[0]})")
            draw_band(ax, info.bss, info.band, COLORS["val"], "repeats", "repeats", curves=info.perfs)
            if np.isfinite(info.perfs_smoothed).any():
                ax.plot(info.bss, info.perfs_smoothed, color="k", ls="--", lw=1.2, label="smoothed mean")
            lo, hi = info.bs_range
            if np.isfinite(lo) and np.isfinite(hi):
                ax.axvspan(lo, hi, color=COLORS["range"], alpha=0.15, lw=0,
                           label=f"candidate range [{fmt(lo)}, {fmt(hi)}]")
            if np.isfinite(info.noise_scale):
                ax.axvline(info.noise_scale, color=COLORS["diverged"], ls="--", lw=1.5,
                           label=f"noise scale B_simple ≈ {fmt(info.noise_scale)}")
            if np.isfinite(chosen):
                ax.axvline(chosen, color=COLORS["chosen"], lw=2, label=f"chosen batch size {fmt(chosen)}")
            _batch_ticks(ax, info.bss)
            ax.set_xlabel("batch size (log2 scale)")
            ax.set_ylabel("perf (held-out slice of the train set)")
            ax.set_title("Perf vs batch size (sweep)")
        elif panel == "candidates":
            x = info.cand_bss
            for r, row in enumerate(info.cand_scores):
                ok = np.isfinite(row)
                ax.plot(x[ok], row[ok], "o", color=COLORS["val"], alpha=0.45, ms=5,
                        label=f"score of a repeat (N={info.cand_scores.shape[0]})" if r == 0 else None)
            m = info.cand_band.mean
            ok = np.isfinite(m)
            ax.plot(x[ok], m[ok], "s-", color="k", ms=6, lw=1, label="mean over repeats")
            pruned = ~ok
            if pruned.any():
                finite = info.cand_scores[np.isfinite(info.cand_scores)]
                y0 = float(finite.min()) if finite.size else 0.0
                ax.plot(x[pruned], np.full(pruned.sum(), y0), "x", color=COLORS["diverged"], ms=8, mew=2,
                        label="pruned by successive halving")
            if info.cand_budget.size == x.size:
                for xi, yi, b in zip(x, np.where(ok, m, np.nan), info.cand_budget):
                    if np.isfinite(yi):
                        ax.annotate(f"{fmt(b, 2)} ep", (xi, yi), textcoords="offset points", xytext=(0, 7),
                                    ha="center", fontsize=7)
            if np.isfinite(info.chosen):
                ax.axvline(info.chosen, color=COLORS["chosen"], lw=2, label=f"chosen {fmt(info.chosen)}")
            _batch_ticks(ax, x)
            ax.set_xlabel("candidate batch size (log2 scale)")
            ax.set_ylabel("short-run score (higher is better)")
            ax.set_title("Candidates (labels: epochs of budget)")
        else:
            ax.plot(info.noise_scale_lrs, info.noise_scale_values, "o-", color=COLORS["train"], ms=4,
                    label=f"B_simple at each LR (N={info.noise_scale_values.size})")
            if np.isfinite(info.noise_scale):
                ax.axhline(info.noise_scale, color=COLORS["diverged"], ls="--", lw=1.5,
                           label=f"estimate used: {fmt(info.noise_scale)}")
            ax.set_xscale("log")
            v = info.noise_scale_values[np.isfinite(info.noise_scale_values)]
            if v.size and (v > 0).all() and v.max() / v.min() > 10:
                ax.set_yscale("log")
            ax.set_xlabel("learning rate during the sweep (log scale)")
            ax.set_ylabel("gradient noise scale B_simple = tr(Σ)/|G|²")
            ax.set_title("Noise-scale estimates")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=legend_size, loc="best", framealpha=0.85)
    fig.suptitle("Batch-size choice")
