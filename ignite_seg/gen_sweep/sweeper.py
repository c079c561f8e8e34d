"""ignite-simple's ``sweeper.sweep(module, selector, cores, hparams, folder)`` over :func:`ignite_seg.sweep`.

The module holds ``model(*values)``, ``dataset()``, ``loss`` and ``accuracy_style``; each point's
values are the model's positional arguments. The sweep runs in ``folder`` (``points/<k>/`` a run
folder per point, ``sweep.npz``, ``analysis/``), continuing a sweep already there, and returns
ignite-simple's list of tuples ``(values, lr_min, lr_max, batch_size, perf_train, loss_train,
perf_val, loss_val)``, the last four arrays with one entry per completed trial. That list is also
pickled to ``points/funcres.pt``, where ignite-simple's scripts read it back (``pickle.load``);
ignite_seg itself reads ``sweep.npz`` and never unpickles it.
"""
from __future__ import annotations

import importlib
import logging
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .. import utils  # noqa: F401  (a script importing the sweeper can torch.load its cached Subsets)
from ..config.hyperparameters import HyperparameterSettings
from ..exceptions import ConfigError
from ..param_sweep import sweep as run_sweep
from ..storage.atomic import atomic_write_bytes
from .param_selectors import ParamSelector

__all__ = ["sweep", "FUNCRES"]

#: where ignite-simple's sweeper left its result list, inside the sweep's folder
FUNCRES = Path("points") / "funcres.pt"

logger = logging.getLogger("ignite_seg")

SweepRow = tuple[tuple[Any, ...], float, float, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _selected(selector: ParamSelector) -> tuple[list[tuple[Any, ...]], int]:
    """The selector's points (in order, a repeated point merged) and their one trial count."""
    points: dict[tuple[Any, ...], int] = {}
    while selector.has_more_trials():
        nxt = selector.get_next_trials()
        if nxt is None:
            raise ConfigError(f"param_selector {type(selector).__name__} waits for results before naming its next "
                              "point; ignite_seg runs selectors that list every point up front (FixedSweep). Pass "
                              "FixedSweep.with_fixed_trials(points, trials), or call ignite_seg.sweep per batch.")
        values, trials = nxt
        points[tuple(values)] = points.get(tuple(values), 0) + int(trials)
    counts = set(points.values())
    if len(counts) > 1:
        raise ConfigError(f"param_selector asks for different trial counts per point ({sorted(counts)}); "
                          "ignite_seg.sweep runs one count at every point. Use FixedSweep.with_fixed_trials.")
    if not points:
        raise ConfigError("param_selector names no point; pass FixedSweep.with_fixed_trials([(value,), ...], trials).")
    return list(points), counts.pop()


def sweep(module_name: str, param_selector: ParamSelector, sweep_cores: int,
          hparams: str | HyperparameterSettings | Any, folder: str | os.PathLike[str]) -> list[SweepRow]:
    """Tune and train ``module_name``'s model at every point of ``param_selector`` (see the module doc)."""
    module = sys.modules["__main__"] if module_name == "__main__" else importlib.import_module(module_name)
    points, trials = _selected(param_selector)
    cores = max(1, min(int(sweep_cores), len(os.sched_getaffinity(0))))
    if cores < sweep_cores:
        logger.info("sweep_cores=%d: %d CPU(s) usable, running %d workers", sweep_cores, cores, cores)
    res = run_sweep((module_name, "model", (), {}), (module_name, "dataset", (), {}), (module_name, "loss", (), {}),
                    folder=folder, points=points, hyperparameters=hparams,
                    accuracy_style=getattr(module, "accuracy_style", "classification"), trials=trials,
                    trials_strict=True, is_continuation=True, cores=cores)
    rec = res.record
    rows: list[SweepRow] = []
    for k, values in enumerate(points):
        keep = rec.trial_ids[k] >= 0
        row: SweepRow = (values, float(rec.lr_start[k]), float(rec.lr_end[k]), int(rec.batch_size[k]),
                         rec.final_perf_train[k][keep], rec.final_loss_train[k][keep],
                         rec.final_perf_val[k][keep], rec.final_loss_val[k][keep])
        param_selector.on_hparams_found(values, row[1], row[2], row[3])
        param_selector.on_trials_completed(values, *row[4:])
        rows.append(row)
    atomic_write_bytes(Path(folder) / FUNCRES, pickle.dumps(rows))
    return rows
