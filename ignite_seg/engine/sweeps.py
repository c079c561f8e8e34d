"""The tuner's worker tasks: an LR range test and a short batch-size run, each an ignite ``Engine``.

The task functions :func:`run_lr_sweep` and :func:`run_batch_trial` are module-level and take one
picklable task record, so any ``concurrent.futures.Executor`` can run them. They build the recipe
from the loader specs, hold out a fixed slice of the *training* set to measure perf on (the
validation set is never indexed), train on the rest, and return arrays; they write no file and
never raise for a failure of the user's code (the error text comes back in the result). Both train
with the final recipe's update options (:class:`~ignite_seg.config.hyperparameters.TrainingOptions`
in ``RecipeSpec.options``: optimizer, gradient clipping, AMP), as the trials will.

Handlers (each with an ``attach()`` that is safe to call twice):

* :class:`GeometricLR` (ignite's ``LRScheduler`` over a torch ``LambdaLR``) sets the learning rate
  of iteration ``i`` to ``lr_start * (lr_end / lr_start) ** ((i - 1) / (num_iters - 1))``;
* :class:`SweepRecorder` records per iteration the LR, the training loss, loss and perf on the
  held-out slice, and the squared gradient norms that the
  :class:`~ignite_seg.engine.noise_trainer.NoiseTrainer` of
  :func:`~ignite_seg.engine.noise_trainer.create_noise_trainer` keeps in its ``grad_norms``;
* :class:`~ignite_seg.engine.handlers.DivergenceStop` with a :class:`~ignite_seg.tuning.lr_range.DivergenceMonitor`
  ends the sweep when the EMA loss exceeds ``diverge_th`` times its minimum;
* :class:`LRRangeTest` bundles the three as a temporary intervention (a context manager that
  leaves the model and the optimizer as it found them, like ignite's ``FastaiLRFinder``).
"""
from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator

import numpy as np
import torch
from ignite.engine import Engine, Events
from ignite.handlers import LinearCyclicalScheduler, LRScheduler
from ignite.utils import manual_seed
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import Subset

from ..config.hyperparameters import FixedHyperparameters, TrainingOptions
from ..config.specs import LoaderSpec
from ..smoothing import DivergenceMonitor
from .batching import Batches, BatchSource, PrepareBatch
from .constant_output import constant_output_loss
from .handlers import CurveRecorder, DivergenceStop, output_loss, report_steps
from .noise_trainer import GradNorms, NoiseSampling, NoiseTrainer, create_noise_trainer
from .scoring import AccuracyStyle, Scorer
from .task_timing import recorded
from .trainer import (
    SNAPSHOT_POINTS,
    LossFn,
    build_recipe,
    create_trainer,
    loss_to,
    make_optimizer,
    passthrough,
    resolve_device,
    set_threads,
)

__all__ = [
    "RecipeSpec",
    "LRSweepTask",
    "LRSweepResult",
    "BatchRunTask",
    "BatchRunResult",
    "GeometricLR",
    "SweepRecorder",
    "LRRangeTest",
    "GradNorms",
    "NoiseTrainer",
    "create_noise_trainer",
    "run_lr_sweep",
    "run_batch_trial",
]


@dataclass(frozen=True)
class RecipeSpec:
    """What every tuning task shares: the loader specs, the held-out slice and the update options."""

    model: LoaderSpec
    dataset: LoaderSpec
    loss: LoaderSpec
    accuracy_style: AccuracyStyle
    #: indices of the training set held out to measure perf (never trained on)
    holdout: tuple[int, ...]
    #: optimizer, clipping and AMP: the final recipe's (the tuning runs train as the trials will)
    options: TrainingOptions = TrainingOptions()
    device: str = "auto"
    threads: int | None = None


