"""Models and datasets of the mid-trial resume tests (importable by worker processes)."""
from __future__ import annotations

import os
import random
import signal
import time

import numpy as np
import torch
from tasks import blobs
from torch import nn
from torch.utils.data import Dataset, get_worker_info

import ignite_seg


class Interruptible(nn.Module):
    """An MLP with dropout (training draws from torch's RNG) that raises (``crash_how="raise"``) or
    SIGKILLs its process (``"kill"``) at its ``crash_at``-th training step while the file
    ``crash_file`` exists, and sleeps ``sleep`` s per training step."""

    def __init__(self, crash_file: str | None = None, crash_at: int = 0, sleep: float = 0.0,
                 crash_how: str = "raise") -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
        self.crash_file, self.crash_at, self.sleep, self.crash_how = crash_file, crash_at, sleep, crash_how
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.steps += 1
            if self.crash_file and self.steps == self.crash_at and os.path.exists(self.crash_file):
                if self.crash_how == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError("interrupted for the test")
            if self.sleep:
                time.sleep(self.sleep)
        return self.net(x)


class Augmented(Dataset):
    """A map-style dataset (the DataLoader path) whose items get fresh noise from torch's RNG each read."""

    def __init__(self, base) -> None:
        self.x, self.y = base.tensors

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i] + 0.3 * torch.randn(self.x.shape[1]), self.y[i]


def augmented_blobs():
    train, val = blobs()
    return Augmented(train), val


class AugmentedThreeWays(Augmented):
    """:class:`Augmented` whose noise comes from torch, numpy and python ``random`` alike (one
    third of the coordinates each), as augmentation libraries draw it."""

    def __getitem__(self, i: int):
        d = self.x.shape[1]
        a, b = d // 3, 2 * d // 3
        noise = torch.cat([torch.randn(a), torch.from_numpy(np.random.randn(b - a)).float(),
                           torch.tensor([random.gauss(0.0, 1.0) for _ in range(d - b)])])
        return self.x[i] + 0.3 * noise, self.y[i]


def augmented_in_workers(num_workers: int = 2) -> ignite_seg.Data:
    """:class:`AugmentedThreeWays` read by ``num_workers`` DataLoader worker processes."""
    train, val = blobs()
    return ignite_seg.Data(AugmentedThreeWays(train), val, num_workers=num_workers)


class Draws(Dataset):
    """Item ``i`` is ``([i, torch seed, worker id, pid], [torch, numpy, random draw])``: which worker read
    it, its torch seed, and the three random draws it made (zeros of the seed and id outside workers)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        info = get_worker_info()
        who = torch.tensor([i, torch.initial_seed() if info else 0, info.id if info else 0, os.getpid()],
                           dtype=torch.int64)
        return who, torch.tensor([float(torch.rand(())), np.random.rand(), random.random()], dtype=torch.float64)
