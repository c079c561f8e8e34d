"""The schedule decision (pure): how many epochs the final trials train, in how many LR cycles.

Example:
    >>> choose_schedule(1437, train_examples=30_000, min_epochs=5, max_epochs=100, cycles=1)
    (21.0, 21)
"""
from __future__ import annotations

import math

__all__ = ["choose_schedule"]


def choose_schedule(
    n_train: int, *, train_examples: int, min_epochs: int, max_epochs: int, cycles: int
) -> tuple[float, int]:
    """``(cycle_size_epochs, epochs)`` so that a trial sees about ``train_examples`` examples.

    ``epochs = clip(round(train_examples / n_train), min_epochs, max_epochs)``, rounded up to a
    multiple of ``cycles`` so that every cycle is whole and the run ends at the cycle's low LR.
    """
    if n_train < 1:
        raise ValueError(f"n_train must be >= 1, got {n_train!r}")
    if not (1 <= min_epochs <= max_epochs) or cycles < 1:
        raise ValueError(f"need 1 <= min_epochs <= max_epochs and cycles >= 1, got {min_epochs}, {max_epochs}, {cycles}")
    epochs = min(max(int(round(train_examples / n_train)), min_epochs), max_epochs)
    epochs = max(cycles, int(math.ceil(epochs / cycles)) * cycles)
    return epochs / cycles, epochs
