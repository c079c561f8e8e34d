"""The image task of bench/tune_cost.py: synthetic 3x32x32 images of 10 classes and a 2-conv CNN.

Each class is a fixed random smooth pattern; an item is its class's pattern plus Gaussian noise
(learnable, generated from the seed, no download). A ``TensorDataset``, so batches are cut by
indexing tensors (the fast path), as a CIFAR-sized job held in memory would be.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset


def _patterns(seed: int = 12345) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(10, 3, 8, 8, generator=g)
    return F.interpolate(coarse, size=(32, 32), mode="bilinear", align_corners=False)


def _make(n: int, seed: int, signal: float) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    x = _patterns()[y] * signal + torch.randn(n, 3, 32, 32, generator=g)
    return TensorDataset(x, y)


def images(n_train: int = 20_000, n_val: int = 2_000, signal: float = 0.15) -> tuple[TensorDataset, TensorDataset]:
    """``n_train`` training and ``n_val`` validation images (``signal``: pattern over unit noise)."""
    return _make(n_train, 1, signal), _make(n_val, 2, signal)


class TwoConvCNN(nn.Module):
    """conv 8@3x3 - ReLU - maxpool 2 - conv 16@3x3 - ReLU - maxpool 2 - dense 10."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def model() -> nn.Module:
    return TwoConvCNN()
