"""The best checkpoint: the weights of the through-time snapshot where a named metric was best.

What is measured: at every through-time snapshot (before training and ``snapshots_per_epoch``
times per epoch), the value :class:`~ignite_seg.engine.recorders.ThroughTimeRecorder` has just
recorded for the metric on the primary validation set's fixed subset (the ``*_val`` curve of
``throughtime.npz``) or, with ``parts`` (``train(best_over=...)``), the mean of its values on several
validation sets' subsets (the ``*_val`` and ``*_val_<name>`` curves), measured on the evaluated model
(the EMA weights with ``ema_decay``). It costs no extra pass. The direction is explicit (``mode``), never guessed; on a tie the earlier
snapshot is kept, as ``numpy.argmax`` / ``argmin`` of the curve picks it.

Policy and writing are split as in ignite: the policy is ignite's ``Checkpoint`` (``n_saved=1``,
the score ``+value`` for ``max`` and ``-value`` for ``min``); the writer, :class:`MemorySaver`,
keeps the ``state_dict`` as bytes in memory. The worker writes no file: the bytes travel in the
trial's outcome and the caller writes ``trials/<i>/model_best.pt``.
"""
from __future__ import annotations

import io
import math
from typing import Any, Mapping

import torch
from ignite.engine import Engine
from ignite.handlers import Checkpoint
from ignite.handlers.checkpoint import BaseSaveHandler

from ..exceptions import ConfigError
from ..storage.result_keys import BestRecord, Mode
from .recorders import SnapshotEvents, ThroughTimeRecorder, curve_key, part_names

__all__ = ["MemorySaver", "BestCheckpoint", "attach_best", "best_parts"]


class MemorySaver(BaseSaveHandler):
    """An ignite save handler that keeps the last checkpoint saved in memory (tensors copied to the CPU);
    :attr:`blob` is its ``torch.save`` bytes, serialised once when asked for (a run improves its best
    many times and needs the bytes once)."""

    def __init__(self) -> None:
        self._state: dict[str, Any] | None = None
        self._blob = b""
        self.filename: str | None = None
        self.saves = 0

    def __call__(self, checkpoint: Mapping[str, Any], filename: str, metadata: Mapping[str, Any] | None = None) -> None:
        self._state = {k: _cpu_copy(v) for k, v in checkpoint.items()}
        self._blob, self.filename = b"", filename
        self.saves += 1

    @property
    def blob(self) -> bytes:
        """The kept checkpoint as ``torch.save`` bytes (empty before the first save)."""
        if self._state is not None and not self._blob:
            buf = io.BytesIO()
            torch.save(self._state, buf)
            self._blob = buf.getvalue()
        return self._blob

    @blob.setter
    def blob(self, value: bytes) -> None:
        self._state, self._blob = None, value

    def remove(self, filename: str) -> None:
        if filename == self.filename:
            self.blob, self.filename = b"", None


