"""Collation of completed trials into ``results.npz`` and ``throughtimes.npz``.

:class:`Collator` appends one trial at a time (O(1) per trial, no re-reading of earlier trials)
and :func:`Collator.arrays` stacks them once; the arrays contain completed trials only, with
their ``trial_ids``.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

from .smoothing import moving_average

__all__ = ["Collator", "FINAL_KEYS", "CURVE_KEYS"]

FINAL_KEYS = ("loss_train", "loss_val", "perf_train", "perf_val")
CURVE_KEYS = ("losses_train", "losses_val", "perfs_train", "perfs_val")


class Collator:
    """Accumulates completed trials; ``smooth_window`` points for the ``*_smoothed`` curves."""

    def __init__(self, settings: Mapping[str, Any], smooth_window: int) -> None:
        self.settings_json = json.dumps(settings, sort_keys=True, default=str)
        self.smooth_window = smooth_window
        self._ids: list[int] = []
        self._final: dict[str, list[float]] = {k: [] for k in FINAL_KEYS}
        self._seconds: list[float] = []
        self._curves: dict[str, list[np.ndarray]] = {k: [] for k in CURVE_KEYS}
        self._epochs: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, trial_id: int, result: Mapping[str, Any], throughtime: Mapping[str, np.ndarray]) -> None:
        """Append one completed trial (its ``result.json`` record and through-time arrays)."""
        epochs = np.asarray(throughtime["epochs"], dtype=np.float64)
        if self._epochs is None:
            self._epochs = epochs
        elif epochs.shape != self._epochs.shape or not np.allclose(epochs, self._epochs):
            raise ValueError(
                f"trial {trial_id} was recorded at other epochs than the earlier trials "
                f"({epochs.shape[0]} vs {self._epochs.shape[0]} snapshots); trials of one run "
                "must share the same hyperparameters"
            )
        self._ids.append(int(trial_id))
        for k in FINAL_KEYS:
            self._final[k].append(float(result[k]))
        self._seconds.append(float(result.get("seconds", np.nan)))
        for k in CURVE_KEYS:
            self._curves[k].append(np.asarray(throughtime[k], dtype=np.float64))

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """``(results, throughtimes)`` dicts ready for ``np.savez``, trials in id order."""
        order = np.argsort(np.asarray(self._ids, dtype=np.int64), kind="stable")
        ids = np.asarray(self._ids, dtype=np.int64)[order]
        results: dict[str, np.ndarray] = {"trial_ids": ids}
        for k in FINAL_KEYS:
            results[f"final_{k}"] = np.asarray(self._final[k], dtype=np.float64)[order]
        results["seconds"] = np.asarray(self._seconds, dtype=np.float64)[order]
        epochs = self._epochs if self._epochs is not None else np.zeros(0)
        tt: dict[str, np.ndarray] = {
            "settings": np.asarray([self.settings_json]),
            "trial_ids": ids,
            "epochs": epochs,
        }
        for k in CURVE_KEYS:
            stacked = (
                np.stack(self._curves[k])[order] if self._curves[k] else np.zeros((0, epochs.shape[0]))
            )
            tt[k] = stacked
            tt[f"{k}_smoothed"] = moving_average(stacked, self.smooth_window, axis=1)
        return results, tt
