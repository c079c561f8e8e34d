"""User handlers: ``train(..., handlers=[spec, ...])``, attached in the worker after ignite_seg's own.

Each spec (a loader spec, like ``metrics=``) builds a callable ``attach(trainer, context)``; it is
called once per trial with the trial's ignite ``Engine`` and a :class:`HandlerContext`.

``context.evaluator`` is an ignite ``Engine`` that runs (and "completes") after every through-time
snapshot, its ``state.metrics`` holding that snapshot's values under the keys of
``throughtime.npz`` (``epochs``, ``losses_val``, ``perfs_train``, ``metric_<m>_val_<set>``, ...).
It measures nothing itself: the values are those the snapshot just recorded, so attaching
ignite's ``EarlyStopping`` to its ``Events.COMPLETED`` costs no extra pass.

``context.checkpoint(name, obj)`` puts the state of a handler's object (one with ``state_dict`` and
``load_state_dict``, such as ignite's ``EarlyStopping``) into the trial's mid-trial checkpoints
(:mod:`~ignite_seg.engine.checkpoints`), so that a resumed trial's handlers go on from where the
uninterrupted ones were.

``context.output_dir`` is a temporary folder of the worker; after the trial, its files come back
as bytes (:func:`collect_output`) and the caller writes them into ``trials/<i>/``, so remote
executors need no shared filesystem. Names of ignite_seg's own files are refused, and the total
is capped at :data:`MAX_OUTPUT_BYTES`.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from ignite.engine import Engine

from ..config.specs import LoaderSpec
from ..exceptions import ConfigError, ConfigTypeError
from ..storage.result_keys import TRIAL_FILES
from .recorders import SnapshotEvents, ThroughTimeRecorder

__all__ = ["HandlerContext", "SnapshotEvaluator", "attach_user_handlers", "collect_output", "RESERVED_NAMES",
           "MAX_OUTPUT_BYTES"]

#: Files of a trial folder that ignite_seg writes itself: a handler's output may not use these names.
RESERVED_NAMES = TRIAL_FILES
#: The most a trial's ``output_dir`` may hold (all files together).
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class HandlerContext:
    """What a user handler's ``attach(trainer, context)`` gets besides the trainer."""

    #: the model being trained (the raw weights)
    model: torch.nn.Module
    #: the model evaluated and saved: the EMA copy with ``ema_decay``, else ``model`` itself
    eval_model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    #: completes after every through-time snapshot, ``state.metrics`` = the snapshot's values
    evaluator: Engine
    trial_id: int
    #: a per-trial folder whose files end up in ``trials/<trial_id>/``
    output_dir: Path
    #: the handler being attached, as ``handlers[k]=<spec>`` (named in errors)
    handler: str = ""
    #: the objects registered with :meth:`checkpoint` by name, shared by every handler of the trial
    stateful: dict[str, Any] = field(default_factory=dict, repr=False)

    def checkpoint(self, name: str, obj: Any) -> None:
        """Keep ``obj``'s state in the trial's mid-trial checkpoints under ``name``.

        ``obj.state_dict()`` is saved with every checkpoint (after every handler of the epoch's
        end has run) and ``obj.load_state_dict(...)`` restores it when the trial resumes, before
        the trainer runs. Its values must be what ``torch.load(weights_only=True)`` reads: tensors,
        numbers, strings, ``None``, and lists, tuples and dicts of them. Registering the same
        object under the same name again does nothing (an ``attach`` may run twice).

        Example:
            >>> from ignite.engine import Events
            >>> from ignite.handlers import EarlyStopping
            >>> def attach(trainer, context):
            ...     stop = EarlyStopping(5, lambda ev: -ev.state.metrics["losses_val"], trainer)
            ...     context.evaluator.add_event_handler(Events.COMPLETED, stop)
            ...     context.checkpoint("early_stopping", stop)

        Raises:
            ConfigTypeError: ``name`` is not a string, or ``obj`` has no ``state_dict`` and
                ``load_state_dict`` methods.
            ConfigError: ``name`` is not letters, digits, ``_``, ``.`` and ``-``, or another
                object has it already.
        """
        where = f"{self.handler or 'a handler'}: context.checkpoint({name!r}, {type(obj).__name__})"
        if not isinstance(name, str):
            raise ConfigTypeError(f"{where}: the name must be a str, got {type(name).__name__}")
        if not _NAME.match(name):
            raise ConfigError(f"{where}: the name must be letters, digits, '_', '.' and '-'")
        if name in self.stateful:
            if self.stateful[name] is obj:
                return
            raise ConfigError(f"{where}: another object ({type(self.stateful[name]).__name__}) is registered "
                              "under this name already; give each object its own name")
        if not all(callable(getattr(obj, m, None)) for m in ("state_dict", "load_state_dict")):
            raise ConfigTypeError(f"{where}: {type(obj).__name__} has no state_dict() and load_state_dict() "
                                  "methods; register an object that has them (as ignite's EarlyStopping does), "
                                  "or one that gets and sets your handler's state through them")
        self.stateful[name] = obj


