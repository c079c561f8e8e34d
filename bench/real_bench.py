"""Digits as a map-style dataset (items read one by one), so trials take the DataLoader path."""
from __future__ import annotations

from torch.utils.data import Dataset


class Listed(Dataset):
    def __init__(self, tensors) -> None:
        self.x, self.y = tensors

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def digits_listed():
    import digits

    train_set, val_set = digits.dataset()
    return Listed(train_set.tensors), Listed(val_set.tensors)