@dataclass(frozen=True)
class LRSweepTask:
    """One repeat of the LR range test."""

    key: Hashable
    recipe: RecipeSpec
    init_seed: int
    data_seed: int
    batch_size: int
    lr_start: float
    lr_end: float
    iterations: int
    diverge_th: float
    diverge_regain: float
    smooth_f: float
    noise_chunks: int
    device_index: int = 0
    #: measure the held-out slice every this many iterations (and after the first and the last)
    holdout_every: int = 1
    #: measure the gradient noise (``noise_chunks`` > 1) every this many iterations, from the first
    noise_every: int = 1


@dataclass
class LRSweepResult:
    """Per-iteration records of one sweep repeat (length = iterations run)."""

    key: Hashable
    status: str  # "diverged" | "completed" | "failed"
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    #: of ``seconds``, the time spent building the recipe (loaders, dataset split)
    prepare_seconds: float = 0.0
    examples: int = 0
    error: str | None = None
    #: the held-out slice's loss under the best constant output (:mod:`~ignite_seg.engine.constant_output`), NaN:
    #: not measurable for this model and loss
    constant_loss: float = math.nan


@dataclass(frozen=True)
class BatchRunTask:
    """A short run at one candidate batch size, one triangular LR cycle ``lr_min -> lr_max -> lr_min``."""

    key: Hashable
    recipe: RecipeSpec
    seed: int
    batch_size: int
    lr_min: float
    lr_max: float
    epochs: float
    device_index: int = 0


@dataclass
class BatchRunResult:
    """Score of one short run: loss and perf on the held-out slice at the end."""

    key: Hashable
    status: str  # "completed" | "diverged" | "failed"
    perf: float = math.nan
    loss: float = math.nan
    iterations: int = 0
    seconds: float = 0.0
    #: seconds in the training steps alone (no set-up, no scoring): what the batch size costs here
    train_seconds: float = 0.0
    examples: int = 0
    error: str | None = None


# -- handlers -------------------------------------------------------------------------------------
class GeometricLR(LRScheduler):
    """Learning rate growing geometrically from ``lr_start`` to ``lr_end`` over ``num_iters``.

    Ignite's ``LRScheduler`` over a torch ``LambdaLR`` (as ignite's ``FastaiLRFinder`` does): it
    sets every param group's ``lr`` to :meth:`lr_at` at ``ITERATION_STARTED``; constructing it sets
    the groups' ``lr`` (and ``initial_lr``) to ``lr_start``.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, lr_start: float, lr_end: float, num_iters: int) -> None:
        if not (0 < lr_start < lr_end):
            raise ValueError(f"GeometricLR needs 0 < lr_start < lr_end, got {lr_start!r}, {lr_end!r}")
        if num_iters < 2:
            raise ValueError(f"GeometricLR needs num_iters >= 2, got {num_iters!r}")
        self.lr_start, self.lr_end, self.num_iters = lr_start, lr_end, num_iters
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] = lr_start
        super().__init__(LambdaLR(optimizer, self.factor))

    def factor(self, step: int) -> float:
        """``lr / lr_start`` after ``step`` steps (0-based); constant past ``num_iters - 1``."""
        return float((self.lr_end / self.lr_start) ** (min(step, self.num_iters - 1) / (self.num_iters - 1)))

    def lr_at(self, iteration: int) -> float:
        """The LR of (1-based) ``iteration``; constant at ``lr_end`` past ``num_iters``."""
        return self.lr_start * self.factor(max(iteration - 1, 0))

    def attach(self, engine: Engine, event: Any = Events.ITERATION_STARTED) -> None:
        """Ignite's ``ParamScheduler.attach``, safe to call twice."""
        if not engine.has_event_handler(self, event):
            engine.add_event_handler(event, self)

    def detach(self, engine: Engine, event: Any = Events.ITERATION_STARTED) -> None:
        if engine.has_event_handler(self, event):
            engine.remove_event_handler(self, event)


