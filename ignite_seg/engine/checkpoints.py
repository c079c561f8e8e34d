"""Mid-trial checkpoints: ``trials/<i>/checkpoint.pt``, from which a killed trial resumes bit for bit.

Every ``every`` epochs (at ``Events.EPOCH_COMPLETED``, never after the last epoch) the worker writes,
atomically (:func:`~ignite_seg.storage.atomic.atomic_write_bytes` under ignite's ``Checkpoint``), one
file holding everything the rest of the trial depends on: the model, the optimizer, the LR scheduler,
the EMA model, the AMP gradient scaler (fp16 on CUDA), the best checkpoint so far, the engine's state (epoch, iteration), the through-time and hidden recorders' values so
far, the divergence guard, and the random states (torch, CUDA, numpy, python ``random``, and the
generator of :class:`~ignite_seg.engine.batching.Batches`, which draws every epoch's shuffling and the
DataLoader's worker seeds), and the state of the objects that user handlers registered with
:meth:`~ignite_seg.engine.user_handlers.HandlerContext.checkpoint` (under ``handler:<name>``).
Checkpoints fall at epoch ends, after every other handler of ``EPOCH_COMPLETED`` (the user's
included), so the data order needs no position inside an epoch: the next epoch draws its
permutation, and its DataLoader workers their seeds, from the restored generator.

A trial that finds a checkpoint of its own (same trial, seed, hyperparameters, loaders, handlers and
the names they registered, batches per epoch) loads it and runs the remaining epochs; any other
file (another recipe, another seed, a corrupt or truncated one) is never loaded: the trial starts
from epoch 0 and says why (:attr:`CheckpointReport.refused`).

``every=None`` (automatic) times the first epoch this process runs: when that time x the trial's
epochs exceeds :data:`AUTO_SECONDS`, checkpoints are written every ``max(1, AUTO_SECONDS // epoch
time)`` epochs (about one a minute), else never. Writing a checkpoint changes no random state, so
the results are the same whether or not, and how often, checkpoints were written.

Workers write only into the run folder they can see: :class:`CheckpointPlan` carries the caller's
path of the run folder and the run's id (``run.json``'s ``run_id``); a worker writes (and reads)
checkpoints only when that path holds a ``run.json`` with the same id (:func:`folder_visible`).
Elsewhere (a remote executor without the shared filesystem) the trial runs without checkpoints and
:attr:`CheckpointReport.off` says why.

A trial on several processes (``trial_processes``, :mod:`~ignite_seg.engine.distributed`) keeps one
file too: rank 0 writes it, every rank loads it. The ranks hold the same weights, optimizer, recorders
and engine state; only their random states differ (each draws its own share's dropout, augmentation),
so the file holds every rank's, gathered into rank 0 (a collective: the ranks save and load together),
and the automatic ``every`` is rank 0's decision on every rank.
"""
from __future__ import annotations

import copy
import io
import json
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import ignite.distributed as idist
import numpy as np
import torch
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint

from ..exceptions import CheckpointWriteError, ConfigTypeError, FolderError
from ..storage.atomic import atomic_write_bytes
from ..storage.contained import contained
from ..storage.names import CHECKPOINT_NAME, RESULT_JSON
from ..storage.records import CheckpointReport  # re-exported: defined here before result.json's record
from ..storage.run_folder import RunFolder
from .handlers import CurveRecorder, DivergenceStop
from .recorders import HiddenRecorder, ThroughTimeRecorder

__all__ = [
    "AUTO_SECONDS", "CHECKPOINT_NAME", "CheckpointPlan", "CheckpointReport", "folder_visible",
    "attach_checkpoints", "log_checkpoint_report",
]

logger = logging.getLogger(__name__)

#: ``every=None`` turns checkpoints on for a trial expected to run longer than this, and writes
#: about one per this many seconds.
AUTO_SECONDS = 60.0
#: The layout of the file's ``identity`` entry; a file of another format is refused.
FORMAT = 2
#: The prefix of the entries of user handlers' objects (``HandlerContext.checkpoint``).
HANDLER_PREFIX = "handler:"


