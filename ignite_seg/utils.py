"""ignite-simple's ``utils.split``, and the datasets ignite-simple's scripts cache with ``torch.save``.

Importing this module lets ``torch.load`` (``weights_only=True``, the default since torch 2.6)
read a cached ``(Subset, Subset)`` of a ``TensorDataset``: it adds those two classes (plain
containers of tensors and indices) to torch's allowed globals, in this process only. A dataset of
any other class still needs ``torch.load(path, weights_only=False)`` (for files you wrote
yourself), and the error ignite_seg reports from a dataset loader says so.
"""
from __future__ import annotations

import os

import numpy as np
import torch
from torch.utils import data

__all__ = ["split", "allow_cached_datasets"]


def allow_cached_datasets() -> None:
    """Let ``torch.load(..., weights_only=True)`` read ``Subset`` and ``TensorDataset`` objects."""
    torch.serialization.add_safe_globals([data.Subset, data.TensorDataset])


allow_cached_datasets()


def split(full: data.Dataset, val_perc: float, filen: str | None = None) -> tuple[data.Subset, data.Subset]:
    """``(train, val)`` Subsets of ``full``, ``val`` a random ``val_perc`` of it (ignite-simple's split).

    ``filen``: an ``.npz`` keeping the held-out indices, reused when it exists (the same split
    every run). The draw uses numpy's global generator, as ignite-simple did.
    """
    if not 0 <= val_perc <= 1:
        raise ValueError(f"val_perc must be in [0, 1], got {val_perc!r}; e.g. 0.1 for a tenth held out.")
    if filen is not None:
        ext = os.path.splitext(filen)[1]
        if ext == "":
            filen += ".npz"
        elif ext != ".npz":
            raise ValueError(f"filen={filen!r}: the held-out indices are saved as .npz; pass a name ending in .npz.")
    if filen is not None and os.path.exists(filen):
        with np.load(filen) as f:
            held = f["held_out_inds"]
    else:
        held = np.random.choice(len(full), int(len(full) * val_perc), replace=False)  # type: ignore[arg-type]
        if filen is not None:
            np.savez_compressed(filen, held_out_inds=held)
    keep = np.ones(len(full), dtype=np.bool_)  # type: ignore[arg-type]
    keep[held] = False
    train_idx, val_idx = torch.from_numpy(np.flatnonzero(keep)), torch.from_numpy(held).long()
    return data.Subset(full, train_idx), data.Subset(full, val_idx)  # type: ignore[arg-type]
