"""What to distrust in a range that :func:`~ignite_seg.lr_range_test` chose on live objects: the warnings it issues
(``warnings.warn``) and keeps (``RangeTestResult.warnings``). Pure numpy.
"""
from __future__ import annotations

import math

import numpy as np

from .lr_range import LRRangeChoice, RangeRule

__all__ = ["edge_warnings"]


def edge_warnings(lrs: np.ndarray, choice: LRRangeChoice, holdout_losses: np.ndarray, window: int,
                  min_improvement: float = RangeRule.min_improvement) -> tuple[str, ...]:
    """What to distrust in a range that touches an end of the sweep (within half a smoothing window), or that no
    fall of the loss measured.

    At the start, the loss was already falling fastest at the first learning rates, so the range
    may begin lower; at the end, no repeat diverged, so it may end higher, and the held-out loss
    there says whether the top is usable at all. A loss that sat on the best constant output's from the sweep's
    start until it diverged (it improved less than the rule's ``min_improvement``) gives the plateau rule's floor
    (:func:`~ignite_seg.tuning.lr_plateau.flat_floor`): nothing in the sweep says the model learns there.
    """
    edge = window // 2
    out = []
    if int(np.searchsorted(lrs, choice.lr_min)) <= edge:
        out.append(
            f"the chosen range starts at the sweep's start (lr_min={choice.lr_min:.3g}, lr_start={lrs[0]:.3g}): the "
            "loss fell fastest from the first learning rates on, so a good range may begin lower (or the loss "
            "behaves badly at any learning rate: check the model's output scale); rerun with a smaller lr_start."
        )
    if int(np.searchsorted(lrs, choice.lr_max)) >= lrs.size - 1 - edge:
        start, top = _mean_at(holdout_losses, 0), _mean_at(holdout_losses, int(np.searchsorted(lrs, choice.lr_max)))
        ratio = top / start if start > 0 else math.nan
        worse = (f"; the held-out loss there was {ratio:.2g}x its start, so the top of the range trains worse "
                 "than no training" if ratio > 1 else "")
        out.append(
            f"the chosen range ends at the sweep's end (lr_max={choice.lr_max:.3g}, lr_end={lrs[-1]:.3g}) with no "
            f"divergence above it{worse}; rerun with a larger lr_end or more steps."
        )
    if choice.plateau_constant_loss is not None and choice.improvement < min_improvement:
        out.append(
            f"the loss never fell below the best constant output's ({choice.plateau_constant_loss:.3g}) before it "
            f"diverged: the range is the top of that floor's quiet part (the plateau rule), a guess for a late "
            "learner, not a measured fall; check that a longer run leaves the floor, or that the model sees its inputs."
        )
    return tuple(out)


def _mean_at(curves: np.ndarray, i: int) -> float:
    """The mean over the repeats of column ``i`` (its last finite value per repeat when past a stop)."""
    i = min(i, curves.shape[1] - 1)
    values = [row[: i + 1][np.isfinite(row[: i + 1])] for row in curves]
    finite = [v[-1] for v in values if v.size]
    return float(np.mean(finite)) if finite else math.nan
