"""Tasks whose learning starts late: a network sits at the best constant output's loss for many steps before it
learns from its inputs, so an LR sweep may see nothing but that floor (the plateau rule's case,
:mod:`ignite_seg.tuning.lr_plateau`). The adding problem (:mod:`bench.tq_unseen_tasks`) was the only such task of
the 34; these are the classic long-plateau problems, written for session 26 before any was tuned.

- ``multiply``: the adding problem's sibling (Hochreiter & Schmidhuber 1997): 40 steps of (value, marker), the target
  the product of the two marked values; an LSTM, MSE.
- ``multiply_raw``: the same with the products as they are (mean 0.25: a network first learns that offset);
  ``distance``: 30 steps of (noise, marker), the target the gap between the two markers over the length; a GRU, MSE.
- ``temporal_order``: 30 steps of one-hot symbols (6 distractors, X, Y); two of X/Y sit at random positions and the
  class is their order (XX, XY, YX, YY); a GRU, cross-entropy (the constant's loss: log 4).
- ``sparse_parity``: 24 inputs of +-1, the class is the parity of 3 of them; a 2-layer MLP, cross-entropy. Networks
  sit at chance for long before they find the 3 bits (Barak et al. 2022).
- ``long_order``: ``temporal_order`` over 120 steps, added after the first six to look for a cross-entropy floor (it
  learns within the sweep).
- ``parity4``: the parity of 4 of 32 bits, a wider MLP (added with ``long_order``, for the same reason).
- ``delayed_recall``: a symbol out of 8 given at the first of 25 steps, noise after it; the class is that symbol; a
  GRU, cross-entropy (the gradient must cross the whole sequence).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

from bench.tq_unseen_tasks import marked_values

__all__ = ["PLATEAU_TASKS"]


def _multiply(n: int, seed: int, steps: int = 40, standardise: bool = True) -> TensorDataset:
    x, values, markers = marked_values(n, seed, steps)
    y = np.where(markers > 0, values, 1.0).prod(1, keepdims=True).astype(np.float32)
    return TensorDataset(torch.tensor(x), torch.tensor((y - 0.25) / 0.22 if standardise else y))  # ~unit variance


def multiply_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _multiply(2000, 71), _multiply(500, 72)


def multiply_raw_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _multiply(2000, 71, standardise=False), _multiply(500, 72, standardise=False)


def multiply_raw_model() -> nn.Module:
    return _LastState(nn.LSTM, 2, 32, 1)


def _distance(n: int, seed: int, steps: int = 30) -> TensorDataset:
    g = np.random.default_rng(seed)
    x = np.zeros((n, steps, 2), dtype=np.float32)
    x[:, :, 0] = g.random((n, steps))
    y = np.zeros((n, 1), dtype=np.float32)
    for i in range(n):
        a, b = sorted(g.choice(steps, 2, replace=False))
        x[i, [a, b], 1] = 1.0
        y[i, 0] = (b - a) / steps
    return TensorDataset(torch.tensor(x), torch.tensor(y))


def distance_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _distance(2000, 79), _distance(500, 80)


def distance_model() -> nn.Module:
    return _LastState(nn.GRU, 2, 32, 1)


class _LastState(nn.Module):
    """A recurrent layer over the sequence, its last state through a linear head."""

    def __init__(self, cell: type[nn.Module], features: int, hidden: int, out: int) -> None:
        super().__init__()
        self.rnn = cell(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.rnn(x)
        h = h[0] if isinstance(h, tuple) else h
        return self.head(h[-1])


def multiply_model() -> nn.Module:
    return _LastState(nn.LSTM, 2, 32, 1)


def _temporal_order(n: int, seed: int, steps: int = 30) -> TensorDataset:
    g = np.random.default_rng(seed)
    symbols = g.integers(0, 6, (n, steps))
    y = g.integers(0, 4, n)
    for i in range(n):
        a = int(g.integers(2, steps // 2 - 2))
        b = int(g.integers(steps // 2, steps - 2))
        symbols[i, a] = 6 + (y[i] >> 1)
        symbols[i, b] = 6 + (y[i] & 1)
    x = np.eye(8, dtype=np.float32)[symbols]
    return TensorDataset(torch.tensor(x), torch.tensor(y))


def temporal_order_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _temporal_order(2000, 73), _temporal_order(500, 74)


def long_order_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _temporal_order(2000, 81, steps=120), _temporal_order(500, 82, steps=120)


def long_order_model() -> nn.Module:
    return _LastState(nn.GRU, 8, 32, 4)


def temporal_order_model() -> nn.Module:
    return _LastState(nn.GRU, 8, 32, 4)


def _sparse_parity(n: int, seed: int, bits: int = 24) -> TensorDataset:
    g = np.random.default_rng(seed)
    x = g.choice([-1.0, 1.0], (n, bits)).astype(np.float32)
    y = (x[:, [2, 11, 19]].prod(1) > 0).astype(np.int64)
    return TensorDataset(torch.tensor(x), torch.tensor(y))


def sparse_parity_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _sparse_parity(3000, 75), _sparse_parity(500, 76)


def _parity4(n: int, seed: int, bits: int = 32) -> TensorDataset:
    g = np.random.default_rng(seed)
    x = g.choice([-1.0, 1.0], (n, bits)).astype(np.float32)
    y = (x[:, [3, 10, 17, 28]].prod(1) > 0).astype(np.int64)
    return TensorDataset(torch.tensor(x), torch.tensor(y))


def parity4_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _parity4(4000, 83), _parity4(500, 84)


def parity4_model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2))


def sparse_parity_model() -> nn.Module:
    return nn.Sequential(nn.Linear(24, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2))


def _delayed_recall(n: int, seed: int, steps: int = 25) -> TensorDataset:
    g = np.random.default_rng(seed)
    y = g.integers(0, 8, n)
    x = np.zeros((n, steps, 9), dtype=np.float32)
    x[np.arange(n), 0, y] = 1.0
    x[:, 1:, 8] = g.standard_normal((n, steps - 1))  # a noise channel after the symbol
    return TensorDataset(torch.tensor(x), torch.tensor(y))


def delayed_recall_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _delayed_recall(2000, 77), _delayed_recall(500, 78)


def delayed_recall_model() -> nn.Module:
    return _LastState(nn.GRU, 9, 32, 8)


_LOSSES = {"multiply": "MSELoss", "multiply_raw": "MSELoss", "distance": "MSELoss"}
PLATEAU_TASKS = {
    name: {"model": ("bench.tq_plateau_tasks", f"{name}_model", (), {}),
           "dataset": ("bench.tq_plateau_tasks", f"{name}_dataset", (), {}),
           "loss": ("torch.nn", _LOSSES.get(name, "CrossEntropyLoss"), (), {}),
           "style": "inv-loss" if name in _LOSSES else "classification"}
    for name in ("multiply", "multiply_raw", "distance", "temporal_order", "sparse_parity", "delayed_recall",
                 "long_order", "parity4")
}