class SweepRecorder(CurveRecorder):
    """Per iteration: LR, training loss, held-out loss and perf, and squared gradient norms.

    ``holdout`` is a list of prepared batches (``(x, y)`` on the device), measured by ``scorer``
    as they are (its ``prepare_batch`` should pass them through). The LR is the first param group's of the optimizer passed to :meth:`attach` (NaN without one);
    the norms are those of a :class:`NoiseTrainer` (NaN on any other engine or a plain step).
    The held-out slice is measured after the first iteration, every ``every`` iterations and at
    the end of the run (``holdout_measured`` is 1 there, 0 where the held-out values are NaN
    because they were not measured): a measurement costs a forward pass over the whole slice,
    tens of training steps (issue 25).
    """

    KEYS = ("lrs", "losses", "holdout_losses", "perfs", "sq_small", "sq_big", "b_small", "b_big", "holdout_measured")

    def __init__(
        self,
        model: torch.nn.Module,
        scorer: Scorer,
        holdout: list[Any],
        every: int = 1,
    ) -> None:
        super().__init__()
        if every < 1:
            raise ValueError(f"SweepRecorder needs every >= 1, got {every!r}")
        self.model, self.scorer, self.holdout, self.every = model, scorer, holdout, every
        self.optimizer: torch.optim.Optimizer | None = None

    def attach(self, engine: Engine, optimizer: torch.optim.Optimizer | None = None) -> None:
        if optimizer is not None:
            self.optimizer = optimizer
        if not engine.has_event_handler(self.record, Events.ITERATION_COMPLETED):
            engine.add_event_handler(Events.ITERATION_COMPLETED, self.record)
        if not engine.has_event_handler(self.measure_last, Events.COMPLETED):
            engine.add_event_handler(Events.COMPLETED, self.measure_last)

    def detach(self, engine: Engine) -> None:
        if engine.has_event_handler(self.record, Events.ITERATION_COMPLETED):
            engine.remove_event_handler(self.record, Events.ITERATION_COMPLETED)
        if engine.has_event_handler(self.measure_last, Events.COMPLETED):
            engine.remove_event_handler(self.measure_last, Events.COMPLETED)

    def record(self, engine: Engine) -> None:
        loss = output_loss(engine)
        due = (len(self.records["losses"]) % self.every) == 0
        hold_loss, perf = self._score() if due and math.isfinite(loss) else (math.nan, math.nan)
        norms = (engine.grad_norms if isinstance(engine, NoiseTrainer) else None) or (math.nan,) * 4
        lr = self.optimizer.param_groups[0]["lr"] if self.optimizer is not None else math.nan
        self.append(lrs=lr, losses=loss, holdout_losses=hold_loss, perfs=perf, holdout_measured=float(due),
                    **dict(zip(("sq_small", "sq_big", "b_small", "b_big"), norms)))

    def measure_last(self, engine: Engine) -> None:
        """At the end of the run (its last step, or where it diverged): measure the held-out slice
        there if the last step did not, so the sampled curve reaches the sweep's end."""
        rec = self.records
        if rec["holdout_measured"] and not rec["holdout_measured"][-1] and math.isfinite(rec["losses"][-1]):
            rec["holdout_losses"][-1], rec["perfs"][-1] = self._score()
            rec["holdout_measured"][-1] = 1.0

    def _score(self) -> tuple[float, float]:
        scores = self.scorer.measure(self.model, self.holdout)
        return scores["loss"], scores["perf"]


