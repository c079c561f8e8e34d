"""The records of ``misc.json``'s ``steps``: one per step of the tuner, each its decision and every input to it.

Re-exported by :mod:`ignite_seg.storage.schemas`, which holds the file's record (:class:`~ignite_seg.storage.schemas.MiscFile`)
and the other tuner files'; the reading rules are that module's (a field an older folder lacks reads as None).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .schema_base import JsonSection, absent_ok, optional, section

__all__ = [
    "MiscSteps", "LRRangeStep", "BatchSizeStep", "BatchSearchProgress", "Rung", "RungNote", "ScheduleStep",
    "GuardAttempt", "GuardStep", "LengthStep",
]


@dataclass(frozen=True)
class LRRangeStep(JsonSection):
    """``steps.lr_range`` (and ``steps.lr_rescan``): one LR range test's decision and its inputs."""

    batch_size: int | None = optional()
    iterations: int | None = optional()
    repeats: int | None = optional()
    repeats_ok: int | None = optional()
    pooled_repeats: int | None = optional()  # 0 since session 11: no rescan at the first sweep's batch
    init_seeds: list[int] | None = optional()
    shared_init: bool | None = optional()
    chosen_on: str | None = optional()
    valley_located_on: str | None = optional()
    smooth_window: int | None = optional()
    stop_ema_weight: float | None = optional()
    lr_min: float | None = optional()
    lr_max: float | None = optional()
    steepest_lr: float | None = optional()
    steepest_slope_per_decade: float | None = optional()
    relative_improvement: float | None = optional()
    #: per repeat, the LR at which it stopped (diverged), and where the choice cut it (None: not)
    stopped_lr: list[float | None] | None = optional()
    cut_lr: list[float | None] | None = optional()
    task_seconds: list[float] | None = optional()
    prepare_seconds: list[float] | None = optional()
    points_used: int | None = optional()
    range_hits_sweep_end: bool | None = optional()
    #: True when ``lr_max`` is the centre of the valley's bottom (older folders: None, read as False)
    anchored_at_loss_minimum: bool | None = optional()
    #: the LR where the loss settled at its floor, when the window was moved below it (a task learned
    #: within the sweep: the loss below the sweep's end was flat); None otherwise and in older folders
    settled_lr: float | None = optional()
    #: the plateau rule (None: it did not fire): ``[first, last]`` LR of the floor the loss sat on before
    #: diverging, the range moved to its top; the held-out perf at the sweep's start and its mean on the floor
    plateau_lr: list[float] | None = optional()
    #: (an entry is None where the perf was not measured, when the floor was judged by the constant's loss)
    plateau_perf: list[float | None] | None = optional()
    #: the held-out slice's loss under the best constant output (session 20; None: not measurable, and older folders)
    constant_loss: float | None = optional()
    #: True when the plateau rule judged the floor trivial by ``constant_loss`` (None in older folders)
    plateau_at_constant: bool | None = optional()
    #: the top of that floor's quiet part (the held-out loss within 2% of the constant's), where the range ended for a
    #: schedule that holds its peak (``range_top == "quiet"``; session 26; None: not judged by the constant's loss)
    plateau_quiet_lr: float | None = optional()
    #: where a plateau range ended: "floor" (its top) or "quiet" (its quiet top); None when the rule did not fire
    range_top: str | None = optional()
    rule: str | None = optional()
    noise_scale: float | None = optional()
    noise_scale_rule: str | None = optional()
    noise_b_small: float | None = optional()
    noise_b_big: int | None = optional()
    #: the held-out slice was measured after the first step, every this many steps and at the end
    #: of each repeat, interpolated in log LR between (issue 25; older folders: None, every step)
    holdout_every: int | None = optional()
    #: True when lr_sweep_max_examples made the sweep shorter than lr_sweep_len epochs
    capped_by_max_examples: bool | None = optional()
    #: why this sweep ran its full lr_sweep_len epochs: the capped one before it could not choose
    #: (None: it was the first, and in older folders)
    longer_after: str | None = optional()
    #: a rescan whose range was not used, and why (the first sweep's range, scaled, was); None: used
    not_used: str | None = optional()


@dataclass(frozen=True)
class Rung(JsonSection):
    """One rung of the successive halving over the batch-size candidates."""

    budget_epochs: float | None = optional()
    batch_sizes: list[int] | None = optional()
    #: ``{str(batch size): mean over the repeats}``
    mean_perf: dict[str, float | None] | None = optional()
    mean_loss: dict[str, float | None] | None = optional()
    ranked_by: str | None = optional()
    #: ``{str(batch size): the least seconds per training example of its runs so far}`` (the tie rule's speeds)
    seconds_per_example: dict[str, float | None] | None = absent_ok()
    kept: list[int] | None = optional()
    best_by_score: int | None = optional()
    #: why the kept best is not the best scored one (present only then)
    tie: str | None = absent_ok()


