"""The records of one trial: what a worker is sent (:class:`TrialTask`) and what it returns (:class:`TrialOutcome`)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, Mapping

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..config.specs import LoaderSpec
from ..storage.records import TrialResult
from ..storage.result_keys import Mode, StopRecord
from .checkpoints import CheckpointPlan
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
    """What a worker returns for one trial: its ``result.json`` record (:attr:`result`, built and
    replaced as the trial runs) and what is not in that file: the weights' bytes, the arrays, the user
    handlers' files, the whole error text and the names the arrays are recorded under.

    Adding a field to ``result.json`` is adding it to :class:`~ignite_seg.storage.records.TrialResult`
    and setting it where the worker learns its value; nothing here repeats the record's fields.
    """

    result: TrialResult
    #: the whole error (``error.txt``: a traceback); ``result.error`` is its last line
    error_text: str | None = None
    throughtime: dict[str, np.ndarray] = field(default_factory=dict)
    hidden: dict[str, np.ndarray] = field(default_factory=dict)
    model_init: bytes = b""
    model: bytes = b""
    #: the raw weights when ``model`` holds their EMA (``ema_decay``), else empty
    model_raw: bytes = b""
    #: the best snapshot's weights (``best_metric``; where they were taken: ``result.best``), else empty
    model_best: bytes = b""
    #: the validation sets' names, the primary one first (recorded as ``*_val``, the others ``*_val_<name>``)
    val_names: tuple[str, ...] = ()
    #: the custom metrics' names (recorded as ``metric_<name>_<part>``)
    metric_names: tuple[str, ...] = ()
    #: the user handlers' files (``context.output_dir``) by relative path, for ``trials/<i>/``
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def trial_id(self) -> int:
        return self.result.trial_id

    @property
    def status(self) -> str:
        """completed, diverged or failed (:data:`TrialStatus`)."""
        return self.result.status

    def end(self, status: TrialStatus, error: str | None = None, *, stopped_epoch: float | None = None) -> None:
        """Record how the trial ended: its status, the whole error (``error.txt``) and its last line, cut
        to 500 characters (``result.json``); a completed trial's stop (``stopped_epoch``: where a user
        handler stopped it, ``None``: it ran to the end)."""
        self.error_text = error
        self.result = replace(self.result, status=status, error=error.strip().splitlines()[-1][:500] if error else None,
                              stop=StopRecord(stopped_epoch) if status == "completed" else None)
