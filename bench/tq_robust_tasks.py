"""Tasks of the tuner-robustness benchmark (issue 25), importable by worker processes.

* ``easy_mnist``: ignite-simple's mnist CNN (conv 32@5x5, maxpool 3, LeakyReLU, dense 64, Tanh,
  dense 10) on synthetic 1x28x28 images of 10 classes: each class is a fixed random pattern of
  bright pixels, an item is its class's pattern under Gaussian noise. The network learns it within
  an LR sweep (the loss is ~0 long before the sweep ends) — the case that collapsed to chance.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset


def easy_mnist_dataset(n_train: int = 3000, n_val: int = 500, seed: int = 0,
                       noise: float = 0.5) -> tuple[TensorDataset, TensorDataset]:
    """Class-dependent pixel patterns (10 classes, 1x28x28) plus Gaussian noise of sd ``noise``."""
    g = torch.Generator().manual_seed(seed)
    patterns = (torch.rand(10, 1, 28, 28, generator=g) < 0.15).float() * 2.0

    def make(n: int) -> TensorDataset:
        y = torch.randint(0, 10, (n,), generator=g)
        x = patterns[y] + noise * torch.randn(n, 1, 28, 28, generator=g)
        return TensorDataset(x, y)

    return make(n_train), make(n_val)


def easy_mnist_model() -> nn.Module:
    """ignite-simple's mnist example network."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 5), nn.MaxPool2d(3), nn.LeakyReLU(),  # 32 x 8 x 8
        nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.Tanh(), nn.Linear(64, 10),
    )
