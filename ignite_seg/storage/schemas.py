"""The tuner's files in ``hparams/``: one record per file, used by the writer and by every reader.

=======================  ==============================================================
file                     record
=======================  ==============================================================
``final.json``           :class:`~ignite_seg.config.hyperparameters.FixedHyperparameters` (:func:`read_final`)
``misc.json``            :class:`MiscFile` (every decision of the tuner and its inputs)
``lr_vs_perf.npz``       :class:`LRSweepFile` (also ``lr_vs_perf_initial.npz`` after a rescan)
``bs_vs_perf.npz``       :class:`BatchSweepFile`
``bs_sampled.npz``       :class:`BatchSampledFile`
=======================  ==============================================================

Arrays: ``R`` repeats, ``P`` sweep points, ``B``/``C`` batch sizes, ``N`` rungs of the halving.
The tuner writes every field. A field that a folder written by an older version (or by hand) may
lack is ``Optional`` and reads as its default, ``None`` unless documented otherwise; only the field
that says what the file is about (``lrs``, ``bss``) is required. ``strict=True`` reading (the tests')
refuses a file with an unknown key or without one of the fields the tuner writes, so a writer and
a reader that drift apart fail a test instead of drawing silent NaN.

Example:
    >>> rec = BatchSampledFile(bss=np.array([8, 16]), chosen=16)
    >>> BatchSampledFile.from_npz(rec.to_npz()).chosen
    16
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, TypeVar

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..smoothing import moving_average, nanmean
from .atomic import read_json, write_json
from .misc_steps import (
    BatchSearchProgress,
    BatchSizeStep,
    GuardAttempt,
    GuardStep,
    LengthStep,
    LRRangeStep,
    MiscSteps,
    Rung,
    RungNote,
    ScheduleStep,
)
from .names import BS_NPZ, FINAL_JSON, LR_INITIAL_NPZ, LR_NPZ, MISC_JSON, SAMPLED_NPZ
from .schema_base import JsonSection, NpzRecord, SchemaError, absent_ok, check_keys, optional, section

__all__ = [
    "FINAL_JSON", "MISC_JSON", "LR_NPZ", "LR_INITIAL_NPZ", "BS_NPZ", "SAMPLED_NPZ", "HPARAM_FILES",
    "SchemaError", "LRSweepFile", "BatchSweepFile", "BatchSampledFile", "MiscFile", "MiscSteps", "LRRangeStep",
    "BatchSizeStep", "BatchSearchProgress", "Rung", "RungNote", "ScheduleStep", "GuardAttempt", "GuardStep", "LengthStep", "Compute",
    "MiscLog", "read_final",
]

#: The tuner's files in ``hparams/`` that the analysis reads (each may be absent).
HPARAM_FILES = (FINAL_JSON, MISC_JSON, LR_NPZ, BS_NPZ, SAMPLED_NPZ)


@dataclass(frozen=True, eq=False)
class LRSweepFile(NpzRecord):
    """``lr_vs_perf.npz``: one LR range test, its curves and the range chosen on them.

    With a rescan the first sweep is kept in ``lr_vs_perf_initial.npz`` and ``lr_vs_perf.npz`` holds
    the sweep whose range was used; a rescan at the first sweep's own batch size pools its repeats
    with the first sweep's (its first rows are the first sweep's repeats, then the rescan's).
    An empty ``lrs`` means no sweep was recorded.
    """

    #: (P,) the sweep's learning rates, growing geometrically
    lrs: np.ndarray
    #: (R, P) training loss per iteration (NaN after a repeat stopped)
    losses: np.ndarray | None = optional()
    #: (R, P) perf on the held-out slice of the training set
    perfs: np.ndarray | None = optional()
    #: (R, P) smoothed ``losses`` and ``perfs``
    losses_smoothed: np.ndarray | None = optional()
    perfs_smoothed: np.ndarray | None = optional()
    #: (P,) derivative against log10 LR of the mean of the curve the range was chosen on, and of perf
    loss_deriv: np.ndarray | None = optional()
    perf_deriv: np.ndarray | None = optional()
    #: (2,) the chosen ``[lr_min, lr_max]``
    lr_range: np.ndarray | None = optional()
    #: (R,) LR at which each repeat stopped (diverged), NaN where it did not
    diverged_lr: np.ndarray | None = optional()
    #: (R, P) the loss on the held-out slice along the sweep, and smoothed (``None``: an older folder);
    #: where ``holdout_measured`` is 0 the value (and ``perfs``') is interpolated in log LR between measurements
    holdout_losses: np.ndarray | None = optional()
    holdout_losses_smoothed: np.ndarray | None = optional()
    #: (R, P) 1 where the held-out slice was measured, 0 where interpolated, NaN past a repeat's end
    #: (issue 25; ``None``: an older folder, measured after every step)
    holdout_measured: np.ndarray | None = absent_ok()
    #: the curve the range was chosen on: ``"holdout_losses"`` or ``"losses"`` (older folders: ``"losses"``)
    choice_curve: str = field(default="losses", metadata={"scalar": str})
    #: the batch size of the sweep
    batch_size: int | None = optional(scalar=int)
    #: whether this is the rescan at the chosen batch size (older folders: ``False``)
    rescan: bool = field(default=False, metadata={"scalar": bool})
    #: the held-out slice's loss under the best constant output (``None``: not measurable, and older folders;
    #: the writer leaves it out then)
    constant_loss: float | None = field(default=None, metadata={"scalar": float, "absent_ok": True})

    @property
    def chosen_on_holdout(self) -> bool:
        return self.choice_curve == "holdout_losses" and self.holdout_losses is not None


@dataclass(frozen=True, eq=False)
class BatchSweepFile(NpzRecord):
    """``bs_vs_perf.npz``: the candidates' first-rung scores and the gradient noise scale.

    ``bss`` is empty when no candidate ran (``batch_pts=0``, e.g. the ``fastest`` preset).
    """

    #: (B,) the candidate batch sizes
    bss: np.ndarray
    #: (R, B) first-rung held-out perf per repeat, and its smoothed mean (B,)
    perfs: np.ndarray | None = optional()
    perfs_smoothed: np.ndarray | None = optional()
    #: (2,) smallest and largest candidate (the chosen batch size twice without candidates)
    bs_range: np.ndarray | None = optional()
    #: the gradient noise scale B_simple used (NaN: not measured; older folders: NaN)
    noise_scale: float = field(default=float("nan"), metadata={"scalar": float})
    #: (K,) per sweep point, the LR and the median of the repeats' running noise-scale estimates
    noise_scale_lrs: np.ndarray | None = optional()
    noise_scale_values: np.ndarray | None = optional()
    #: the chosen batch size
    batch_size: int | None = optional(scalar=int)

    @classmethod
    def of_rungs(cls, bss: Sequence[int], chosen: int, rung_perfs: Sequence[np.ndarray], noise: float,
                 noise_lrs: np.ndarray, noise_values: np.ndarray) -> BatchSweepFile:
        """The file of a search over ``bss`` (empty: no candidate runs) whose first rung scored ``rung_perfs[0]``."""
        c = len(bss)
        perfs = rung_perfs[0] if rung_perfs else np.zeros((0, 0))
        return cls(
            bss=np.asarray(bss, dtype=np.int64), perfs=perfs,
            perfs_smoothed=moving_average(nanmean(perfs), 3) if c else np.zeros(0),
            bs_range=np.array([min(bss), max(bss)] if c else [chosen, chosen], dtype=np.int64),
            noise_scale=noise, noise_scale_lrs=noise_lrs, noise_scale_values=noise_values, batch_size=chosen,
        )


@dataclass(frozen=True, eq=False)
class BatchSampledFile(NpzRecord):
    """``bs_sampled.npz``: the candidates' short runs of the successive halving (empty arrays without runs)."""

    #: (C,) the candidate batch sizes
    bss: np.ndarray
    #: (R, C) held-out perf at the deciding rung (NaN where pruned earlier), and the losses beside it
    scores: np.ndarray | None = optional()
    losses: np.ndarray | None = optional()
    #: (C,) the epochs each candidate trained for
    budget_epochs: np.ndarray | None = optional()
    #: the chosen batch size
    chosen: int | None = optional(scalar=int)
    #: (N, R, C) perf and loss at every rung, (N,) each rung's budget in epochs
    rung_scores: np.ndarray | None = optional()
    rung_losses: np.ndarray | None = optional()
    rung_budgets: np.ndarray | None = optional()

    @classmethod
    def of_rungs(cls, bss: Sequence[int], chosen: int, rung_budgets: Sequence[float],
                 rung_perfs: Sequence[np.ndarray], rung_losses: Sequence[np.ndarray]) -> BatchSampledFile:
        """The file of a search over ``bss`` (empty: no candidate runs) from its rungs' scores (R, C)."""
        c = len(bss)
        if not rung_perfs:  # no candidate, or a single one: no runs
            return cls(bss=np.asarray(bss, dtype=np.int64).reshape(c), scores=np.zeros((0, c)),
                       losses=np.zeros((0, c)), budget_epochs=np.zeros(c), chosen=chosen,
                       rung_scores=np.zeros((0, 0, c)), rung_losses=np.zeros((0, 0, c)), rung_budgets=np.zeros(0))
        budgets = np.zeros(c)
        for budget, perfs in zip(rung_budgets, rung_perfs):
            budgets[np.isfinite(perfs).any(axis=0)] = budget
        return cls(bss=np.asarray(bss, dtype=np.int64), scores=rung_perfs[-1], losses=rung_losses[-1],
                   budget_epochs=budgets, chosen=chosen, rung_scores=np.stack(rung_perfs),
                   rung_losses=np.stack(rung_losses), rung_budgets=np.asarray(rung_budgets))


