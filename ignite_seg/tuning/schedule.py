"""The schedule decisions (pure): how many epochs the final trials train, in how many LR cycles, and
which learning rates of the tuned range the schedule uses.

Example:
    >>> choose_schedule(1437, train_examples=30_000, min_epochs=5, max_epochs=100, cycles=1)
    (21.0, 21)
    >>> round(schedule_lrs("cosine", 0.01, 0.1).lr_end, 4)  # the peak: the range's geometric centre
    0.0316
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..engine.constant_output import CONSTANT_TOL

__all__ = ["choose_schedule", "ScheduleLRs", "PEAK_FIRST", "DECAYING", "ANNEALING", "BRIEF_PEAK", "HELD_PEAK",
           "DECAY_RATIO", "DIVERGE_MARGIN", "schedule_lrs"]

#: Schedules that reach their peak at once (after the warmup) and then hold or decay from it; the
#: triangular one visits its top only briefly, once per cycle.
PEAK_FIRST = ("cosine", "inv-sqrt", "one-cycle", "constant")
#: Schedules that decay from their peak (``lr_end``) to ``lr_start`` at the last step, and the least ratio between
#: the two: a narrow tuned range (a third of a decade is common) would leave them barely annealed. bench/RESULTS.md,
#: session 17: the tuned AdamW cosine recipes of 18 tasks decaying to a tenth of the peak instead of the range's
#: bottom (1.8x below it) scored +0.005 on average, up to +0.017, and at most 0.0014 less (within the noise).
DECAYING = ("cosine", "inv-sqrt")
#: Schedules that anneal their peak away before the end (a decay from the peak, or one-cycle's way down): their peak
#: is lifted towards :data:`DIVERGE_MARGIN` below the divergence.
ANNEALING = DECAYING + ("one-cycle",)
#: Peak-first schedules that leave their peak at once: inverse-sqrt decaying a decade is below half its peak after 3%
#: of its steps, and its time-averaged log LR lies 0.79 decades below the peak (cosine's: 0.36), so at the same peak
#: it trains at about a third of cosine's LR. Its peak is the range's top, like the triangular schedule's: about 2.7x
#: the centre on a range a decade wide, where both schedules average the same log LR (bench/RESULTS.md, session 24).
BRIEF_PEAK = ("inv-sqrt",)
#: Peak-first schedules that hold their peak to the end (no annealing): on a floor at the best constant output's loss
#: the plateau rule ends their range at the floor's quiet top, not at its top next to the divergence
#: (:mod:`~ignite_seg.tuning.lr_plateau`; bench/RESULTS.md, sessions 25-26: the adding and multiplication problems)
HELD_PEAK = tuple(name for name in PEAK_FIRST if name not in ANNEALING)
DECAY_RATIO = 10.0
#: An annealing schedule's peak is lifted from the range's centre towards this factor below the LR where the sweep
#: first diverged (above the range's top for SGD only): the range test's rule of thumb, a decade below the divergence.
DIVERGE_MARGIN = 10.0


def choose_schedule(
    n_train: int, *, train_examples: int, min_epochs: int, max_epochs: int, cycles: int
) -> tuple[float, int]:
    """``(cycle_size_epochs, epochs)`` so that a trial sees about ``train_examples`` examples.

    ``epochs = clip(round(train_examples / n_train), min_epochs, max_epochs)``, rounded up to a
    multiple of ``cycles`` so that every cycle is whole and the run ends at the cycle's low LR.
    """
    if n_train < 1:
        raise ValueError(f"n_train must be >= 1, got {n_train!r}")
    if not (1 <= min_epochs <= max_epochs) or cycles < 1:
        raise ValueError(f"need 1 <= min_epochs <= max_epochs and cycles >= 1, got {min_epochs}, {max_epochs}, {cycles}")
    epochs = min(max(int(round(train_examples / n_train)), min_epochs), max_epochs)
    epochs = max(cycles, int(math.ceil(epochs / cycles)) * cycles)
    return epochs / cycles, epochs


class ScheduleLRs(NamedTuple):
    """The ``lr_start``/``lr_end`` of the recipe (see :mod:`ignite_seg.engine.schedules` for what each
    schedule makes of them) and why."""

    lr_start: float
    lr_end: float
    mapping: str
    #: the peak was lifted from the range's centre (top: :data:`BRIEF_PEAK`) towards :data:`DIVERGE_MARGIN` below the
    #: divergence
    lifted: bool = False
    #: where in the tuned range a peak-first schedule's peak was put before any lift: ``"centre"`` (its geometric
    #: centre), ``"top"`` (:data:`BRIEF_PEAK`) or ``"quiet top"`` (a held peak on a trivial floor's quiet top); None
    #: for the triangular schedule, which cycles over the range
    peak_at: str | None = None


def schedule_lrs(schedule: str, lr_min: float, lr_max: float, diverged_lr: float | None = None,
                 optimizer: str | None = None, *, quiet_top: bool = False) -> ScheduleLRs:
    """Map the tuned range ``[lr_min, lr_max]`` onto ``schedule``.

    The range's top is where the loss's improvement has slowed to a fraction of its steepest: past the
    steepest point, the edge of what training tolerates. The triangular schedule touches it once per
    cycle and spends its time in between (its mean LR is the range's middle), so it cycles over the whole
    range. A schedule whose peak comes first (:data:`PEAK_FIRST`: cosine and inverse-sqrt after the warmup,
    one-cycle, constant) trains at or near its peak for much of the run — cosine stays above 85% of its
    peak for the first quarter of the steps — so its peak (``lr_end``) is the range's geometric centre, a
    safe LR inside the range. A cosine or inverse-sqrt run then decays to ``lr_start``: the range's bottom,
    or a tenth of the peak (:data:`DECAY_RATIO`) where that is lower — the grid family's, and what a user
    writes. ignite_seg's issue 25: with the top as the peak, a cosine run *started* at the edge of the range.

    Inverse-sqrt is the exception (:data:`BRIEF_PEAK`): it leaves its peak at once — decaying a decade, it is below
    half its peak after 3% of its steps and averages a log LR 0.79 decades below it, where cosine averages 0.36 — so
    at the centre it trains at about a third of the LR cosine trains at, and its peak is the range's top (about 2.7x
    the centre on a range a decade wide: the two average the same log LR). bench/RESULTS.md, session 24: grids of the
    AdamW inv-sqrt recipe put the best peak above the centre-tuned one on 11 of 16 tasks (1.3-5.6x), below it on 2;
    over 68 tunes (34 tasks, 2 seeds) the top scored better on 16 (up to +0.052), worse on 12 (up to -0.012, where the
    grid is flat), and the mean regret against the grids fell from 0.0117 to 0.0069.

    The centre is cautious where the range ends far below where training broke down: a sweep whose held-out loss
    bottomed out early and crept up for a decade or more before a repeat diverged (a young model's noise at a rising
    LR, not an LR it cannot train at). A schedule that anneals its peak away (:data:`ANNEALING`: a decay from the
    peak, or one-cycle's way down) does not end hot, so its peak is lifted to a decade below the lowest LR at which a
    repeat diverged (``diverged_lr``, :data:`DIVERGE_MARGIN`) when that lies above the centre (inverse-sqrt's: above
    the top; bench/RESULTS.md, session 22: a Transformer with momentum SGD, range 0.0013-0.013, diverged at 0.3: 0.67
    at the centre, 0.91 lifted to the top, the grid's best 0.94). For ``optimizer="sgd"`` the lift may go above the
    range's top: SGD's best peak tracks its divergence (session 22: the grid's best momentum
    peak lay a median 0.46 decades above the centre, correlated 0.72 with the gap up to the divergence), and lifting
    past the top trained 0.91 -> 0.92 on the Transformer and 0.63 -> 0.64 on a tabular task, at most 0.012 worse on
    13 tunes (session 23). An adaptive optimizer (AdamW, or an unknown one: ``None``) stops at the top: its grid's best
    peak lay at the centre (a median 0.07 decades below it, uncorrelated with the divergence, session 21), and its
    sweeps diverge up to two decades past the range. One-cycle, lifted the same way since session 24 (AdamW: grids of 8
    tasks put its best peak above the centre on 7; over 34 + 21 tunes the lift scored better on 17, worse on 8, none
    newly below the untuned default, and lifted a GRU out of a collapse). Constant keeps the centre: it never anneals
    its peak — except on a range that ends at a trivial floor's quiet top (``quiet_top``, :mod:`.lr_plateau`): that top
    is where the held-out loss still lay within 2% of the best constant output's, a bound already far below the
    divergence, and the peak is the top itself (bench/RESULTS.md, session 26: over 12 tunes of 3 tasks the top scored
    better on 9, up to +0.23, worse on 3 by 0.0006-0.006; the adding problem 0.871-0.999 at the centre, 0.951-0.9995
    at the top).

    Example:
        >>> [round(v, 5) for v in schedule_lrs("cosine", 0.01, 0.032)[:2]]  # narrow: it ends a decade below the peak
        [0.00179, 0.01789]
        >>> [round(v, 5) for v in schedule_lrs("cosine", 0.0001, 0.1)[:2]]  # a wide range: at its bottom
        [0.0001, 0.00316]
        >>> [round(v, 5) for v in schedule_lrs("cosine", 0.001, 0.01, diverged_lr=0.3)[:2]]  # lifted, up to the top
        [0.001, 0.01]
        >>> [round(v, 5) for v in schedule_lrs("cosine", 0.001, 0.01, diverged_lr=0.3, optimizer="sgd")[:2]]  # past it
        [0.001, 0.03]
        >>> [round(v, 5) for v in schedule_lrs("inv-sqrt", 0.001, 0.01)[:2]]  # it leaves its peak at once: the top
        [0.001, 0.01]
    """
    if not 0 < lr_min <= lr_max:
        raise ValueError(f"need 0 < lr_min <= lr_max, got lr_min={lr_min!r}, lr_max={lr_max!r}")
    if schedule not in PEAK_FIRST:
        return ScheduleLRs(lr_min, lr_max, f"{schedule}: cycles over the whole tuned range")
    if quiet_top and schedule in HELD_PEAK:
        peak, at = lr_max, "quiet top"
        how = (f"{schedule}: it holds its peak, and the range ends at a trivial floor's quiet top (the held-out loss "
               f"within {CONSTANT_TOL:.0%} of the best constant output's), itself a cautious bound, so the peak "
               "(lr_end) is that top")
    elif schedule in BRIEF_PEAK:
        peak, at = lr_max, "top"
        how = (f"{schedule}: its peak comes first but it leaves it at once (below half the peak after 3% of the steps, "
               "its time-averaged log LR 0.79 decades below it against cosine's 0.36), so the peak (lr_end) is the "
               "tuned range's top, as the triangular schedule's is")
    else:
        peak, at = math.sqrt(lr_min * lr_max), "centre"
        how = (f"{schedule}: its peak comes first and is held or decays, so the peak (lr_end) is the geometric centre "
               "of the tuned range, not its top (the edge of what training tolerates)")
    lifted = False
    if schedule in ANNEALING and diverged_lr is not None and math.isfinite(diverged_lr):
        target = diverged_lr / DIVERGE_MARGIN
        to = target if optimizer == "sgd" else min(lr_max, target)
        if to > peak:
            peak, lifted = to, True
            where = (f"{DIVERGE_MARGIN:g}x below where the sweep diverged, above the range's top (SGD's best peak "
                     "tracks its divergence)" if peak > lr_max else "the top" if peak == lr_max
                     else f"{DIVERGE_MARGIN:g}x below where the sweep diverged")
            how += (f", lifted to {where} ({peak:.3g}; the sweep diverged at {diverged_lr:.3g}): a range that ends far "
                    "below the divergence is cautious")
    if schedule in DECAYING:
        floor = min(lr_min, peak / DECAY_RATIO)
        return ScheduleLRs(floor, peak, how + ("; the decay ends at lr_start, the range's bottom" if floor == lr_min
                                               else f"; the decay ends at lr_start = the peak / {DECAY_RATIO:g}, "
                                               "below the range's bottom (a narrow range would barely anneal)"), lifted,
                           at)
    return ScheduleLRs(lr_min, peak, how + "; lr_start is the range's bottom", lifted, at)

