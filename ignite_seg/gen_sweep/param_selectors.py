"""ignite-simple's parameter selectors: which points a ``sweeper.sweep`` runs, and its listeners.

A selector lists ``(values, trials)`` pairs (``get_next_trials``) until ``has_more_trials`` is
false, and hears each point's tuned hyperparameters and final trial metrics (the
:class:`SweepListener` methods) as the points finish. ignite_seg runs the points of a selector
that lists them all up front (:class:`FixedSweep`); one that waits for results before naming
the next point (``get_next_trials`` returning ``None``) is refused with a ``ConfigError``.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

__all__ = ["SweepListener", "ParamSelector", "FixedSweep"]


class SweepListener:
    """Hears the sweep's results; override the methods you need (both do nothing here)."""

    def on_hparams_found(self, values: tuple[Any, ...], lr_min: float, lr_max: float, batch_size: int) -> None:
        """Point ``values`` was tuned: the LR range ``[lr_min, lr_max]`` and the batch size."""

    def on_trials_completed(self, values: tuple[Any, ...], perfs_train: np.ndarray, losses_train: np.ndarray,
                            perfs_val: np.ndarray, losses_val: np.ndarray) -> None:
        """Point ``values`` finished its trials: final metrics, one entry per completed trial."""


class ParamSelector(SweepListener):
    """Names the points to run: ``get_next_trials() -> (values, trials)`` until ``has_more_trials()`` is false."""

    def get_next_trials(self) -> tuple[tuple[Any, ...], int] | None:
        raise NotImplementedError(f"{type(self).__name__} must define get_next_trials()")

    def has_more_trials(self) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must define has_more_trials()")


class FixedSweep(ParamSelector):
    """The points in a fixed order: ``gnt_results`` is the tuple of ``(values, trials)`` pairs."""

    def __init__(self, gnt_results: tuple[tuple[tuple[Any, ...], int], ...]) -> None:
        self.gnt_results = tuple(gnt_results)
        self.gnt_results_index = 0

    def get_next_trials(self) -> tuple[tuple[Any, ...], int]:
        self.gnt_results_index += 1
        return self.gnt_results[self.gnt_results_index - 1]

    def has_more_trials(self) -> bool:
        return self.gnt_results_index < len(self.gnt_results)

    @classmethod
    def with_fixed_trials(cls, pts: Iterable[tuple[Any, ...]], trials: int) -> FixedSweep:
        """Each point of ``pts`` (a tuple of the model's arguments) with ``trials`` trials."""
        return cls(tuple((tuple(pt), trials) for pt in pts))
