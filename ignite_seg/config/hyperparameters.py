"""Hyperparameter records: fixed recipes and the tuner's presets.

``FixedHyperparameters`` is a recipe the user already knows (no tuning). ``HyperparameterSettings``
controls the tuner; the named presets live in :data:`ignite_seg.config.presets.PRESETS`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from ..exceptions import ConfigError, ConfigTypeError
from .checks import check_int
from .recipe_options import (  # re-exported: the parts a recipe is made of
    SCHEDULES,
    OptimizerName,
    OptimizerSpec,
    RecipeOptions,
    ScheduleName,
    ScheduleSpec,
    TrainingOptions,
)
from .records import JsonRecord

__all__ = [
    "OptimizerName",
    "ScheduleName",
    "SCHEDULES",
    "FixedHyperparameters",
    "HyperparameterSettings",
    "OptimizerSpec",
    "ScheduleSpec",
    "TrainingOptions",
    "RecipeOptions",
    "check_loop_options",
    "check_update_options",
]


@dataclass(frozen=True, repr=False)
class FixedHyperparameters(JsonRecord, RecipeOptions):
    """A complete training recipe, used as is (no tuning).

    Trials train for ``epochs`` epochs with the learning-rate ``schedule``: by default a triangular
    cyclical learning rate that goes from ``lr_start`` to ``lr_end`` and back every
    ``cycle_size_epochs`` epochs; ``one-cycle``, ``cosine``, ``inv-sqrt`` and ``constant`` map
    ``[lr_start, lr_end]`` as :mod:`ignite_seg.engine.schedules` says, each after an optional linear
    warmup from 0 over ``warmup_epochs`` (or ``warmup_steps`` optimizer steps; ``noam`` is its own warmup). ``optimizer`` is plain SGD (with optional ``momentum``)
    or AdamW (with ``betas`` and ``eps``); ``ema_decay`` (None: off) evaluates and saves an
    exponential moving average of the weights (``model.pt``; the raw weights in ``model_raw.pt``); ``weight_decay``,
    ``grad_clip_norm`` (clip the gradient norm) and ``amp`` (mixed precision: float16 with a
    gradient scaler on CUDA, bfloat16 on the CPU) are options of the trainer. Those options are
    :class:`RecipeOptions`' fields, passed as keywords; ``hp.optimizer_spec``, ``hp.options`` and
    ``hp.schedule_spec`` read them as records.

    Example:
        >>> hp = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=32,
        ...                           cycle_size_epochs=4, epochs=8)
        >>> hp.batch_size
        32
    """

    lr_start: float
    lr_end: float
    batch_size: int
    cycle_size_epochs: float
    epochs: int

    def __post_init__(self) -> None:
        for name in ("lr_start", "lr_end", "cycle_size_epochs", "momentum", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigTypeError(
                    f"FixedHyperparameters.{name} must be a number, got {value!r} "
                    f"({type(value).__name__})."
                )
        for name in ("batch_size", "epochs"):
            check_int(f"FixedHyperparameters.{name}", getattr(self, name), 1)
        if not (self.lr_start > 0 and self.lr_end > 0):
            raise ConfigError(
                f"FixedHyperparameters needs positive learning rates, got lr_start={self.lr_start!r}, "
                f"lr_end={self.lr_end!r}; pass values such as lr_start=0.01, lr_end=0.1."
            )
        if not self.cycle_size_epochs > 0:
            raise ConfigError(
                f"FixedHyperparameters.cycle_size_epochs must be > 0, got {self.cycle_size_epochs!r}."
            )
        if self.optimizer not in ("sgd", "adamw"):
            raise ConfigError(
                f"FixedHyperparameters.optimizer must be 'sgd' or 'adamw', got {self.optimizer!r}."
            )
        if self.momentum < 0 or self.weight_decay < 0:
            raise ConfigError(
                "FixedHyperparameters.momentum and weight_decay must be >= 0, got "
                f"momentum={self.momentum!r}, weight_decay={self.weight_decay!r}."
            )
        check_update_options("FixedHyperparameters", self)
        check_loop_options("FixedHyperparameters", self, "epochs")


@dataclass(frozen=True, repr=False)
class HyperparameterSettings(JsonRecord, RecipeOptions):
    """Settings of the tuner; every constant of the LR range test, the batch-size search and the
    schedule decision is a field. Customise a preset with ``dataclasses.replace``.

    The tuner (:func:`ignite_seg.tuning.recipe.choose_recipe`) runs, in order:

    1. the **LR range test**: ``lr_min_inits`` repeats, each from its own seeded initialisation
       (``lr_shared_init=True``: all from one; the choice then describes that initialisation more
       than the recipe: on the regression benchmark two sets of repeats from one initialisation
       agreed to 10% while initialisations differed by 40%), the LR
       growing geometrically ``lr_start -> lr_end`` over ``lr_sweep_len`` epochs (at least
       ``lr_sweep_min_iters`` iterations) at ``initial_batch_size``; a repeat stops when its EMA
       loss exceeds ``diverge_th`` times its minimum or gives back ``diverge_regain`` of its
       improvement (saturating losses never double). The EMA weight is ``lr_smooth_f`` at
       ``initial_batch_size``, proportionally less at smaller batches (noisier losses). The curves are
       smoothed over ``lr_smooth_frac`` of the sweep and the range is where the slope of the
       ``lr_choose_on`` loss (``"holdout"``: on the held-out slice, sampled along the sweep, free of
       batch-to-batch noise; ``"train"``: the training batches' loss) against
       log LR stays within ``lr_steep_frac`` of the steepest, looking only ``lr_window_decades``
       below the divergence (further down, a sweep's loss falls because the model is young), and
       at least ``lr_min_span_decades`` wide. Perf is measured on a held-out slice
       of the *training* set (``holdout_frac``, at most ``holdout_max`` items).
    2. the **gradient noise scale**, from every ``noise_every``-th batch of the sweep split into
       ``noise_chunks`` chunks (the steps between are plain updates; EMA weight ``1 - noise_ema_beta``
       per measured step, the median before divergence), and ``batch_pts`` candidates on the grid
       ``batch_start * batch_step**k <= batch_end`` around ``noise_batch_frac`` times it (at a
       fixed number of examples, a batch of ``B`` makes the progress of ``1 / (1 + B / B_noise)``
       of the examples, McCandlish et al. eq. 2.11: 80% at a quarter of the noise scale), each scored by
       ``batch_rn_min_inits`` short runs of ``batch_sweep_len`` epochs with the LR scaled (linearly
       in the batch size below ``initial_batch_size``, by its square root above: ``scale_lr``);
       after each rung the best ``1/batch_eta`` continue with ``batch_eta`` times the budget. The
       ranking is by held-out ``batch_score``: the loss (default: continuous, so less noisy on a
       small slice than an accuracy) or the perf, the other breaking ties. At every rung, the
       candidates within ``batch_tie_tol`` (relative) of the best are ties: short runs cannot order
       them. With ``batch_tie_test`` and 2 or more repeats, a candidate also ties when a one-sided
       paired t-test over the repeats (same initialisation per repeat) does not find it worse at 95%.
       Tied candidates rank smallest batch first (at a fixed number of examples it makes more
       progress, the noise-scale model; the rule keeps the choice repeatable), except that with
       ``batch_tie_prefer="faster"`` a larger tied candidate whose runs scored at least as well as
       the smallest tied one and took fewer seconds per training example on this machine (by more
       than ``batch_tie_speed_margin``) ranks first: a trial of a fixed number of epochs then ends
       sooner. ``"smaller"`` ranks the smallest first whatever the speed (no timings in the choice).
       ``batch_pts=0`` takes the grid point nearest that centre without runs.
    3. an optional **rescan** of the LR range at the chosen batch size (``rescan_lr_after_bs``);
       none when that is ``initial_batch_size`` (the first sweep measured that curve already).
    4. the **schedule**: ``epochs`` such that each trial sees about ``train_examples`` examples,
       within ``[min_epochs, max_epochs]``, in ``cycles`` triangular LR cycles.
    5. the **recipe check**: short runs of the final recipe must improve its held-out loss, else its
       learning rates back off (:mod:`ignite_seg.tuning.guard`).
    6. the **length check**: ``length_runs`` runs of the final recipe, its full length, each holding out
       its own slice of the training set and scoring it after every epoch; when in every run the perf
       ends more than ``length_tol`` of its best (plus 2 of an accuracy's smallest steps on the slice: items,
       tokens or labels) below it, the trials train only to the latest of the runs' best epochs (at
       least ``min_epochs``), the cycles shortened in proportion (:mod:`ignite_seg.tuning.length`).
       When the perf did not fall, the recipe **compressed** to ``length_short`` of its epochs (at least
       ``min_epochs``; its cycles and warmup in proportion) is trained beside the first run on the same
       slice; the trials train the shorter schedule only when it ends above the full one on every one of
       ``length_short_runs`` slices (a sign test: each pair runs only after the ones before favoured the
       shorter; a recipe tuned hot suits a short schedule: a GRU's tuned peak at 15 epochs 0.77-0.81,
       compressed to 5 0.83-0.85). When every run fell, the recipe may be too hot rather than too long:
       the recipe with its learning rates divided by the recipe check's back-off (sqrt 10) at the planned
       epochs is taken when it ends above each run's best by more than the tolerance and above the
       shorter schedule's end on the same slice; else the shorter
       schedule is taken over the cut when it is shorter and ends within the tolerance of each run's best.
       ``length_runs=0`` skips the check, ``length_short=0`` the shorter schedule.

    What a tune costs stops growing with the dataset (issue 25): a sweep repeat sees at most
    ``lr_sweep_max_examples`` examples (500 steps at batch 16; fastai and Lightning take 100 steps;
    ``lr_sweep_len`` epochs when that is fewer, never fewer than ``lr_sweep_min_iters`` steps), its held-out slice is measured
    at most about ``lr_holdout_evals`` times (after the first step, every ``k`` steps and at the
    end; the points between are interpolated linearly in log LR, see
    :mod:`ignite_seg.tuning.budget`), and a batch-size candidate's first rung sees
    ``batch_sweep_len`` epochs but at most ``batch_sweep_max_examples`` examples (every candidate
    the same number of examples). ``None`` lifts each cap.

    The trials and the tuning runs (the LR sweep's repeats, the batch-size candidates) use
    ``optimizer``, ``momentum``, ``weight_decay``, ``betas``, ``eps``, ``grad_clip_norm`` and ``amp``
    (:class:`TrainingOptions`, as in :class:`FixedHyperparameters`); the final trials use ``schedule`` (cycle length ``epochs / cycles`` for the triangular
    one), ``warmup_epochs`` or ``warmup_steps``, and ``ema_decay``. These are :class:`RecipeOptions`'
    fields, which the tuner copies into the recipe it chooses.

    Example:
        >>> import dataclasses
        >>> from ignite_seg.config.presets import get_preset
        >>> s = dataclasses.replace(get_preset("fast"), lr_min_inits=3)
        >>> s.lr_min_inits
        3
    """

    # LR range test
    lr_start: float = 1e-4
    lr_end: float = 10.0
    lr_sweep_len: float = 6.0
    lr_sweep_min_iters: int = 200
    lr_min_inits: int = 4
    lr_shared_init: bool = False
    lr_choose_on: Literal["holdout", "train"] = "holdout"
    initial_batch_size: int = 16
    diverge_th: float = 2.0
    diverge_regain: float = 0.8
    lr_smooth_f: float = 0.1
    lr_smooth_frac: float = 0.1
    lr_steep_frac: float = 0.3
    lr_window_decades: float = 1.0
    lr_min_span_decades: float = 0.5
    holdout_frac: float = 0.1
    holdout_max: int = 512
    # gradient noise scale and batch-size search
    noise_chunks: int = 4
    noise_every: int = 2
    noise_ema_beta: float = 0.95
    noise_batch_frac: float = 0.25
    batch_start: int = 8
    batch_end: int = 512
    batch_step: float = 2.0
    batch_pts: int = 4
    batch_sweep_len: float = 1.0
    batch_rn_min_inits: int = 1
    batch_eta: int = 2
    batch_score: Literal["loss", "perf"] = "loss"
    batch_tie_tol: float = 0.03
    batch_tie_test: bool = True
    batch_tie_prefer: Literal["faster", "smaller"] = "faster"
    batch_tie_speed_margin: float = 0.1
    rescan_lr_after_bs: bool = False
    # schedule of the final trials
    train_examples: int = 30_000
    min_epochs: int = 5
    max_epochs: int = 100
    cycles: int = 1
    # length check of the final recipe (full-length runs scoring a held-out slice each epoch; 0: none)
    length_runs: int = 2
    length_tol: float = 0.02
    length_short: float = 1 / 3
    length_short_runs: int = 3
    # tuning cost (issue 25): sweeps and batch-size runs capped in steps / examples, the held-out
    # curve sampled; None lifts a cap (sized in epochs only, the held-out slice after every step)
    lr_sweep_max_examples: int | None = 8000
    lr_holdout_evals: int | None = 32
    batch_sweep_max_examples: int | None = 4096

    def __post_init__(self) -> None:
        _check_number(self, "lr_start", lambda v: v > 0, "a positive learning rate such as 1e-4")
        _check_number(self, "lr_end", lambda v: v > self.lr_start, f"a value above lr_start={self.lr_start!r}")
        _check_number(self, "lr_sweep_len", lambda v: v > 0, "a positive number of epochs such as 8")
        _check_int(self, "lr_sweep_min_iters", 10)
        _check_int(self, "lr_min_inits", 1)
        _check_int(self, "initial_batch_size", 2)
        _check_number(self, "diverge_th", lambda v: v > 1, "a factor above 1 such as 2")
        _check_number(self, "diverge_regain", lambda v: 0 < v <= 1, "a fraction in (0, 1] such as 0.8")
        _check_number(self, "lr_smooth_f", lambda v: 0 < v <= 1, "a weight in (0, 1] such as 0.1")
        _check_number(self, "lr_smooth_frac", lambda v: 0 <= v < 0.5, "a fraction in [0, 0.5) such as 0.1")
        _check_number(self, "lr_steep_frac", lambda v: 0 < v < 1, "a fraction in (0, 1) such as 0.3")
        _check_number(self, "lr_window_decades", lambda v: v > 0, "a positive number of decades such as 1")
        _check_number(self, "lr_min_span_decades", lambda v: v >= 0, "a number of decades >= 0 such as 0.5")
        _check_number(self, "holdout_frac", lambda v: 0 < v < 1, "a fraction in (0, 1) such as 0.1")
        _check_int(self, "holdout_max", 1)
        _check_int(self, "noise_chunks", 2)
        if self.initial_batch_size < self.noise_chunks:
            raise ConfigError(
                f"HyperparameterSettings.initial_batch_size={self.initial_batch_size!r} is smaller than "
                f"noise_chunks={self.noise_chunks!r}; each chunk needs at least one example. Raise "
                "initial_batch_size or lower noise_chunks."
            )
        _check_int(self, "noise_every", 1)
        _check_number(self, "noise_ema_beta", lambda v: 0 <= v < 1, "a value in [0, 1) such as 0.95")
        _check_number(self, "noise_batch_frac", lambda v: v > 0, "a positive fraction such as 0.25")
        _check_int(self, "batch_start", 1)
        _check_int(self, "batch_end", self.batch_start)
        _check_number(self, "batch_step", lambda v: v > 1, "a factor above 1 such as 2")
        _check_int(self, "batch_pts", 0)
        _check_number(self, "batch_sweep_len", lambda v: v > 0, "a positive number of epochs such as 1")
        _check_int(self, "batch_rn_min_inits", 1)
        _check_int(self, "batch_eta", 2)
        _check_number(self, "batch_tie_tol", lambda v: 0 <= v < 1, "a relative tolerance in [0, 1) such as 0.03")
        _check_number(self, "batch_tie_speed_margin", lambda v: v >= 0, "a relative margin >= 0 such as 0.1")
        _check_choice(self, "batch_tie_prefer", ("faster", "smaller"))
        _check_choice(self, "batch_score", ("loss", "perf"))
        for name in ("lr_shared_init", "batch_tie_test", "rescan_lr_after_bs"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigTypeError(
                    f"HyperparameterSettings.{name} must be True or False, got {getattr(self, name)!r}."
                )
        _check_choice(self, "lr_choose_on", ("holdout", "train"))
        _check_int(self, "train_examples", 1)
        _check_int(self, "min_epochs", 1)
        _check_int(self, "max_epochs", self.min_epochs)
        _check_int(self, "cycles", 1)
        _check_int(self, "length_runs", 0)
        _check_number(self, "length_tol", lambda v: 0 <= v < 1, "a relative tolerance in [0, 1) such as 0.02")
        _check_number(self, "length_short", lambda v: 0 <= v < 1,
                      "a fraction of the epochs in [0, 1) such as 1/3 (0: no shorter schedule is compared)")
        _check_int(self, "length_short_runs", 1)
        if self.optimizer not in ("sgd", "adamw"):
            raise ConfigError(
                f"HyperparameterSettings.optimizer must be 'sgd' or 'adamw', got {self.optimizer!r}."
            )
        _check_number(self, "momentum", lambda v: 0 <= v < 1, "a value in [0, 1) such as 0.9")
        _check_number(self, "weight_decay", lambda v: v >= 0, "a value >= 0 such as 1e-4")
        check_update_options("HyperparameterSettings", self)
        check_loop_options("HyperparameterSettings", self, "min_epochs")
        _check_cost_caps(self)


def _check_cost_caps(s: HyperparameterSettings) -> None:
    """The caps of issue 25: each an int of at least its minimum, or None (no cap)."""
    for name, minimum in (("lr_sweep_max_examples", 1), ("lr_holdout_evals", 2), ("batch_sweep_max_examples", 1)):
        check_int(f"HyperparameterSettings.{name}", getattr(s, name), minimum, optional=True)


def check_update_options(owner: str, record: RecipeOptions) -> None:
    """Check ``grad_clip_norm`` (None or > 0) and ``amp`` (a bool)."""
    if not isinstance(record.amp, bool):
        raise ConfigTypeError(f"{owner}.amp must be True or False, got {record.amp!r}.")
    if record.grad_clip_norm is not None:
        _number(owner, "grad_clip_norm", record.grad_clip_norm, lambda v: v > 0,
                "None (no clipping) or a positive norm such as 1.0")


def check_loop_options(owner: str, record: RecipeOptions, epochs: str) -> None:
    """Check ``schedule``, ``warmup_epochs`` (below the record's field ``epochs``: the shortest
    training), ``betas``, ``eps`` and ``ema_decay``; a JSON list of betas becomes a tuple (the record
    is frozen, so ``object.__setattr__``)."""
    if record.schedule not in SCHEDULES:
        raise ConfigError(f"{owner}.schedule must be one of {list(SCHEDULES)}, got {record.schedule!r}.")
    shortest = getattr(record, epochs)
    _number(owner, "warmup_epochs", record.warmup_epochs, lambda v: 0 <= v < shortest,
            f"a number of epochs >= 0 and below {epochs}={shortest!r} such as 1")
    betas = record.betas
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ConfigTypeError(f"{owner}.betas must be a pair of numbers such as (0.9, 0.999), got {betas!r}.")
    for k, beta in enumerate(betas):
        _number(owner, f"betas[{k}]", beta, lambda v: 0 <= v < 1, "values in [0, 1) such as (0.9, 0.999)")
    object.__setattr__(record, "betas", tuple(float(b) for b in betas))
    _number(owner, "eps", record.eps, lambda v: v > 0, "a small positive number such as 1e-8")
    if record.ema_decay is not None:
        _number(owner, "ema_decay", record.ema_decay, lambda v: 0 < v < 1, "None (off) or a decay in (0, 1) such as 0.999")
    _check_warmup_steps(owner, record)


def _check_warmup_steps(owner: str, record: RecipeOptions) -> None:
    """``warmup_steps``: an int >= 0, not with ``warmup_epochs``; the ``noam`` schedule needs one of the two."""
    check_int(f"{owner}.warmup_steps", record.warmup_steps, 0)
    if record.warmup_steps and record.warmup_epochs:
        raise ConfigError(f"{owner} has warmup_steps={record.warmup_steps!r} and warmup_epochs={record.warmup_epochs!r}: "
                          "give the warmup in steps or in epochs, not both (set the other to 0).")
    if record.schedule == "noam" and not (record.warmup_steps or record.warmup_epochs):
        raise ConfigError(f"{owner}.schedule='noam' (lr = peak * min(k / W, sqrt(W / k)), peak = lr_end) needs its "
                          "warmup W: pass warmup_steps= (optimizer steps, e.g. 4000) or warmup_epochs= (e.g. 1.0).")


def _number(owner: str, name: str, value: Any, ok: Callable[[float], bool], fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigTypeError(f"{owner}.{name} must be a number, got {value!r} ({type(value).__name__}); use {fix}.")
    if not ok(value):
        raise ConfigError(f"{owner}.{name}={value!r} is out of range; use {fix}.")


def _check_number(s: HyperparameterSettings, name: str, ok: Callable[[float], bool], fix: str) -> None:
    value = getattr(s, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigTypeError(
            f"HyperparameterSettings.{name} must be a number, got {value!r} ({type(value).__name__}); use {fix}."
        )
    if not ok(value):
        raise ConfigError(f"HyperparameterSettings.{name}={value!r} is out of range; use {fix}.")


def _check_choice(s: HyperparameterSettings, name: str, choices: tuple[str, str]) -> None:
    value = getattr(s, name)
    if value not in choices:
        raise ConfigError(f"HyperparameterSettings.{name} must be {choices[0]!r} or {choices[1]!r}, got {value!r}.")


def _check_int(s: HyperparameterSettings, name: str, minimum: int) -> None:
    check_int(f"HyperparameterSettings.{name}", getattr(s, name), minimum)