@dataclass(frozen=True)
class RungNote(JsonSection):
    """The one "rung" of a search with a single candidate: no runs."""

    note: str


def _load_rungs(value: Any, strict: bool) -> list[Rung | RungNote]:
    return [RungNote.from_json(r, strict=strict) if "note" in r else Rung.from_json(r, strict=strict) for r in value]


@dataclass(frozen=True)
class BatchSearchProgress(JsonSection):
    """``steps.batch_size`` while the candidate runs go on (rewritten after each rung)."""

    candidates: list[int] | None = optional()
    rungs: list[Rung | RungNote] | None = optional(load=_load_rungs)
    state: str = "running"


@dataclass(frozen=True)
class BatchSizeStep(JsonSection):
    """``steps.batch_size`` once chosen: the noise scale, the candidates, the rungs and the reason."""

    noise_scale: float | None = optional()
    centre: float | None = optional()
    noise_batch_frac: float | None = optional()
    candidates: list[int] | None = optional()
    chosen: int | None = optional()
    reason: str | None = optional()
    rungs: list[Rung | RungNote] | None = optional(load=_load_rungs)
    lr_scaling: str | None = optional()
    #: the rule that decided (ignite_seg.tuning.reasons.RULES: noise-scale, fallback, single-candidate,
    #: best-score, tie) and the fallback taken, if any (the noise scale could not be measured)
    rule: str | None = optional()
    fallback: str | None = optional()


def _load_batch_step(value: Any, strict: bool) -> BatchSizeStep | BatchSearchProgress:
    cls = BatchSearchProgress if "state" in value else BatchSizeStep
    return cls.from_json(value, strict=strict)


@dataclass(frozen=True)
class ScheduleStep(JsonSection):
    """``steps.schedule``: the final trials' epochs and cycles, and the LR range they cycle over."""

    epochs: int | None = optional()
    cycle_size_epochs: float | None = optional()
    cycles: int | None = optional()
    train_examples: int | None = optional()
    n_train: int | None = optional()
    lr_start: float | None = optional()
    lr_end: float | None = optional()
    lr_how: str | None = optional()
    #: the schedule the trials train with, its warmup, and one sentence describing it (the log's)
    schedule: str | None = optional()
    warmup_epochs: float | None = optional()
    description: str | None = optional()
    #: the tuned range ``[lr_min, lr_max]`` before it was mapped onto the schedule (older folders: None)
    range_min: float | None = optional()
    range_max: float | None = optional()
    #: how the range maps onto ``schedule`` (which LRs become ``lr_start``/``lr_end``, and why)
    mapping: str | None = optional()
    #: the LR where the range's sweep first diverged, at the trials' batch size (None: no repeat diverged; older
    #: folders), and whether an annealing schedule's peak was lifted from the range's centre (inverse-sqrt's: its top)
    #: towards a decade below it
    diverged_lr: float | None = optional()
    peak_lifted: bool | None = optional()
    #: where in the tuned range the peak was put before any lift: "centre" (its geometric centre), "top" (a
    #: schedule that leaves its peak at once, inverse-sqrt) or "quiet top" (a held peak on a trivial floor's quiet
    #: top, session 26); None for the triangular schedule and in older folders
    peak_at: str | None = optional()


@dataclass(frozen=True)
class GuardAttempt(JsonSection):
    """One short run of the recipe (every repeat) at one pair of learning rates."""

    lr_start: float | None = optional()
    lr_end: float | None = optional()
    #: held-out loss per repeat before the run and after it (None: not finite)
    start_loss: list[float | None] | None = optional()
    end_loss: list[float | None] | None = optional()
    passed: bool | None = optional()
    verdict: str | None = optional()


def _load_attempts(value: Any, strict: bool) -> list[GuardAttempt]:
    return [GuardAttempt.from_json(a, strict=strict) for a in value]


@dataclass(frozen=True)
class GuardStep(JsonSection):
    """``steps.guard``: the check of the chosen recipe by short runs before the trials, and its back-offs."""

    steps: int | None = optional()
    repeats: int | None = optional()
    margin: float | None = optional()
    backoff_factor: float | None = optional()
    attempts: list[GuardAttempt] | None = optional(load=_load_attempts)
    #: the learning rates the trials use (after any back-off)
    lr_start: float | None = optional()
    lr_end: float | None = optional()
    backoffs: int | None = optional()
    fallback: bool | None = optional()
    #: the rule that decided, in words
    decided_by: str | None = optional()


