"""What a trial records while it trains: through-time metrics and hidden representations.

Keys (the contract with the collation and the analysis): a *part* is ``train``, ``val`` (the
primary validation set, ignite-simple's keys) or ``val_<name>`` (the others). Through time
(:func:`curve_key`): ``losses_<part>``, ``perfs_<part>``, ``metric_<m>_<part>``; final metrics
(:func:`final_key`, ``result.json``): ``loss_<part>``, ``perf_<part>``, ``metric_<m>_<part>``.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from ignite.engine import Engine, EventEnum, Events

from .handlers import CurveRecorder
from .scoring import Scorer

__all__ = [
    "curve_key", "final_key", "part_names", "snapshot_iterations", "SnapshotEvents", "ThroughTimeRecorder",
    "HiddenRecorder",
]

#: Hidden layers recorded at most (the last ones before the output).
HIDDEN_LAYERS = 3


def curve_key(metric: str, part: str) -> str:
    """The through-time key of ``metric`` on ``part`` (``train``, ``val``, ``val_<set>``)."""
    if metric == "loss":
        return f"losses_{part}"
    if metric == "perf":
        return f"perfs_{part}"
    return f"metric_{metric}_{part}"


def final_key(metric: str, part: str) -> str:
    """The final-metric key (``result.json``) of ``metric`` on ``part``."""
    if metric in ("loss", "perf"):
        return f"{metric}_{part}"
    return f"metric_{metric}_{part}"


def part_names(val_names: tuple[str, ...]) -> dict[str, str]:
    """The key suffix of each validation set: ``val`` for the primary one, ``val_<name>`` for the others."""
    return {name: "val" if k == 0 else f"val_{name}" for k, name in enumerate(val_names)}


def snapshot_iterations(iters_per_epoch: int, epochs: int, per_epoch: int) -> list[int]:
    """Iterations (after the update) at which to snapshot, ``per_epoch`` per epoch, deduplicated."""
    total = iters_per_epoch * epochs
    its = {int(round(k * iters_per_epoch / per_epoch)) for k in range(1, per_epoch * epochs + 1)}
    return sorted(i for i in its if 1 <= i <= total)


class ThroughTimeRecorder(CurveRecorder):
    """Loss, perf and custom metrics on fixed subsets, ``per_epoch`` times per epoch plus once before training.

    ``sets`` maps a part name (``train``, ``val``, ``val_<name>``) to its fixed batches, already
    prepared (``(x, y)`` on the device); ``scorer`` measures every batch of a part as it is (its
    ``prepare_batch`` should pass prepared batches through). ``records`` holds ``epochs`` (the
    exact fractional epoch: iteration / iterations per epoch) and one list per metric and part under
    :func:`curve_key` (``losses_train``, ``perfs_val``, ``metric_iou_val_shifted``, ...).
    """

    KEYS = ("epochs",)

    def __init__(
        self,
        scorer: Scorer,
        model: torch.nn.Module,
        sets: Mapping[str, list[Any]],
        iters_per_epoch: int,
        epochs: int,
        per_epoch: int,
    ) -> None:
        super().__init__()
        self.scorer, self.model, self.sets = scorer, model, dict(sets)
        for part in self.sets:
            for metric in scorer.names:
                self.records[curve_key(metric, part)] = []
        self.iters_per_epoch = iters_per_epoch
        self._when = set(snapshot_iterations(iters_per_epoch, epochs, per_epoch))

    def attach(self, engine: Engine) -> None:
        if not engine.has_registered_events(SnapshotEvents.SNAPSHOT_COMPLETED):
            engine.register_events(*SnapshotEvents)
        # checked on the step's handler: a resumed trial has had the STARTED one removed (its measurement is kept)
        if not engine.has_event_handler(self._snapshot_when_due, Events.ITERATION_COMPLETED):
            engine.add_event_handler(Events.STARTED, self.snapshot)
            # a plain handler, not an event filter: ignite's filter wrapper costs a few Python calls every step
            engine.add_event_handler(Events.ITERATION_COMPLETED, self._snapshot_when_due)

    def _snapshot_when_due(self, engine: Engine) -> None:
        if engine.state.iteration in self._when:
            self.snapshot(engine)

    def snapshot(self, engine: Engine) -> None:
        values = {"epochs": engine.state.iteration / self.iters_per_epoch}
        for part, measured in self.scorer.measure_parts(self.model, self.sets).items():
            for metric, value in measured.items():
                values[curve_key(metric, part)] = value
        self.append(**values)
        # Fired when a handler listens (one has, so the event is registered), through the engine's own
        # ``_fire_event``: the public ``fire_event`` first checks the event against the engine's list of
        # events with a Python ``__eq__`` per entry, more than the rest of the recorder's own work.
        if engine._event_handlers.get(SnapshotEvents.SNAPSHOT_COMPLETED):
            engine._fire_event(SnapshotEvents.SNAPSHOT_COMPLETED)

    def latest(self) -> dict[str, float]:
        """The last snapshot's values by key (``epochs`` and every :func:`curve_key`); empty before one."""
        return {k: v[-1] for k, v in self.records.items() if v}


class SnapshotEvents(EventEnum):
    """Fired on the trainer by :class:`ThroughTimeRecorder` once a snapshot's values are recorded
    (:meth:`ThroughTimeRecorder.latest` holds them): the best checkpoint and the user handlers'
    evaluator run on it."""

    SNAPSHOT_COMPLETED = "snapshot_completed"


def _hidden_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    leaves = [(n, m) for n, m in model.named_modules() if n and not list(m.children())]
    return leaves[:-1][-HIDDEN_LAYERS:] if len(leaves) > 1 else []


class HiddenRecorder:
    """Hidden representations of a fixed sample at the start and after every epoch.

    ``batch`` is a prepared ``(x, y)`` batch on the model's device (``x`` anything the model
    takes). Uses forward hooks on the model's last few leaf modules before the output; layers
    whose output has fewer than 3 features are skipped. No special model API is needed.
    """

    def __init__(self, model: torch.nn.Module, batch: tuple[Any, Any]):
        self.model = model
        self.x, targets = batch
        self.targets = targets.detach().cpu().numpy() if isinstance(targets, torch.Tensor) else np.asarray(targets)
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