# -- misc.json -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Compute(JsonSection):
    """``compute``: worker seconds, examples and wall seconds per stage (``lr``, ``batch``, ``rescan``)."""

    task_seconds: dict[str, float] = field(default_factory=dict)
    examples: dict[str, int] = field(default_factory=dict)
    wall_seconds: dict[str, float] = field(default_factory=dict)
    #: the sums, written when the tune completes
    total_task_seconds: float | None = absent_ok()
    total_examples: int | None = absent_ok()
    total_wall_seconds: float | None = absent_ok()

    def charged(self, stage: str, seconds: float, examples: int, wall: float) -> Compute:
        """These figures with one more batch of tasks of ``stage`` added."""
        return dataclasses.replace(self, task_seconds=_added(self.task_seconds, stage, seconds),
                                   examples=_added(self.examples, stage, examples),
                                   wall_seconds=_added(self.wall_seconds, stage, wall))

    def totalled(self, wall: float) -> Compute:
        return dataclasses.replace(self, total_task_seconds=sum(self.task_seconds.values()),
                                   total_examples=sum(self.examples.values()), total_wall_seconds=wall)


@dataclass(frozen=True)
class MiscFile(JsonSection):
    """``misc.json``: every decision of the tuner and its inputs, rewritten after each step.

    ``state`` is ``"running"`` until the tune completes (then ``"complete"``, with ``final``).
    """

    state: str | None = optional()
    seed: int | None = optional()
    #: the tuner's settings (``HyperparameterSettings.to_dict()``)
    settings: dict[str, Any] | None = optional()
    n_train: int | None = optional()
    holdout_size: int | None = optional()
    holdout_from: str | None = optional()
    steps: MiscSteps = field(default_factory=MiscSteps, metadata={"load": section(MiscSteps)})
    compute: Compute = field(default_factory=Compute, metadata={"load": section(Compute)})
    #: the recipe (``FixedHyperparameters.to_dict()``), once complete
    final: dict[str, Any] | None = absent_ok()

    def write(self, path: str | Path) -> None:
        write_json(path, self.to_json())

    @classmethod
    def read(cls, path: str | Path, *, strict: bool = False) -> MiscFile | None:
        """The record in ``path``, or ``None`` when the file does not exist."""
        try:
            data = read_json(path)
        except FileNotFoundError:
            return None
        return cls.from_json(data, strict=strict)


