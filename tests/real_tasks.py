"""Recipes of real projects, tiny (importable by worker processes).

* ``tagging``: variable-length sequences padded by a ``collate_fn`` into a :class:`Batch`, targets
  padded with the loss's ``ignore_index`` (-1), a per-token classifier with outputs ``(N, C, L)``,
  and an IoU metric over the tokens of class 1 (like the reference's segment IoU);
* ``dict_items``: items that are dicts, a two-input model fed through ``prepare_batch``;
* ``flips``: a dataset whose ``__getitem__`` flips its input at random (augmentation), logging
  every draw to a file so a test can see what each epoch read;
* ``two_val_sets``: a classification task with two named validation sets.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from ignite.metrics import Metric
from torch import nn
from torch.utils.data import Dataset, TensorDataset

import ignite_seg

PAD = -1
N_CLASSES = 3
N_FEATURES = 4


@dataclass
class Batch:
    """A padded batch of sequences: features ``(N, L, F)``, lengths ``(N,)``, targets ``(N, L)``."""

    features: torch.Tensor
    lengths: torch.Tensor
    targets: torch.Tensor


class Sequences(Dataset):
    """Sequences of 3–12 tokens; a token's class is the argmax of its first three features."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(3, 13, (n,), generator=g)
        self.items = []
        for k in lengths.tolist():
            x = torch.randn(k, N_FEATURES, generator=g)
            self.items.append((x, x[:, :N_CLASSES].argmax(dim=1)))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i]


def pad_collate(items) -> Batch:
    lengths = torch.tensor([len(x) for x, _ in items])
    n = int(lengths.max())
    feats = torch.zeros(len(items), n, N_FEATURES)
    targets = torch.full((len(items), n), PAD, dtype=torch.long)
    for i, (x, y) in enumerate(items):
        feats[i, : len(x)] = x
        targets[i, : len(y)] = y
    return Batch(feats, lengths, targets)


def prepare_batch(batch: Batch, device=None, non_blocking: bool = False):
    x = (batch.features.to(device, non_blocking=non_blocking), batch.lengths)
    return x, batch.targets.to(device, non_blocking=non_blocking)


def tagging(n_train: int = 160, n_val: int = 64, seed: int = 0) -> ignite_seg.Data:
    return ignite_seg.Data(
        Sequences(n_train, seed), Sequences(n_val, seed + 1), collate_fn=pad_collate, prepare_batch=prepare_batch
    )


class Tagger(nn.Module):
    """Per-token classifier: ``((features, lengths)) -> (N, C, L)`` logits."""

    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, N_CLASSES))

    def forward(self, inputs):
        features, _lengths = inputs
        return self.net(features).transpose(1, 2)


def tagging_loss() -> nn.Module:
    return nn.CrossEntropyLoss(ignore_index=PAD)


class ClassIoU(Metric):
    """Intersection over union of the tokens predicted and labelled ``cls``, padding left out."""

    def __init__(self, cls: int = 1) -> None:
        self.cls = cls
        super().__init__()

    def reset(self) -> None:
        self.inter = 0
        self.union = 0

    def update(self, output) -> None:
        y_pred, y = output
        mask = y != PAD
        pred = (y_pred.argmax(dim=1) == self.cls) & mask
        true = (y == self.cls) & mask
        self.inter += int((pred & true).sum())
        self.union += int((pred | true).sum())

    def compute(self) -> float:
        return self.inter / max(self.union, 1)


def class_iou(cls: int = 1) -> Metric:
    return ClassIoU(cls)


# -- dict items, two inputs ----------------------------------------------------------------------
class DictItems(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.a = torch.randn(n, 3, generator=g)
        self.b = torch.randn(n, 2, generator=g)
        self.y = ((self.a.sum(1) + self.b[:, 0]) > 0).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return {"a": self.a[i], "b": self.b[i], "label": self.y[i]}


def dict_prepare(batch, device=None, non_blocking: bool = False):
    return (batch["a"].to(device), batch["b"].to(device)), batch["label"].to(device)


def dict_items(n_train: int = 128, n_val: int = 64) -> ignite_seg.Data:
    return ignite_seg.Data(DictItems(n_train, 0), DictItems(n_val, 1), prepare_batch=dict_prepare)


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 8)
        self.b = nn.Linear(2, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, inputs):
        a, b = inputs
        return self.out(torch.relu(self.a(a) + self.b(b)))


