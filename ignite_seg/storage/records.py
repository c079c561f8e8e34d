"""The records of ``run.json`` and ``trials/<i>/result.json``: one typed record per file, used by the
writer and by every reader (:meth:`~ignite_seg.storage.run_folder.RunFolder.read_run`,
:meth:`~ignite_seg.storage.run_folder.RunFolder.read_result`).

=======================  ==============================================================
file                     record
=======================  ==============================================================
``run.json``             :class:`RunRecord` (format :data:`RUN_FORMAT`)
``trials/<i>/result.json``  :class:`TrialResult` (format :data:`RESULT_FORMAT`): the final metrics under ``metrics``
=======================  ==============================================================

Each record has a ``format`` field. Folders written before the records (``run.json`` format 1 or
none; a flat ``result.json`` with the final metrics beside the bookkeeping keys, no ``format``) read
as today's records: a field the file lacks takes its default here, once, and a flat result's keys
that are no field of :class:`TrialResult` are its metrics. Adding a field to a file is adding a
field to its record.

Example:
    >>> r = TrialResult(trial_id=0, status="completed", metrics={"loss_val": 0.5})
    >>> TrialResult.from_json(r.to_json(), trial_id=0) == r
    True
    >>> TrialResult.from_json({"status": "completed", "loss_val": 0.5}, trial_id=0).metrics  # a flat (older) file
    {'loss_val': 0.5}
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, TypeVar, get_args

from ..config.records import JsonRecord
from .result_keys import BestRecord, ResultKeys, StopRecord

__all__ = ["RunRecord", "TrialResult", "RunState", "RUN_STATES", "RUN_FORMAT", "RESULT_FORMAT", "state"]

#: ``run.json``'s format: 2 is :class:`RunRecord`; 1 (and none) the dict of ignite_seg before it, same keys.
RUN_FORMAT = 2
#: ``result.json``'s format: 2 nests the final metrics under ``metrics``; none: flat (before the record).
RESULT_FORMAT = 2

#: ``run.json``'s ``state``: ``running`` (tuning or trials under way, or interrupted), ``collated``
#: (trials collated, the analysis not done), ``complete`` (the call's work is all written).
#: ``failed``: the run stopped on an error of its own (a tune that found no range), recorded as ``error``
RunState = Literal["running", "collated", "complete", "failed"]
RUN_STATES: tuple[str, ...] = get_args(RunState)

F = TypeVar("F", bound="_FileRecord")


def state(value: RunState) -> RunState:
    """A ``run.json`` state, checked against :data:`RunState` (a typo fails here, not in a reader)."""
    if value not in RUN_STATES:
        raise ValueError(f"not a run state: {value!r}; one of {RUN_STATES}")
    return value


class _FileRecord(JsonRecord):
    """A file's record: JSON lists read back as the tuples the record declares."""

    @classmethod
    def _from_fields(cls: type[F], data: Mapping[str, Any], **values: Any) -> F:
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        out = {k: v for k, v in data.items() if k in fields}
        for name, f in fields.items():
            if isinstance(out.get(name), list) and "tuple[" in str(f.type):
                out[name] = tuple(out[name])
        return cls(**{**out, **values})


@dataclass(frozen=True, repr=False, kw_only=True)
class RunRecord(_FileRecord):
    """``run.json``: how the run was called (versions, loaders, settings, seed), its names of
    validation sets and metrics, its plan and its state. Written by the calling process alone."""

    format: int = RUN_FORMAT
    versions: dict[str, str] = field(default_factory=dict)
    created: str | None = None
    #: tells a worker that the folder it sees is this run's (mid-trial checkpoints)
    run_id: str | None = None
    #: the loaders by name (``model``, ``dataset``, ``loss``): each a ``LoaderSpec.to_json()`` record
    loaders: dict[str, dict[str, Any]]
    accuracy_style: str = "classification"
    #: ``kind`` (``fixed`` or ``tuned``) and the settings' fields
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    analysis: str = "images"
    allow_later_analysis_up_to: str = "video"
    seed: int | None = None
    device: str = "auto"
    #: ``None`` in a folder that did not record it (the call's value is kept)
    snapshots_per_epoch: int | None = None
    checkpoint_every: int | None = None
    trial_processes: int = 1
    argv: tuple[str, ...] = ()
    val_names: tuple[str, ...] = ("val",)
    metric_names: tuple[str, ...] = ()
    metric_modes: dict[str, str] = field(default_factory=dict)
    best_metric: str | None = None
    best_mode: str | None = None
    #: ``primary``, ``mean`` or the validation sets' names
    best_over: str | tuple[str, ...] = "primary"
    val_only_metrics: tuple[str, ...] = ()
    handlers: tuple[str, ...] = ()
    #: what a recovery (``trials=0``) of a call killed before its plan adds: ``trials``, ``trials_strict``
    requested_trials: dict[str, Any] | None = None
    state: RunState = "running"
    #: the training set's size (the LR figure's steps); ``None`` in older runs
    n_train: int | None = None
    #: the trial ids of the call; empty before the plan is made
    planned_trials: tuple[int, ...] = ()
    #: the failure of a run in state ``failed``: ``stage``, ``type``, ``message``
    error: dict[str, str] | None = None

    def __post_init__(self) -> None:
        state(self.state)

    @property
    def keys(self) -> ResultKeys:
        """The run's validation sets and custom metrics (an older run without the names: ``val`` alone)."""
        return ResultKeys.from_record({"val_names": self.val_names, "metric_names": self.metric_names,
                                       "metric_modes": self.metric_modes})

    @property
    def hp_kind(self) -> str:
        """``fixed`` (a recipe given) or ``tuned``."""
        return str(self.hyperparameters.get("kind", "tuned"))

    def to_json(self) -> dict[str, Any]:
        return self.to_dict()

    @classmethod
    def coerce(cls, value: RunRecord | Mapping[str, Any] | None) -> RunRecord:
        """A record, from itself or a mapping of the file's keys (``None``, ``{}``: every default)."""
        if isinstance(value, RunRecord):
            return value
        return cls.from_json({"loaders": {}, **(value or {})})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """Today's record, or an older one converted (format 1 or none: the same keys, a missing one
        its default here)."""
        fmt = data.get("format", 1)
        if not isinstance(fmt, int) or fmt > RUN_FORMAT:
            raise ValueError(f"run.json format {fmt!r} is newer than this ignite_seg reads ({RUN_FORMAT}); upgrade it")
        return cls._from_fields(data, format=RUN_FORMAT)