class SnapshotEvaluator:
    """An ignite ``Engine`` run once per through-time snapshot of ``recorder``: one iteration that
    sets ``state.metrics`` to the snapshot's values, then ``Events.COMPLETED``."""

    def __init__(self, recorder: ThroughTimeRecorder) -> None:
        self.recorder = recorder
        self.engine = Engine(self._step)

    def _step(self, engine: Engine, _item: Any) -> None:
        engine.state.metrics.update(self.recorder.latest())

    def attach(self, trainer: Engine) -> Engine:
        """Run the evaluator after each snapshot on ``trainer``; return it. Safe to call twice."""
        self.recorder.attach(trainer)
        if not trainer.has_event_handler(self._run, SnapshotEvents.SNAPSHOT_COMPLETED):
            trainer.add_event_handler(SnapshotEvents.SNAPSHOT_COMPLETED, self._run)
        return self.engine

    def _run(self, _trainer: Engine) -> None:
        self.engine.run([0], max_epochs=1)


def attach_user_handlers(specs: Sequence[LoaderSpec], trainer: Engine, context: HandlerContext) -> dict[str, Any]:
    """Build each spec's ``attach`` callable and call it with ``(trainer, context)``, in order;
    return the objects they registered with :meth:`HandlerContext.checkpoint`, by name."""
    for k, spec in enumerate(specs):
        attach = spec.build()
        if not callable(attach):
            raise TypeError(f"handlers[{k}]={spec.describe(120)} built {attach!r}, not a callable "
                            "attach(trainer, context); a handler spec returns the function to call")
        attach(trainer, dataclasses.replace(context, handler=f"handlers[{k}]={spec.describe(120)}"))
    return context.stateful


def collect_output(folder: Path, limit: int = MAX_OUTPUT_BYTES) -> dict[str, bytes]:
    """The files under ``folder`` by relative path (``/``-separated), read into memory.

    Raises:
        ValueError: a file would replace one of ignite_seg's (:data:`RESERVED_NAMES`), or the files
            hold more than ``limit`` bytes.
    """
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    names = {p.relative_to(folder).as_posix(): p for p in paths}
    clash = sorted(n for n in names if n in RESERVED_NAMES)
    if clash:
        raise ValueError(f"handlers wrote {clash} into context.output_dir; those names are ignite_seg's own "
                         f"({sorted(RESERVED_NAMES)}): rename the file(s)")
    total = sum(os.path.getsize(p) for p in paths)
    if total > limit:
        raise ValueError(f"handlers wrote {total} bytes into context.output_dir, more than the {limit} bytes a "
                         f"trial may return ({len(paths)} files, the largest {max(paths, key=os.path.getsize).name}); "
                         "write less, or write large files elsewhere yourself")
    return {name: p.read_bytes() for name, p in names.items()}
