"""The learning-rate line's words: how the trials' learning rates were reached, read from ``misc.json``'s steps.

Where the peak sits in the tuned range (its geometric centre, or the top for a schedule that leaves its peak at
once), where a lift took it, and the back-offs of the recipe and length checks, which the range alone does not show
(:func:`~ignite_seg.tuning.schedule.schedule_lrs` made the decisions; these say them).
"""
from __future__ import annotations

from ..engine.constant_output import CONSTANT_TOL
from ..storage.schemas import MiscSteps, ScheduleStep
from ._mpl import fmt

__all__ = ["lr_how", "peak_in_range"]


def lr_how(steps: MiscSteps) -> str | None:
    """How the trials' learning rates were reached: the schedule's mapping of the tuned range (a decaying schedule's
    peak lifted towards a decade below the sweep's divergence), the longer sweep it was read on (when the capped one
    could not choose or barely learned), then any division by the recipe check (its back-offs) or the length check
    (its cooler recipe)."""
    sch = steps.schedule
    how = [sch.lr_how] if sch is not None and sch.lr_how else []
    if sch is not None and sch.peak_lifted and sch.diverged_lr:
        how.append(_lift(sch, sch.diverged_lr))
    used = steps.used_lr_range
    if used is not None and used.longer_after:  # the capped sweep could not choose, or barely learned
        how.append(f"a longer sweep: {used.longer_after}")
    g, length = steps.guard, steps.length
    if g is not None and g.backoffs and g.backoff_factor:
        how.append(f"then / {g.backoff_factor ** g.backoffs:.3g} by the recipe check ({g.backoffs} back-off(s))")
    if length is not None and length.cool_won and length.cool_factor:
        why = ("its first run's held-out perf dipped and recovered: a recipe at the edge of stability"
               if length.cool_because == "spiked" else "its runs fell from being too hot")
        how.append(f"then / {length.cool_factor:.3g} by the length check ({why})")
    return "; ".join(how) or None


def _lift(sch: ScheduleStep, diverged: float) -> str:
    """Where a lifted peak went from (the range's centre, or its top for a schedule that leaves its peak at once) and
    to: a decade below where the sweep diverged, capped at the range's top (adaptive optimizers) or above it (SGD)."""
    start = "top" if sch.peak_at == "top" else "centre"
    top, peak, at = sch.range_max, sch.lr_end, fmt(diverged, 4)
    if top is not None and peak is not None and peak > top * (1 + 1e-9):
        return (f"the peak lifted above the range's top, towards a decade below where the sweep diverged ({at}): "
                "SGD's best peak tracks its divergence")
    if top is not None and peak is not None and peak >= top * (1 - 1e-9):
        return (f"the peak lifted from the range's {start} to its top (a decade below where the sweep diverged, {at}, "
                "lies above it)")
    return f"the peak lifted from the range's {start} towards a decade below where the sweep diverged ({at})"


def peak_in_range(sch: ScheduleStep | None) -> str:
    """Where the peak sits in the tuned range it was mapped from (``peak_at``: "centre", "top" or "quiet top"; a lifted
    peak or an older folder: the range alone, ``lr_how`` says the lift); empty when the range is not known."""
    if sch is None or sch.range_min is None or sch.range_max is None:
        return ""
    rng = f"the tuned range [{fmt(sch.range_min, 4)}, {fmt(sch.range_max, 4)}]"
    at = None if sch.peak_lifted else sch.peak_at
    if at == "centre":
        return f": the geometric centre of {rng}"
    if at == "top":
        return f": the top of {rng}, as the schedule leaves its peak at once"
    if at == "quiet top":
        return (f": the top of {rng}, a trivial floor's quiet top (the held-out loss within {CONSTANT_TOL:.0%} of the "
                "best constant output's), which the schedule holds")
    return f", from {rng}"