# -- augmentation ---------------------------------------------------------------------------------
class Flips(Dataset):
    """Blobs whose input is reversed at random on every read; each read is logged to ``log``."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, log: str | None) -> None:
        self.x, self.y, self.log = x, y, log

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        flip = bool(torch.rand(()) < 0.5)
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(f"{os.getpid()} {i} {int(flip)}\n")
        x = self.x[i].flip(0) if flip else self.x[i]
        return x, self.y[i]


def flips(log: str | None = None, n_train: int = 48, n_val: int = 24):
    from tasks import blobs

    tr, va = blobs(n_train=n_train, n_val=n_val)
    return Flips(*tr.tensors, log), va


# -- named validation sets ------------------------------------------------------------------------
def two_val_sets() -> ignite_seg.Data:
    from tasks import blobs

    tr, va = blobs()
    _, shifted = blobs(seed=1)
    return ignite_seg.Data(tr, {"clean": va, "shifted": TensorDataset(*shifted.tensors)})


# -- a loss with a weight tensor ------------------------------------------------------------------
#: devices every WeightedLoss was moved to with ``.to`` (in this process)
MOVES: list = []


class WeightedLoss(nn.CrossEntropyLoss):
    """Cross-entropy with a class ``weight`` buffer; records the devices it is moved to."""

    def __init__(self, n_classes: int = 3) -> None:
        super().__init__(weight=torch.ones(n_classes))

    def to(self, *args, **kwargs):
        MOVES.append(torch.device(args[0] if args else kwargs["device"]))
        return super().to(*args, **kwargs)


def flips_in_workers(log: str | None = None, num_workers: int = 2) -> ignite_seg.Data:
    """:func:`flips` loaded by ``num_workers`` DataLoader worker processes."""
    tr, va = flips(log)
    return ignite_seg.Data(tr, va, num_workers=num_workers)


def tagging_without_collate():
    """Variable-length sequences as a plain pair: two items cannot be stacked."""
    return Sequences(16, 0), Sequences(8, 1)


def dict_items_without_prepare() -> ignite_seg.Data:
    """Dict items collated by default into a dict batch, with no prepare_batch to split it."""
    return ignite_seg.Data(DictItems(16, 0), DictItems(8, 1), collate_fn=lambda items: {
        k: torch.stack([item[k] for item in items]) for k in items[0]})


def cached_blobs() -> ignite_seg.Data:
    """``tasks.blobs`` as plain item lists, read once and kept (``cache=True``)."""
    from tasks import blobs_list

    tr, va = blobs_list()
    return ignite_seg.Data(tr, va, cache=True)


# -- Data options: the training order and the evaluation batch size -------------------------------
def blobs_options(shuffle: bool = True, eval_batch_size: int | None = None) -> ignite_seg.Data:
    from tasks import blobs

    tr, va = blobs()
    _, shifted = blobs(seed=1)
    return ignite_seg.Data(tr, {"clean": va, "shifted": shifted}, shuffle=shuffle, eval_batch_size=eval_batch_size)


# -- (N, T, C) outputs: the classes last (Data(class_dim=-1)) -------------------------------------
class TaggerLast(Tagger):
    """:class:`Tagger` whose logits keep the classes last, ``(N, L, C)``, as a sequence model's do."""

    def forward(self, inputs):
        return super().forward(inputs).transpose(1, 2)


class FlatLoss(nn.Module):
    """Cross-entropy of ``(N, L, C)`` logits against ``(N, L)`` targets, flattened as the recipe writes it."""

    def __init__(self) -> None:
        super().__init__()
        self.ce = nn.CrossEntropyLoss(ignore_index=PAD)
        self.ignore_index = PAD  # what perf reads to leave padding out

    def forward(self, logits, y):
        return self.ce(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def tagging_last(**kw) -> ignite_seg.Data:
    import dataclasses

    return dataclasses.replace(tagging(**kw), class_dim=-1)
