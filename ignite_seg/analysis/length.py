"""The length check's figure: each run's held-out perf after every epoch, the tolerance under its best,
and the epochs the trials train (``misc.json`` ``steps.length``, written by :mod:`ignite_seg.tuning.length`).

Registered by one line of :data:`.products.PRODUCTS` (``png(length.FIGURE)``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..smoothing import deepest_dip, smooth_epochs
from ..storage.names import MISC_JSON
from ..storage.schemas import MiscFile
from ._mpl import COLORS, PERF_LABELS, new_figure, set_color
from .figure_spec import FigureSpec
from .load import hparams_inputs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .snapshot import Snapshot

__all__ = ["LengthInfo", "length_info", "length_of", "plot_length", "length_caption", "FIGURE"]


@dataclass(frozen=True)
class LengthInfo:
    """Each length run's held-out perf per epoch, its smoothed best and tolerance; the decision."""

    perfs: tuple[np.ndarray, ...]
    #: per run: the 1-based epoch of its smoothed best, the best, its tolerance
    best_epochs: tuple[int, ...]
    bests: tuple[float, ...]
    tols: tuple[float, ...]
    statuses: tuple[str, ...]
    epochs_planned: int
    epochs: int
    cut: bool
    accuracy_style: str
    decided_by: str
    #: the shorter schedule's epochs (0: none compared), its runs' perf per epoch (run k on run k's slice), taken
    short_epochs: int = 0
    short_perfs: tuple[np.ndarray, ...] = ()
    short_won: bool = False
    #: what the shorter schedule was compared with: ``"end"`` (the full runs' ends) or ``"best"`` (every run fell)
    short_against: str = "end"
    #: the slices of the sign test (0: a folder from before it, whose rule asked for a margin of the tolerance)
    short_slices: int = 0
    #: the cooler recipe (compared when every run fell, or when the first run dipped and recovered): its learning
    #: rates' divisor (0: not compared), its runs' perf per epoch (run k on run k's slice), taken, and why it was
    #: compared (``"fell"`` or ``"spiked"``)
    cool_factor: float = 0.0
    cool_perfs: tuple[np.ndarray, ...] = ()
    cool_won: bool = False
    cool_because: str = "fell"

    @property
    def dipped(self) -> bool:
        """The cooler recipe ran because the first run dipped and recovered (not because every run fell)."""
        return self.cool_because == "spiked" and bool(self.cool_perfs)


def length_info(misc: object, accuracy_style: str = "classification") -> LengthInfo | None:
    """The figure's info from ``misc.json`` as read (``None``: no length run to draw)."""
    step = MiscFile.from_json(misc).steps.length if isinstance(misc, dict) else None
    if step is None or not step.runs or not step.perfs or step.epochs_planned is None or step.epochs is None:
        return None
    perfs = tuple(np.asarray(p, dtype=np.float64) for p in step.perfs)
    if not any(p.size for p in perfs):
        return None
    item_tols = step.item_tol or [0.0] * len(perfs)
    best_epochs, bests, tols = [], [], []
    for p, item_tol in zip(perfs, item_tols):
        sm = smooth_epochs(p) if p.size else np.full(1, np.nan)
        k = int(np.nanargmax(sm)) if np.isfinite(sm).any() else 0
        best_epochs.append(k + 1)
        bests.append(float(sm[k]))
        tols.append((step.rel_tol or 0.0) * abs(float(sm[k])) + float(item_tol))
    return LengthInfo(perfs, tuple(best_epochs), tuple(bests), tuple(tols), tuple(step.run_status or ()),
                      step.epochs_planned, step.epochs, bool(step.cut), accuracy_style, step.decided_by or "",
                      short_epochs=step.short_epochs or 0,
                      short_perfs=tuple(np.asarray(p, dtype=np.float64) for p in step.short_perfs or ()),
                      short_won=bool(step.short_won), short_against=step.short_against or "end",
                      short_slices=step.short_slices or 0, cool_factor=step.cool_factor or 0.0,
                      cool_perfs=tuple(np.asarray(p, dtype=np.float64) for p in step.cool_perfs or ()),
                      cool_won=bool(step.cool_won), cool_because=step.cool_because or "fell")


def length_of(snap: Snapshot) -> LengthInfo | None:
    return length_info(snap.misc, snap.style)


