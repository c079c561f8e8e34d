"""Tiny models and datasets used by the tests (importable by worker processes)."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset


def mlp(n_in: int = 8, n_hidden: int = 16, n_out: int = 3) -> nn.Module:
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out))


def linear(n_in: int = 4, n_out: int = 1) -> nn.Module:
    return nn.Linear(n_in, n_out)


def blobs(n_train: int = 96, n_val: int = 48, n_in: int = 8, n_classes: int = 3, seed: int = 0):
    """Gaussian blobs: a classification task an MLP learns in a few epochs."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(n_classes, n_in, generator=g) * 3

    def make(n: int) -> TensorDataset:
        y = torch.randint(0, n_classes, (n,), generator=g)
        x = centers[y] + torch.randn(n, n_in, generator=g)
        return TensorDataset(x, y)

    return make(n_train), make(n_val)


def multilabel(n_train: int = 96, n_val: int = 48, n_in: int = 8, n_labels: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n_in, n_labels, generator=g)

    def make(n: int) -> TensorDataset:
        x = torch.randn(n, n_in, generator=g)
        return TensorDataset(x, (x @ w > 0).float())

    return make(n_train), make(n_val)


def regression(n_train: int = 96, n_val: int = 48, n_in: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n_in, 1, generator=g)

    def make(n: int) -> TensorDataset:
        x = torch.randn(n, n_in, generator=g)
        return TensorDataset(x, x @ w + 0.1 * torch.randn(n, 1, generator=g))

    return make(n_train), make(n_val)


class ListDataset(Dataset):
    """A plain map-style dataset (not a TensorDataset) of (x, y) pairs."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def blobs_list(**kw):
    tr, va = blobs(**kw)
    return ListDataset([(x, int(y)) for x, y in tr]), ListDataset([(x, int(y)) for x, y in va])


class Exploding(nn.Module):
    """A model whose output becomes NaN after a few updates (loss diverges)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1 if self.training else 0
        out = self.lin(x)
        return out * float("nan") if self.calls > 5 else out


class RaisesInTraining(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 3)

    def forward(self, x):
        if self.training:
            raise RuntimeError("boom in training")
        return self.lin(x)
