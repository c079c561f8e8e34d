"""One trial: an ignite ``Engine`` training one model with a cyclical learning rate.

Each training feature is a handler with an ``attach()`` that is safe to call twice:

* the learning-rate schedule from :func:`~ignite_seg.engine.schedules.build_scheduler` (ignite's
  schedulers; ``LinearCyclicalScheduler`` by default);
* ignite's ``EMAHandler`` when ``ema_decay`` is set (:mod:`~ignite_seg.engine.ema`):
  snapshots, final metrics and ``model`` use the averaged weights, ``model_raw`` the trained ones;
* :class:`~ignite_seg.engine.handlers.DivergenceStop` stops the run at the first non-finite loss and
  records the iteration;
* :class:`~ignite_seg.engine.recorders.ThroughTimeRecorder` measures loss, perf and custom metrics on
  fixed subsets of the training set and of every validation set ``snapshots_per_epoch`` times per
  epoch;
* :class:`~ignite_seg.engine.recorders.HiddenRecorder` keeps hidden representations of a sample (for the
  analysis video);
* :class:`~ignite_seg.engine.best.BestCheckpoint` (``best_metric``) keeps the weights of the best snapshot;
* then the user's handlers (:mod:`~ignite_seg.engine.user_handlers`); one that terminates the trainer
  ends the trial early (status ``completed``, ``result.stop`` with the epoch it stopped at);
* last, the mid-trial checkpoints (:mod:`~ignite_seg.engine.checkpoints`), which also keep the
  objects the user's handlers registered.

Batches come from :mod:`ignite_seg.engine.batching` (the tensor fast path or a seeded ``DataLoader``)
and go through the recipe's ``prepare_batch``; every measurement is a :class:`~ignite_seg.engine.scoring.Scorer`.

:func:`run_trial` is the function the workers run; it returns everything to the caller (arrays
and ``state_dict`` bytes) and writes no file.
"""
from __future__ import annotations

import io
import math
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from ignite.engine import Engine, Events
from ignite.utils import manual_seed

from ..config.hyperparameters import FixedHyperparameters, OptimizerSpec
from ..config.specs import LoaderSpec
from ..exceptions import CheckpointWriteError
from ..storage.records import TrialResult
from .batching import Batches, BatchSource, Data, PrepareBatch, as_data, default_prepare_batch
from .best import attach_best
from .checkpoints import attach_checkpoints
from .constant_output import constant_output_loss
from .ema import attach_ema
from .epoch_log import EpochLog
from .handlers import DivergenceStop, report_steps
from .models import as_model
from .recorders import HiddenRecorder, ThroughTimeRecorder, final_key, part_names
from .schedules import build_scheduler
from .scoring import Scorer
from .trial_records import TrialOutcome, TrialSetup, TrialTask
from .user_handlers import HandlerContext, SnapshotEvaluator, attach_user_handlers, collect_output

__all__ = [
    "TrialSetup", "TrialTask", "TrialOutcome", "Recipe", "build_recipe", "loss_to",
    "create_trainer", "make_optimizer", "ThroughTimeRecorder", "HiddenRecorder", "run_trial",
    "TrialPlacement", "set_threads", "resolve_device", "state_dict_bytes",
]

#: Through-time snapshots measure at most this many points of each set.
SNAPSHOT_POINTS = 1024
#: Points whose hidden representations are recorded for the analysis video.
HIDDEN_POINTS = 256

LossFn = Callable[[Any, Any], torch.Tensor]


@dataclass
class Recipe:
    """The live objects built from the three loader specs."""

    model: torch.nn.Module
    data: Data
    loss_fn: LossFn

    @property
    def prepare_batch(self) -> PrepareBatch:
        """The record's ``prepare_batch``, else ignite's default for ``(x, y)`` batches."""
        return self.data.prepare_batch or default_prepare_batch


def build_recipe(model: LoaderSpec, dataset: LoaderSpec, loss: LoaderSpec) -> Recipe:
    """Call the three loaders (the model first, so its initialisation follows the seed)."""
    net = as_model(model.build())  # ignite-simple's (with hidden outputs, stripped) pair: the stripped one
    data = as_data(dataset.build(), f"dataset_loader={dataset.describe()}")
    return Recipe(net, data, loss.build())


def loss_to(loss_fn: LossFn, device: torch.device) -> LossFn:
    """The loss moved to ``device`` when it is a module (its ``weight=`` and other buffers)."""
    if isinstance(loss_fn, torch.nn.Module):
        return loss_fn.to(device)
    return loss_fn


