"""A range test's evidence: its repeats' curves stacked, the noise scale's figures, and the records written of it
(``lr_vs_perf.npz``'s :class:`~ignite_seg.storage.schemas.LRSweepFile` and ``misc.json``'s
:class:`~ignite_seg.storage.schemas.LRRangeStep`), built by :mod:`ignite_seg.tuning.recipe` from its sweeps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Literal, NamedTuple

import numpy as np

from ..config.hyperparameters import HyperparameterSettings
from ..engine.constant_output import CONSTANT_TOL
from ..engine.sweeps import LRSweepResult, LRSweepTask
from ..storage.schemas import LRRangeStep, LRSweepFile
from .lr_range import LRRangeChoice, log_lr_derivative, mean_curve, smooth_curves

__all__ = ["Curves", "Noise", "sweep_file", "range_step", "stack"]


@dataclass(frozen=True)
class Curves:
    """One range test's repeats, stacked (R, P) on its LR grid."""

    stage: Literal["lr", "rescan"]
    tasks: list[LRSweepTask]
    ordered: list[LRSweepResult]  # this sweep's repeats in task order, failed ones included
    ok: list[LRSweepResult]  # this sweep's repeats that ran
    lrs: np.ndarray
    stacked: dict[str, np.ndarray]
    window: int
    #: lr_sweep_max_examples made the sweep shorter than lr_sweep_len epochs
    capped: bool = False

    @property
    def batch_size(self) -> int:
        return self.tasks[0].batch_size

    @property
    def constant_loss(self) -> float | None:
        """The held-out slice's loss under the best constant output (the median over the repeats that measured it;
        the slice is the same for all), None where none could."""
        values = [r.constant_loss for r in self.ok if math.isfinite(r.constant_loss)]
        return float(np.median(values)) if values else None


class Noise(NamedTuple):
    running: np.ndarray  # (P,) the pooled running estimate along the sweep
    value: float
    b_small: float
    chunks: int


def sweep_file(curves: Curves, choice: LRRangeChoice, stopped: np.ndarray, held_out: bool) -> LRSweepFile:
    """The evidence: per-repeat curves, smoothed, derivatives of the mean against log10 LR."""
    stacked, window, lrs = curves.stacked, curves.window, curves.lrs
    perfs_smoothed = smooth_curves(stacked["perfs"], window)
    mean_perf = mean_curve(perfs_smoothed)
    mean_perf[choice.n_valid:] = np.nan
    return LRSweepFile(
        lrs=lrs, losses=stacked["losses"], perfs=stacked["perfs"],
        losses_smoothed=smooth_curves(stacked["losses"], window), perfs_smoothed=perfs_smoothed,
        loss_deriv=choice.deriv, perf_deriv=log_lr_derivative(mean_perf, lrs, max(window, 3)),
        lr_range=np.array([choice.lr_min, choice.lr_max]), diverged_lr=stopped,
        holdout_losses=stacked["holdout_losses"],
        holdout_losses_smoothed=choice.smoothed if held_out else smooth_curves(stacked["holdout_losses"], window),
        choice_curve="holdout_losses" if held_out else "losses", batch_size=curves.batch_size,
        rescan=curves.stage == "rescan", holdout_measured=stacked.get("holdout_measured"),
        constant_loss=curves.constant_loss,
    )


def range_step(
    s: HyperparameterSettings, curves: Curves, choice: LRRangeChoice, stopped: np.ndarray, noise: Noise,
) -> LRRangeStep:
    """``misc.json``'s record of one range test: the decision and every input to it."""
    held_out = s.lr_choose_on == "holdout"
    on_holdout = "held-out loss (train-set slice)"
    return LRRangeStep(
        batch_size=curves.batch_size, iterations=curves.lrs.size, repeats=len(curves.tasks),
        repeats_ok=len(curves.ok), pooled_repeats=0,
        init_seeds=[task.init_seed for task in curves.tasks], shared_init=s.lr_shared_init,
        chosen_on=on_holdout if held_out else "training loss",
        valley_located_on=on_holdout if held_out or choice.valley_on_other_curves
        else "training loss (the held-out loss was not finite)",
        smooth_window=curves.window, stop_ema_weight=curves.tasks[0].smooth_f, lr_min=choice.lr_min,
        lr_max=choice.lr_max, steepest_lr=choice.steepest_lr, steepest_slope_per_decade=choice.steepest_slope,
        relative_improvement=choice.improvement, stopped_lr=stopped.tolist(), cut_lr=choice.diverged_lr.tolist(),
        task_seconds=[r.seconds for r in curves.ordered], prepare_seconds=[r.prepare_seconds for r in curves.ordered],
        points_used=choice.n_valid, range_hits_sweep_end=choice.hit_end,
        anchored_at_loss_minimum=choice.anchored_at_minimum,
        settled_lr=choice.settled_lr,
        plateau_lr=list(choice.plateau_lrs or ()) or None,
        plateau_perf=[_or_none(p) for p in choice.plateau_perfs] if choice.plateau_perfs else None,
        constant_loss=curves.constant_loss, plateau_at_constant=choice.plateau_constant_loss is not None,
        plateau_quiet_lr=choice.plateau_quiet_lr, range_top=choice.plateau_top,
        rule=f"slope against log10 lr within {s.lr_steep_frac} of the steepest, largest loss drop, "
             f"within {s.lr_window_decades} decades below the last usable lr (or below where the loss settled at its floor, "
             "when it was flat there) and not past the valley floor; the top of a floor of 0.8 decades or more "
             f"where the held-out perf did not improve or the loss stayed within {CONSTANT_TOL:.0%} of the best "
             "constant output's (the plateau rule), when the loss sat on one before diverging; for a schedule that "
             f"holds its peak, the top of that floor's quiet part (the loss within {CONSTANT_TOL:.0%} of the "
             "constant's); a loss that never fell, at the "
             "constant's until it diverged, is such a floor from the sweep's start (not for SGD)",
        noise_scale=noise.value,
        noise_scale_rule="median over every repeat's running EMA estimate before divergence" if noise.chunks > 1
        else "not measured here (plain updates); the first sweep's estimate is the one used",
        noise_b_small=noise.b_small, noise_b_big=curves.batch_size, holdout_every=curves.tasks[0].holdout_every,
        capped_by_max_examples=curves.capped,
    )


def _or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


def stack(rows: Iterable[np.ndarray], n: int) -> np.ndarray:
    """Rows of different lengths as one (R, n) array, NaN-padded after each row's end."""
    rows = list(rows)
    out = np.full((len(rows), n), np.nan)
    for i, row in enumerate(rows):
        out[i, : min(n, row.size)] = row[:n]
    return out
