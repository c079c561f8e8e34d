"""One trial: an ignite ``Engine`` training one model with a cyclical learning rate.

Each training feature is a handler with an ``attach()`` that is safe to call twice:

* ignite's ``LinearCyclicalScheduler`` for the triangular learning-rate schedule;
* :class:`~ignite_seg.engine.handlers.DivergenceStop` stops the run at the first non-finite loss and
  records the iteration;
* :class:`ThroughTimeRecorder` measures loss and perf on fixed subsets of the training and
  validation sets ``snapshots_per_epoch`` times per epoch;
* :class:`HiddenRecorder` keeps hidden representations of a sample (for the analysis video).

:func:`run_trial` is the function the workers run; it returns everything to the caller (arrays
and ``state_dict`` bytes) and writes no file.
"""
from __future__ import annotations

import io
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from ignite.engine import Engine, Events
from ignite.handlers import LinearCyclicalScheduler

from ..config.hyperparameters import FixedHyperparameters, OptimizerName
from ..config.specs import LoaderSpec
from .data import Batches, TensorData, as_tensor_data, eval_batches, gather
from .handlers import CurveRecorder, DivergenceStop
from .metrics import AccuracyStyle, LossFn, Probe, evaluate

__all__ = [
    "TrialTask",
    "TrialOutcome",
    "Recipe",
    "build_recipe",
    "create_trainer",
    "make_optimizer",
    "ThroughTimeRecorder",
    "HiddenRecorder",
    "run_trial",
    "set_threads",
    "resolve_device",
    "state_dict_bytes",
]

#: Through-time snapshots measure at most this many points of each set.
SNAPSHOT_POINTS = 1024
#: Points whose hidden representations are recorded for the analysis video.
HIDDEN_POINTS = 256
#: Hidden layers recorded at most (the last ones before the output).
HIDDEN_LAYERS = 3

TrialStatus = Literal["completed", "diverged", "failed"]


@dataclass(frozen=True)
class TrialTask:
    """Everything a worker needs to run one trial (picklable, sent to the worker)."""

    trial_id: int
    model: LoaderSpec
    dataset: LoaderSpec
    loss: LoaderSpec
    hparams: FixedHyperparameters
    accuracy_style: AccuracyStyle
    seed: int
    device: str = "auto"
    snapshots_per_epoch: int = 10
    record_hidden: bool = False
    threads: int | None = None


@dataclass
class TrialOutcome:
    """What a worker returns for one trial. ``status`` is completed, diverged or failed."""

    trial_id: int
    status: TrialStatus
    seconds: float
    started_at: float
    pid: int
    metrics: dict[str, float] = field(default_factory=dict)
    throughtime: dict[str, np.ndarray] = field(default_factory=dict)
    hidden: dict[str, np.ndarray] = field(default_factory=dict)
    model_init: bytes = b""
    model: bytes = b""
    error: str | None = None
    diverged_iteration: int | None = None
    peak_rss_mib: float | None = None


@dataclass
class Recipe:
    """The live objects built from the three loader specs."""

    model: torch.nn.Module
    train_set: Any
    val_set: Any
    loss_fn: LossFn


def build_recipe(model: LoaderSpec, dataset: LoaderSpec, loss: LoaderSpec) -> Recipe:
    """Call the three loaders (the model first, so its initialisation follows the seed)."""
    net = model.build()
    pair = dataset.build()
    train_set, val_set = pair
    loss_fn = loss.build()
    return Recipe(net, train_set, val_set, loss_fn)


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


def make_optimizer(
    model: torch.nn.Module, optimizer: OptimizerName, *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0
) -> torch.optim.Optimizer:
    """SGD (with ``momentum``) or AdamW over the model's parameters; AdamW ignores ``momentum``."""
    if optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)