def resolve_device(device: str, index: int = 0) -> torch.device:
    """``auto`` picks CUDA when available (GPUs round-robin by ``index``), else the CPU."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", index % torch.cuda.device_count())
        return torch.device("cpu")
    return torch.device(device)


def state_dict_bytes(model: torch.nn.Module) -> bytes:
    """The model's ``state_dict`` on the CPU, serialised with ``torch.save``."""
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu().clone() for k, v in model.state_dict().items()}, buf)
    return buf.getvalue()


def make_optimizer(model: torch.nn.Module, spec: OptimizerSpec, *, lr: float) -> torch.optim.Optimizer:
    """``spec``'s optimizer over the model's parameters at learning rate ``lr``: SGD (with ``momentum``)
    or AdamW (with ``betas``, ``eps``), each ignoring the other's options.

    Example:
        >>> make_optimizer(torch.nn.Linear(2, 1), OptimizerSpec(optimizer="adamw", eps=1e-6), lr=0.01).defaults["eps"]
        1e-06
    """
    if spec.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=spec.betas, eps=spec.eps,
                                 weight_decay=spec.weight_decay)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=spec.momentum, weight_decay=spec.weight_decay)


def create_trainer(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    device: torch.device,
    grad_clip_norm: float | None = None,
    amp: bool = False,
    prepare_batch: PrepareBatch | None = None,
) -> Engine:
    """An ignite ``Engine`` whose step is one optimizer update; ``engine.state.output`` is the loss.

    Each raw batch goes through ``prepare_batch(batch, device, non_blocking=True) -> (x, y)``
    (ignite's default for ``(x, y)`` pairs when ``None``) and the loss is ``loss_fn(model(x), y)``.
    ``amp`` runs the forward pass under ``torch.autocast`` (float16 with a ``GradScaler`` on
    CUDA, bfloat16 on the CPU); ``grad_clip_norm`` clips the gradient norm before the step.
    """
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type) if amp and device.type == "cuda" else None
    prepare = prepare_batch or default_prepare_batch

    def step(engine: Engine, batch: Any) -> float:
        # the model is put in training mode once (Events.STARTED); evaluations restore the mode
        x, y = prepare(batch, device, True)
        optimizer.zero_grad(set_to_none=True)
        if amp:
            with torch.autocast(device.type, dtype=amp_dtype):
                loss = loss_fn(model(x), y)
        else:  # no context manager on the plain path: three Python calls a step
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            if grad_clip_norm is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if grad_clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip_norm)
            optimizer.step()
        return float(loss.item())

    engine = Engine(step)
    engine.add_event_handler(Events.STARTED, lambda _: model.train())
    engine.grad_scaler = scaler  # type: ignore[attr-defined]  # mid-trial checkpoints save its state
    return engine


def _subset_indices(rng: np.random.Generator, n: int, m: int) -> torch.Tensor:
    return torch.from_numpy(np.sort(rng.choice(n, size=m, replace=False)))


def passthrough(batch: Any, device: Any = None, non_blocking: bool = False) -> Any:
    """A ``prepare_batch`` for batches prepared already (the fixed subsets on the device)."""
    return batch


