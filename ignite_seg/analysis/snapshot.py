"""A run folder read once: :class:`Snapshot` is what every extractor (``*_of``) is given.

Each file is read at most once per snapshot, on first use; a build task (one product, or one scene
of the video) makes one snapshot and hands it to every extractor it calls. There is no cache across
tasks: a snapshot lives as long as its task, so a file rewritten since is read afresh by the next.
"""
from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..storage.records import RunRecord, TrialResult
from ..storage.result_keys import ResultKeys
from ..storage.run_folder import RunFolder
from ..storage.schemas import (
    BS_NPZ,
    LR_NPZ,
    MISC_JSON,
    SAMPLED_NPZ,
    BatchSampledFile,
    BatchSweepFile,
    LRSweepFile,
)
from .load import hidden_path, read_json_or_none, read_npz, trial_records
from .outcomes import BestMarks, Outcomes, best_label, best_marks, outcomes_info

__all__ = ["Snapshot"]


class Snapshot:
    """The files of one run folder, each read on first use and kept (``cached_property``)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = str(folder)
        self.rf = RunFolder(folder)

    @cached_property
    def run(self) -> RunRecord:
        """``run.json`` (a :class:`~ignite_seg.exceptions.FolderError` when the folder has none)."""
        return self.rf.read_run()

    @cached_property
    def run_or_none(self) -> RunRecord | None:
        """``run.json``, or ``None`` (a tune-only folder of an older version may have none)."""
        return self.rf.read_run() if self.rf.is_run() else None

    @cached_property
    def keys(self) -> ResultKeys:
        """The run's validation sets and custom metrics (``run.json``; an older folder: ``val`` alone)."""
        return self.run.keys

    @cached_property
    def style(self) -> str:
        return self.run.accuracy_style

    @cached_property
    def final(self) -> FixedHyperparameters | None:
        return self.rf.read_final()

    @cached_property
    def misc(self) -> Any:
        return read_json_or_none(self.rf.hparams / MISC_JSON)

    @cached_property
    def lr_sweep(self) -> LRSweepFile | None:
        return LRSweepFile.read(self.rf.hparams / LR_NPZ)

    @cached_property
    def batch_sweep(self) -> BatchSweepFile | None:
        return BatchSweepFile.read(self.rf.hparams / BS_NPZ)

    @cached_property
    def batch_sampled(self) -> BatchSampledFile | None:
        return BatchSampledFile.read(self.rf.hparams / SAMPLED_NPZ)

    @cached_property
    def results(self) -> dict[str, np.ndarray] | None:
        return read_npz(self.rf.results)

    @cached_property
    def throughtimes(self) -> dict[str, np.ndarray] | None:
        return read_npz(self.rf.throughtimes)

    @cached_property
    def trial_records(self) -> list[TrialResult]:
        """Every finished trial's ``result.json`` (all statuses)."""
        return trial_records(self.rf)

    @cached_property
    def hidden_path(self) -> Path | None:
        return hidden_path(self.rf)

    @cached_property
    def hidden(self) -> dict[str, np.ndarray] | None:
        return read_npz(self.hidden_path) if self.hidden_path is not None else None

    @cached_property
    def outcomes(self) -> Outcomes:
        """The completed trials' best checkpoints and early stops (their ``result.json`` records)."""
        return outcomes_info(self.run, self.trial_records)

    @cached_property
    def best_marks(self) -> BestMarks | None:
        """The trials' best checkpoints as the through-time figures mark them; ``None`` when the run kept none."""
        o = self.outcomes
        return best_marks(o, best_label(o.metric, self.keys, self.style, o.parts))

    def completed_stops(self, tt: Mapping[str, np.ndarray]) -> tuple[tuple[int, float], ...]:
        """The early stops recorded by the trials ``tt`` draws (the summary's count, one source for both)."""
        drawn = {int(t) for t in np.asarray(tt.get("trial_ids", ()))}
        return tuple((tid, epoch) for tid, epoch in self.outcomes.stops if tid in drawn)

    @cached_property
    def counts(self) -> dict[str, int]:
        """Finished trials by status (``completed``, ``diverged``, ``failed``)."""
        counts = {"completed": 0, "diverged": 0, "failed": 0}
        for rec in self.trial_records:
            counts[rec.status] = counts.get(rec.status, 0) + 1
        return counts
