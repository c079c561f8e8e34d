"""Datasets for the tuner tests (importable by worker processes)."""
from __future__ import annotations

import os

import torch
from tasks import blobs
from torch.utils.data import Dataset


class AccessLog(Dataset):
    """Wraps a dataset and appends every index read to ``<log_dir>/<name>.<pid>.log``.

    The log lives in files because the readers are worker processes.
    """

    def __init__(self, inner: Dataset, log_dir: str, name: str) -> None:
        self.inner, self.log_dir, self.name = inner, log_dir, name

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i):
        with open(os.path.join(self.log_dir, f"{self.name}.{os.getpid()}.log"), "a") as fh:
            fh.write(f"{int(i)}\n")
        return self.inner[i]


def logged_blobs(log_dir: str, **kw):
    train, val = blobs(**kw)
    return AccessLog(train, log_dir, "train"), AccessLog(val, log_dir, "val")


def read_log(log_dir: str, name: str) -> list[int]:
    out: list[int] = []
    for f in sorted(os.listdir(log_dir)):
        if f.startswith(name + "."):
            with open(os.path.join(log_dir, f)) as fh:
                out += [int(line) for line in fh if line.strip()]
    return out


class NaNOut(torch.nn.Module):
    """A model whose output is NaN from the very first batch."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.lin(x) * float("nan")
