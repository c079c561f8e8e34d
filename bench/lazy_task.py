"""A lazy image dataset (items computed on the fly, never held) and a small CNN, for bench/real_data.py."""
from __future__ import annotations

import os
import time

import torch
from torch import nn
from torch.utils.data import Dataset


class LazyImages(Dataset):
    """``n`` items of 3x32x32, each computed from its index when read (like decoding a file)."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        y = int(torch.randint(0, 10, (), generator=g))
        x = torch.randn(3, 32, 32, generator=g) * 0.5
        x[y % 3] += 0.3 * (y - 4.5)
        return x, y


def lazy_images(n_train: int = 50_000, n_val: int = 10_000):
    return LazyImages(n_train, 0), LazyImages(n_val, 1)


class StampedCNN(nn.Module):
    """A small CNN that writes the time of its first training step to ``$BENCH_FIRST_STEP`` and
    stops the trial after ``$BENCH_STOP_AFTER`` training steps (the benchmark needs no more).
    The time it is built goes to ``$BENCH_FIRST_STEP.built`` (the last one built is the trial's:
    the caller's probe builds one first)."""

    def __init__(self) -> None:
        super().__init__()
        path = os.environ.get("BENCH_FIRST_STEP")
        if path:
            with open(path + ".built", "w") as f:
                f.write(repr(time.time()))
        self.net = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(4),
            nn.Flatten(), nn.Linear(8 * 8 * 8, 10),
        )
        self.steps = 0

    def forward(self, x):
        if self.training:
            self.steps += 1
            path = os.environ.get("BENCH_FIRST_STEP")
            if self.steps == 1 and path:
                with open(path, "w") as f:
                    f.write(repr(time.time()))
            if self.steps > int(os.environ.get("BENCH_STOP_AFTER", "1000000000")):
                raise RuntimeError("benchmark: enough steps")
        return self.net(x)
