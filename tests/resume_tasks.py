"""Models and datasets of the mid-trial resume tests (importable by worker processes)."""
from __future__ import annotations

import os
import signal
import time

import torch
from tasks import blobs
from torch import nn
from torch.utils.data import Dataset


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