def set_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count when ``threads`` is given and differs (each call costs)."""
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


class TrialPlacement:
    """Where a trial's training runs: its device, its training batches and its training step.

    This one is a trial in one process; :class:`ignite_seg.engine.distributed.RankPlacement` is
    one rank of a trial on several processes (its share of each batch, a DDP-wrapped step).
    ``processes`` and ``devices`` (those of every process, set by :meth:`device`) go into ``result.json``.
    """

    processes = 1
    devices: tuple[str, ...] = ()

    def device(self, task: TrialTask) -> torch.device:
        device = resolve_device(task.setup.device, task.trial_id)
        self.devices = (str(device),)
        return device

    def batches(self, source: BatchSource, batch_size: int, seed: int) -> Any:
        return Batches(source, batch_size, torch.Generator().manual_seed(seed))

    def trainer(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_fn: LossFn,
                device: torch.device, hp: FixedHyperparameters, prepare: PrepareBatch) -> Engine:
        return create_trainer(model, optimizer, loss_fn, device, hp.grad_clip_norm, hp.amp, prepare)


def run_trial(task: TrialTask, placement: TrialPlacement | None = None) -> TrialOutcome:
    """Run one trial; never raises for a failure of the user's code (status ``failed``).

    ``placement``: where it trains (:class:`TrialPlacement`, one process, by default).
    """
    started = time.time()
    t0 = time.perf_counter()
    outcome = TrialOutcome(TrialResult(trial_id=task.trial_id, status="failed", seconds=0.0, started_at=started,
                                       pid=os.getpid()))
    placement = placement or TrialPlacement()
    try:
        set_threads(task.threads)
        with tempfile.TemporaryDirectory(prefix=f"ignite_seg_trial{task.trial_id}_") as output_dir:
            _train(task, outcome, Path(output_dir), placement)
    except CheckpointWriteError:  # an error of the run (a full disk), not of the trial: to the caller
        raise
    except (Exception, SystemExit, KeyboardInterrupt):  # the user's code may raise these too
        outcome.end("failed", traceback.format_exc())
    rss = _peak_rss_mib()
    outcome.result = replace(  # the processes are recorded only where their devices are known
        outcome.result, processes=placement.processes if placement.devices else None, devices=tuple(placement.devices),
        seconds=time.perf_counter() - t0, peak_rss_mib=None if rss is None else round(rss, 1))
    return outcome


def _peak_rss_mib() -> float | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


@dataclass
class _Sources:
    """A trial's datasets ready for batching: the training set and each validation set by part name."""

    train: BatchSource
    val: dict[str, BatchSource]

    @classmethod
    def of(cls, data: Data, device: torch.device) -> _Sources:
        pin = device.type == "cuda"
        parts = part_names(data.val_names)
        val = {parts[name]: BatchSource(ds, data, pin_memory=pin) for name, ds in data.val_sets.items()}
        return cls(BatchSource(data.train, data, pin_memory=pin), val)


def _snapshot_sets(
    rng: np.random.Generator, sources: _Sources, prepare: PrepareBatch, device: torch.device
) -> tuple[dict[str, list[Any]], torch.Tensor]:
    """Fixed random subsets of ``min(SNAPSHOT_POINTS, len(train), len(set))`` points of the training set
    (sized by the primary validation set) and of each validation set, read once and prepared on
    ``device``; and the primary set's subset indices."""
    n_train = len(sources.train)
    m = min(SNAPSHOT_POINTS, n_train, len(sources.val["val"]))
    indices = {"train": _subset_indices(rng, n_train, m)}
    for part, src in sources.val.items():
        indices[part] = _subset_indices(rng, len(src), min(SNAPSHOT_POINTS, n_train, len(src)))
    sets = {}
    for part, idx in indices.items():
        src = sources.train if part == "train" else sources.val[part]
        sets[part] = [prepare(b, device, False) for b in src.fixed(idx)]
    return sets, indices["val"]


def _training_prepare(recipe: Recipe, source: BatchSource, device: torch.device) -> PrepareBatch:
    """The training steps' ``prepare_batch``: a pass-through for tensor pairs on ``device`` already (the fast
    path on the CPU: the default's two ``.to(device)`` per step would return the same tensors), else the recipe's."""
    on_device = source.tensors is not None and all(t.device == device for t in source.tensors)
    return passthrough if recipe.data.prepare_batch is None and on_device else recipe.prepare_batch


def _final_metrics(
    scorer: Scorer, model: torch.nn.Module, sources: _Sources, prepare: PrepareBatch, device: torch.device
) -> dict[str, float]:
    """Every metric over the whole training set and every validation set, under :func:`final_key`."""
    out: dict[str, float] = {}
    for part, src in {"train": sources.train, **sources.val}.items():
        batches = (prepare(b, device, True) for b in src.in_order())
        for metric, value in scorer.measure_parts(model, {part: batches})[part].items():
            out[final_key(metric, part)] = value
    return out


def _attach_user_handlers(
    task: TrialTask, engine: Engine, recorder: ThroughTimeRecorder,
    live: tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer], output_dir: Path,
) -> dict[str, Any]:
    """The user's handlers, after ignite_seg's own but before the checkpoints; the objects they
    registered for the checkpoints (``context.checkpoint``), by name."""
    if not task.setup.handlers:
        return {}
    model, eval_model, optimizer = live
    evaluator = SnapshotEvaluator(recorder).attach(engine)
    context = HandlerContext(model, eval_model, optimizer, evaluator, task.trial_id, output_dir)
    return attach_user_handlers(task.setup.handlers, engine, context)