@dataclass(frozen=True)
class CheckpointPlan:
    """Where and how often a trial checkpoints (sent to the worker with its task).

    Args:
        every: epochs between checkpoints, or ``None`` for automatic (see the module's docstring).
        run_folder: the run folder, as the calling process sees it.
        run_id: the run's id in ``run.json``; a folder at ``run_folder`` with another id is not this run's.
    """

    every: int | None
    run_folder: str
    run_id: str

    def path(self, trial_id: int) -> Path:
        return RunFolder(self.run_folder).trial(trial_id) / CHECKPOINT_NAME


def folder_visible(plan: CheckpointPlan) -> bool:
    """Whether this process sees the run folder of ``plan`` (its ``run.json`` with the run's id)."""
    try:
        return RunFolder(plan.run_folder).read_run().run_id == plan.run_id
    except (OSError, FolderError):
        return False


def log_checkpoint_report(trial_id: int, report: CheckpointReport) -> None:
    """Log in the caller what a trial's checkpoints did (workers' logs may go nowhere)."""
    if report.resumed_from_epoch is not None:
        logger.info("trial %d resumed from its checkpoint at epoch %d", trial_id, report.resumed_from_epoch)
    if report.refused is not None:
        logger.warning("trial %d restarted from epoch 0: %s", trial_id, report.refused)


class _State:
    """An object with ``state_dict``/``load_state_dict`` from two functions (for ignite's ``Checkpoint``)."""

    def __init__(self, get: Callable[[], Any], put: Callable[[Any], None]) -> None:
        self.state_dict, self.load_state_dict = get, put