def create_trainer(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    device: torch.device,
    grad_clip_norm: float | None = None,
    amp: bool = False,
) -> Engine:
    """An ignite ``Engine`` whose step is one optimizer update; ``engine.state.output`` is the loss.

    ``amp`` runs the forward pass under ``torch.autocast`` (float16 with a ``GradScaler`` on
    CUDA, bfloat16 on the CPU); ``grad_clip_norm`` clips the gradient norm before the step.
    """
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type) if amp and device.type == "cuda" else None

    def step(engine: Engine, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
        # the model is put in training mode once (Events.STARTED); evaluations restore the mode
        x, y = batch
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
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
    return engine


def snapshot_iterations(iters_per_epoch: int, epochs: int, per_epoch: int) -> list[int]:
    """Iterations (after the update) at which to snapshot, ``per_epoch`` per epoch, deduplicated."""
    total = iters_per_epoch * epochs
    its = {int(round(k * iters_per_epoch / per_epoch)) for k in range(1, per_epoch * epochs + 1)}
    return sorted(i for i in its if 1 <= i <= total)


class ThroughTimeRecorder(CurveRecorder):
    """Loss and perf on fixed subsets, ``per_epoch`` times per epoch plus once before training.

    ``records`` holds the lists, with the exact fractional epoch of each snapshot (iteration /
    iterations per epoch).
    """

    KEYS = ("epochs", "losses_train", "losses_val", "perfs_train", "perfs_val")

    def __init__(
        self,
        probe: Probe,
        train_batch: tuple[torch.Tensor, torch.Tensor],
        val_batch: tuple[torch.Tensor, torch.Tensor],
        iters_per_epoch: int,
        epochs: int,
        per_epoch: int,
    ) -> None:
        super().__init__()
        self.probe = probe
        self.train_batch, self.val_batch = probe.to_device(train_batch), probe.to_device(val_batch)
        self.iters_per_epoch = iters_per_epoch
        self._when = set(snapshot_iterations(iters_per_epoch, epochs, per_epoch))

    def attach(self, engine: Engine) -> None:
        if not engine.has_event_handler(self.snapshot, Events.STARTED):
            engine.add_event_handler(Events.STARTED, self.snapshot)
            engine.add_event_handler(
                Events.ITERATION_COMPLETED(event_filter=lambda _e, it: it in self._when), self.snapshot
            )

    def snapshot(self, engine: Engine) -> None:
        lt, pt = self.probe(self.train_batch)
        lv, pv = self.probe(self.val_batch)
        self.append(epochs=engine.state.iteration / self.iters_per_epoch, losses_train=lt, losses_val=lv,
                    perfs_train=pt, perfs_val=pv)


def _hidden_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    leaves = [(n, m) for n, m in model.named_modules() if n and not list(m.children())]
    return leaves[:-1][-HIDDEN_LAYERS:] if len(leaves) > 1 else []


class HiddenRecorder:
    """Hidden representations of a fixed sample at the start and after every epoch.

    Uses forward hooks on the model's last few leaf modules before the output; layers whose
    output has fewer than 3 features are skipped. No special model API is needed.
    """

    def __init__(self, model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor], device: torch.device):
        self.model, self.device = model, device
        self.x = batch[0].to(device)
        self.targets = batch[1].detach().cpu().numpy()
        self.layers = _hidden_layers(model)
        self.epochs: list[float] = []
        self.values: dict[str, list[np.ndarray]] = {name: [] for name, _ in self.layers}

    def attach(self, engine: Engine) -> None:
        if not self.layers or engine.has_event_handler(self.record, Events.STARTED):
            return
        engine.add_event_handler(Events.STARTED, self.record)
        engine.add_event_handler(Events.EPOCH_COMPLETED, self.record)

    @torch.no_grad()
    def record(self, engine: Engine) -> None:
        captured: dict[str, torch.Tensor] = {}
        handles = [
            module.register_forward_hook(lambda _m, _i, out, name=name: captured.__setitem__(name, out))
            for name, module in self.layers
        ]
        was_training = self.model.training
        self.model.eval()
        try:
            self.model(self.x)
        finally:
            self.model.train(was_training)
            for h in handles:
                h.remove()
        self.epochs.append(engine.state.epoch if engine.state.iteration else 0)
        for name, out in captured.items():
            if isinstance(out, torch.Tensor):
                self.values[name].append(out.detach().reshape(out.shape[0], -1).float().cpu().numpy())

    def arrays(self) -> dict[str, np.ndarray]:
        kept = [n for n, v in self.values.items() if v and v[0].shape[1] >= 3]
        if not kept:
            return {}
        out: dict[str, np.ndarray] = {
            "epochs": np.asarray(self.epochs, dtype=np.float64),
            "targets": self.targets,
            "layer_names": np.asarray(kept),
            "layer_types": np.asarray([type(dict(self.layers)[n]).__name__ for n in kept]),  # for the analysis
        }
        for k, name in enumerate(kept):
            out[f"layer_{k}"] = np.stack(self.values[name])
        return out


