"""User handlers and a task for the handler and best-checkpoint tests (importable by the workers).

* ``wrong_val_blobs``: the blobs task whose validation labels are shifted by one class, so the
  validation loss rises as soon as the model learns the training labels;
* ``early_stopping``: ignite's ``EarlyStopping`` on ``context.evaluator`` (score: minus ``losses_val``);
* ``early_stopping_on``: the same on a given curve, its state registered for mid-trial checkpoints;
* ``registers``: registrations that ``context.checkpoint`` refuses;
* ``csv_logger``: one CSV row per epoch (epoch, the last snapshot's ``losses_val``) in ``output_dir``;
* ``writes``: a handler that writes one named file (to try ignite_seg's own names and the size cap).
"""
from __future__ import annotations

import csv

import numpy as np
import torch
from ignite.engine import Events
from ignite.handlers import EarlyStopping
from tasks import blobs
from torch.utils.data import TensorDataset


def wrong_val_blobs():
    train, val = blobs()
    x, y = val.tensors
    return train, TensorDataset(x, (y + 1) % 3)


def early_stopping(patience: int = 2, only_trial: int | None = None):
    def attach(trainer, context):
        if only_trial is not None and context.trial_id != only_trial:
            return
        stop = EarlyStopping(patience, lambda ev: -ev.state.metrics["losses_val"], trainer)
        context.evaluator.add_event_handler(Events.COMPLETED, stop)
    return attach


def early_stopping_on(val_losses, patience: int = 2, register: bool = True):
    """ignite's ``EarlyStopping`` on a given validation-loss curve, ``val_losses[k]`` at the ``k``-th
    epoch's snapshot (one snapshot per epoch), registered for the checkpoints unless not ``register``."""
    def attach(trainer, context):
        stop = EarlyStopping(patience, lambda ev: -val_losses[round(ev.state.metrics["epochs"])], trainer)
        context.evaluator.add_event_handler(Events.COMPLETED, stop)
        if register:
            context.checkpoint("early_stopping", stop)
            context.checkpoint("early_stopping", stop)  # attach() run twice registers it once
    return attach


def registers(name, what: str = "early_stopping"):
    """Registers ``what`` under ``name``: an ``EarlyStopping``, an object without state, two objects, or one
    whose state holds a numpy scalar."""
    def attach(trainer, context):
        stop = EarlyStopping(2, lambda ev: 0.0, trainer)
        if what == "numpy":  # a state that torch.load(weights_only=True) cannot read
            stop.state_dict = lambda: {"counter": 0, "best_score": np.float64(1.0)}
        context.checkpoint(name, stop if what != "plain" else object())
        if what == "two":
            context.checkpoint(name, EarlyStopping(3, lambda ev: 0.0, trainer))
    return attach


def csv_logger(name: str = "metrics.csv"):
    def attach(trainer, context):
        path = context.output_dir / name

        def write_row(engine):
            new = not path.exists()
            with open(path, "a", newline="") as fh:
                out = csv.writer(fh)
                if new:
                    out.writerow(["epoch", "losses_val"])
                out.writerow([engine.state.epoch, context.evaluator.state.metrics["losses_val"]])

        trainer.add_event_handler(Events.EPOCH_COMPLETED, write_row)
    return attach


def writes(name: str, size: int = 10):
    def attach(trainer, context):
        trainer.add_event_handler(Events.COMPLETED, lambda _: (context.output_dir / name).write_bytes(b"x" * size))
    return attach


def not_a_factory():
    return 42


def replay_early_stopping(scores, patience: int) -> int | None:
    """The index of the snapshot at which ignite's ``EarlyStopping`` (min_delta 0) stops on ``scores``."""
    best, counter = None, 0
    for k, s in enumerate(scores):
        if best is None or s > best:
            best, counter = s, 0
        else:
            counter += 1
            if counter >= patience:
                return k
    return None


def measure_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model(x), y))
