"""The per-epoch log line: what a plain ignite script prints after each epoch, at INFO.

After every epoch the trainer logs, on the ``ignite_seg`` logger, the values of the through-time
snapshot just taken at the epoch's end (:class:`~ignite_seg.engine.recorders.ThroughTimeRecorder`):
loss, perf and every custom metric on the training subset and on each validation set's subset,
measured on the evaluated model (the EMA weights with ``ema_decay``). It costs no extra pass. A
script's ``@trainer.on(Events.EPOCH_COMPLETED)`` print of an evaluator's metrics becomes this line;
``logging.getLogger("ignite_seg").setLevel(logging.WARNING)`` silences it.
"""
from __future__ import annotations

import logging
import math

import ignite.distributed as idist
from ignite.engine import Engine, Events

from ..runtime.logs import ensure_logging
from .recorders import ThroughTimeRecorder, curve_key, part_names

__all__ = ["EpochLog", "epoch_line"]

logger = logging.getLogger("ignite_seg")


def epoch_line(trial_id: int, epoch: int, epochs: int, values: dict[str, float], metrics: tuple[str, ...],
               parts: dict[str, str]) -> str:
    """The line of one epoch: ``values`` by :func:`curve_key`, ``parts`` the part keys and their display names.

    Example:
        >>> epoch_line(0, 2, 5, {"losses_train": 0.5, "perfs_train": 0.8, "losses_val_noisy": 0.75,
        ...                      "perfs_val_noisy": 0.625}, ("loss", "perf"), {"train": "train", "val_noisy": "noisy"})
        'trial 0 epoch 2/5: train loss 0.5000 perf 0.8000 | noisy loss 0.7500 perf 0.6250'
    """
    sets = []
    for part, name in parts.items():
        shown = [f"{m} {values[curve_key(m, part)]:.4f}" for m in metrics
                 if not math.isnan(values.get(curve_key(m, part), math.nan))]
        sets.append(f"{name} " + " ".join(shown))
    return f"trial {trial_id} epoch {epoch}/{epochs}: " + " | ".join(sets)


class EpochLog:
    """Logs :func:`epoch_line` at INFO after every epoch from ``recorder``'s last snapshot.

    ``val_names``: the validation sets' names, the primary one first (each part is shown by its set's name).
    """

    def __init__(self, recorder: ThroughTimeRecorder, trial_id: int, epochs: int, val_names: tuple[str, ...]) -> None:
        self.recorder, self.trial_id, self.epochs = recorder, trial_id, epochs
        names = {"train": "train", **{part: name for name, part in part_names(val_names).items()}}
        self.parts = {part: names.get(part, part) for part in recorder.sets}

    def attach(self, engine: Engine) -> None:
        """Attach after ``recorder`` (its end-of-epoch snapshot comes first); safe to call twice. A worker
        process without a logging configuration of its own (a fork server's child inherits none) gets
        ignite_seg's INFO handler on stderr, as the caller has: the line reaches the console."""
        ensure_logging()
        if not engine.has_event_handler(self._log, Events.EPOCH_COMPLETED):
            engine.add_event_handler(Events.EPOCH_COMPLETED, self._log)

    def _log(self, engine: Engine) -> None:
        if logger.isEnabledFor(logging.INFO) and idist.get_rank() == 0:  # one line per trial, not per process
            logger.info(epoch_line(self.trial_id, engine.state.epoch, self.epochs, self.recorder.latest(),
                                   self.recorder.scorer.names, self.parts))
