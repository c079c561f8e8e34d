"""Batches from any dataset: the recipe's :class:`Data` record, the fast tensor path, seeded DataLoaders.

A dataset loader returns ``(train, val)`` or a :class:`Data` record. Two paths turn a dataset into
batches:

* **tensors**: a ``TensorDataset`` of two tensors (or a ``Subset`` of one), with no ``collate_fn``,
  is batched by indexing its tensors — one indexing operation per batch;
* **DataLoader**: anything else goes through a ``torch.utils.data.DataLoader`` whose shuffling is
  seeded per trial, so that ``__getitem__`` runs afresh every epoch and random augmentation is drawn
  anew each time. ``Data(cache=True)`` reads a deterministic dataset once instead.

A *raw batch* is what the path yields (the collated items); ``prepare_batch(batch, device,
non_blocking) -> (x, y)`` (ignite's signature) turns it into the model's input and the target.
Nothing here reads a whole dataset unless ``cache=True`` asks for it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from ignite.utils import convert_tensor
from torch.utils.data import DataLoader, Dataset, Sampler, Subset, TensorDataset, get_worker_info
from torch.utils.data._utils.collate import default_collate

from ..exceptions import ConfigError, ConfigTypeError

__all__ = [
    "Data",
    "PrepareBatch",
    "as_data",
    "default_prepare_batch",
    "tensor_pair",
    "BatchSource",
    "Batches",
    "shuffled_batches",
]

PrepareBatch = Callable[[Any, "torch.device | str | None", bool], tuple[Any, Any]]
Collate = Callable[[list[Any]], Any]

#: The evaluation batch size without ``Data(eval_batch_size=...)``.
EVAL_BATCH_SIZE = 1024
#: The name of the validation set when the loader returns a single one.
PRIMARY = "val"
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class Data:
    """What a dataset loader may return instead of ``(train, val)``.

    Args:
        train: the training set (any ``torch.utils.data.Dataset``).
        val: the validation set, or a dict of named validation sets; the first is primary (its
            keys in the files are ignite-simple's ``*_val``), the others are recorded as
            ``*_val_<name>``. Names are letters, digits and ``_``.
        collate_fn: turns a list of items into a batch (e.g. padding variable-length sequences).
        prepare_batch: ``prepare_batch(batch, device, non_blocking) -> (x, y)``, ignite's
            signature; ``x`` is whatever the model takes (a tensor, tuple, dict, dataclass). The
            default moves a ``(x, y)`` pair to the device.
        cache: read every item once and keep it (only for a deterministic dataset: random
            augmentation would be frozen at its first draw).
        num_workers: DataLoader worker processes per trial (0: load in the trial's process, the
            default, since every core already runs a trial).
        shuffle: draw the training batches in a new seeded order every epoch (the default, as
            ``DataLoader(shuffle=True)``); ``False`` keeps the dataset's order.
        eval_batch_size: the batch size of every evaluation (the through-time snapshots and the final
            metrics); ``None``: :data:`EVAL_BATCH_SIZE`. Lower it for a model whose activations at
            that batch do not fit the device; it does not change what is measured.
        class_dim: the dimension of the model's outputs that holds the classes, for
            ``accuracy_style="classification"``: 1 (``(N, C, *)``, the default, as ignite's
            ``Accuracy``) or e.g. ``-1`` for a sequence model's ``(N, T, C)`` logits (targets ``(N, T)``).
            Only ``perf`` reads it; the loss and custom metrics get the model's output as it is.

    Example:
        >>> from torch.utils.data import TensorDataset
        >>> ds = TensorDataset(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long))
        >>> Data(ds, {"clean": ds, "noisy": ds}).val_names
        ('clean', 'noisy')
    """

    train: Any
    val: Any
    collate_fn: Collate | None = None
    prepare_batch: PrepareBatch | None = None
    cache: bool = False
    num_workers: int = 0
    shuffle: bool = True
    eval_batch_size: int | None = None
    class_dim: int = 1
    _val_sets: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        sets = dict(self.val) if isinstance(self.val, Mapping) else {PRIMARY: self.val}
        if not sets:
            raise ConfigError("Data(val={}) has no validation set; pass a dataset or a non-empty dict of them.")
        for name in sets:
            if not (isinstance(name, str) and _NAME.match(name)) or str(name).endswith("smoothed"):
                raise ConfigError(
                    f"Data(val=...): validation set name {name!r} must be letters, digits and '_', not ending "
                    "in 'smoothed' (it becomes part of the keys in the result files, beside the *_smoothed curves)."
                )
        for arg in ("collate_fn", "prepare_batch"):
            value = getattr(self, arg)
            if value is not None and not callable(value):
                raise ConfigTypeError(f"Data({arg}={value!r}) must be callable or None.")
        if not isinstance(self.cache, bool):
            raise ConfigTypeError(f"Data(cache={self.cache!r}) must be True or False.")
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise ConfigError(f"Data(num_workers={self.num_workers!r}) must be an int >= 0.")
        if not isinstance(self.shuffle, bool):
            raise ConfigTypeError(f"Data(shuffle={self.shuffle!r}) must be True (a new order every epoch) or False.")
        size = self.eval_batch_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"Data(eval_batch_size={size!r}) must be an int >= 1, or None for {EVAL_BATCH_SIZE}.")
        if isinstance(self.class_dim, bool) or not isinstance(self.class_dim, int) or self.class_dim == 0:
            raise ConfigError(f"Data(class_dim={self.class_dim!r}) must be the int index of the outputs' class "
                              "dimension, not 0 (the batch): 1 for (N, C, *) outputs, -1 for (N, T, C).")
        object.__setattr__(self, "_val_sets", sets)

    @property
    def val_sets(self) -> dict[str, Any]:
        """The validation sets by name, the primary one first."""
        return dict(self._val_sets)

    @property
    def val_names(self) -> tuple[str, ...]:
        return tuple(self._val_sets)

    @property
    def primary(self) -> Any:
        """The primary validation set."""
        return next(iter(self._val_sets.values()))


def as_data(value: Any, where: str = "dataset_loader") -> Data:
    """The loader's return value as a :class:`Data` record (a ``(train, val)`` pair is wrapped)."""
    if isinstance(value, Data):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return Data(value[0], value[1])
    got = type(value).__name__ + (f" of {len(value)} items" if isinstance(value, (tuple, list)) else "")
    raise ConfigError(
        f"{where} must return a pair (train_set, val_set) or ignite_seg.Data(train, val, ...), got {got}."
    )