N = TypeVar("N", int, float)


def _added(figures: Mapping[str, N], stage: str, value: N) -> dict[str, N]:
    """``figures`` with ``value`` added to ``stage``'s."""
    return {**figures, stage: figures.get(stage, 0) + value}


# -- final.json ------------------------------------------------------------------------------------
def read_final(path: str | Path, *, strict: bool = False) -> FixedHyperparameters | None:
    """``final.json`` (the recipe), or ``None`` when the tune has not completed."""
    try:
        data = read_json(path)
    except FileNotFoundError:
        return None
    check_keys(FixedHyperparameters, set(data), strict, FINAL_JSON)
    return FixedHyperparameters.from_dict(data)


class MiscLog:
    """Keeps ``misc.json`` up to date while a tune runs: each step's record, rewritten atomically."""

    def __init__(self, path: str | Path, settings: Mapping[str, Any], seed: int, n_train: int, holdout_size: int):
        self.path = Path(path)
        self.misc = MiscFile(state="running", seed=seed, settings=dict(settings), n_train=n_train,
                             holdout_size=holdout_size, holdout_from="training set")
        self.misc.write(self.path)

    def record(self, **steps: Any) -> None:
        """Set the records of the steps named (fields of :class:`MiscSteps`) and rewrite the file."""
        self.misc = dataclasses.replace(self.misc, steps=dataclasses.replace(self.misc.steps, **steps))
        self.misc.write(self.path)

    def charge(self, stage: str, seconds: float, examples: int, wall: float) -> None:
        """Add a batch of tasks' compute to ``stage`` (written with the next record)."""
        self.misc = dataclasses.replace(self.misc, compute=self.misc.compute.charged(stage, seconds, examples, wall))

    def finish(self, wall: float, final: Mapping[str, Any]) -> None:
        self.misc = dataclasses.replace(self.misc, state="complete", compute=self.misc.compute.totalled(wall),
                                        final=dict(final))
        self.misc.write(self.path)
