"""``sweep.npz``: a parameter sweep's results collated, one row per point.

The one owner of the file's keys: :func:`ignite_seg.sweep` writes a :class:`SweepRecord` with
:meth:`SweepRecord.write`, the sweep report reads it back with :meth:`SweepRecord.read`.

Keys (``K`` points, ``P`` parameters, ``T`` the most trials of any point):

- ``point_labels`` (K,) str: ``"hidden=8, act='relu'"``, the point as a reader names it;
- ``point_json`` (K,) str: ``{"args": [...], "kwargs": {...}}``, the loader arguments of the point;
- ``param_names`` (P,) str and ``param_values`` (K, P) float: each parameter's value, NaN where
  it is not a number (a nonlinearity's name) or the point does not set it;
- ``lr_start``, ``lr_end`` (K,) float, ``batch_size``, ``epochs`` (K,) int: each point's recipe;
- ``trial_ids`` (K, T) int (-1 pads) and ``final_loss_train``, ``final_loss_val``,
  ``final_perf_train``, ``final_perf_val`` (K, T) float (NaN pads): the completed trials;
- ``n_completed`` (K,) int.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .atomic import write_npz

__all__ = ["SweepRecord", "METRIC_KEYS", "SWEEP_NPZ"]

SWEEP_NPZ = "sweep.npz"
METRIC_KEYS = ("final_loss_train", "final_loss_val", "final_perf_train", "final_perf_val")
_KEYS = ("point_labels", "point_json", "param_names", "param_values", "lr_start", "lr_end", "batch_size",
         "epochs", "trial_ids", *METRIC_KEYS, "n_completed")


@dataclass(frozen=True)
class SweepRecord:
    """The arrays of ``sweep.npz`` (see the module docstring for the shapes)."""

    point_labels: np.ndarray
    point_json: np.ndarray
    param_names: np.ndarray
    param_values: np.ndarray
    lr_start: np.ndarray
    lr_end: np.ndarray
    batch_size: np.ndarray
    epochs: np.ndarray
    trial_ids: np.ndarray
    final_loss_train: np.ndarray
    final_loss_val: np.ndarray
    final_perf_train: np.ndarray
    final_perf_val: np.ndarray
    n_completed: np.ndarray

    def __post_init__(self) -> None:
        k = len(self.point_labels)
        for key in _KEYS:
            value = getattr(self, key)
            if key != "param_names" and value.shape[:1] != (k,):
                raise ValueError(f"sweep.npz: {key} has shape {value.shape}, expected {k} points first")
        if self.param_values.shape != (k, len(self.param_names)):
            raise ValueError(f"sweep.npz: param_values has shape {self.param_values.shape}, "
                             f"expected {(k, len(self.param_names))}")

    @property
    def n_points(self) -> int:
        return len(self.point_labels)

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the record atomically (a kill leaves the old file or the new one)."""
        write_npz(path, **{key: getattr(self, key) for key in _KEYS})

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> SweepRecord:
        """Read ``sweep.npz``; a file missing a key raises ``ValueError`` naming it."""
        with np.load(Path(path), allow_pickle=False) as z:
            missing = [key for key in _KEYS if key not in z.files]
            if missing:
                raise ValueError(f"{path} is not a sweep file of this version: missing {missing}")
            return cls(**{key: z[key] for key in _KEYS})