def default_prepare_batch(batch: Any, device: torch.device | str | None = None, non_blocking: bool = False) -> tuple[Any, Any]:
    """ignite's default: a ``(x, y)`` batch moved to ``device`` (tensors inside tuples/dicts too)."""
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise TypeError(
            f"a batch of type {type(batch).__name__} is not an (input, target) pair; return "
            "ignite_seg.Data(train, val, prepare_batch=...) from the dataset loader to say how to split it"
        )
    x, y = batch
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):  # the usual batch: skip convert_tensor's walk
        if device is None:
            return x, y
        return x.to(device, non_blocking=non_blocking), y.to(device, non_blocking=non_blocking)
    return convert_tensor(x, device, non_blocking), convert_tensor(y, device, non_blocking)


def tensor_pair(dataset: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(x, y)`` tensors of a ``TensorDataset`` of two tensors or a ``Subset`` of one, else ``None``."""
    if isinstance(dataset, TensorDataset) and len(dataset.tensors) == 2:
        return dataset.tensors[0], dataset.tensors[1]
    if isinstance(dataset, Subset):
        inner = tensor_pair(dataset.dataset)
        if inner is not None:
            idx = torch.as_tensor(list(dataset.indices), dtype=torch.long)
            return inner[0][idx], inner[1][idx]
    return None


class _Items(Dataset[Any]):
    """A dataset read once, item by item (``Data(cache=True)``)."""

    def __init__(self, dataset: Any) -> None:
        self.items = [dataset[i] for i in range(len(dataset))]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


def _seed_worker(worker_id: int) -> None:
    """DataLoader workers: numpy and ``random`` follow the worker's torch seed (set by the loader)."""
    import random

    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


class _EpochSampler(Sampler[tuple[int, int]]):
    """Keys ``(epoch seed, index)`` in a random order: each ``iter()`` draws the epoch's seed, then its
    permutation, from ``generator``."""

    def __init__(self, n: int, generator: torch.Generator) -> None:
        self.n, self.generator = n, generator

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[int, int]]:
        seed = int(torch.empty((), dtype=torch.int64).random_(generator=self.generator))
        for i in torch.randperm(self.n, generator=self.generator).tolist():
            yield seed, i


