"""Extraction from a run folder: each function reads the files it needs and returns an ``_info``.

These are the only analysis functions that read files; the ``*_info`` functions they call are
pure. Results are cached per process (a worker renders several figures of one folder).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Hashable, Mapping, TypeVar, cast

import numpy as np

from ..config.hyperparameters import FixedHyperparameters
from ..storage.result_keys import ResultKeys
from ..storage.run_folder import RunFolder
from ..storage.schema_base import NpzRecord
from ..storage.schemas import (
    BS_NPZ,
    FINAL_JSON,
    LR_NPZ,
    MISC_JSON,
    SAMPLED_NPZ,
    BatchSampledFile,
    BatchSizeStep,
    BatchSweepFile,
    LRSweepFile,
    MiscFile,
    Rung,
    read_final,
)
from .batch import BatchInfo, batch_info
from .curves import (
    FinalInfo,
    FinalPairsInfo,
    FinalPanelsInfo,
    ThroughTimeInfo,
    final_info,
    final_pairs_info,
    final_panels_info,
    throughtime_info,
)
from .hidden import PCAInfo, pca_info
from .load import hidden_path, read_json_or_none, read_npz, trial_records
from .lr import LRSweepInfo, ScheduleInfo, lr_sweep_info, schedule_info
from .metrics import MetricsInfo, metrics_info
from .outcomes import BestMarks, Outcomes, best_label, best_marks, outcomes_info
from .text import SummaryInfo, TunerFiles, summary_info

__all__ = ["run_of", "keys_of", "lr_of", "batch_of", "schedule_of", "throughtime_of", "metrics_of", "final_of",
           "final_panels_of", "final_pairs_of", "pca_of", "summary_of", "counts_of", "hidden_trial_of",
           "outcomes_of", "best_marks_of"]

R = TypeVar("R", bound=NpzRecord)


def _rf(folder: str) -> RunFolder:
    return RunFolder(folder)


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return -1


def run_of(folder: str) -> dict[str, Any]:
    return _run_cached(folder, _stamp(_rf(folder).run_json))


@functools.lru_cache(maxsize=8)
def _run_cached(folder: str, _stamp: int) -> dict[str, Any]:
    return _rf(folder).read_run()


def keys_of(folder: str) -> ResultKeys:
    """The run's validation sets and custom metrics (``run.json``; an older folder: ``val`` alone)."""
    return ResultKeys.from_record(run_of(folder))


def _npz(path: str) -> dict[str, np.ndarray] | None:
    """The arrays of ``path``, cached while the file is unchanged (keyed by its mtime)."""
    return _npz_cached(path, _stamp(Path(path)))


@functools.lru_cache(maxsize=32)
def _npz_cached(path: str, _stamp: int) -> dict[str, np.ndarray] | None:
    return read_npz(Path(path))


@functools.lru_cache(maxsize=32)
def _record_cached(cls: Hashable, path: str, _stamp: int) -> Any:
    assert isinstance(cls, type) and issubclass(cls, NpzRecord)
    return cls.read(path)


def _hp_npz(folder: str, cls: type[R], name: str) -> R | None:
    """The record of ``hparams/<name>``, cached while the file is unchanged (keyed by its mtime)."""
    p = _rf(folder).hparams / name
    return _record_cached(cast(Hashable, cls), str(p), _stamp(p))  # a class is hashable


def _final(folder: str) -> FixedHyperparameters | None:
    return read_final(_rf(folder).hparams / FINAL_JSON)


def lr_of(folder: str) -> LRSweepInfo | None:
    sweep = _hp_npz(folder, LRSweepFile, LR_NPZ)
    return lr_sweep_info(sweep) if sweep is not None else None


def batch_of(folder: str) -> BatchInfo | None:
    final = _final(folder)
    by, tie = "loss", ""
    misc = read_json_or_none(_rf(folder).hparams / MISC_JSON)
    step = MiscFile.from_json(misc).steps.batch_size if isinstance(misc, dict) else None
    if isinstance(step, BatchSizeStep) and step.rungs:
        last = step.rungs[-1]
        if isinstance(last, Rung):
            by, tie = last.ranked_by or by, last.tie or ""
    return batch_info(_hp_npz(folder, BatchSweepFile, BS_NPZ), _hp_npz(folder, BatchSampledFile, SAMPLED_NPZ),
                      float(final.batch_size) if final is not None else np.nan, by, tie)