@dataclass(frozen=True)
class LengthStep(JsonSection):
    """``steps.length``: the length check (full-length runs of the final recipe, each scoring its own
    held-out slice after every epoch) and the epochs it left the trials. Lists hold one entry per run."""

    runs: int | None = optional()
    #: the epochs the schedule planned, and those the trials train
    epochs_planned: int | None = optional()
    epochs: int | None = optional()
    cut: bool | None = optional()
    #: items of each run's held-out slice; a run's tolerance: ``rel_tol`` x |its best| + its ``item_tol`` (2 of an
    #: accuracy's smallest steps on the slice: items, tokens or labels; 0 for a continuous perf)
    slice_items: list[int] | None = optional()
    rel_tol: float | None = optional()
    item_tol: list[float] | None = optional()
    #: epochs a run's perf stays fallen before it stops early; epochs each run measured; how each ended
    stop_patience: int | None = optional()
    run_epochs: list[int] | None = optional()
    run_status: list[str] | None = optional()
    #: each run's held-out perf and loss after every epoch it ran
    perfs: list[list[float]] | None = optional()
    losses: list[list[float]] | None = optional()
    #: each usable run's verdict, and the rule that decided, in words
    run_decisions: list[str] | None = optional()
    decided_by: str | None = optional()
    #: the shorter schedule (the recipe compressed to ``length_short`` of its epochs, cycles and warmup in
    #: proportion): its epochs, each of its runs' held-out perf after every epoch (run k on run k's slice), how each
    #: ended, and whether the trials train it (it ended above the full schedule on every one of
    #: ``length_short_runs`` slices)
    short_epochs: int | None = optional()
    short_perfs: list[list[float]] | None = optional()
    short_status: list[str] | None = optional()
    short_won: bool | None = optional()
    #: what the shorter schedule's end was compared with: ``"end"``, the full runs' ends (they did not all fall: it
    #: must end above each, a sign test), or ``"best"``, their best (every run fell: it must reach it, within the
    #: tolerance, in fewer epochs than the cut); ``None`` when not compared
    short_against: str | None = optional()
    #: against ``"end"``: the slices it had to end above the full runs on (``length_short_runs``, a sign test);
    #: ``None`` in folders made before the sign test (their rule: above by the full run's tolerance on every slice)
    short_slices: int | None = optional()
    #: the cooler recipe (the recipe with both learning rates divided by ``cool_factor`` at the planned epochs, run k
    #: on run k's slice), compared when every run fell or when the first run's perf dipped and recovered on a
    #: decaying schedule: its runs' held-out perf after every epoch, how each ended, and whether the trials train it
    #: (every run fell: it ended above the run's best by more than the tolerance, and above the compressed schedule's
    #: end on the same slice, on every slice; a dip: it ended at least as high as the first run);
    #: ``None`` when not compared (and in folders made before it)
    cool_factor: float | None = optional()
    cool_perfs: list[list[float]] | None = optional()
    cool_status: list[str] | None = optional()
    cool_won: bool | None = optional()
    #: why the cooler recipe was compared: ``"fell"`` (every run fell) or ``"spiked"`` (the first run dipped by more
    #: than the tolerance and recovered); ``None`` when not compared, and in folders made before the dip rule (where it
    #: was compared only when every run fell)
    cool_because: str | None = optional()
    #: the learning rates the trials train when the cooler recipe was taken (``None`` otherwise)
    lr_start: float | None = optional()
    lr_end: float | None = optional()


@dataclass(frozen=True)
class MiscSteps(JsonSection):
    """``steps``: each step's record, once the step has run."""

    lr_range: LRRangeStep | None = field(default=None, metadata={"absent_ok": True, "load": section(LRRangeStep)})
    batch_size: BatchSizeStep | BatchSearchProgress | None = field(
        default=None, metadata={"absent_ok": True, "load": _load_batch_step})
    lr_rescan: LRRangeStep | None = field(default=None, metadata={"absent_ok": True, "load": section(LRRangeStep)})
    schedule: ScheduleStep | None = field(default=None, metadata={"absent_ok": True, "load": section(ScheduleStep)})
    guard: GuardStep | None = field(default=None, metadata={"absent_ok": True, "load": section(GuardStep)})
    length: LengthStep | None = field(default=None, metadata={"absent_ok": True, "load": section(LengthStep)})

    @property
    def used_lr_range(self) -> LRRangeStep | None:
        """The range test whose range was used: the rescan if there was one and it was used."""
        return self.lr_rescan if self.lr_rescan is not None and not self.lr_rescan.not_used else self.lr_range