def _cpu_copy(value: Any) -> Any:
    """A copy on the CPU of a tensor, or of every tensor in a (nested) ``state_dict``."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, Mapping):
        return {k: _cpu_copy(v) for k, v in value.items()}
    return value


class BestCheckpoint:
    """Keeps ``model``'s weights at the snapshot where ``metric`` on the primary validation set is best,
    or its mean over the validation sets ``parts`` (part names: ``val``, ``val_<name>``).

    Example:
        >>> best = BestCheckpoint(eval_model, recorder, "perf", "max")  # doctest: +SKIP
        >>> best.attach(trainer); trainer.run(batches)  # doctest: +SKIP
        >>> best.record().epoch, len(best.saver.blob) > 0  # doctest: +SKIP
        (2.5, True)
    """

    def __init__(self, model: torch.nn.Module, recorder: ThroughTimeRecorder, metric: str, mode: Mode,
                 parts: tuple[str, ...] = ("val",)) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode={mode!r}: pass 'min' or 'max' (the direction is never guessed)")
        if not parts:
            raise ValueError("parts=(): name at least one validation set part ('val', 'val_<name>')")
        self.recorder, self.metric, self.mode, self.parts = recorder, metric, mode, tuple(parts)
        self.keys = tuple(curve_key(metric, part) for part in self.parts)
        for key in self.keys:
            if key not in recorder.records:
                raise ValueError(f"metric={metric!r} on {key!r} is not recorded; known: {sorted(recorder.records)}")
        self.saver = MemorySaver()
        self.checkpoint = Checkpoint({"model": model}, self.saver, filename_prefix="best",
                                     score_function=self._score, score_name=metric, n_saved=1)
        self.epoch: float | None = None
        self.value: float | None = None

    def _score(self, engine: Engine) -> float:
        return self._priority(self._latest())

    def _latest(self) -> float:
        """The last snapshot's value: the metric on the one part, or its mean over the parts."""
        records = self.recorder.records
        if len(self.keys) == 1:
            return records[self.keys[0]][-1]
        return math.fsum(records[key][-1] for key in self.keys) / len(self.keys)

    def _priority(self, value: float) -> float:
        """The checkpoint's score of a recorded value: higher is better whatever the mode."""
        if not math.isfinite(value):
            return -math.inf  # never preferred to a finite value
        return value if self.mode == "max" else -value

    def attach(self, engine: Engine) -> None:
        """Attach after ``recorder`` (whose ``attach`` registers the snapshot event); safe to call twice."""
        self.recorder.attach(engine)
        if not engine.has_event_handler(self._on_snapshot, SnapshotEvents.SNAPSHOT_COMPLETED):
            engine.add_event_handler(SnapshotEvents.SNAPSHOT_COMPLETED, self._on_snapshot)

    def _on_snapshot(self, engine: Engine) -> None:
        # ignite's Checkpoint (n_saved=1) saves when it keeps nothing yet or the score beats the kept one's
        # (strictly); deciding that here first spares its per-call work on the snapshots that do not improve
        if self.value is not None and self._score(engine) <= self._priority(self.value):
            return
        saves = self.saver.saves
        self.checkpoint(engine)
        if self.saver.saves != saves:
            self.epoch, self.value = self.recorder.records["epochs"][-1], self._latest()

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed trial needs to keep the same best (for the mid-trial checkpoint)."""
        return {"checkpoint": self.checkpoint.state_dict(), "blob": self.saver.blob, "filename": self.saver.filename,
                "saves": self.saver.saves, "epoch": self.epoch, "value": self.value}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.checkpoint.load_state_dict(state["checkpoint"])
        self.saver.blob, self.saver.filename, self.saver.saves = state["blob"], state["filename"], state["saves"]
        self.epoch, self.value = state["epoch"], state["value"]

    def record(self) -> BestRecord | None:
        """Where the kept checkpoint was taken; ``None`` before the first snapshot."""
        if self.epoch is None or self.value is None:
            return None
        return BestRecord(self.metric, self.mode, self.epoch, self.value, () if self.parts == ("val",) else self.parts)


def attach_best(
    engine: Engine, model: torch.nn.Module, recorder: ThroughTimeRecorder, metric: str | None, mode: Mode | None,
    parts: tuple[str, ...] = ("val",),
) -> BestCheckpoint | None:
    """A :class:`BestCheckpoint` of ``model`` attached to ``engine``; ``None`` (nothing attached) without ``metric``."""
    if metric is None or mode is None:
        return None
    best = BestCheckpoint(model, recorder, metric, mode, parts)
    best.attach(engine)
    return best


def best_parts(over: str | tuple[str, ...], val_names: tuple[str, ...]) -> tuple[str, ...]:
    """The parts (``val``, ``val_<name>``) whose mean chooses the best snapshot, for ``train(best_over=...)``:
    ``"primary"`` the primary set, ``"mean"`` every validation set, else the sets named (dataset order).

    Example:
        >>> best_parts("mean", ("clean", "noisy")), best_parts(("noisy",), ("clean", "noisy"))
        (('val', 'val_noisy'), ('val_noisy',))
    """
    parts = part_names(val_names)
    if over == "primary":
        return ("val",)
    if over == "mean":
        return tuple(parts.values())
    unknown = [name for name in over if name not in parts]
    if unknown:
        raise ConfigError(f"best_over={list(over)!r} names {unknown}, not validation sets of this dataset; its "
                          f"sets are {list(val_names)} (the keys of Data(val={{...}})). Name some of those, or "
                          f"pass 'mean' for all of them.")
    return tuple(parts[name] for name in val_names if name in over)
