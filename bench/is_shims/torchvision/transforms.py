"""``ToTensor`` and ``Compose`` as torchvision defines them, for uint8 arrays (HxW or HxWxC)."""
from __future__ import annotations

import numpy as np
import torch


class ToTensor:
    """uint8 HxW(xC) array -> float CxHxW tensor in [0, 1], as torchvision's ``ToTensor``."""

    def __call__(self, pic: np.ndarray) -> torch.Tensor:
        a = np.asarray(pic)
        if a.ndim == 2:
            a = a[:, :, None]
        return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1))).float().div(255)


class Compose:
    def __init__(self, transforms: list) -> None:
        self.transforms = list(transforms)

    def __call__(self, x):  # type: ignore[no-untyped-def]
        for t in self.transforms:
            x = t(x)
        return x