def _train(task: TrialTask, outcome: TrialOutcome, output_dir: Path, placement: TrialPlacement) -> None:
    hp, setup = task.hparams, task.setup
    manual_seed(task.seed)  # torch, numpy and random: a dataset's augmentation may draw from any of them
    rng = np.random.default_rng(task.seed)
    recipe = build_recipe(setup.model, setup.dataset, setup.loss)
    extra = {name: spec.build() for name, spec in setup.metrics.items()}
    outcome.val_names, outcome.metric_names = recipe.data.val_names, tuple(extra)
    device = placement.device(task)
    model = recipe.model.to(device)
    loss_fn = loss_to(recipe.loss_fn, device)
    outcome.model_init = state_dict_bytes(model)

    sources = _Sources.of(recipe.data, device)
    sets, val_indices = _snapshot_sets(rng, sources, recipe.prepare_batch, device)
    constant = constant_output_loss(model, sets["train"], loss_fn)  # eval mode, no random number drawn
    outcome.result = replace(outcome.result, constant_loss_train=constant if math.isfinite(constant) else None)
    batches = placement.batches(sources.train, hp.batch_size, task.seed)
    iters_per_epoch = len(batches)

    optimizer = make_optimizer(model, hp.optimizer_spec, lr=hp.lr_start)
    engine = placement.trainer(model, optimizer, loss_fn, device, hp, _training_prepare(recipe, sources.train, device))
    scheduler = build_scheduler(hp, iters_per_epoch, optimizer)
    engine.add_event_handler(Events.ITERATION_STARTED, scheduler)
    eval_model = attach_ema(engine, model, hp.ema_decay)  # the model itself without EMA
    guard = DivergenceStop()
    guard.attach(engine)
    scorer = Scorer(loss_fn, setup.accuracy_style, extra, prepare_batch=passthrough, val_only=setup.val_only_metrics,
                    class_dim=recipe.data.class_dim)
    recorder = ThroughTimeRecorder(scorer, eval_model, sets, iters_per_epoch, hp.epochs, setup.snapshots_per_epoch)
    recorder.attach(engine)
    EpochLog(recorder, task.trial_id, hp.epochs, recipe.data.val_names).attach(engine)
    hidden = None
    if task.record_hidden:
        sample = sources.val["val"].take(val_indices[:HIDDEN_POINTS])  # the first fixed val points
        hidden = HiddenRecorder(eval_model, recipe.prepare_batch(sample, device, False))
        hidden.attach(engine)
    best = attach_best(engine, eval_model, recorder, setup.best_metric, setup.best_mode, setup.best_parts)
    saved = {"trainer": engine, "model": model, "optimizer": optimizer, "scheduler": scheduler, "recorder": recorder,
             "ema_model": eval_model if eval_model is not model else None, "guard": guard, "hidden": hidden,
             "best": best, "grad_scaler": getattr(engine, "grad_scaler", None)}
    registered = _attach_user_handlers(task, engine, recorder, (model, eval_model, optimizer), output_dir)
    checkpoints = attach_checkpoints(task, engine, saved, batches, iters_per_epoch, registered)
    outcome.result = replace(outcome.result, checkpoints=checkpoints)
    report_steps(engine, hp.epochs * iters_per_epoch)  # steps done, for the driver's bar and stall warning

    engine.run(batches, max_epochs=hp.epochs)

    outcome.throughtime = recorder.arrays()
    outcome.hidden = hidden.arrays() if hidden is not None else {}
    outcome.model = state_dict_bytes(eval_model)
    outcome.model_raw = state_dict_bytes(model) if eval_model is not model else b""
    if best is not None:
        outcome.model_best = best.saver.blob
        outcome.result = replace(outcome.result, best=best.record())
    outcome.files = collect_output(output_dir)
    if guard.diverged_at is None:
        metrics = _final_metrics(scorer, eval_model, sources, recipe.prepare_batch, device)
        outcome.result = replace(outcome.result, metrics=dict(metrics))
    _settle(outcome, guard, engine.state.iteration, iters_per_epoch, hp.epochs)


def _settle(outcome: TrialOutcome, guard: DivergenceStop, iteration: int, iters_per_epoch: int, epochs: int) -> None:
    """The trial's status from how it ended: diverged, completed, or completed early (a user handler)."""
    if guard.diverged_at is not None:
        outcome.result = replace(outcome.result, diverged_iteration=guard.diverged_at)
        outcome.end("diverged", f"loss became non-finite at iteration {guard.diverged_at}")
    elif not all(v is not None and math.isfinite(v) for k, v in outcome.result.metrics.items()
                 if not k.startswith("metric_")):
        outcome.end("diverged", "final loss or perf is not finite")
    elif iteration < iters_per_epoch * epochs:  # a user handler terminated the trainer
        outcome.end("completed", stopped_epoch=iteration / iters_per_epoch)
    else:
        outcome.end("completed")
