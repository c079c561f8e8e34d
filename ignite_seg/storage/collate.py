"""Collation of completed trials into ``results.npz`` and ``throughtimes.npz``.

:class:`Collator` appends one trial at a time (O(1) per trial, no re-reading of earlier trials)
and :func:`Collator.arrays` stacks them once; the arrays contain completed trials only, with
their ``trial_ids``. Every key of the scheme of :mod:`.result_keys` that the first trial has is
collated (named validation sets, custom metrics, the best checkpoint's ``best_epoch`` and
``best_value``): the final values are the names of its record's ``metrics``
(:class:`~ignite_seg.storage.records.TrialResult`); every later trial must have the same keys.

A trial stopped early by a user handler has fewer snapshots: its curves are padded with NaN to the
longest trial's (``throughtimes.npz`` keeps ``(T, S)`` arrays and the longest ``epochs``); the
snapshots it has must be those of the other trials.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

from ..smoothing import moving_average
from .records import TrialResult
from .result_keys import BEST_KEYS, curve_keys, final_keys, is_curve_key

__all__ = ["Collator", "FINAL_KEYS", "CURVE_KEYS"]

#: The keys of a plain run (one validation set, no custom metric); they always come first.
FINAL_KEYS = final_keys()
CURVE_KEYS = curve_keys()


def _ordered(keys: set[str], plain: tuple[str, ...]) -> tuple[str, ...]:
    """The plain keys first, then the others sorted (so every run orders its keys alike)."""
    return plain + tuple(sorted(keys - set(plain)))


class Collator:
    """Accumulates completed trials; ``smooth_window`` points for the ``*_smoothed`` curves."""

    def __init__(self, settings: Mapping[str, Any], smooth_window: int) -> None:
        self.settings_json = json.dumps(settings, sort_keys=True, default=str)
        self.smooth_window = smooth_window
        self._ids: list[int] = []
        self._final: dict[str, list[float]] = {k: [] for k in FINAL_KEYS}
        self._seconds: list[float] = []
        self._best: dict[str, list[float]] | None = None  # best_epoch, best_value when the run keeps a best
        self._curves: dict[str, list[np.ndarray]] = {k: [] for k in CURVE_KEYS}
        self._epochs: np.ndarray | None = None
        self._keyed = False  # whether the key set was taken from a first trial

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, trial_id: int, result: TrialResult, throughtime: Mapping[str, np.ndarray]) -> None:
        """Append one completed trial (its ``result.json`` record and through-time arrays)."""
        epochs = np.asarray(throughtime["epochs"], dtype=np.float64)
        short, long = sorted((epochs, epochs if self._epochs is None else self._epochs), key=len)
        if not np.allclose(short, long[: len(short)]):
            raise ValueError(
                f"trial {trial_id} was recorded at other epochs than the earlier trials "
                f"({epochs.shape[0]} vs {long.shape[0]} snapshots); trials of one run "
                "must share the same hyperparameters"
            )
        self._epochs = long
        self._check_keys(trial_id, result, throughtime)
        self._check_best(trial_id, result)
        self._ids.append(int(trial_id))
        for k, values in self._final.items():
            values.append(result.metric(k))
        best = result.best
        if self._best is not None and best is not None:
            self._best["best_epoch"].append(best.epoch)
            self._best["best_value"].append(best.value)
        self._seconds.append(np.nan if result.seconds is None else float(result.seconds))
        for k, curves in self._curves.items():
            curves.append(np.asarray(throughtime[k], dtype=np.float64))

    def _check_keys(self, trial_id: int, result: TrialResult, throughtime: Mapping[str, np.ndarray]) -> None:
        """The first trial fixes the keys (the plain ones and every other key it has);
        a trial with other keys is refused before anything of it is added."""
        curves = {k for k in throughtime if is_curve_key(k)}
        if not self._keyed:
            self._final = {k: [] for k in _ordered(set(result.metrics), FINAL_KEYS)}
            self._curves = {k: [] for k in _ordered(curves, CURVE_KEYS)}
            self._keyed = True
        for what, have, want in (("final values (result.json)", set(result.metrics), self._final),
                                 ("curves (throughtime.npz)", curves, self._curves)):
            extra, missing = sorted(have - set(want)), sorted(set(want) - have)
            if extra or missing:
                raise ValueError(
                    f"trial {trial_id}'s {what} differ from the run's: extra {extra}, missing {missing}; "
                    "every trial of a run must record the same validation sets and metrics"
                )

    def _check_best(self, trial_id: int, result: TrialResult) -> None:
        """The first trial says whether the run keeps a best checkpoint; every trial must agree."""
        has = result.best is not None
        if not self._ids and self._best is None and has:
            self._best = {k: [] for k in BEST_KEYS}
        if has != (self._best is not None):
            raise ValueError(f"trial {trial_id} {'has' if has else 'has no'} best checkpoint (best_metric) unlike the "
                             "earlier trials; every trial of a run keeps one by the same metric, or none does")

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """``(results, throughtimes)`` dicts ready for ``np.savez``, trials in id order."""
        order = np.argsort(np.asarray(self._ids, dtype=np.int64), kind="stable")
        ids = np.asarray(self._ids, dtype=np.int64)[order]
        results: dict[str, np.ndarray] = {"trial_ids": ids}
        for k, values in self._final.items():
            results[f"final_{k}"] = np.asarray(values, dtype=np.float64)[order]
        results["seconds"] = np.asarray(self._seconds, dtype=np.float64)[order]
        for k, values in (self._best or {}).items():
            results[k] = np.asarray(values, dtype=np.float64)[order]
        epochs = self._epochs if self._epochs is not None else np.zeros(0)
        tt: dict[str, np.ndarray] = {
            "settings": np.asarray([self.settings_json]),
            "trial_ids": ids,
            "epochs": epochs,
        }
        for k, curves in self._curves.items():
            stacked = np.stack([_padded(c, epochs.shape[0]) for c in curves])[order] if curves \
                else np.zeros((0, epochs.shape[0]))
            tt[k] = stacked
            tt[f"{k}_smoothed"] = moving_average(stacked, self.smooth_window, axis=1)
        return results, tt


def _padded(curve: np.ndarray, n: int) -> np.ndarray:
    """``curve`` with NaN appended up to ``n`` points (a trial stopped early)."""
    return np.concatenate([curve, np.full(n - curve.shape[0], np.nan)]) if curve.shape[0] < n else curve