def _rng_state(batches: Any) -> _State:
    """The process's random states and the generator of ``batches``."""
    generator: torch.Generator = batches.generator

    def get() -> dict[str, Any]:
        kind, keys, pos, has_gauss, gauss = np.random.get_state()  # type: ignore[misc]
        state = {
            "torch": torch.get_rng_state(), "batches": generator.get_state(), "python": random.getstate(),
            "numpy": (kind, torch.from_numpy(np.asarray(keys).astype(np.int64)), pos, has_gauss, gauss),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def put(state: Mapping[str, Any]) -> None:
        torch.set_rng_state(state["torch"])
        generator.set_state(state["batches"])
        random.setstate(state["python"])
        kind, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    return _State(get, put)


def _per_rank(state: _State) -> _State:
    """Every rank's ``state`` in a trial's group, gathered into rank 0's file; ``state`` itself in one process."""
    if idist.get_world_size() == 1:
        return state

    def get() -> dict[str, Any]:
        return {"ranks": idist.all_gather(state.state_dict())}  # a collective: every rank calls it

    def put(saved: Mapping[str, Any]) -> None:
        ranks = saved["ranks"]
        if len(ranks) != idist.get_world_size():
            raise ValueError(f"it holds the random states of {len(ranks)} processes, not {idist.get_world_size()}")
        state.load_state_dict(ranks[idist.get_rank()])

    return _State(get, put)


def _stateful(name: str, obj: Any) -> Any:
    """``obj`` itself when it has a ``state_dict``, else an adapter for the recorders and the guard."""
    if hasattr(obj, "state_dict"):
        return obj
    if isinstance(obj, CurveRecorder):  # lists of floats by key
        return _State(lambda: {k: list(v) for k, v in obj.records.items()},
                      lambda s: setattr(obj, "records", {k: list(v) for k, v in s.items()}))
    if isinstance(obj, DivergenceStop):
        return _State(lambda: {"diverged_at": obj.diverged_at}, lambda s: setattr(obj, "diverged_at", s["diverged_at"]))
    if isinstance(obj, HiddenRecorder):  # arrays by layer
        def get() -> dict[str, Any]:
            return {"epochs": list(obj.epochs),
                    "values": {k: [torch.from_numpy(a) for a in v] for k, v in obj.values.items()}}

        def put(s: Mapping[str, Any]) -> None:
            obj.epochs = list(s["epochs"])
            obj.values = {k: [t.numpy() for t in v] for k, v in s["values"].items()}

        return _State(get, put)
    raise TypeError(f"checkpoint entry {name!r}: {type(obj).__name__} has no state_dict()")


#: Entries a checkpoint may lack: the hidden recorder runs in one trial of a run, and which one may
#: change when a continuation finds other trials completed.
_OPTIONAL = ("hidden",)


class _TrialCheckpoints:
    """The policy (ignite's ``Checkpoint``: what, when) over the writer (an atomic write, here)."""

    def __init__(self, plan: CheckpointPlan, trial_id: int, objects: Mapping[str, Any], to_save: dict[str, Any],
                 identity: str, finish_epoch: Callable[[], None]) -> None:
        self.plan, self.path, self.identity = plan, plan.path(trial_id), identity
        self.every = plan.every
        self.objects, self.to_save = objects, to_save
        self.saver = Checkpoint({**to_save, "identity": _State(lambda: {"identity": identity}, lambda s: None)},
                                self._write, filename_pattern="{name}.{ext}", n_saved=None,
                                global_step_transform=lambda engine, _event: engine.state.epoch)
        self._t0 = 0.0
        self.finish_epoch = finish_epoch

    def _write(self, checkpoint: Mapping[str, Any], filename: str, metadata: Mapping[str, Any] | None = None) -> None:
        if idist.get_rank() != 0 or not folder_visible(self.plan) or (self.path.parent / RESULT_JSON).exists():
            # not rank 0 of a trial's group; the run folder went away (archived); the trial was recorded
            return  # finished (timed out)
        _check_loadable({k: v for k, v in checkpoint.items() if k.startswith(HANDLER_PREFIX)})
        buf = io.BytesIO()
        torch.save(checkpoint, buf)
        try:
            with contained(self.plan.run_folder):  # no link inside the run folder is followed
                atomic_write_bytes(self.path, buf.getvalue())
        except (OSError, FolderError) as exc:  # the folder's fault, not the trial's: the run stops
            raise CheckpointWriteError(
                f"writing the checkpoint {str(self.path)!r} failed: {exc}. Free space (or fix the folder), then "
                "continue the run with is_continuation=True, trials=0: the trial resumes from its last checkpoint."
            ) from exc

    def attach(self, engine: Engine) -> None:
        if not engine.has_event_handler(self._epoch_completed, Events.EPOCH_COMPLETED):
            engine.add_event_handler(Events.STARTED, self._started)
            engine.add_event_handler(Events.EPOCH_COMPLETED, self._epoch_completed)

    def _started(self, engine: Engine) -> None:
        self._t0 = time.perf_counter()

    def _epoch_completed(self, engine: Engine) -> None:
        epoch, last = engine.state.epoch, engine.state.max_epochs or 0
        if self.every is None:  # automatic: decided once, after this process's first epoch
            seconds = time.perf_counter() - self._t0
            self.every = max(1, int(AUTO_SECONDS // max(seconds, 1e-9))) if seconds * last > AUTO_SECONDS else 0
            if idist.get_world_size() > 1:  # the ranks of a group save together: rank 0's decision
                decided = idist.broadcast(torch.tensor(self.every), src=0)
                self.every = int(decided) if isinstance(decided, torch.Tensor) else self.every
        if self.every and epoch % self.every == 0 and epoch < last and not engine.should_terminate:
            self.finish_epoch()  # the data order's draws of this epoch are all made
            self.saver(engine)

    def load(self, engine: Engine) -> CheckpointReport:
        """Load the trial's checkpoint into the live objects when it is the trial's own."""
        if not self.path.is_file():
            return CheckpointReport()
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
            _check_identity(state, self.identity)
            needed = {k: v for k, v in self.to_save.items() if k in state or k not in _OPTIONAL}
            missing = sorted(set(needed) - set(state))
            if missing:
                raise ValueError(f"it holds no {missing}")
        except Exception as exc:  # a corrupt or foreign file: never loaded
            return self._refused(f"{self.path} is not this trial's checkpoint ({type(exc).__name__}: {exc})")
        before = copy.deepcopy({k: obj.state_dict() for k, obj in needed.items()})
        try:
            Checkpoint.load_objects(needed, state)
        except Exception as exc:
            Checkpoint.load_objects(needed, before)  # leave every object as it was
            return self._refused(f"{self.path} does not fit this trial ({type(exc).__name__}: {exc})")
        for obj in self.objects.values():  # the recorders' measurement at STARTED is in the checkpoint already
            handler = obj.snapshot if isinstance(obj, ThroughTimeRecorder) else \
                obj.record if isinstance(obj, HiddenRecorder) else None
            if handler is not None and engine.has_event_handler(handler, Events.STARTED):
                engine.remove_event_handler(handler, Events.STARTED)
        logger.info("resuming from %s at epoch %d", self.path, engine.state.epoch)
        return CheckpointReport(resumed_from_epoch=engine.state.epoch)

    def _refused(self, why: str) -> CheckpointReport:
        logger.warning("%s; starting the trial from epoch 0", why)
        return CheckpointReport(refused=why)


def _check_loadable(entries: Mapping[str, Any]) -> None:
    """Raise when a user handler's state would make the checkpoint unreadable (``weights_only``)."""
    for key, state in entries.items():
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        try:
            torch.load(buf, weights_only=True)
        except Exception as exc:
            name = key[len(HANDLER_PREFIX):]
            raise ConfigTypeError(
                f"context.checkpoint({name!r}, ...): its state_dict() holds a value that torch.load(weights_only=True) "
                f"cannot read back ({type(exc).__name__}: {str(exc).splitlines()[0]}); return tensors, numbers, "
                "strings, None, and lists, tuples and dicts of them (e.g. float(x) for a numpy scalar)"
            ) from exc


def _check_identity(state: Any, identity: str) -> None:
    if not isinstance(state, dict) or not isinstance(state.get("identity"), dict):
        raise ValueError("no identity entry")
    found = state["identity"].get("identity")
    if found != identity:
        theirs, ours = json.loads(found) if isinstance(found, str) else {}, json.loads(identity)
        differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        raise ValueError(f"written for another trial or recipe: {differ} differ")


def trial_identity(task: Any, iters_per_epoch: int, handler_states: Sequence[str] = ()) -> str:
    """What a checkpoint must match to be loaded: the trial's id, seed, recipe, loaders, custom
    metrics and user handlers (by fingerprint), the names of the handlers' registered objects,
    snapshots and batches per epoch, as JSON."""
    setup = task.setup
    facts = {
        "format": FORMAT, "trial_id": task.trial_id, "seed": task.seed, "hparams": task.hparams.to_dict(),
        "loaders": [spec.fingerprint() for spec in (setup.model, setup.dataset, setup.loss)],
        "metrics": {name: spec.fingerprint() for name, spec in setup.metrics.items()},
        "handlers": [spec.fingerprint() for spec in setup.handlers],
        "handler_states": sorted(handler_states),
        "snapshots_per_epoch": setup.snapshots_per_epoch, "iters_per_epoch": iters_per_epoch,
        "accuracy_style": setup.accuracy_style,
    }
    if setup.processes > 1:  # a group's file holds each rank's random states (absent before groups had files)
        facts["processes"] = setup.processes
    return json.dumps(facts, sort_keys=True, default=str)


def attach_checkpoints(
    task: Any, engine: Engine, objects: Mapping[str, Any], batches: Any, iters_per_epoch: int,
    handler_states: Mapping[str, Any] | None = None,
) -> CheckpointReport:
    """Checkpoint ``objects`` (``None`` values are skipped), the user handlers' registered
    ``handler_states`` and the random states on ``engine`` as ``task.checkpoints`` says; resume from
    the trial's checkpoint when there is one of its own. Call it last, after the user's handlers,
    just before ``engine.run``: its epoch-end write then follows every other handler's. No plan
    attaches nothing."""
    plan: CheckpointPlan | None = task.checkpoints
    if plan is None:
        return CheckpointReport()
    if not folder_visible(plan):
        return CheckpointReport(off=f"the run folder {plan.run_folder} (run {plan.run_id}) is not visible from "
                                    "this worker: no mid-trial checkpoint was written or read")
    objects = {k: v for k, v in objects.items() if v is not None}
    to_save = {k: _stateful(k, v) for k, v in objects.items()}
    to_save["rng"] = _per_rank(_rng_state(batches))
    handler_states = handler_states or {}
    to_save.update({HANDLER_PREFIX + name: obj for name, obj in handler_states.items()})
    identity = trial_identity(task, iters_per_epoch, list(handler_states))
    keeper = _TrialCheckpoints(plan, task.trial_id, objects, to_save, identity, batches.finish_epoch)
    report = keeper.load(engine)
    keeper.attach(engine)
    return report
