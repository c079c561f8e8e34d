"""Synthetic MNIST, FashionMNIST and CIFAR10: the same item shapes, dtypes and constructor arguments.

Each class is a fixed random pattern (drawn from the dataset's name) plus per-item noise, so a network
can learn it, not perfectly: the noise makes some items ambiguous. Sizes: ``IS_SYNTH_TRAIN`` (3000)
and ``IS_SYNTH_VAL`` (500) items; ``download`` is accepted and does nothing.
"""
from __future__ import annotations

import os
import zlib

import numpy as np
import torch.utils.data


class _Synthetic(torch.utils.data.Dataset):
    shape: tuple[int, ...] = (28, 28)
    classes = [str(i) for i in range(10)]

    def __init__(self, root: str, train: bool = True, transform=None, target_transform=None,  # type: ignore[no-untyped-def]
                 download: bool = False) -> None:
        self.root, self.train, self.transform, self.target_transform = root, train, transform, target_transform
        n = int(os.environ.get("IS_SYNTH_TRAIN" if train else "IS_SYNTH_VAL", 3000 if train else 500))
        name = type(self).__name__
        patterns = np.random.default_rng(zlib.crc32(name.encode())).random((10, *self.shape))
        rng = np.random.default_rng(zlib.crc32(f"{name}/{train}".encode()))
        self.targets = rng.integers(0, 10, n)
        noisy = 0.55 * patterns[self.targets] + 0.45 * rng.random((n, *self.shape))
        self.data = (255 * noisy).astype(np.uint8)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        img, target = self.data[i], int(self.targets[i])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


class MNIST(_Synthetic):
    pass


class FashionMNIST(_Synthetic):
    pass


class CIFAR10(_Synthetic):
    shape = (32, 32, 3)