def _as_tensors_or_itself(dataset: Any) -> TensorData | Any:
    """The dataset as tensors when it can be materialised, else the dataset itself."""
    tensors = as_tensor_data(dataset)
    return dataset if tensors is None else tensors


def _subset_indices(rng: np.random.Generator, n: int, m: int) -> torch.Tensor:
    return torch.from_numpy(np.sort(rng.choice(n, size=m, replace=False)))


def set_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count when ``threads`` is given and differs (each call costs)."""
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def run_trial(task: TrialTask) -> TrialOutcome:
    """Run one trial; never raises for a failure of the user's code (status ``failed``)."""
    started = time.time()
    t0 = time.perf_counter()
    outcome = TrialOutcome(task.trial_id, "failed", 0.0, started, os.getpid())
    try:
        set_threads(task.threads)
        _train(task, outcome)
    except (Exception, SystemExit, KeyboardInterrupt):  # the user's code may raise these too
        outcome.status = "failed"
        outcome.error = traceback.format_exc()
    outcome.seconds = time.perf_counter() - t0
    outcome.peak_rss_mib = _peak_rss_mib()
    return outcome


def _peak_rss_mib() -> float | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def _train(task: TrialTask, outcome: TrialOutcome) -> None:
    hp = task.hparams
    torch.manual_seed(task.seed)
    rng = np.random.default_rng(task.seed)
    recipe = build_recipe(task.model, task.dataset, task.loss)
    device = resolve_device(task.device, task.trial_id)
    model = recipe.model.to(device)
    outcome.model_init = state_dict_bytes(model)

    train_data: TensorData | Any = _as_tensors_or_itself(recipe.train_set)
    val_data: TensorData | Any = _as_tensors_or_itself(recipe.val_set)
    m = min(SNAPSHOT_POINTS, len(train_data), len(val_data))
    train_sub = gather(train_data, _subset_indices(rng, len(train_data), m))
    val_sub = gather(val_data, _subset_indices(rng, len(val_data), m))

    generator = torch.Generator().manual_seed(task.seed)
    batches = Batches(train_data, hp.batch_size, generator)
    iters_per_epoch = len(batches)

    optimizer = make_optimizer(model, hp.optimizer, lr=hp.lr_start, momentum=hp.momentum,
                               weight_decay=hp.weight_decay)
    engine = create_trainer(model, optimizer, recipe.loss_fn, device, hp.grad_clip_norm, hp.amp)
    cycle = max(2, int(round(hp.cycle_size_epochs * iters_per_epoch)))
    scheduler = LinearCyclicalScheduler(optimizer, "lr", start_value=hp.lr_start, end_value=hp.lr_end, cycle_size=cycle)
    engine.add_event_handler(Events.ITERATION_STARTED, scheduler)
    guard = DivergenceStop()
    guard.attach(engine)
    probe = Probe(model, recipe.loss_fn, task.accuracy_style, device)
    recorder = ThroughTimeRecorder(probe, train_sub, val_sub, iters_per_epoch, hp.epochs, task.snapshots_per_epoch)
    recorder.attach(engine)
    hidden = None
    if task.record_hidden:
        hidden = HiddenRecorder(model, (val_sub[0][:HIDDEN_POINTS], val_sub[1][:HIDDEN_POINTS]), device)
        hidden.attach(engine)

    engine.run(batches, max_epochs=hp.epochs)

    outcome.throughtime = recorder.arrays()
    outcome.hidden = hidden.arrays() if hidden is not None else {}
    outcome.model = state_dict_bytes(model)
    if guard.diverged_at is not None:
        outcome.status = "diverged"
        outcome.diverged_iteration = guard.diverged_at
        outcome.error = f"loss became non-finite at iteration {guard.diverged_at}"
        return
    style = task.accuracy_style
    loss_train, perf_train = evaluate(model, recipe.loss_fn, eval_batches(train_data), style, device)
    loss_val, perf_val = evaluate(model, recipe.loss_fn, eval_batches(val_data), style, device)
    outcome.metrics = {
        "loss_train": loss_train,
        "loss_val": loss_val,
        "perf_train": perf_train,
        "perf_val": perf_val,
    }
    if not all(math.isfinite(v) for v in outcome.metrics.values()):
        outcome.status = "diverged"
        outcome.error = "final loss or perf is not finite"
        return
    outcome.status = "completed"
