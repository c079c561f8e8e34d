"""Fast batching of the user's datasets.

Small datasets (the common case for the trials we run) are materialised once into two tensors,
so that a batch is one indexing operation instead of ``batch_size`` ``__getitem__`` calls and a
collate. Datasets too large for that fall back to a ``torch.utils.data.DataLoader``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torch.utils.data._utils.collate import default_collate

__all__ = ["TensorData", "as_tensor_data", "Batches", "gather", "eval_batches"]

#: Datasets whose tensors would take more than this are not materialised.
MATERIALIZE_MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class TensorData:
    """A dataset held as an input tensor and a target tensor of equal length."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.x.shape[0])


def _item_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(value)


def as_tensor_data(dataset: Dataset[Any]) -> TensorData | None:
    """Materialise ``dataset`` into tensors, or return ``None`` when it is too large or ragged."""
    if isinstance(dataset, TensorDataset) and len(dataset.tensors) == 2:
        return TensorData(dataset.tensors[0], dataset.tensors[1])
    n = len(dataset)  # type: ignore[arg-type]
    if n == 0:
        return None
    x0, y0 = dataset[0]
    per_item = _item_tensor(x0).element_size() * _item_tensor(x0).numel()
    per_item += _item_tensor(y0).element_size() * max(1, _item_tensor(y0).numel())
    if per_item * n > MATERIALIZE_MAX_BYTES:
        return None
    try:
        batch = default_collate([dataset[i] for i in range(n)])
    except (RuntimeError, TypeError):  # ragged items: leave it to a DataLoader
        return None
    x, y = batch[0], batch[1]
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        return None
    return TensorData(x, y)


def gather(dataset: Dataset[Any] | TensorData, indices: Sequence[int] | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The items at ``indices`` as an ``(x, y)`` batch."""
    if isinstance(dataset, TensorData):
        idx = torch.as_tensor(indices, dtype=torch.long)
        return dataset.x[idx], dataset.y[idx]
    batch = default_collate([dataset[int(i)] for i in indices])
    return batch[0], batch[1]


def eval_batches(
    dataset: Dataset[Any] | TensorData, batch_size: int = 1024
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The whole dataset, in order, in batches of ``batch_size``."""
    n = len(dataset)  # type: ignore[arg-type]
    for start in range(0, n, batch_size):
        yield gather(dataset, range(start, min(n, start + batch_size)))


class Batches:
    """A re-iterable of shuffled training batches; each ``iter()`` is one epoch.

    Shuffling draws from ``generator`` so that a seeded trial sees the same batches whatever
    process runs it.
    """

    def __init__(
        self, dataset: Dataset[Any] | TensorData, batch_size: int, generator: torch.Generator
    ) -> None:
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.generator = generator
        self._loader: DataLoader[Any] | None = None
        if not isinstance(dataset, TensorData):
            self._loader = DataLoader(dataset, batch_size=self.batch_size, shuffle=True, generator=generator)

    def __len__(self) -> int:
        n = len(self.dataset)  # type: ignore[arg-type]
        return (n + self.batch_size - 1) // self.batch_size

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self._loader is not None:
            for x, y in self._loader:
                yield x, y
            return
        assert isinstance(self.dataset, TensorData)
        perm = torch.randperm(len(self.dataset), generator=self.generator)
        x, y = self.dataset.x, self.dataset.y
        for start in range(0, len(perm), self.batch_size):
            idx = perm[start : start + self.batch_size]
            yield x[idx], y[idx]
