"""The evidence behind each tuned value, in the words the summary's table shows (pure).

Each function reads the tuner's records (``hparams/*.npz`` as records, ``misc.json``'s steps) and
returns the lines of evidence for one decision: the LR range, the batch size, the epochs.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..engine.constant_output import CONSTANT_TOL
from ..storage.schemas import (
    BS_NPZ,
    LR_NPZ,
    MISC_JSON,
    SAMPLED_NPZ,
    BatchSampledFile,
    BatchSizeStep,
    BatchSweepFile,
    LengthStep,
    LRSweepFile,
    MiscSteps,
    ScheduleStep,
)
from ._mpl import fmt

__all__ = ["lr_evidence", "batch_evidence", "epochs_evidence"]


def _f(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).ravel()


def lr_evidence(lr: LRSweepFile | None, hp_kind: str, steps: MiscSteps) -> tuple[str, ...]:
    if hp_kind == "fixed":
        return ("given by the user (FixedHyperparameters): no LR range test was run",)
    if lr is None:
        return (f"no LR range test recorded (hparams/{LR_NPZ} is missing)",)
    lrs = _f(lr.lrs)
    if lrs.size == 0:
        return (f"the preset recorded no LR sweep (empty hparams/{LR_NPZ})",)
    losses = np.asarray(lr.losses if lr.losses is not None else np.zeros((0, lrs.size)),
                        dtype=np.float64).reshape(-1, lrs.size)
    rng = _f(lr.lr_range if lr.lr_range is not None else [np.nan, np.nan])
    held_out = lr.choice_curve == "holdout_losses"
    used = steps.used_lr_range
    every = used.holdout_every if used is not None and used.holdout_every else 1  # None: an older folder
    floor = (used.plateau_lr, used.plateau_perf) if used is not None else (None, None)
    plateau = floor[0] is not None and floor[1] is not None
    out = [
        f"LR range test: {losses.shape[0]} repeat(s), {lrs.size} points from {fmt(lrs[0])} to {fmt(lrs[-1])} "
        "(geometric)",
        f"chosen range [{fmt(rng[0])}, {fmt(rng[1])}]: "
        + (f"the top of {'the quiet part of ' if used is not None and used.range_top == 'quiet' else ''}the floor "
           "the loss sat on (the plateau rule, below)" if plateau else
           "the steepest sustained improvement of the smoothed "
           + (f"held-out loss (a slice of the training set, measured {_every(every)})" if held_out else "loss")
           + " against log LR, within the window the rule looks in")
        + " (misc.json: lr_range.rule)",
    ]
    if used is not None and used.longer_after:
        out.append(f"a longer sweep: {used.longer_after}")
    if used is not None and used.settled_lr is not None:
        out.append(f"no divergence and the loss at its floor by lr {fmt(used.settled_lr)} (95% of its improvement "
                   "made): the window was moved below there, where the slope still means something")
    if floor[0] is not None and floor[1] is not None:
        (lo, hi), (p0, p_on) = floor[0], floor[1]
        constant = used.constant_loss if used is not None and used.plateau_at_constant else None
        while_ = (f"at the held-out loss of the best constant output ({fmt(constant)})" if constant is not None else
                  f"while the held-out perf did not improve ({fmt(p0)} at the start, {fmt(p_on)} on the floor)")
        quiet = used.plateau_quiet_lr if used is not None and used.range_top == "quiet" else None
        top = ("the floor's top" if quiet is None else f"the top of its quiet part (lr {fmt(quiet)}: the held-out loss "
               f"within {CONSTANT_TOL:.0%} of the constant's), as the schedule holds its peak")
        out.append(f"the loss sat on a floor from lr {fmt(lo)} to {fmt(hi)} before diverging {while_}: the network "
                   f"learned nothing beyond a constant output there, so the range was moved to {top} (the plateau "
                   "rule)")
    if used is not None and used.anchored_at_loss_minimum:
        out.append("lr_max is the centre of the valley's bottom: the loss crept up past its minimum without "
                   "diverging, so the range ends at the minimum (located on the held-out loss)")
    deriv = _f(lr.loss_deriv if lr.loss_deriv is not None else [])
    if deriv.size == lrs.size and np.isfinite(deriv).any():
        k = int(np.nanargmin(deriv))
        out.append(f"steepest loss decrease d loss/d log10(lr) = {fmt(deriv[k])} at lr {fmt(lrs[k])}")
    div = _f(lr.diverged_lr if lr.diverged_lr is not None else [])
    fin = div[np.isfinite(div)]
    if fin.size:
        out.append(f"diverged in {fin.size} of {div.size} repeat(s), at lr " + ", ".join(fmt(d) for d in fin))
    elif div.size:
        out.append(f"no repeat diverged ({div.size} repeat(s))")
    return tuple(out)


def _every(k: int) -> str:
    return "after every step" if k <= 1 else f"every {k} steps, interpolated between"


def epochs_evidence(hp_kind: str, step: ScheduleStep | None, settings: Mapping[str, Any],
                    length: LengthStep | None = None) -> tuple[str, ...]:
    """How the epochs were reached: the preset's examples per trial over the training items, clipped,
    and cut by the length check (``length``: ``steps.length``) when it fired."""
    if hp_kind == "fixed":
        return ("given by the user (FixedHyperparameters)",)
    if step is None or not step.train_examples or not step.n_train or step.epochs is None:
        return (f"from the dataset size and the preset (min/max epochs); see {MISC_JSON}",)
    how = (f"about {step.train_examples:,} examples per trial (train_examples) / "
           f"{step.n_train:,} training items = {step.train_examples / step.n_train:.3g}")
    lo, hi = settings.get("min_epochs"), settings.get("max_epochs")
    if lo is not None and hi is not None:
        how += f", kept within [min_epochs, max_epochs] = [{lo}, {hi}]"
    if step.cycles and step.cycles > 1:
        how += f", rounded to {step.cycles} whole cycles"
    if length is not None and length.short_won:
        why = ("the held-out perf fell after its best in every length run, and the compressed schedule reached that "
               "best in fewer epochs on every slice" if length.short_against == "best" else
               "the held-out perf of the compressed schedule ended above the full one on every length slice")
        return (f"{length.epochs} epochs: the length check compressed the planned {step.epochs} ({how}), cycles and "
                f"warmup in proportion: {why}",)
    if length is not None and length.cut:
        return (f"{length.epochs} epochs: the length check cut the planned {step.epochs} ({how}): the held-out "
                "perf fell after its best in every length run",)
    return (f"{step.epochs} epochs: {how}",)


def batch_evidence(bs: BatchSweepFile | None, sampled: BatchSampledFile | None, hp_kind: str,
                 steps: MiscSteps) -> tuple[str, ...]:
    if hp_kind == "fixed":
        return ("given by the user (FixedHyperparameters): no batch-size search was run",)
    out: list[str] = []
    step = steps.batch_size if isinstance(steps.batch_size, BatchSizeStep) else None
    reason = step.reason if step is not None else None
    if step is not None and step.fallback:
        out.append(f"fallback: {step.fallback}")
    if bs is not None:
        vals = _f(bs.noise_scale_values if bs.noise_scale_values is not None else [])
        if np.isfinite(bs.noise_scale):
            extra = f" (from {vals.size} estimate(s) during the sweep)" if vals.size else ""
            out.append(f"gradient noise scale B_simple ≈ {fmt(bs.noise_scale)}{extra}")
        rng = _f(bs.bs_range if bs.bs_range is not None else [])
        if rng.size >= 2 and np.isfinite(rng).all():
            out.append(f"candidate range [{fmt(rng[0])}, {fmt(rng[1])}]")
    if sampled is not None:
        cand = _f(sampled.bss)
        if cand.size:
            out.append(_candidates_line(sampled, cand))
            if sampled.chosen is not None:
                out.append(f"chosen: {int(sampled.chosen)} ({reason})" if reason else
                           f"chosen: {int(sampled.chosen)} (by the short-run scores)")
                reason = None
    if reason:  # no candidate runs to show (batch_pts=0): the rule alone
        out.append(f"chosen by the rule: {reason}")
    if not out:
        out.append(f"no batch-size evidence recorded (hparams/{BS_NPZ} and {SAMPLED_NPZ} are missing "
                   "or empty; the preset may skip the candidate runs)")
    return tuple(out)


def _candidates_line(sampled: BatchSampledFile, cand: np.ndarray) -> str:
    scores = np.asarray(sampled.scores if sampled.scores is not None else np.zeros((0, cand.size)),
                        dtype=np.float64).reshape(-1, cand.size)
    budget = _f(sampled.budget_epochs if sampled.budget_epochs is not None else [])
    parts = []
    for j, b in enumerate(cand):
        col = scores[:, j]
        col = col[np.isfinite(col)]
        bud = f", {fmt(budget[j], 2)} ep" if budget.size == cand.size else ""
        parts.append(f"{int(b)}: {fmt(float(col.mean()), 4)}{bud}" if col.size else f"{int(b)}: pruned")
    return (f"candidates (batch: mean short-run held-out perf{', budget' if budget.size == cand.size else ''}): "
            + "; ".join(parts))
