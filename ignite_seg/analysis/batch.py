"""The batch size: perf against batch size, the noise-scale estimate and the scored candidates."""
from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

import numpy as np

from ..storage.schemas import BatchSampledFile, BatchSweepFile
from ._mpl import COLORS, draw_band, draw_trials, fmt, new_figure
from .stats import Band, mean_band

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure

__all__ = ["BatchInfo", "CandidateRanking", "batch_info", "candidate_ranking", "plot_batch_size", "draw_batch_size"]


class CandidateRanking(NamedTuple):
    """What the batch-size rule ranked: each candidate's mean held-out ``by`` at the last rung it ran.

    A pruned candidate is at its real score at the rung where it was cut (``budget``: that rung's epochs).
    """

    by: str
    bss: np.ndarray
    values: np.ndarray
    repeats: np.ndarray
    budget: np.ndarray
    pruned: np.ndarray
    best_by_score: float
    chosen: float
    tie_note: str = ""


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
    #: what the rule ranked (``None``: not known, the candidates' perf is drawn)
    ranking: CandidateRanking | None = None


def _arr(a: Any) -> np.ndarray:
    return np.zeros(0) if a is None else np.asarray(a, dtype=np.float64)


def candidate_ranking(sampled: BatchSampledFile, by: str = "loss", tie_note: str = "") -> CandidateRanking | None:
    """The held-out ``by`` (``loss`` or ``perf``) the rule ranked, per candidate at the last rung it ran
    (pure, from ``bs_sampled.npz``'s rungs; without them, the deciding rung's). ``None`` without runs."""
    cand = _arr(sampled.bss).ravel()
    rungs = _arr(sampled.rung_losses if by == "loss" else sampled.rung_scores)
    budgets = _arr(sampled.rung_budgets).ravel()
    if rungs.size == 0 or rungs.ndim != 3:
        last = _arr(sampled.losses if by == "loss" else sampled.scores)
        if last.size == 0:
            return None
        given = _arr(sampled.budget_epochs).ravel()
        rungs, budgets = last.reshape(1, -1, cand.size), np.array([given.max() if given.size else np.nan])
    ran = np.isfinite(rungs).any(axis=1)  # (N, C)
    last_rung = np.where(ran.any(axis=0), ran.shape[0] - 1 - np.argmax(ran[::-1], axis=0), -1)
    values, repeats, budget = np.full(cand.size, np.nan), np.zeros(cand.size, dtype=np.int64), np.full(cand.size, np.nan)
    for c, n in enumerate(last_rung):
        if n >= 0:
            col = rungs[n, :, c]
            values[c], repeats[c], budget[c] = np.nanmean(col), np.isfinite(col).sum(), budgets[n]
    pruned = last_rung < rungs.shape[0] - 1
    alive = np.where(pruned, np.nan, values)
    best = float(cand[np.nanargmin(alive) if by == "loss" else np.nanargmax(alive)]) if np.isfinite(alive).any() else np.nan
    chosen = float(sampled.chosen) if sampled.chosen is not None else np.nan
    return CandidateRanking(by, cand, values, repeats, budget, pruned, best, chosen, tie_note)


