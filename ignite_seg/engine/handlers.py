"""The ignite handlers that trials and tuning sweeps share.

* :class:`DivergenceStop` ends a run at the first non-finite loss or, given a
  :class:`~ignite_seg.smoothing.DivergenceMonitor`, once the monitor's EMA rules say the loss
  diverged; the iteration is kept in its typed attribute ``diverged_at``;
* :class:`CurveRecorder` is the base of the recorders that append one float per key per
  measurement; :meth:`CurveRecorder.arrays` turns the lists into float64 arrays;
* :func:`report_steps` tells the driver how many steps a run of the default pool has done.

Each ``attach()`` is safe to call twice; the live values are typed attributes of the handler,
not ad-hoc attributes of ``engine.state``.
"""
from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from ignite.engine import Engine, Events

from ..runtime.workers import report_progress, reports_progress
from ..smoothing import DivergenceMonitor

__all__ = ["output_loss", "DivergenceStop", "CurveRecorder", "report_steps", "REPORT_EVERY_STEPS"]


def output_loss(engine: Engine) -> float:
    """The loss the engine's step returned (``engine.state.output``) as a float."""
    return float(engine.state.output)  # type: ignore[arg-type]  # ignite types State.output as int | None


class DivergenceStop:
    """Terminates the run once the training loss diverges.

    Without a ``monitor``, the first non-finite loss (what a trial or a batch-size run checks);
    with one, :meth:`DivergenceMonitor.update` decides (non-finite, or the EMA loss past
    ``diverge_th`` times its minimum or giving back ``regain`` of its improvement: the LR sweeps).
    ``diverged_at`` is the iteration it stopped at, ``None`` while the loss stays in bounds.

    Example:
        >>> stop = DivergenceStop()  # doctest: +SKIP
        >>> stop.attach(trainer); trainer.run(batches)  # doctest: +SKIP
        >>> stop.diverged_at is None  # doctest: +SKIP
        True
    """

    def __init__(self, monitor: DivergenceMonitor | None = None) -> None:
        self.monitor = monitor
        self.diverged_at: int | None = None

    def diverged(self, loss: float) -> bool:
        """Feed one training loss; ``True`` when the run should stop."""
        if self.monitor is None:
            return not math.isfinite(loss)
        return self.monitor.update(loss)

    def attach(self, engine: Engine) -> None:
        if not engine.has_event_handler(self._check, Events.ITERATION_COMPLETED):
            engine.add_event_handler(Events.ITERATION_COMPLETED, self._check)

    def detach(self, engine: Engine) -> None:
        if engine.has_event_handler(self._check, Events.ITERATION_COMPLETED):
            engine.remove_event_handler(self._check, Events.ITERATION_COMPLETED)

    def _check(self, engine: Engine) -> None:
        if self.monitor is None:  # every step of a trial: the check inline (math.isfinite takes the float)
            if math.isfinite(engine.state.output):  # type: ignore[arg-type]  # State.output: int | None
                return
        elif not self.diverged(output_loss(engine)):
            return
        self.diverged_at = engine.state.iteration
        engine.terminate()


class CurveRecorder:
    """Lists of floats under the names in ``KEYS``, one value per key per measurement."""

    KEYS: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.records: dict[str, list[float]] = {k: [] for k in self.KEYS}

    def append(self, **values: float) -> None:
        """Append one value to each named list."""
        for k, v in values.items():
            self.records[k].append(float(v))

    def arrays(self) -> dict[str, np.ndarray]:
        """The lists as float64 arrays, by key."""
        return {k: np.asarray(v, dtype=np.float64) for k, v in self.records.items()}


def report_steps(engine: Engine, total: int) -> None:
    """Tell the driver, while ``engine`` runs, how many of its ``total`` iterations are done
    (:func:`~ignite_seg.runtime.workers.report_progress`: at most every few seconds); safe to call twice.
    Outside a task of the default pool (another executor, the caller's own process) nothing is attached:
    every step would pay for a report that goes nowhere."""
    if reports_progress() and not engine.has_event_handler(_report, Events.ITERATION_COMPLETED):
        engine.add_event_handler(Events.ITERATION_COMPLETED, _report, total)


#: Steps between two looks at the clock of :func:`_report` (a report goes out at most every
#: ``PROGRESS_EVERY_S`` seconds; a step of a small model takes well under a millisecond).
REPORT_EVERY_STEPS = 8


def _report(engine: Engine, total: int) -> None:
    done = engine.state.iteration
    if done % REPORT_EVERY_STEPS == 0 or done == total:
        report_progress(done, total)