def schedule_of(folder: str) -> ScheduleInfo | None:
    final = _final(folder)
    run = read_json_or_none(_rf(folder).run_json)  # a tune-only folder may have none
    n_train = run.get("n_train") if isinstance(run, dict) else None  # absent in older runs: 40 steps an epoch
    ipe = -(-int(n_train) // int(final.batch_size)) if final is not None and n_train else None
    return schedule_info(final, iters_per_epoch=ipe) if final is not None else None


def outcomes_of(folder: str) -> Outcomes:
    """The completed trials' best checkpoints and early stops (their ``result.json`` records), cached
    while those records and ``run.json`` are unchanged (keyed by their mtimes)."""
    rf = _rf(folder)
    stamps = tuple(_stamp(rf.trial(t) / "result.json") for t in rf.trial_ids())
    return _outcomes_cached(folder, stamps, _stamp(rf.run_json))


@functools.lru_cache(maxsize=8)
def _outcomes_cached(folder: str, _records: tuple[int, ...], _run: int) -> Outcomes:
    return outcomes_info(run_of(folder), trial_records(_rf(folder)))


def best_marks_of(folder: str) -> BestMarks | None:
    """The trials' best checkpoints as the through-time figures mark them; ``None`` when the run kept none."""
    o = outcomes_of(folder)
    style = str(run_of(folder).get("accuracy_style", "classification"))
    return best_marks(o, best_label(o.metric, keys_of(folder), style, o.parts))


def throughtime_of(folder: str) -> ThroughTimeInfo | None:
    tt = _npz(str(_rf(folder).throughtimes))
    if tt is None:
        return None
    return throughtime_info(tt, str(run_of(folder).get("accuracy_style", "classification")), keys_of(folder),
                            best_marks_of(folder), _completed_stops(folder, tt))


def metrics_of(folder: str) -> MetricsInfo | None:
    tt = _npz(str(_rf(folder).throughtimes))
    return metrics_info(tt, keys_of(folder), best_marks_of(folder), _completed_stops(folder, tt)) if tt is not None else None


def _completed_stops(folder: str, tt: Mapping[str, np.ndarray]) -> tuple[tuple[int, float], ...]:
    """The early stops recorded by the trials the figures draw (the summary's count, one source for both)."""
    drawn = {int(t) for t in np.asarray(tt.get("trial_ids", ()))}
    return tuple((tid, epoch) for tid, epoch in outcomes_of(folder).stops if tid in drawn)


def counts_of(folder: str) -> dict[str, int]:
    counts = {"completed": 0, "diverged": 0, "failed": 0}
    for rec in trial_records(_rf(folder)):
        counts[str(rec.get("status"))] = counts.get(str(rec.get("status")), 0) + 1
    return counts


def final_of(folder: str) -> FinalInfo | None:
    results = _npz(str(_rf(folder).results))
    if results is None:
        return None
    from ._mpl import PERF_LABELS

    label = "final val " + PERF_LABELS.get(str(run_of(folder).get("accuracy_style")), "perf")
    c = counts_of(folder)
    return final_info(results, "final_perf_val", label, c.get("failed", 0), c.get("diverged", 0))


def final_panels_of(folder: str) -> FinalPanelsInfo | None:
    results = _npz(str(_rf(folder).results))
    if results is None:
        return None
    from ._mpl import PERF_LABELS

    c = counts_of(folder)
    return final_panels_info(results, keys_of(folder), PERF_LABELS.get(str(run_of(folder).get("accuracy_style")), "perf"),
                             c.get("failed", 0), c.get("diverged", 0))


def final_pairs_of(folder: str) -> FinalPairsInfo | None:
    results = _npz(str(_rf(folder).results))
    if results is None:
        return None
    return final_pairs_info(results, str(run_of(folder).get("accuracy_style", "classification")))


def hidden_trial_of(folder: str) -> int | None:
    p = hidden_path(_rf(folder))
    return int(p.parent.name) if p is not None else None


def pca_of(folder: str) -> PCAInfo | None:
    p = hidden_path(_rf(folder))
    if p is None:
        return None
    arrays = _npz(str(p))
    return pca_info(arrays, trial=int(p.parent.name)) if arrays else None


def run_title(path: Path) -> str:
    """The folder's last two path components (``digits/current``): ``current`` alone says little."""
    parts = path.resolve().parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else str(path)


def summary_of(folder: str) -> SummaryInfo:
    rf = _rf(folder)
    final = _final(folder)
    return summary_info(
        run_of(folder), final.to_dict() if final is not None else None, _npz(str(rf.results)), trial_records(rf),
        TunerFiles(read_json_or_none(rf.hparams / MISC_JSON), _hp_npz(folder, LRSweepFile, LR_NPZ),
                   _hp_npz(folder, BatchSweepFile, BS_NPZ), _hp_npz(folder, BatchSampledFile, SAMPLED_NPZ)),
        title=run_title(rf.path), throughtimes=_npz(str(rf.throughtimes)),
    )