def plot_length(info: LengthInfo, dpi: float = 110) -> Figure:
    """Each run's held-out perf (thin: as measured; thick: the 3-epoch mean the rule reads), its best and
    the tolerance under it (shaded), and the epochs the trials train."""
    fig = new_figure(8, 5.0, dpi)
    ax = fig.subplots()
    for r, p in enumerate(info.perfs):
        if not p.size:
            continue
        color = COLORS["val"] if r == 0 else set_color(r - 1)
        e = np.arange(1, p.size + 1)
        status = info.statuses[r] if r < len(info.statuses) else ""
        ax.plot(e, p, color=color, lw=0.8, alpha=0.5)
        ax.plot(e, smooth_epochs(p), color=color, lw=2,
                label=f"run {r + 1}: held-out slice {r + 1}" + (" (stopped: fell)" if status == "stopped" else ""))
        best, tol, k = info.bests[r], info.tols[r], info.best_epochs[r]
        ax.axhspan(best - tol, best, color=color, alpha=0.08)
        ax.plot([k], [best], "o", color=color, ms=6)
    for r, p in enumerate(info.short_perfs):
        if not p.size:
            continue
        color = COLORS["val"] if r == 0 else set_color(r - 1)
        compared_end = info.short_against == "end" and not (info.cut or info.cool_won)  # every run fell: not the end
        if r < len(info.perfs) and info.perfs[r].size and compared_end:  # compared with this end
            ax.plot([info.perfs[r].size], [smooth_epochs(info.perfs[r])[-1]], "o", color=color, ms=8, mfc="white",
                    mew=1.5)
        ax.plot(np.arange(1, p.size + 1), p, color=color, lw=1.5, ls="--", marker="s", ms=3,
                label=f"slice {r + 1}: the recipe compressed to {info.short_epochs} epochs")
        ax.plot([p.size], [smooth_epochs(p)[-1]], "s", color=color, ms=8, mfc="white", mew=1.5)
    for r, p in enumerate(info.cool_perfs):
        if not p.size:
            continue
        color = COLORS["val"] if r == 0 else set_color(r - 1)
        if info.dipped and r < len(info.perfs) and info.perfs[r].size:  # compared with this end
            sm = smooth_epochs(info.perfs[r])
            ax.plot([sm.size], [sm[-1]], "o", color=color, ms=8, mfc="white", mew=1.5)
            k, depth = deepest_dip(sm)
            ax.plot([k + 1], [sm[k]], "x", color=color, ms=9, mew=2,
                    label=f"run {r + 1}'s dip: {depth:.3g} below its best so far")
        ax.plot(np.arange(1, p.size + 1), p, color=color, lw=1.5, ls=":", marker="^", ms=3,
                label=f"slice {r + 1}: the recipe at its learning rates / {info.cool_factor:.3g}")
        ax.plot([p.size], [smooth_epochs(p)[-1]], "^", color=color, ms=8, mfc="white", mew=1.5)
    ax.axvline(info.epochs_planned, color="grey", ls=":", lw=1, label=f"planned: {info.epochs_planned} epochs")
    if info.cut:
        ax.axvline(info.epochs, color=COLORS["chosen"], ls="--", lw=1.5, label=f"the trials train {info.epochs} epochs")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"held-out {PERF_LABELS.get(info.accuracy_style, 'perf')}")
    ax.set_xlim(0.5, info.epochs_planned + 0.5)
    verdict = (f"the run dipped; the recipe at its learning rates / {info.cool_factor:.3g} ended as high"
               if info.dipped and info.cool_won
               else f"the recipe at its learning rates / {info.cool_factor:.3g} ended above the runs' best" if info.cool_won
               else f"the {info.epochs}-epoch schedule reached the runs' best" if info.short_won and info.short_against == "best"
               else f"the {info.epochs}-epoch schedule ended better" if info.short_won
               else f"cut {info.epochs_planned} -> {info.epochs} epochs" if info.cut else f"{info.epochs} epochs kept")
    ax.set_title(f"Length check: {verdict}\n(dot: a run's best on its 3-epoch mean; shaded: the tolerance under it)",
                 fontsize=11)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=2, frameon=False)  # off the curves
    ax.grid(True, alpha=0.3)
    return fig