class LRRangeTest:
    """The LR range test as a temporary intervention on a trainer.

    While attached, the learning rate grows geometrically (:class:`GeometricLR`), ``recorder``
    records every iteration and a :class:`~ignite_seg.engine.handlers.DivergenceStop` ends the run at
    divergence; :attr:`diverged_at` is its iteration (``None``: the sweep ran to the end).

    Example:
        >>> test = LRRangeTest(1e-4, 1.0, 100, 4.0, 0.05, recorder)  # doctest: +SKIP
        >>> with test.attach(trainer, model, optimizer) as engine:  # doctest: +SKIP
        ...     engine.run(batches, max_iters=100)
        >>> test.recorder.arrays()["losses"]  # doctest: +SKIP
    """

    def __init__(
        self, lr_start: float, lr_end: float, num_iters: int, diverge_th: float, smooth_f: float,
        recorder: SweepRecorder, regain: float | None = None,
    ) -> None:
        self.lr_start, self.lr_end, self.num_iters = lr_start, lr_end, num_iters
        self.diverge_th, self.smooth_f, self.regain = diverge_th, smooth_f, regain
        self.recorder = recorder
        self.stop: DivergenceStop | None = None

    @property
    def diverged_at(self) -> int | None:
        """The iteration at which the last attached sweep diverged, or ``None``."""
        return None if self.stop is None else self.stop.diverged_at

    @contextlib.contextmanager
    def attach(self, engine: Engine, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Iterator[Engine]:
        """Attach the sweep's handlers; on exit remove them and restore model and optimizer."""
        saved_model = copy.deepcopy(model.state_dict())
        saved_opt = copy.deepcopy(optimizer.state_dict())
        schedule = GeometricLR(optimizer, self.lr_start, self.lr_end, self.num_iters)
        self.stop = DivergenceStop(DivergenceMonitor(self.diverge_th, self.smooth_f, self.regain))
        schedule.attach(engine)
        self.recorder.attach(engine, optimizer)
        self.stop.attach(engine)
        try:
            yield engine
        finally:
            for h in (schedule, self.recorder, self.stop):
                h.detach(engine)
            model.load_state_dict(saved_model)
            optimizer.load_state_dict(saved_opt)


# -- task functions -------------------------------------------------------------------------------
@dataclass
class _Prepared:
    model: torch.nn.Module
    loss_fn: LossFn
    fit: BatchSource
    #: the held-out slice of the training set: fixed batches, prepared on the device
    holdout: list[Any]
    device: torch.device
    prepare_batch: PrepareBatch
    scorer: Scorer


def _prepare(recipe: RecipeSpec, init_seed: int, device_index: int) -> _Prepared:
    """Build the recipe (model first, from ``init_seed``), split the training set, touch no val item.

    ``init_seed`` seeds torch, numpy and ``random`` (ignite's ``manual_seed``), as a trial's seed does: a
    dataset that augments with numpy's or Python's global RNG (albumentations does) read in this process
    would otherwise draw whatever a worker's earlier tasks left there, and the same tune would choose
    differently (an augmented shapes task's range moved 60x between two tunes of one seed).
    """
    set_threads(recipe.threads)
    manual_seed(init_seed)
    built = build_recipe(recipe.model, recipe.dataset, recipe.loss)
    device = resolve_device(recipe.device, device_index)
    pin = device.type == "cuda"
    train = BatchSource(built.data.train, built.data, pin_memory=pin)
    held = np.asarray(recipe.holdout, dtype=np.int64)
    rest = np.setdiff1d(np.arange(len(train)), held)
    prepare = built.prepare_batch
    holdout = [prepare(b, device, False) for b in train.fixed(recipe.holdout, batch_size=SNAPSHOT_POINTS)]
    fit = BatchSource(Subset(train.dataset, rest.tolist()), built.data, pin_memory=pin)
    loss_fn = loss_to(built.loss_fn, device)
    scorer = Scorer(loss_fn, recipe.accuracy_style, prepare_batch=passthrough, class_dim=built.data.class_dim)
    return _Prepared(built.model.to(device), loss_fn, fit, holdout, device, prepare, scorer)


def final_recipe_trainer(recipe: RecipeSpec, hp: FixedHyperparameters, seed: int, device_index: int = 0
                         ) -> tuple[_Prepared, Batches, torch.optim.Optimizer, Engine]:
    """The final recipe ``hp`` set up on the fit split (model from ``seed``, batches drawn from it, the
    optimizer at ``lr_start``, the trial's trainer with its clipping and AMP): what the recipe check and
    the length check train; each attaches its own schedule and measurements."""
    prep = _prepare(recipe, seed, device_index)
    batches = Batches(prep.fit, hp.batch_size, torch.Generator().manual_seed(seed))
    optimizer = make_optimizer(prep.model, hp.optimizer_spec, lr=hp.lr_start)
    engine = create_trainer(prep.model, optimizer, prep.loss_fn, prep.device, grad_clip_norm=hp.grad_clip_norm,
                            amp=hp.amp, prepare_batch=prep.prepare_batch)
    return prep, batches, optimizer, engine


def _make_optimizer(recipe: RecipeSpec, model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    return make_optimizer(model, recipe.options, lr=lr)


def run_lr_sweep(task: LRSweepTask) -> LRSweepResult:
    """One LR range-test repeat: geometric LR, per-iteration records, stop at divergence."""
    result = LRSweepResult(task.key, "failed")
    with recorded(result) as t0:
        prep = _prepare(task.recipe, task.init_seed, task.device_index)
        result.prepare_seconds = time.perf_counter() - t0
        result.constant_loss = constant_output_loss(prep.model, prep.holdout, prep.loss_fn)  # no RNG drawn
        optimizer = _make_optimizer(task.recipe, prep.model, task.lr_start)
        engine = create_noise_trainer(prep.model, optimizer, prep.loss_fn, prep.device,
                                      NoiseSampling(task.noise_chunks, task.noise_every), prep.prepare_batch,
                                      task.recipe.options.grad_clip_norm, task.recipe.options.amp)
        recorder = SweepRecorder(prep.model, prep.scorer, prep.holdout, task.holdout_every)
        test = LRRangeTest(task.lr_start, task.lr_end, task.iterations, task.diverge_th, task.smooth_f, recorder,
                           task.diverge_regain)
        batches = Batches(prep.fit, task.batch_size, torch.Generator().manual_seed(task.data_seed))
        report_steps(engine, task.iterations)
        with test.attach(engine, prep.model, optimizer):
            state = engine.run(batches, max_iters=task.iterations)
        result.arrays = recorder.arrays()
        result.status = "diverged" if test.diverged_at is not None else "completed"
        result.examples = batches.examples(state.iteration)
    return result


def run_batch_trial(task: BatchRunTask) -> BatchRunResult:
    """A short run at ``task.batch_size``: one triangular LR cycle, scored on the held-out slice."""
    result = BatchRunResult(task.key, "failed")
    with recorded(result):
        prep = _prepare(task.recipe, task.seed, task.device_index)
        batches = Batches(prep.fit, task.batch_size, torch.Generator().manual_seed(task.seed))
        iterations = max(2, int(round(task.epochs * len(batches))))
        optimizer = _make_optimizer(task.recipe, prep.model, task.lr_min)
        options = task.recipe.options
        engine = create_trainer(prep.model, optimizer, prep.loss_fn, prep.device, options.grad_clip_norm, options.amp,
                                prep.prepare_batch)
        scheduler = LinearCyclicalScheduler(
            optimizer, "lr", start_value=task.lr_min, end_value=task.lr_max, cycle_size=iterations
        )
        engine.add_event_handler(Events.ITERATION_STARTED, scheduler)
        stop = DivergenceStop()
        stop.attach(engine)
        report_steps(engine, iterations)
        t_train = time.perf_counter()
        state = engine.run(batches, max_iters=iterations)
        result.train_seconds = time.perf_counter() - t_train
        result.iterations = int(state.iteration)
        result.examples = batches.examples(state.iteration)
        if stop.diverged_at is not None:
            result.status, result.perf, result.loss = "diverged", 0.0, math.inf
        else:
            scores = prep.scorer.measure(prep.model, prep.holdout)
            result.loss, result.perf = scores["loss"], scores["perf"]
            finite = math.isfinite(result.loss) and math.isfinite(result.perf)
            result.status = "completed" if finite else "diverged"
            if not finite:
                result.perf, result.loss = 0.0, math.inf
    return result
