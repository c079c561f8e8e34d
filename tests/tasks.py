"""Tiny models and datasets used by the tests (importable by worker processes)."""
from __future__ import annotations

import numpy as np
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


def blank_inputs(n_train: int = 48, n_val: int = 48, n_in: int = 8, n_classes: int = 3, seed: int = 0):
    """The blobs' labels with every input zero (images that were never loaded): the best a network can do is the
    best constant output, the class shares."""
    train, val = blobs(n_train, n_val, n_in, n_classes, seed)
    return tuple(TensorDataset(torch.zeros_like(ds.tensors[0]), ds.tensors[1]) for ds in (train, val))


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


def noisy_few(n_train: int = 160, n_val: int = 48, n_in: int = 16, seed: int = 0):
    """Few items, a weak signal in 2 of ``n_in`` inputs and much noise: a wide MLP learns the signal in a
    few epochs, then fits the noise (its held-out loss rises: it overfits)."""
    g = torch.Generator().manual_seed(seed)

    def make(n: int) -> TensorDataset:
        x = torch.randn(n, n_in, generator=g)
        return TensorDataset(x, x[:, :2].sum(1, keepdim=True) + torch.randn(n, 1, generator=g))

    return make(n_train), make(n_val)


class NumpyAugmented(Dataset):
    """:func:`blobs` read through a ``Dataset`` that augments every read with noise from numpy's global
    RNG (as albumentations-style pipelines do), not torch's."""

    def __init__(self, base: TensorDataset) -> None:
        self.base = base

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int):
        x, y = self.base[i]
        return x + torch.from_numpy(np.random.normal(0.0, 0.5, x.shape).astype(np.float32)), int(y)


def blobs_numpy_augmented():
    train, val = blobs()
    return NumpyAugmented(train), val


class ListDataset(Dataset):
    """A plain map-style dataset (not a TensorDataset) of (x, y) pairs."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def regression_flat(n_train: int = 96, n_val: int = 48, n_in: int = 4, seed: int = 0):
    """:func:`regression` with targets of shape (N,): against a (N, 1) output an elementwise loss broadcasts."""
    return tuple(TensorDataset(ds.tensors[0], ds.tensors[1][:, 0]) for ds in regression(n_train, n_val, n_in, seed))


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


class KillsWorker(nn.Module):
    """Kills its own process (SIGKILL) after a few training steps.

    With ``once_marker`` set, only the first process to get there dies (it leaves the marker
    file behind), so a retry succeeds. With ``only_seed`` set, only the trial of that seed dies.
    """

    def __init__(self, once_marker: str | None = None, only_seed: int | None = None) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 3)
        self.steps = 0
        self.once_marker = once_marker
        self.armed = only_seed is None or torch.initial_seed() == only_seed

    def forward(self, x):
        import os
        import signal

        if self.training and self.armed:
            self.steps += 1
            if self.steps == 3:
                if self.once_marker is None:
                    os.kill(os.getpid(), signal.SIGKILL)
                try:
                    fd = os.open(self.once_marker, os.O_CREAT | os.O_EXCL)
                except FileExistsError:
                    pass
                else:
                    os.close(fd)
                    os.kill(os.getpid(), signal.SIGKILL)
        return self.lin(x)


# -- broken recipes, for the bad-input catalogue ------------------------------------------
def raises():
    raise ValueError("cannot build this")


def not_a_module():
    return "I am a string"


def one_dataset():
    return blobs()[0]


def three_datasets():
    return (*blobs(), blobs()[0])


def sized(n_train: int, n_val: int):
    return blobs(n_train=max(n_train, 1), n_val=max(n_val, 1))[0].__class__(
        *[t[:n_train] for t in blobs()[0].tensors]
    ), TensorDataset(*[t[:n_val] for t in blobs()[1].tensors])


def inputs_only():
    tr, va = blobs()
    return ListDataset([x for x, _ in tr]), ListDataset([x for x, _ in va])


def float_targets():
    tr, va = blobs()
    return TensorDataset(tr.tensors[0], tr.tensors[1].float()), va


def class_out_of_range():
    tr, va = blobs(n_classes=3)
    return TensorDataset(tr.tensors[0], tr.tensors[1] + 5), va


def class_out_of_range_late():
    """Every target in range but item 100's (a check of the first items misses it)."""
    tr, va = blobs(n_train=128, n_classes=3)
    y = tr.tensors[1].clone()
    y[100] = 7
    return TensorDataset(tr.tensors[0], y), va


class TaggedBlobs:
    """A callable instance (a dataset loader) holding a set: its repr and its set order vary by process."""

    def __init__(self, tags: set[str]) -> None:
        self.tags = set(tags)

    def __call__(self):
        return blobs()


def nan_inputs():
    tr, va = blobs()
    x = tr.tensors[0].clone()
    x[7, 2] = float("nan")
    return TensorDataset(x, tr.tensors[1]), va


def inf_targets():
    tr, va = regression()
    y = va.tensors[1].clone()
    y[3] = float("inf")
    return tr, TensorDataset(va.tensors[0], y)


def three():
    return 3


def quick_or_dies_once(task: tuple):
    """A task for the runner's own tests: ``("quick", v)`` returns ``v``; ``("dies_once", marker,
    delay)`` kills its worker after ``delay`` seconds the first time (leaving ``marker``), and
    returns ``"retried"`` when run again."""
    import os
    import time

    if task[0] == "quick":
        return task[1]
    marker, delay = task[1], task[2]
    if os.path.exists(marker):
        return "retried"
    open(marker, "w").close()
    time.sleep(delay)
    os._exit(9)


def regression_in_units(n_train: int = 96, n_val: int = 48):
    """:func:`regression` with its targets in units of a few hundred (not standardised)."""
    train, val = regression(n_train, n_val)
    return tuple(TensorDataset(ds.tensors[0], 150.0 + 80.0 * ds.tensors[1]) for ds in (train, val))
