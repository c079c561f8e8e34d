"""The records of ``run.json`` and ``trials/<i>/result.json``: one typed record per file, used by the
writer and by every reader (:meth:`~ignite_seg.storage.run_folder.RunFolder.read_run`,
:meth:`~ignite_seg.storage.run_folder.RunFolder.read_result`).

=======================  ==============================================================
file                     record
=======================  ==============================================================
``run.json``             :class:`RunRecord` (format :data:`RUN_FORMAT`)
``trials/<i>/result.json``  :class:`TrialResult` (format :data:`RESULT_FORMAT`): the final metrics under ``metrics``;
                         ``best`` (:class:`BestRecord`), ``stop`` (:class:`StopRecord`), ``checkpoints``
                         (:class:`CheckpointReport`) nested
=======================  ==============================================================

Each record has a ``format`` field. Folders written before the records (``run.json`` format 1 or
none; a flat ``result.json`` with the final metrics beside the bookkeeping keys, no ``format``) read
as today's records: a field the file lacks takes its default here, once, and a flat result is
converted by :func:`_from_flat` (its keys that are not bookkeeping are its metrics). Adding a field
to a file is adding a field to its record (and, for ``result.json``, setting it in the worker where
its value is known: a worker's ``TrialOutcome`` holds the record itself, as ``outcome.result``).

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

__all__ = ["RunRecord", "TrialResult", "CheckpointReport", "RunState", "RUN_STATES", "RUN_FORMAT", "RESULT_FORMAT",
           "state"]

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
        fields = {f.name: f for f in dataclasses.fields(cls)}
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


@dataclass(frozen=True, repr=False)
class CheckpointReport(JsonRecord):
    """What a trial's mid-trial checkpoints did (``result.json``'s ``checkpoints``; each ``None``
    when there is nothing to say)."""

    #: the epoch the trial resumed from, ``None`` when it started from epoch 0
    resumed_from_epoch: int | None = None
    #: why no checkpoint was written or read (e.g. the worker does not see the run folder)
    off: str | None = None
    #: why an existing checkpoint was not loaded (the trial started from epoch 0)
    refused: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.to_dict().items() if v is not None}


@dataclass(frozen=True, repr=False, kw_only=True)
class TrialResult(_FileRecord):
    """``trials/<i>/result.json``: one finished trial (completed, diverged or failed), written last
    of its files. ``metrics`` holds its final values by their keys (:class:`ResultKeys`:
    ``loss_<split>``, ``perf_<split>``, ``metric_<m>_<split>``); ``best``, ``stop`` and ``checkpoints``
    are records of their own; the rest is bookkeeping. A field that says nothing (``None``, empty)
    is left out of the file."""

    format: int = RESULT_FORMAT
    trial_id: int
    status: str
    seconds: float | None = None
    started_at: float | None = None
    pid: int | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    peak_rss_mib: float | None = None
    diverged_iteration: int | None = None
    #: where the best checkpoint (``model_best.pt``) was taken; ``None`` without one
    best: BestRecord | None = None
    #: a completed trial: where a user handler stopped it (``epoch`` ``None``: it ran to the end);
    #: ``None`` where the record says nothing (not completed)
    stop: StopRecord | None = None
    #: the last line of the error (the whole traceback is ``error.txt``)
    error: str | None = None
    checkpoints: CheckpointReport = field(default_factory=CheckpointReport)
    #: the processes that trained it, and the device of each
    processes: int | None = None
    devices: tuple[str, ...] = ()
    #: the loss of the best constant output on the fixed training subset its snapshots score, measured before it
    #: trained (:func:`~ignite_seg.engine.constant_output.constant_output_loss`; None: not measurable, older folders)
    constant_loss_train: float | None = None

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    def metric(self, key: str) -> float:
        """The final value of ``key`` (NaN when absent or not finite)."""
        value = self.metrics.get(key)
        return float("nan") if value is None else float(value)

    def to_json(self) -> dict[str, Any]:
        """The file's content: the fields that say something, the records nested."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update(best=None if self.best is None else self.best.to_json(),
                    stop=None if self.stop is None else self.stop.to_json(),
                    checkpoints=self.checkpoints.to_json() or None, devices=list(self.devices))
        return {k: v for k, v in data.items() if v is not None and v != []}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, trial_id: int) -> TrialResult:
        """Today's record, or a flat one of an older folder (:func:`_from_flat`); ``trial_id`` is the
        trial folder's, for a record without one."""
        fmt = data.get("format")
        if fmt is None:
            return _from_flat(data, trial_id)
        if not isinstance(fmt, int) or fmt > RESULT_FORMAT:
            raise ValueError(f"result.json format {fmt!r} is newer than this ignite_seg reads ({RESULT_FORMAT})")
        best, stop = data.get("best"), data.get("stop")
        return cls._from_fields({"trial_id": trial_id, **data}, best=None if best is None else BestRecord.from_json(best),
                                stop=None if stop is None else StopRecord.from_json(stop),
                                checkpoints=CheckpointReport.from_dict(data.get("checkpoints") or {}))

    @classmethod
    def coerce(cls, value: TrialResult | Mapping[str, Any]) -> TrialResult:
        """A record, from itself or a mapping of the file's keys (with its ``trial_id``)."""
        if isinstance(value, TrialResult):
            return value
        return cls.from_json(value, trial_id=int(value["trial_id"]))


#: The bookkeeping keys of a flat ``result.json`` (before format 2) that are not final values.
_FLAT_KEYS = frozenset({
    "trial_id", "status", "seconds", "started_at", "pid", "peak_rss_mib", "diverged_iteration", "error", "processes",
    "devices", "best_metric", "best_mode", "best_epoch", "best_value", "best_over", "stopped_early", "stopped_epoch",
    "resumed_from_epoch", "checkpoints_off", "checkpoint_refused", "constant_loss_train",
})


def _from_flat(data: Mapping[str, Any], trial_id: int) -> TrialResult:
    """A flat ``result.json`` (ignite_seg before format 2): the final values beside the bookkeeping
    keys, the best checkpoint as ``best_*``, the stop as ``stopped_*``, the checkpoints' facts at the top."""
    best = None
    if "best_metric" in data:
        best = BestRecord.from_json({"metric": data["best_metric"], "mode": data["best_mode"],
                                     "epoch": data["best_epoch"], "value": data.get("best_value"),
                                     "parts": data.get("best_over", ())})
    stop = None
    if "stopped_early" in data:
        stop = StopRecord(float(data["stopped_epoch"]) if data["stopped_early"] and data.get("stopped_epoch") is not None
                          else None)
    checkpoints = CheckpointReport(data.get("resumed_from_epoch"), data.get("checkpoints_off"),
                                   data.get("checkpoint_refused"))
    return TrialResult._from_fields({"trial_id": trial_id, **data}, metrics={k: v for k, v in data.items()
                                                                            if k not in _FLAT_KEYS},
                                    best=best, stop=stop, checkpoints=checkpoints)