class _EpochSeeded(Dataset[Any]):
    """``dataset`` read by :class:`_EpochSampler`'s keys: the first key of a new epoch seed that a
    DataLoader worker reads re-seeds its torch, numpy and ``random`` from that seed + its id, so
    persistent workers draw every epoch's augmentation from the sampler's generator."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.seed: int | None = None

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: tuple[int, int]) -> Any:
        seed, i = key
        if seed != self.seed:
            import random

            info = get_worker_info()
            mine = seed + (info.id if info is not None else 0)
            torch.manual_seed(mine)
            np.random.seed(mine % 2**32)
            random.seed(mine)
            self.seed = seed
        return self.dataset[i]


class BatchSource:
    """One dataset made ready for batching on one path (see the module's docstring).

    Args:
        dataset: the dataset.
        data: the recipe's data record (``collate_fn``, ``cache``, ``num_workers``).
        pin_memory: pin batches for a faster copy to a GPU.
    """

    def __init__(self, dataset: Any, data: Data, pin_memory: bool = False) -> None:
        if data.cache and tensor_pair(dataset) is None:
            dataset = _Items(dataset)
            if data.collate_fn is None:
                dataset = _stacked(dataset) or dataset
        self.dataset = dataset
        self.tensors = tensor_pair(dataset) if data.collate_fn is None else None
        self.collate_fn: Collate = data.collate_fn or default_collate
        self.num_workers = data.num_workers
        self.pin_memory = pin_memory
        self.shuffle = data.shuffle
        self.eval_batch_size = data.eval_batch_size or EVAL_BATCH_SIZE

    def __len__(self) -> int:
        return len(self.dataset)

    @property
    def fast(self) -> bool:
        """Whether batches are taken by indexing tensors."""
        return self.tensors is not None

    def loader(self, batch_size: int, generator: torch.Generator | None, shuffle: bool) -> DataLoader[Any]:
        return DataLoader(
            self.dataset, batch_size=batch_size, shuffle=shuffle, generator=generator, collate_fn=self.collate_fn,
            num_workers=self.num_workers, pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0, worker_init_fn=_seed_worker if self.num_workers else None,
        )

    def epochs(self, batch_size: int, generator: torch.Generator) -> DataLoader[Any]:
        """The shuffled training loader; each ``iter()`` is one epoch drawn from ``generator`` (see :class:`Batches`)."""
        if not self.num_workers or not self.shuffle:
            return self.loader(batch_size, generator, shuffle=self.shuffle)
        return DataLoader(  # the loader's own generator draws only the workers' first seeds, overridden
            _EpochSeeded(self.dataset), batch_size=batch_size, sampler=_EpochSampler(len(self), generator),
            generator=torch.Generator().manual_seed(0), collate_fn=self.collate_fn, num_workers=self.num_workers,
            pin_memory=self.pin_memory, persistent_workers=True, worker_init_fn=_seed_worker,
        )

    def take(self, indices: Sequence[int] | torch.Tensor) -> Any:
        """The items at ``indices`` as one raw batch."""
        if self.tensors is not None:
            idx = torch.as_tensor(indices, dtype=torch.long)
            return self.tensors[0][idx], self.tensors[1][idx]
        return self.collate_fn([self.dataset[int(i)] for i in indices])

    def fixed(self, indices: Sequence[int] | torch.Tensor, batch_size: int | None = None) -> list[Any]:
        """Raw batches of the items at ``indices``, read once (the through-time snapshots' subsets);
        ``batch_size`` defaults to the evaluation batch size."""
        batch_size = batch_size or self.eval_batch_size
        idx = [int(i) for i in indices]
        return [self.take(idx[s : s + batch_size]) for s in range(0, len(idx), batch_size)]

    def in_order(self, batch_size: int | None = None) -> Iterator[Any]:
        """The whole dataset in order (final evaluation), by the evaluation batch size unless given."""
        batch_size = batch_size or self.eval_batch_size
        if self.tensors is not None:
            n = len(self)
            for s in range(0, n, batch_size):
                yield self.tensors[0][s : s + batch_size], self.tensors[1][s : s + batch_size]
            return
        yield from self.loader(batch_size, None, shuffle=False)


def _stacked(items: _Items) -> TensorDataset | None:
    """A cached dataset of equal-shape ``(tensor, tensor)`` items as a TensorDataset, else ``None``."""
    try:
        batch = default_collate(items.items)
    except (RuntimeError, TypeError):
        return None
    if isinstance(batch, (tuple, list)) and len(batch) == 2 and all(isinstance(t, torch.Tensor) for t in batch):
        return TensorDataset(batch[0], batch[1])
    return None


def shuffled_batches(n: int, batch_size: int, generator: torch.Generator, shuffle: bool = True) -> Iterator[torch.Tensor]:
    """One epoch of the tensor path: a permutation of ``range(n)`` drawn from ``generator``, cut into
    index batches of ``batch_size`` (the last one shorter); ``shuffle=False``: ``range(n)``, nothing drawn."""
    perm = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    for start in range(0, n, batch_size):
        yield perm[start : start + batch_size]


class Batches:
    """A re-iterable of shuffled raw training batches; each ``iter()`` is one epoch.

    Shuffling (and the DataLoader's worker seeds) draw from ``generator``, so a seeded trial sees
    the same batches whatever process runs it; a dataset that is not on the tensor path has its
    ``__getitem__`` called afresh every epoch.

    What an epoch draws from ``generator``, in order: on the DataLoader path without workers,
    ``iter()`` draws the loader's base seed (one int64, unused), the ``RandomSampler`` the epoch's
    permutation and, once it has handed out the last index, one more permutation that it never
    uses; with workers (persistent: started once per trial), :class:`_EpochSampler` draws the
    epoch's seed (one int64) and its permutation, and worker ``k`` re-seeds torch, numpy and
    ``random`` from the epoch's seed + ``k`` before its first item of the epoch. After
    :meth:`finish_epoch` every draw of the epoch is made, so the generator's state is the one the
    next epoch starts from: a checkpoint of it restores the data order and every random draw of the
    dataset's ``__getitem__``, in the trial's process or in the workers.
    """

    def __init__(self, source: BatchSource, batch_size: int, generator: torch.Generator) -> None:
        self.source = source
        self.batch_size = int(batch_size)
        self.generator = generator
        self._loader = None if source.fast else source.epochs(self.batch_size, generator)
        self._epoch: Iterator[Any] | None = None

    def __len__(self) -> int:
        return (len(self.source) + self.batch_size - 1) // self.batch_size

    def examples(self, iterations: int) -> int:
        """Training examples seen in ``iterations`` iterations (each epoch's last batch may be short)."""
        full, part = divmod(int(iterations), len(self))
        return full * len(self.source) + min(part * self.batch_size, len(self.source))

    def finish_epoch(self) -> None:
        """Run the current epoch's DataLoader iterator out after its last batch.

        A ``RandomSampler`` that runs out draws from ``generator`` once more; done here, at the
        epoch's end, the generator's state is the one the next epoch starts from (what a mid-trial
        checkpoint keeps). The same draws happen in the same order either way.
        """
        if self._epoch is not None:
            for _ in self._epoch:
                raise RuntimeError("Batches.finish_epoch() was called before the epoch's last batch")

    def __iter__(self) -> Iterator[Any]:
        if self._loader is not None:
            self._epoch = iter(self._loader)
            yield from self._epoch
            return
        assert self.source.tensors is not None
        x, y = self.source.tensors
        for idx in shuffled_batches(len(x), self.batch_size, self.generator, self.source.shuffle):
            yield x[idx], y[idx]
