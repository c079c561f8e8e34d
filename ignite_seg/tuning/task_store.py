"""The tune's finished tasks, kept in ``hparams/tasks/`` so that a tune killed half way resumes.

Every sweep repeat and candidate run is a deterministic function of its task record (seeds, batch
size, learning rates, the loaders' fingerprints, the held-out slice). :class:`TaskStore` keeps each
finished result under a digest of that record; a later tune of the same folder that builds an
identical task takes the kept result instead of running it again, so a tune killed after its LR range
test redoes only what had not finished. A changed setting, seed or loader changes the digest (the
task runs again). Failed tasks are not kept. Results are read without pickle (arrays in ``.npz``,
the rest as JSON): a run folder from elsewhere cannot run code through them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..config.specs import LoaderSpec
from ..engine.guard_run import GuardResult
from ..engine.length_run import LengthResult
from ..engine.sweeps import BatchRunResult, LRSweepResult
from ..storage.atomic import write_npz
from ..storage.contained import mkdir_inside

__all__ = ["TASKS_DIR", "TaskStore", "task_digest"]

#: The store's folder inside ``hparams/``.
TASKS_DIR = "tasks"

#: The result types a store reads back, by name (nothing else is constructed from a file).
_TYPES: dict[str, type] = {"LRSweepResult": LRSweepResult, "BatchRunResult": BatchRunResult,
                           "GuardResult": GuardResult, "LengthResult": LengthResult}


def task_digest(task: Any) -> str:
    """sha256 of a task record's content: loader specs by their fingerprint, the rest by ``repr``."""
    digest = hashlib.sha256(type(task).__name__.encode())

    def feed(record: Any) -> None:
        for f in dataclasses.fields(record):
            if f.name == "key":
                continue
            value = getattr(record, f.name)
            if isinstance(value, LoaderSpec):
                text = value.fingerprint()
            elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                feed(value)
                continue
            else:
                text = repr(value)
            digest.update(f"{f.name}={text};".encode())

    feed(task)
    return digest.hexdigest()[:32]


class TaskStore:
    """Finished task results of one tune, one ``.npz`` per task in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _path(self, task: Any) -> Path:
        return self.folder / f"{task_digest(task)}.npz"

    def load(self, task: Any) -> Any | None:
        """The kept result of an identical task (its ``key`` set to ``task.key``), or ``None``."""
        path = self._path(task)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                arrays = {k[len("arrays/"):]: z[k] for k in z.files if k.startswith("arrays/")}
            cls = _TYPES[meta.pop("type")]
        except (OSError, ValueError, KeyError):  # a torn or foreign file: run the task again
            return None
        if "arrays" in {f.name for f in dataclasses.fields(cls)}:
            meta["arrays"] = arrays
        return cls(key=task.key, **meta)

    def save(self, task: Any, result: Any) -> None:
        """Keep ``result`` of ``task`` (not a failed one: that runs again on resume)."""
        if getattr(result, "status", "failed") == "failed" or type(result).__name__ not in _TYPES:
            return
        mkdir_inside(self.folder)
        meta = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name not in ("key", "arrays")}
        meta["type"] = type(result).__name__
        arrays = {f"arrays/{k}": np.asarray(v) for k, v in (getattr(result, "arrays", None) or {}).items()}
        write_npz(self._path(task), meta=np.array(json.dumps(meta)), **arrays)