def batch_info(bs_vs_perf: BatchSweepFile | Mapping[str, Any] | None, bs_sampled: BatchSampledFile | Mapping[str, Any] | None,
               final_batch_size: float = float("nan"), ranked_by: str | None = None, tie_note: str = "") -> BatchInfo | None:
    """Evidence for the batch size from ``bs_vs_perf.npz`` and ``bs_sampled.npz`` (either may be absent).

    Each comes as its record or its arrays. ``None`` when neither holds any batch size. ``ranked_by``
    (``loss`` or ``perf``, from ``misc.json``): what the rule ranked, drawn with ``tie_note`` (why the
    chosen one is not the best scored); ``None``: the candidates' perf is drawn.
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
        ranking=candidate_ranking(sampled, ranked_by, tie_note) if sampled and ranked_by and cand.size else None,
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


def _repeats(n: int) -> str:
    return f"{n} repeat{'' if n == 1 else 's'}"


def _draw_ranking(ax: Any, r: CandidateRanking) -> None:
    """The candidates at the score the rule ranked: survivors, pruned ones at their real score, the best
    scored and the chosen one, and the tie rule when it decided."""
    kept, cut = ~r.pruned & np.isfinite(r.values), r.pruned & np.isfinite(r.values)
    n = int(r.repeats[kept].max()) if kept.any() else 0
    ax.plot(r.bss[kept], r.values[kept], "s", color="k", ms=7, gid="candidates", zorder=4,
            label=f"last rung: mean of {_repeats(n)}" if n > 1 else "last rung: the only repeat, no mean")
    if cut.any():
        ax.plot(r.bss[cut], r.values[cut], "x", color=COLORS["diverged"], ms=9, mew=2, gid="pruned", zorder=4,
                label="pruned at an earlier rung (its score there)")
    for xi, yi, b in zip(r.bss, r.values, r.budget):
        if np.isfinite(yi):
            ax.annotate(f"{fmt(b, 2)} ep", (xi, yi), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7)
    if np.isfinite(r.best_by_score):
        k = int(np.flatnonzero(r.bss == r.best_by_score)[0])
        ax.plot([r.best_by_score], [r.values[k]], "o", mfc="none", mec=COLORS["range"], ms=15, mew=2,
                label=f"{'lowest' if r.by == 'loss' else 'highest'} held-out {r.by}: {fmt(r.best_by_score)}")
    if np.isfinite(r.chosen):
        by_rule = np.isfinite(r.best_by_score) and r.chosen != r.best_by_score
        ax.axvline(r.chosen, color=COLORS["chosen"], lw=2,
                   label=f"chosen {fmt(r.chosen)}" + (" by the tie rule" if by_rule else ""))
        if by_rule and r.tie_note:
            ax.text(0.02, 0.98, "\n".join(textwrap.wrap(r.tie_note, 48)), transform=ax.transAxes, fontsize=7,
                    va="top", bbox={"facecolor": "white", "alpha": 0.85, "lw": 0})
    finite = r.values[np.isfinite(r.values)]
    if finite.size:  # room above the points for the tie rule's note and the epoch labels
        lo, hi = float(finite.min()), float(finite.max())
        span = hi - lo or abs(hi) * 0.1 or 1.0
        ax.set_ylim(lo - 0.1 * span, hi + (0.6 if r.tie_note else 0.2) * span)
    _batch_ticks(ax, r.bss)
    ax.set_xlabel("candidate batch size (log2 scale)")
    ax.set_ylabel(f"held-out {r.by} ({'lower' if r.by == 'loss' else 'higher'} is better)")
    ax.set_title(f"Candidates: the held-out {r.by} the rule ranks (labels: epochs)")


def plot_batch_size(info: BatchInfo, dpi: float = 110) -> Figure:
    """Perf vs batch size with the noise scale B_simple, the candidates' scores and the estimates."""
    fig = new_figure(4.6 * len(_panels(info)) + 1, 4.4, dpi)
    draw_batch_size(fig, info)
    return fig


def draw_batch_size(fig: Figure | SubFigure, info: BatchInfo, legend_size: float = 8, compact: bool = False) -> None:
    """The batch-size panels drawn into ``fig`` (a figure or a subfigure).

    ``compact`` (the video, a wide and short frame): every panel of the PNG, the titles wrapped to the
    panel's width and the legends smaller, so that nothing runs into the next panel or is cut off.
    """
    panels = _panels(info)
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    chosen = info.final_batch_size if np.isfinite(info.final_batch_size) else info.chosen
    for ax, panel in zip(axes, panels):
        if panel == "sweep":
            draw_trials(ax, info.bss, info.perfs, COLORS["val"], f"each repeat (N={info.perfs.shape[0]})")
            draw_band(ax, info.bss, info.band, COLORS["val"], "repeats", "repeats", curves=info.perfs)
            if np.isfinite(info.perfs_smoothed).sum() >= 5:  # a smoothing through fewer points says nothing
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
        elif panel == "candidates" and info.ranking is not None:
            _draw_ranking(ax, info.ranking)
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
        ax.legend(fontsize=legend_size * (0.85 if compact else 1), loc="best", framealpha=0.85)
        if compact:
            ax.set_title(textwrap.fill(ax.get_title(), width=max(24, 100 // len(panels))), fontsize=10)
            ax.set_ylabel(textwrap.fill(ax.get_ylabel(), width=32), fontsize=9)
            ax.set_xlabel(textwrap.fill(ax.get_xlabel(), width=28), fontsize=9)
    fig.suptitle("Batch-size choice")
