"""Reading a run folder for the analysis (numpy and JSON only, no matplotlib)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from ..storage.atomic import named_damage, read_json
from ..storage.names import ERROR_TXT, HIDDEN_NPZ, RESULT_JSON
from ..storage.records import TrialResult
from ..storage.run_folder import RunFolder
from ..storage.schemas import HPARAM_FILES

__all__ = ["read_npz", "read_json_or_none", "trial_records", "hidden_path", "HPARAM_FILES", "hparams_inputs",
           "results_inputs", "throughtimes_inputs", "hidden_inputs", "summary_inputs", "video_inputs"]



def read_npz(path: Path) -> dict[str, np.ndarray] | None:
    """All arrays of an ``.npz``, or ``None`` when the file does not exist."""
    try:
        with named_damage(path), np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        return None


def read_json_or_none(path: Path) -> Any:
    try:
        return read_json(path)
    except FileNotFoundError:
        return None


def trial_records(rf: RunFolder) -> list[TrialResult]:
    """Every finished trial's ``result.json`` (all statuses); one without an ``error`` takes the last
    line of its ``error.txt`` when it has one."""
    out = []
    for tid, res in rf.finished_trials():
        err = rf.trial(tid) / ERROR_TXT
        text = err.read_text(encoding="utf-8", errors="replace").strip() if res.error is None and err.is_file() else ""
        out.append(dataclasses.replace(res, error=text.splitlines()[-1][:500]) if text else res)
    return out


def hidden_path(rf: RunFolder) -> Path | None:
    """The ``hidden.npz`` of the (one) trial that recorded hidden representations, if any."""
    for tid in rf.trial_ids():
        p = rf.trial(tid) / HIDDEN_NPZ
        if p.is_file():
            return p
    return None


# -- the inputs of the products (a change of one redoes the product) ---------------------------------

def hparams_inputs(rf: RunFolder, *names: str) -> list[Path]:
    return [rf.hparams / n for n in names]


# run.json is not an input by its mtime (train() rewrites it after the analysis, to mark the run
# complete): what the analysis reads of it is in each product's manifest stamp instead.
def results_inputs(rf: RunFolder) -> list[Path]:
    return [rf.results, *(rf.trial(t) / RESULT_JSON for t in rf.trial_ids())]


def throughtimes_inputs(rf: RunFolder) -> list[Path]:
    """The curves, and the trials' records (their best checkpoints are marked on the curves)."""
    return [rf.throughtimes, *(rf.trial(t) / RESULT_JSON for t in rf.trial_ids())]


def hidden_inputs(rf: RunFolder) -> list[Path]:
    p = hidden_path(rf)
    return [p] if p is not None else []


def summary_inputs(rf: RunFolder) -> list[Path]:
    return [*results_inputs(rf), *hparams_inputs(rf, *HPARAM_FILES)]


def video_inputs(rf: RunFolder) -> list[Path]:
    return [*results_inputs(rf), rf.throughtimes, *hparams_inputs(rf, *HPARAM_FILES), *hidden_inputs(rf)]
