"""The tuner benchmark's tasks (issue 18): tiny, of different kinds, importable by worker processes.

Each loader is a module-level function (the workers resolve it by name). Every task trains in a
few seconds per trial on one CPU core:

* ``cnn``: scikit-learn's 8x8 digits (1437 train / 360 val) through a small CNN (conv 8, pool, conv 16,
  linear), cross-entropy, accuracy;
* ``noisy_regression``: 8 inputs, a smooth target under heavy noise (noise sd 0.5 against a signal sd
  of ~0.8), 1000 train / 1000 val, MLP 8-32-1, MSE, ``inv-loss`` perf;
* ``tiny``: 180 of scikit-learn's 8x8 digits to train on (the other 1617 to validate), MLP 64-32-10;
* ``binary``: two interleaved moons with label noise (noise 0.3; 800 train / 800 val), MLP 2-32-32-2;
* ``sequence``: the sequence-tagging task of ``tests/real_tasks.py`` (padded variable-length
  sequences through a ``collate_fn``, per-token cross-entropy with an ignored padding index), with a
  larger validation set (512 sequences) so that its accuracy is less noisy.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.data import TensorDataset


def _digits_images() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_va, y_tr, y_va = train_test_split(x / 16.0, y, test_size=0.2, random_state=0, stratify=y)

    def as_set(a, b) -> TensorDataset:  # type: ignore[no-untyped-def]
        return TensorDataset(torch.as_tensor(a, dtype=torch.float32).reshape(-1, 1, 8, 8), torch.as_tensor(b))

    return as_set(x_tr, y_tr), as_set(x_va, y_va)


def cnn_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _digits_images()


def cnn_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 8 x 4 x 4
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 16 x 2 x 2
        nn.Flatten(), nn.Linear(64, 10),
    )


def noisy_regression_dataset(n_train: int = 1000, n_val: int = 1000, seed: int = 1) -> tuple[TensorDataset, TensorDataset]:
    """``y = sin(2 x.w1) + 0.5 (x.w2)^2 + 0.5 noise``: the best MSE is ~0.25 (the noise's variance)."""
    g = torch.Generator().manual_seed(seed)
    w1, w2 = torch.randn(8, 1, generator=g) / math.sqrt(8), torch.randn(8, 1, generator=g) / math.sqrt(8)

    def make(n: int) -> TensorDataset:
        x = torch.randn(n, 8, generator=g)
        y = torch.sin(2 * x @ w1) + 0.5 * (x @ w2) ** 2 + 0.5 * torch.randn(n, 1, generator=g)
        return TensorDataset(x, y)

    return make(n_train), make(n_val)


def noisy_regression_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))


def tiny_dataset(n_train: int = 180) -> tuple[TensorDataset, TensorDataset]:
    """A tiny training set: 180 of the digits (18 per class), the other 1617 images to validate on."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_va, y_tr, y_va = train_test_split(x / 16.0, y, train_size=n_train, random_state=0, stratify=y)

    def as_set(a, b) -> TensorDataset:  # type: ignore[no-untyped-def]
        return TensorDataset(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b))

    return as_set(x_tr, y_tr), as_set(x_va, y_va)


def tiny_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def binary_dataset(n_train: int = 800, n_val: int = 800) -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_moons

    x, y = make_moons(n_samples=n_train + n_val, noise=0.3, random_state=0)
    x = torch.as_tensor(x, dtype=torch.float32)
    y = torch.as_tensor(y)
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


def binary_model() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))


def sequence_dataset():  # type: ignore[no-untyped-def]
    from tests.real_tasks import tagging

    return tagging(n_train=160, n_val=512)


def sequence_model() -> nn.Module:
    from tests.real_tasks import Tagger

    return Tagger()


def sequence_loss() -> nn.Module:
    from tests.real_tasks import tagging_loss

    return tagging_loss()
