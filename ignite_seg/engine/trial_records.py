"""The records of one trial: what a worker is sent (:class:`TrialTask`) and what it returns (:class:`TrialOutcome`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..config.specs import LoaderSpec
from ..storage.records import TrialResult
from ..storage.result_keys import BestRecord, Mode, StopRecord
from .checkpoints import CheckpointPlan, CheckpointReport
from .scoring import AccuracyStyle

__all__ = ["TrialStatus", "TrialSetup", "TrialTask", "TrialOutcome"]

TrialStatus = Literal["completed", "diverged", "failed"]


@dataclass(frozen=True)
class TrialSetup:
    """What every trial of a run shares: the loaders, how the trial is measured and what it keeps.

    The validated call holds one (:attr:`ignite_seg.run_config.RunConfig.setup`); each
    :class:`TrialTask` carries it to its worker unchanged.
    """

    model: LoaderSpec
    dataset: LoaderSpec
    loss: LoaderSpec
    accuracy_style: AccuracyStyle
    device: str = "auto"
    snapshots_per_epoch: int = 10
    #: custom ignite ``Metric``s by name, built in the worker
    metrics: Mapping[str, LoaderSpec] = field(default_factory=dict)
    #: keep the weights of the snapshot where this metric (``loss``, ``perf`` or a custom one) is best
    best_metric: str | None = None
    best_mode: Mode | None = None
    best_parts: tuple[str, ...] = ("val",)  #: the parts (``val``, ``val_<name>``) whose mean of best_metric is best
    val_only_metrics: tuple[str, ...] = ()  #: custom metrics measured on the validation sets only (NaN on train)
    #: user handlers: specs that build ``attach(trainer, context)``, attached after ours
    handlers: tuple[LoaderSpec, ...] = ()
    #: processes training each trial together (:mod:`~ignite_seg.engine.distributed` when > 1)
    processes: int = 1
    #: seconds a collective may wait for a lost process of the trial's group before the trial fails
    collective_timeout: float = 300.0

    @property
    def specs(self) -> dict[str, LoaderSpec]:
        """The three loaders by name (``model``, ``dataset``, ``loss``), as run.json records them."""
        return {"model": self.model, "dataset": self.dataset, "loss": self.loss}


@dataclass(frozen=True)
class TrialTask:
    """Everything a worker needs to run one trial (picklable, sent to the worker): the run's
    :class:`TrialSetup` and what is this trial's own."""

    trial_id: int
    setup: TrialSetup
    hparams: FixedHyperparameters
    seed: int
    record_hidden: bool = False
    threads: int | None = None
    #: mid-trial checkpoints (:mod:`~ignite_seg.engine.checkpoints`); ``None``: none written or read
    checkpoints: CheckpointPlan | None = None


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
    #: the raw weights when ``model`` holds their EMA (``ema_decay``), else empty
    model_raw: bytes = b""
    error: str | None = None
    diverged_iteration: int | None = None
    peak_rss_mib: float | None = None
    #: the validation sets' names, the primary one first (recorded as ``*_val``, the others ``*_val_<name>``)
    val_names: tuple[str, ...] = ()
    #: the custom metrics' names (recorded as ``metric_<name>_<part>``)
    metric_names: tuple[str, ...] = ()
    #: the best snapshot's weights and where they were taken (``best_metric``), else empty / ``None``
    model_best: bytes = b""
    best: BestRecord | None = None
    #: the fractional epoch a user handler stopped the trial at; ``None`` when it ran to the end
    stopped_epoch: float | None = None
    #: the user handlers' files (``context.output_dir``) by relative path, for ``trials/<i>/``
    files: dict[str, bytes] = field(default_factory=dict)
    #: what the mid-trial checkpoints did (resumed from an epoch, off and why, a file refused)
    checkpoints: CheckpointReport = field(default_factory=CheckpointReport)
    #: how many processes trained the trial, and the device of each (rank order)
    processes: int = 1
    devices: tuple[str, ...] = ()

    def result(self) -> TrialResult:
        """The trial's ``result.json`` record (the bytes and arrays are files of their own)."""
        return TrialResult(
            trial_id=self.trial_id, status=self.status, seconds=self.seconds, started_at=self.started_at, pid=self.pid,
            metrics=dict(self.metrics), peak_rss_mib=None if self.peak_rss_mib is None else round(self.peak_rss_mib, 1),
            diverged_iteration=self.diverged_iteration, best=self.best,
            stop=StopRecord(self.stopped_epoch) if self.status == "completed" else None,
            error=self.error.strip().splitlines()[-1][:500] if self.error else None, checkpoints=self.checkpoints,
            processes=self.processes if self.devices else None, devices=tuple(self.devices),
        )