def length_caption(info: LengthInfo) -> str:
    runs = len(info.perfs)
    head = (f"The final recipe trained up to its full {info.epochs_planned} epochs in {runs} run(s), each holding "
            "out its own slice of the training set and scoring it after every epoch, stopping once its perf had "
            "clearly fallen (thin: as measured; thick: the 3-epoch mean the rule reads; dot: its best; shaded: the "
            "tolerance under the best). ")
    all_fell = ((info.cut and not info.short_won) or (info.short_won and info.short_against == "best")
                or (info.cool_won and not info.dipped))
    fell = runs if all_fell else sum(_fell(p, b, t) for p, b, t in zip(info.perfs, info.bests, info.tols))
    who = ("Every run's perf fell below its tolerance" if all_fell
           else "The run's perf did not fall below its tolerance" if runs == 1 and not fell
           else f"The perf fell below its tolerance in {fell} of the {runs} runs, not in every one" if fell
           else "No run's perf fell below its tolerance")
    n = len(info.short_perfs)
    compared = (")." if all_fell and info.short_epochs >= info.epochs else ", compared with the run's best)." if all_fell
                else "; open circle: the full run's end, with which it is compared).")
    shorter = "" if not n else (
        f" Beside {'each run' if n > 1 else 'it'}, the recipe compressed to {info.short_epochs} epochs (its cycles "
        "and warmup in proportion) trained on the same slice (dashed, squares; open square: its end, the mean of "
        f"its last two epochs{compared}")
    if all_fell:
        latest = max(info.best_epochs, default=info.epochs)
        cool = "" if not info.cool_perfs else (
            f" The recipe at its learning rates / {info.cool_factor:.3g} (dotted, triangles; open triangle: its end) "
            f"trained the planned {info.epochs_planned} epochs on the same slice{'s' if len(info.cool_perfs) > 1 else ''}"
            + (": it ended above the runs' best by more than the tolerance (and above the compressed schedule's end "
               "where it ran beside) on every slice, so the runs fell from being too hot rather than too long, and the "
               f"trials train it, the planned {info.epochs} epochs." if info.cool_won
               else "; it did not end above the runs' best by more than the tolerance (and above the compressed "
                    "schedule's end where it ran beside) on every slice."))
        if info.cool_won:
            return head + f"{who}.{cool}"
        if info.short_won:
            return head + (f"{who}.{cool}{shorter} It ended within the tolerance of the runs' best on every slice, so "
                           f"the trials train the compressed {info.epochs}-epoch schedule rather than the {latest} "
                           "epochs of the latest best.")
        not_taken = (" It is not shorter than the cut, so it was not compared." if info.short_epochs >= info.epochs
                     else " It did not reach the runs' best within the tolerance on every slice.")
        return head + (f"{who}{'.' + cool + ' So' if cool else ', so'} the trials train {info.epochs} epochs (dashed), "
                       "the latest of the runs' best epochs (at least min_epochs)." + (shorter + not_taken if n else ""))
    if info.dipped:
        who += (f", but {'it' if runs == 1 else 'the first'} dipped more than its tolerance below its best so far "
                "(cross) and recovered: a recipe at the edge of stability, whose trials, from other initialisations, may not "
                f"recover. The recipe at its learning rates / {info.cool_factor:.3g} (dotted, triangles; open "
                f"triangle: its end) trained the planned {info.epochs_planned} epochs on the same slice")
        if info.cool_won:
            beside = "" if not n else (f" The recipe compressed to {info.short_epochs} epochs (dashed, squares) "
                                       "trained beside the first run and was not compared.")
            return head + (f"{who}: it ended at least as high as the run (open circle: the run's end), so the trials "
                           f"train it, the planned {info.epochs} epochs.{beside}")
        who += ": it ended below the run (open circle: the run's end) and is not taken"
    # a folder from before the sign test (no short_slices) was decided by a margin of the tolerance
    how = "" if info.short_slices else " by more than the tolerance"
    sign = " (a sign test: each slice is tried only after the ones before favoured it)" if info.short_slices else ""
    if info.short_won:
        return head + (f"{who}.{shorter} It ended above the full schedule{how} on every one of the {n} slices{sign}, "
                       f"so the trials train the compressed {info.epochs}-epoch schedule.")
    if n:
        shorter += (f" It did not end above the full schedule{how} on slice {n} (a further slice is tried only after "
                    "the ones before favoured it), so the full schedule stands.")
    further = ("when the last one fell, or for the compressed schedule's next slice" if n > 1
               else "only when the last one fell")
    return head + f"{who}, so the trials train the planned {info.epochs} epochs (a further run is made {further}).{shorter}"


def _fell(perfs: np.ndarray, best: float, tol: float) -> bool:
    """Whether a run's 3-epoch mean ends more than ``tol`` below its ``best`` (the rule of the check)."""
    return bool(perfs.size) and float(smooth_epochs(perfs)[-1]) < best - tol


def _has_length(snap: Snapshot) -> bool:
    return length_of(snap) is not None


FIGURE = FigureSpec(
    name="length_check_png", file="length_check.png", needs="images", cost=0.3,
    inputs=lambda rf: hparams_inputs(rf, MISC_JSON), available=_has_length, extract=length_of, plot=plot_length,
    caption_of=length_caption, title="Length check",
    caption="Each length run's held-out perf after every epoch, its best and the tolerance under it, the "
            "recipe compressed to fewer epochs beside it, and the epochs the trials train (misc.json: steps.length).",
)