@dataclass(frozen=True, repr=False, kw_only=True)
class TrialResult(_FileRecord):
    """``trials/<i>/result.json``: one finished trial (completed, diverged or failed), written last
    of its files. ``metrics`` holds its final values by their keys (:class:`ResultKeys`:
    ``loss_<split>``, ``perf_<split>``, ``metric_<m>_<split>``); the rest is bookkeeping."""

    format: int = RESULT_FORMAT
    trial_id: int
    status: str
    seconds: float | None = None
    started_at: float | None = None
    pid: int | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    peak_rss_mib: float | None = None
    diverged_iteration: int | None = None
    #: where the best checkpoint was taken (:class:`BestRecord`), ``None`` without one
    best_metric: str | None = None
    best_mode: str | None = None
    best_epoch: float | None = None
    best_value: float | None = None
    best_over: tuple[str, ...] = ()
    #: a completed trial: whether a user handler stopped it, and at which epoch (:class:`StopRecord`)
    stopped_early: bool | None = None
    stopped_epoch: float | None = None
    #: the last line of the error (the whole traceback is ``error.txt``)
    error: str | None = None
    #: what the mid-trial checkpoints did: resumed from an epoch, off and why, a file refused
    resumed_from_epoch: int | None = None
    checkpoints_off: str | None = None
    checkpoint_refused: str | None = None
    #: the processes that trained it, and the device of each
    processes: int | None = None
    devices: tuple[str, ...] = ()

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def best(self) -> BestRecord | None:
        """Where the best checkpoint was taken; ``None`` for a trial without one."""
        if self.best_metric is None:
            return None
        nan = float("nan")
        return BestRecord(self.best_metric, "min" if self.best_mode == "min" else "max",
                          nan if self.best_epoch is None else float(self.best_epoch),
                          nan if self.best_value is None else float(self.best_value), self.best_over)

    @property
    def stop(self) -> StopRecord | None:
        """Whether a user handler stopped it; ``None`` where the record says nothing (not completed, older)."""
        if self.stopped_early is None:
            return None
        return StopRecord(float(self.stopped_epoch) if self.stopped_early and self.stopped_epoch is not None else None)

    def metric(self, key: str) -> float:
        """The final value of ``key`` (NaN when absent or not finite)."""
        value = self.metrics.get(key)
        return float("nan") if value is None else float(value)

    def _present(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_dict().items() if v is not None and v != []}

    def to_json(self) -> dict[str, Any]:
        """The file's content: the fields set (``None`` and empty ones left out, as they read back)."""
        data = self._present()
        if self.stopped_early is not None:  # said whenever a completed trial says whether it stopped
            data["stopped_epoch"] = self.stopped_epoch
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, trial_id: int) -> TrialResult:
        """Today's record, or a flat one of an older folder (its keys that are no field: the metrics);
        ``trial_id`` is the trial folder's, for a record without one."""
        fmt = data.get("format")
        if fmt is None:  # flat: the final values beside the bookkeeping keys
            names = {f.name for f in dataclasses.fields(cls)}
            metrics = {k: v for k, v in data.items() if k not in names}
            return cls._from_fields({"trial_id": trial_id, **data}, metrics=metrics, format=RESULT_FORMAT)
        if not isinstance(fmt, int) or fmt > RESULT_FORMAT:
            raise ValueError(f"result.json format {fmt!r} is newer than this ignite_seg reads ({RESULT_FORMAT})")
        return cls._from_fields({"trial_id": trial_id, **data})

    @classmethod
    def coerce(cls, value: TrialResult | Mapping[str, Any]) -> TrialResult:
        """A record, from itself or a mapping of the file's keys (with its ``trial_id``)."""
        if isinstance(value, TrialResult):
            return value
        return cls.from_json(value, trial_id=int(value["trial_id"]))
