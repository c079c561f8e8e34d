"""Tasks the tuner was never developed on (issue 25: "our own checks use tasks you have not seen"),
importable by worker processes. Each is a recipe a user might bring, not one that suits the tuner:

* ``wine``: scikit-learn's wine (178 items, 13 features, 3 classes), standardised on the training
  split; an MLP with BatchNorm and dropout;
* ``diabetes``: scikit-learn's diabetes regression (442 items, 10 features), inputs and target
  standardised on the training split; a tanh MLP, MSE;
* ``shapes``: 1x16x16 images of four shapes (square, cross, ring, bar) drawn at a random place
  under noise, **augmented on every read** (a random shift and flip in ``__getitem__``: a ``Dataset``,
  not tensors, so batches go through a DataLoader); a CNN with BatchNorm;
* ``cancer``: scikit-learn's breast cancer (569 items, 30 features, 2 classes), standardised; an MLP;
* ``dicts``: items are dicts (``{"features": ..., "label": ...}``) as a tokenizer-style pipeline yields
  them, batched by the default collate into a dict and turned into ``(x, y)`` by the task's ``prepare_batch``
  (an ``ignite_seg.Data``); scikit-learn's ``make_classification`` (1,500 + 500 items, 20 features, 4 classes,
  5% labels flipped); an MLP with LayerNorm and GELU;
* ``friedman`` (session 14): scikit-learn's ``make_friedman1`` (2,000 + 500 items, 10 features, noise 1.0), a larger
  noisy regression; a ReLU MLP, MSE;
* ``few_digits`` (session 14): scikit-learn's digits with only 300 training items (1,497 to validate); an MLP.
* ``tokens`` (session 15): padded token sequences (lengths 6-24 of a 16-token vocabulary, 2,000 + 500); the label is
  which of tokens 1-8 occurs most often in the sequence's second half (8% of the training labels random); a 2-layer pre-norm Transformer encoder (d 32, 4 heads, dropout 0.1) with
  learned positions, a padding mask and a masked mean-pool — the recipe a user brings for text;
* ``rare`` (session 15): ``make_classification`` with 90% / 10% classes (3,000 + 1,000 items, 30 features, 3% labels
  flipped): a constant prediction already scores 0.9; an MLP with dropout.
* ``raw_diabetes`` (session 15): scikit-learn's diabetes with its target in its own units (mean 152, sd 77), not
  standardised, as a user may hand it over; a ReLU MLP, MSE;
* ``tags`` (session 15): multi-label (``make_multilabel_classification``, 6 labels, about 2 per item, 1,500 + 500),
  ``BCEWithLogitsLoss``, perf = the share of labels right (``accuracy_style="multiclass"``); an MLP.
* ``many_classes`` (session 15): ``make_classification`` with 40 classes (4,000 + 1,000 items, 40 features); an MLP;
* ``gru`` (session 15): the ``tokens`` task's data (other draws) read by a GRU over packed padded sequences.
* ``hastie`` (session 18, added after the length check's sign test was built, to check it on tasks it was not
  developed on): scikit-learn's ``make_hastie_10_2`` (2,000 + 1,000 items: the class is whether the squared norm of
  10 Gaussian features passes its median); a ReLU MLP;
* ``sparse_regression`` (session 18): ``make_regression`` (600 + 300 items, 50 features of which 8 matter, noise
  30), target standardised; a ReLU MLP that can overfit it, MSE;
* ``waves`` (session 18): 1-D signals of 64 steps (a sine, square, triangle or sawtooth wave at a random frequency
  and phase, amplitude jitter, Gaussian noise; 1,600 + 400), a small Conv1d network.
* ``noisy_labels`` (session 19, added to look for new failures, before any change): scikit-learn's digits with 30%
  of the 1,297 training labels replaced by random ones (the 500 validation labels clean), an MLP that can memorise
  them: training long hurts;
* ``deep_plain`` (session 19): ``make_classification`` (2,000 + 500 items, 20 features, 5 classes) read by an
  8-layer ReLU MLP with no normalisation (a narrow window between too slow and diverging);
* ``res_digits`` (session 19): scikit-learn's digits as 1x8x8 images (1,297 + 500), shifted by up to a pixel on
  every read; a small residual CNN with BatchNorm and a global average pool;
* ``autoencoder`` (session 19): scikit-learn's digits (standardised) reconstructed through a 16-unit bottleneck
  (64 outputs, MSE; ``accuracy_style="inv-loss"``);
* ``logistic`` (session 19): a single ``nn.Linear`` (logistic regression) on ``make_classification`` (2,000 + 500
  items, 40 features, 2 classes, 10% labels flipped): a convex model.

* ``outliers_l1`` (session 20, added to look for new failures, before any change): ``make_regression`` (2,000 + 500
  items, 20 features, noise 10), target standardised, 5% of the training targets replaced by outliers of 5-15 sd;
  ``L1Loss`` (its gradient does not shrink near the optimum); a ReLU MLP;
* ``smooth_digits`` (session 20): scikit-learn's digits as 1x8x8 images (1,297 + 500), a small CNN without
  normalisation, ``CrossEntropyLoss(label_smoothing=0.1)`` (the loss's floor is far above 0);
* ``adding`` (session 20): the adding problem (sequences of 30 steps of (value, marker); the target is the sum of
  the two marked values; 2,000 + 500), an LSTM, MSE;
* ``bag_of_words`` (session 20): variable-length lists of token ids (no padding: an ``ignite_seg.Data`` whose
  ``collate_fn`` concatenates them with offsets for ``nn.EmbeddingBag``); the label is whether the item holds more
  "positive" tokens than "negative" ones among 200 (3,000 + 1,000, 5% flipped);
* ``tabular_mixed`` (session 20): three categorical columns (10, 50 and 200 levels, carried as float codes) and 8
  numeric ones; 3 classes from category effects plus a numeric rule (3,000 + 1,000); embeddings + an MLP.

* ``weighted_classes`` (session 21, added to look for new failures, before any change): ``make_classification`` with 4
  classes at 70/15/10/5% (3,000 + 1,000 items, 20 features, 2% labels flipped), standardised; ``CrossEntropyLoss``
  with the inverse-share class weights a user sets for imbalance (the loss is not what accuracy measures); an MLP;
* ``huber_multi`` (session 21): three regression targets in their own units (scales about 1, 5 and 20; the third
  with Student-t noise) from 12 features (2,500 + 500), ``HuberLoss``; a SiLU MLP (``accuracy_style="inv-loss"``);
* ``groupnorm_cnn`` (session 21): 3x16x16 colour images of 4 classes (red or blue dominant x horizontal or vertical
  stripes, random phase and period, noise; 2,000 + 500) through a CNN with GroupNorm and a global average pool.

* ``segment`` (session 23, added to look for new failures, before any change): per-pixel segmentation of 1x24x24
  images (1,500 + 500) holding two to four discs and squares of random size, position and brightness on a noisy,
  unevenly lit background; labels per pixel (background, disc, square); a tiny U-Net (one skip connection, no
  normalisation), ``CrossEntropyLoss`` over ``(N, 3, 24, 24)`` outputs; the accuracy is per pixel;
* ``frozen_probe`` (session 23): a linear probe: scikit-learn's digits (1,297 + 500) through a frozen random
  two-layer feature extractor (its parameters ``requires_grad=False``, as a user freezes a pretrained backbone) and
  a trainable linear head.

The splits and the data are fixed by seeds; nothing downloads (scikit-learn bundles both sets).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset


def _split(x: np.ndarray, y: np.ndarray, n_val: int, seed: int) -> tuple[np.ndarray, ...]:
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[n_val:], order[:n_val]
    mu, sd = x[tr].mean(0), x[tr].std(0) + 1e-8
    return (x[tr] - mu) / sd, y[tr], (x[va] - mu) / sd, y[va]


def _classes(x: np.ndarray, y: np.ndarray, n_val: int, seed: int) -> tuple[TensorDataset, TensorDataset]:
    """A classification set split and standardised by :func:`_split`, as float32 / int64 tensors."""
    xt, yt, xv, yv = _split(x, y, n_val, seed)
    return (TensorDataset(torch.tensor(xt, dtype=torch.float32), torch.tensor(yt)),
            TensorDataset(torch.tensor(xv, dtype=torch.float32), torch.tensor(yv)))


def wine_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_wine

    d = load_wine()
    return _classes(d.data, d.target, 58, 3)


def wine_model() -> nn.Module:
    return nn.Sequential(nn.Linear(13, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 3))


def diabetes_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_diabetes

    d = load_diabetes()
    xt, yt, xv, yv = _split(d.data, d.target, 142, 4)
    mu, sd = yt.mean(), yt.std()

    def tensors(x: np.ndarray, y: np.ndarray) -> TensorDataset:
        return TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor((y - mu) / sd, dtype=torch.float32)[:, None])

    return tensors(xt, yt), tensors(xv, yv)


def diabetes_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))


def _shape(kind: int, size: int = 16) -> np.ndarray:
    img = np.zeros((size, size), np.float32)
    yy, xx = np.mgrid[:size, :size] - 3.5
    if kind == 0:  # square
        img[:8, :8] = 1.0
    elif kind == 1:  # cross
        img[3:5, :8] = img[:8, 3:5] = 1.0
    elif kind == 2:  # ring
        r = np.sqrt(yy**2 + xx**2)
        img[(r > 2.0) & (r < 3.6)] = 1.0
    else:  # bar
        img[3:5, :8] = 1.0
    return img


class Shapes(Dataset):
    """``n`` items of four shape classes; a fixed placement and noise per item, and, when ``augment``,
    a fresh random shift (up to 2 pixels) and horizontal flip on every read."""

    def __init__(self, n: int, seed: int, augment: bool) -> None:
        g = np.random.default_rng(seed)
        self.y = g.integers(0, 4, n)
        self.pos = g.integers(0, 9, (n, 2))
        self.noise = g.normal(0.0, 0.6, (n, 16, 16)).astype(np.float32)
        self.augment = augment
        self.shapes = [_shape(k) for k in range(4)]

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = np.zeros((16, 16), np.float32)
        r, c = self.pos[i]
        img[r : r + 8, c : c + 8] = self.shapes[self.y[i]][:8, :8]
        img = img + self.noise[i]
        if self.augment:
            dr, dc = np.random.randint(-2, 3, 2)
            img = np.roll(img, (int(dr), int(dc)), axis=(0, 1))
            if np.random.rand() < 0.5:
                img = img[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(img))[None], int(self.y[i])


def shapes_dataset() -> tuple[Shapes, Shapes]:
    return Shapes(2000, 11, augment=True), Shapes(500, 12, augment=False)


def shapes_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, 4))


def cancer_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    return _classes(d.data, d.target, 169, 5)


def cancer_model() -> nn.Module:
    return nn.Sequential(nn.Linear(30, 32), nn.ReLU(), nn.Linear(32, 2))


class DictItems(Dataset):
    """``{"features": float32 (20,), "label": int}`` items."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"features": self.x[i], "label": self.y[i]}


def dict_prepare(batch: dict[str, torch.Tensor], device: Any = None, non_blocking: bool = False) -> tuple[Any, Any]:
    return (batch["features"].to(device, non_blocking=non_blocking), batch["label"].to(device, non_blocking=non_blocking))


def dicts_dataset() -> Any:
    from sklearn.datasets import make_classification

    from ignite_seg import Data

    x, y = make_classification(n_samples=2000, n_features=20, n_informative=5, n_classes=4, flip_y=0.05,
                               random_state=7)
    xt, yt, xv, yv = _split(x, y, 500, 6)
    return Data(DictItems(xt, yt), DictItems(xv, yv), prepare_batch=dict_prepare)


def dicts_model() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(),
                         nn.Linear(64, 4))


def friedman_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_friedman1

    x, y = make_friedman1(n_samples=2500, n_features=10, noise=1.0, random_state=8)
    xt, yt, xv, yv = _split(x, y, 500, 9)
    mu, sd = yt.mean(), yt.std()
    return (TensorDataset(torch.tensor(xt, dtype=torch.float32), torch.tensor((yt - mu) / sd, dtype=torch.float32)[:, None]),
            TensorDataset(torch.tensor(xv, dtype=torch.float32), torch.tensor((yv - mu) / sd, dtype=torch.float32)[:, None]))


def friedman_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def few_digits_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_digits

    d = load_digits()
    n = len(d.target)
    return _classes(d.data, d.target, n - 300, 10)  # 300 training items, the other 1,497 to validate


def few_digits_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


class TokenCounts(Dataset):
    """``n`` sequences of token ids (0 pads), lengths 6-24 over tokens 1-15; the label is the most frequent of tokens
    1-8 in the sequence's second half (ties redrawn), replaced by a random one on a ``flip`` fraction of the items."""

    def __init__(self, n: int, seed: int, flip: float = 0.0) -> None:
        g = np.random.default_rng(seed)
        x = np.zeros((n, 24), np.int64)
        y = np.zeros(n, np.int64)
        for i in range(n):
            while True:
                length = int(g.integers(6, 25))
                seq = g.integers(1, 16, length)
                counts = np.bincount(seq[length // 2:], minlength=16)[1:9]
                if (counts == counts.max()).sum() == 1:
                    break
            x[i, :length], y[i] = seq, int(np.argmax(counts))
        flipped = g.random(n) < flip
        y[flipped] = g.integers(0, 8, int(flipped.sum()))
        self.x, self.y = torch.tensor(x), torch.tensor(y)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


class TinyEncoder(nn.Module):
    """Embedding + learned positions, a pre-norm ``nn.TransformerEncoder`` with the padding mask, masked mean-pool."""

    def __init__(self, vocab: int = 16, d: int = 32, length: int = 24, classes: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Parameter(torch.zeros(1, length, d))
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = x == 0
        h = self.encoder(self.embed(x) + self.pos[:, : x.shape[1]], src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1).clamp(min=1.0))


def tokens_dataset() -> tuple[TokenCounts, TokenCounts]:
    return TokenCounts(2000, 13, flip=0.08), TokenCounts(500, 14)


def tokens_model() -> nn.Module:
    return TinyEncoder()


def rare_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=4000, n_features=30, n_informative=8, weights=[0.9, 0.1], flip_y=0.03,
                               class_sep=0.8, random_state=15)
    return _classes(x, y, 1000, 16)


def rare_model() -> nn.Module:
    return nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(64, 2))


def raw_diabetes_dataset() -> tuple[TensorDataset, TensorDataset]:
    """scikit-learn's diabetes as it comes: the features (already centred and scaled by the loader) and the
    target in its own units (25-346, mean 152), which a user who does not standardise it hands over."""
    from sklearn.datasets import load_diabetes

    d = load_diabetes()
    order = np.random.default_rng(4).permutation(len(d.target))
    tr, va = order[142:], order[:142]

    def tensors(idx: np.ndarray) -> TensorDataset:
        return TensorDataset(torch.tensor(d.data[idx], dtype=torch.float32),
                             torch.tensor(d.target[idx], dtype=torch.float32)[:, None])

    return tensors(tr), tensors(va)


def raw_diabetes_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))


def tags_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_multilabel_classification

    x, y = make_multilabel_classification(n_samples=2000, n_features=40, n_classes=6, n_labels=2, random_state=17)
    xt, yt, xv, yv = _split(x.astype(np.float64), y, 500, 18)
    return (TensorDataset(torch.tensor(xt, dtype=torch.float32), torch.tensor(yt, dtype=torch.float32)),
            TensorDataset(torch.tensor(xv, dtype=torch.float32), torch.tensor(yv, dtype=torch.float32)))


def tags_model() -> nn.Module:
    return nn.Sequential(nn.Linear(40, 64), nn.ReLU(), nn.Linear(64, 6))


def many_classes_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=5000, n_features=40, n_informative=24, n_redundant=4, n_classes=40,
                               n_clusters_per_class=1, class_sep=1.5, random_state=19)
    return _classes(x, y, 1000, 20)


def many_classes_model() -> nn.Module:
    return nn.Sequential(nn.Linear(40, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 40))


class GRUTagger(nn.Module):
    """Embedding, a 1-layer GRU over the padded sequence (packed by length), its last state to the classes."""

    def __init__(self, vocab: int = 16, d: int = 32, classes: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.gru = nn.GRU(d, 64, batch_first=True)
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lengths = (x != 0).sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(x), lengths, batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)
        return self.head(h[-1])


def gru_dataset() -> tuple[TokenCounts, TokenCounts]:
    return TokenCounts(2000, 21, flip=0.08), TokenCounts(500, 22)


def gru_model() -> nn.Module:
    return GRUTagger()


def hastie_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_hastie_10_2

    x, y = make_hastie_10_2(n_samples=3000, random_state=31)
    return _classes(x, (y > 0).astype(np.int64), 1000, 32)


def hastie_model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))


def sparse_regression_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_regression

    x, y = make_regression(n_samples=900, n_features=50, n_informative=8, noise=30.0, random_state=33)
    xt, yt, xv, yv = _split(x, y, 300, 34)
    mu, sd = yt.mean(), yt.std()
    as_t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    return (TensorDataset(as_t(xt), as_t((yt - mu) / sd)[:, None]),
            TensorDataset(as_t(xv), as_t((yv - mu) / sd)[:, None]))


def sparse_regression_model() -> nn.Module:
    return nn.Sequential(nn.Linear(50, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))


def _waves(n: int, seed: int, steps: int = 64) -> TensorDataset:
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 4, n)
    t = np.arange(steps)[None, :] * rng.uniform(0.04, 0.15, (n, 1)) + rng.uniform(0, 1, (n, 1))  # cycles
    frac = t % 1.0
    shapes = np.stack([np.sin(2 * np.pi * t), np.sign(np.sin(2 * np.pi * t)), 4 * np.abs(frac - 0.5) - 1,
                       2 * frac - 1])  # sine, square, triangle, sawtooth
    x = shapes[kind, np.arange(n)] * rng.uniform(0.6, 1.4, (n, 1)) + rng.normal(0, 0.6, (n, steps))
    return TensorDataset(torch.tensor(x[:, None, :], dtype=torch.float32), torch.tensor(kind))


def waves_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _waves(1600, 35), _waves(400, 36)


def waves_model() -> nn.Module:
    return nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2), nn.Conv1d(16, 32, 5, padding=2),
                         nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 4))


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.data.astype(np.float32), d.target


def noisy_labels_dataset() -> tuple[TensorDataset, TensorDataset]:
    x, y = _digits()
    train, val = _classes(x, y, 500, 41)
    labels = train.tensors[1].clone()
    g = torch.Generator().manual_seed(42)
    flip = torch.rand(len(labels), generator=g) < 0.3
    labels[flip] = torch.randint(0, 10, (int(flip.sum()),), generator=g)
    return TensorDataset(train.tensors[0], labels), val


def noisy_labels_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def deep_plain_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=2500, n_features=20, n_informative=12, n_classes=5, n_clusters_per_class=2,
                               random_state=43)
    return _classes(x, y, 500, 44)


def deep_plain_model() -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(20, 64), nn.ReLU()]
    for _ in range(7):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(64, 5))


class ShiftedDigits(Dataset):
    """scikit-learn's digits as 1x8x8 images in [0, 1]; when ``augment``, a fresh shift of up to a pixel on every read."""

    def __init__(self, x: np.ndarray, y: np.ndarray, augment: bool) -> None:
        self.x, self.y, self.augment = x.reshape(-1, 8, 8) / 16.0, y, augment

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = self.x[i]
        if self.augment:
            dr, dc = np.random.randint(-1, 2, 2)
            img = np.roll(img, (int(dr), int(dc)), axis=(0, 1))
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32))[None], int(self.y[i])


def res_digits_dataset() -> tuple[ShiftedDigits, ShiftedDigits]:
    x, y = _digits()
    order = np.random.default_rng(45).permutation(len(x))
    return ShiftedDigits(x[order[500:]], y[order[500:]], True), ShiftedDigits(x[order[:500]], y[order[:500]], False)


class _Residual(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


def res_digits_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         _Residual(16), _Residual(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def autoencoder_dataset() -> tuple[TensorDataset, TensorDataset]:
    x, y = _digits()
    xt, _, xv, _ = _split(x, y, 500, 46)
    return (TensorDataset(torch.tensor(xt, dtype=torch.float32), torch.tensor(xt, dtype=torch.float32)),
            TensorDataset(torch.tensor(xv, dtype=torch.float32), torch.tensor(xv, dtype=torch.float32)))


def autoencoder_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 64), nn.ReLU(),
                         nn.Linear(64, 64))


def logistic_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=2500, n_features=40, n_informative=10, n_classes=2, flip_y=0.1,
                               random_state=47)
    return _classes(x, y, 500, 48)


def logistic_model() -> nn.Module:
    return nn.Linear(40, 2)


def outliers_l1_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_regression

    x, y = make_regression(n_samples=2500, n_features=20, n_informative=10, noise=10.0, random_state=51)
    xt, yt, xv, yv = _split(x, y, 500, 52)
    mu, sd = yt.mean(), yt.std()
    yt, yv = (yt - mu) / sd, (yv - mu) / sd
    g = np.random.default_rng(53)
    bad = g.random(len(yt)) < 0.05
    yt = np.where(bad, g.choice([-1.0, 1.0], len(yt)) * g.uniform(5, 15, len(yt)), yt)
    return (TensorDataset(torch.tensor(xt, dtype=torch.float32), torch.tensor(yt, dtype=torch.float32)[:, None]),
            TensorDataset(torch.tensor(xv, dtype=torch.float32), torch.tensor(yv, dtype=torch.float32)[:, None]))


def outliers_l1_model() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def smooth_digits_dataset() -> tuple[TensorDataset, TensorDataset]:
    x, y = _digits()
    order = np.random.default_rng(54).permutation(len(x))
    images = torch.tensor(x.reshape(-1, 1, 8, 8) / 16.0, dtype=torch.float32)
    labels = torch.tensor(y)
    return (TensorDataset(images[order[500:]], labels[order[500:]]),
            TensorDataset(images[order[:500]], labels[order[:500]]))


def smooth_digits_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, 10))


def marked_values(n: int, seed: int, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` sequences of ``steps`` (value in [0, 1), marker) pairs, two markers each: ``(x, values, markers)``."""
    g = np.random.default_rng(seed)
    values = g.random((n, steps))
    markers = np.zeros((n, steps))
    for i in range(n):
        markers[i, g.choice(steps, 2, replace=False)] = 1.0
    return np.stack([values, markers], axis=-1).astype(np.float32), values, markers


def _adding(n: int, seed: int, steps: int = 30) -> TensorDataset:
    x, values, markers = marked_values(n, seed, steps)
    y = (values * markers).sum(1, keepdims=True).astype(np.float32)
    return TensorDataset(torch.tensor(x), torch.tensor(y))


def adding_dataset() -> tuple[TensorDataset, TensorDataset]:
    return _adding(2000, 55), _adding(500, 56)


class LastStateLSTM(nn.Module):
    """An LSTM over the sequence, its last state through a linear head."""

    def __init__(self, features: int = 2, hidden: int = 32, out: int = 1) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(x)
        return self.head(h[-1])


def adding_model() -> nn.Module:
    return LastStateLSTM()


class TokenBags(Dataset):
    """``n`` lists of 5-40 token ids out of 200 (1-20 "positive", 21-40 "negative", the rest neutral); the label is
    whether the positive ones outnumber the negative ones (ties redrawn), flipped on a ``flip`` fraction."""

    def __init__(self, n: int, seed: int, flip: float = 0.0) -> None:
        g = np.random.default_rng(seed)
        self.items: list[list[int]] = []
        labels = []
        while len(self.items) < n:
            tokens = g.integers(0, 200, int(g.integers(5, 41)))
            pos, neg = int(((tokens >= 1) & (tokens <= 20)).sum()), int(((tokens >= 21) & (tokens <= 40)).sum())
            if pos == neg:
                continue
            self.items.append(tokens.tolist())
            labels.append(int(pos > neg))
        y = np.array(labels)
        flipped = g.random(n) < flip
        y[flipped] = 1 - y[flipped]
        self.y = y.tolist()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[list[int], int]:
        return self.items[i], self.y[i]


def bag_collate(items: list[tuple[list[int], int]]) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Token lists concatenated, with each list's offset (``nn.EmbeddingBag``'s input), and the labels."""
    lengths = torch.tensor([len(tokens) for tokens, _ in items])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    tokens = torch.tensor([t for toks, _ in items for t in toks], dtype=torch.long)
    return (tokens, offsets), torch.tensor([label for _, label in items])


class BagClassifier(nn.Module):
    def __init__(self, vocab: int = 200, d: int = 32, classes: int = 2) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, d, mode="mean")
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(d, classes))

    def forward(self, x: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        tokens, offsets = x
        return self.head(self.bag(tokens, offsets))


def bag_of_words_dataset() -> Any:
    from ignite_seg import Data

    return Data(TokenBags(3000, 57, flip=0.05), TokenBags(1000, 58), collate_fn=bag_collate)


def bag_of_words_model() -> nn.Module:
    return BagClassifier()


def tabular_mixed_dataset() -> tuple[TensorDataset, TensorDataset]:
    g = np.random.default_rng(59)
    n = 4000
    levels = (10, 50, 200)
    cats = np.stack([g.integers(0, k, n) for k in levels], axis=1)
    effects = [g.normal(0, 1, (k, 3)) for k in levels]
    num = g.normal(0, 1, (n, 8))
    logits = sum(e[cats[:, j]] for j, e in enumerate(effects)) + num[:, :3] * np.array([1.5, -1.0, 0.8])
    logits[:, 0] += np.sin(2 * num[:, 3])
    y = np.argmax(logits + g.gumbel(size=logits.shape), axis=1)
    x = np.concatenate([cats.astype(np.float32), num.astype(np.float32)], axis=1)
    xt, yt, xv, yv = x[1000:], y[1000:], x[:1000], y[:1000]
    return (TensorDataset(torch.tensor(xt), torch.tensor(yt)), TensorDataset(torch.tensor(xv), torch.tensor(yv)))


class MixedTabular(nn.Module):
    """Embeddings for the three categorical columns (float codes), concatenated with the numeric ones, an MLP."""

    def __init__(self, levels: tuple[int, ...] = (10, 50, 200), dims: tuple[int, ...] = (4, 8, 16), numeric: int = 8,
                 classes: int = 3) -> None:
        super().__init__()
        self.embeds = nn.ModuleList(nn.Embedding(k, d) for k, d in zip(levels, dims))
        self.mlp = nn.Sequential(nn.Linear(sum(dims) + numeric, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64),
                                 nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.embeds)
        codes = x[:, :k].long()
        parts = [e(codes[:, j]) for j, e in enumerate(self.embeds)]
        return self.mlp(torch.cat([*parts, x[:, k:]], dim=1))


def tabular_mixed_model() -> nn.Module:
    return MixedTabular()


def weighted_classes_dataset() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=4000, n_features=20, n_informative=10, n_classes=4,
                               weights=[0.70, 0.15, 0.10, 0.05], flip_y=0.02, class_sep=1.0, random_state=61)
    x = x.astype(np.float32)
    xt, yt, xv, yv = x[1000:], y[1000:], x[:1000], y[:1000]
    mu, sd = xt.mean(0), xt.std(0) + 1e-6
    return (TensorDataset(torch.tensor((xt - mu) / sd), torch.tensor(yt)),
            TensorDataset(torch.tensor((xv - mu) / sd), torch.tensor(yv)))


def weighted_classes_model() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


#: 1 / (classes x share): the weights a user computes from the design's 70/15/10/5% shares
CLASS_WEIGHTS = torch.tensor([1 / (4 * w) for w in (0.70, 0.15, 0.10, 0.05)])


def huber_multi_dataset() -> tuple[TensorDataset, TensorDataset]:
    g = np.random.default_rng(62)
    n = 3000
    x = g.normal(0, 1, (n, 12)).astype(np.float32)
    y1 = np.sin(x[:, 0]) + np.sin(2 * x[:, 1]) + 0.1 * g.normal(size=n)
    y2 = 5 * (x[:, 2] * x[:, 3] + 0.5 * x[:, 4] ** 2) + 0.5 * g.normal(size=n)
    y3 = 20 * (0.6 * x[:, 5] - 0.4 * x[:, 6] + 0.3 * np.abs(x[:, 7])) + 4 * g.standard_t(3, size=n)
    y = np.stack([y1, y2, y3], axis=1).astype(np.float32)
    return (TensorDataset(torch.tensor(x[500:]), torch.tensor(y[500:])),
            TensorDataset(torch.tensor(x[:500]), torch.tensor(y[:500])))


def huber_multi_model() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 3))


def _stripes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = np.random.default_rng(seed)
    y = g.integers(0, 4, n)
    rows = np.arange(16)[None, :, None]
    cols = np.arange(16)[None, None, :]
    period = g.uniform(3, 6, (n, 1, 1))
    phase = g.uniform(0, 2 * np.pi, (n, 1, 1))
    vertical = (y % 2 == 1)[:, None, None]
    pattern = 0.5 + 0.5 * np.sin(2 * np.pi * np.where(vertical, cols, rows) / period + phase)
    img = g.normal(0, 0.35, (n, 3, 16, 16)) + 0.3
    red = (y < 2)
    img[red, 0] += pattern[red]
    img[~red, 2] += pattern[~red]
    img[:, 1] += 0.5 * pattern * g.uniform(0, 1, (n, 1, 1))  # a green distractor on every class
    return torch.tensor(img, dtype=torch.float32), torch.tensor(y)


def groupnorm_cnn_dataset() -> tuple[TensorDataset, TensorDataset]:
    return TensorDataset(*_stripes(2000, 63)), TensorDataset(*_stripes(500, 64))


def groupnorm_cnn_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4))


class Segments(Dataset):
    """1x24x24 images of discs and squares on a noisy, unevenly lit background; per-pixel labels 0/1/2."""

    def __init__(self, n: int, seed: int) -> None:
        g = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:24, 0:24].astype(np.float32)
        x = np.zeros((n, 1, 24, 24), np.float32)
        y = np.zeros((n, 24, 24), np.int64)
        for i in range(n):
            tilt = g.normal(0, 0.02, 2)
            img = tilt[0] * (xx - 12) + tilt[1] * (yy - 12) + g.normal(0, 0.35, (24, 24))
            lab = np.zeros((24, 24), np.int64)
            for _ in range(g.integers(2, 5)):
                cx, cy, r = g.uniform(3, 21), g.uniform(3, 21), g.uniform(2.0, 5.0)
                kind = int(g.integers(1, 3))
                inside = ((xx - cx) ** 2 + (yy - cy) ** 2 <= r**2) if kind == 1 else (
                    (np.abs(xx - cx) <= r * 0.85) & (np.abs(yy - cy) <= r * 0.85))
                img = np.where(inside, g.uniform(0.6, 1.4), img)
                lab = np.where(inside, kind, lab)
            x[i, 0], y[i] = img, lab
        self.x, self.y = torch.tensor(x), torch.tensor(y)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


def segment_dataset() -> tuple[Segments, Segments]:
    return Segments(1500, 61), Segments(500, 62)


class TinyUNet(nn.Module):
    """Two 3x3 convolutions, a 2x pool, one at half resolution, a transposed convolution up, the skip joined, a 1x1
    head: per-pixel logits of 3 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.enc(x)
        return self.dec(torch.cat([self.up(self.mid(e)), e], dim=1))


def segment_model() -> nn.Module:
    return TinyUNet()


def frozen_probe_dataset() -> tuple[TensorDataset, TensorDataset]:
    x, y = _digits()
    return _classes(x, y, 500, 63)


def frozen_probe_model() -> nn.Module:
    g = torch.Generator().manual_seed(64)  # the same "pretrained" backbone in every process
    backbone = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
    with torch.no_grad():
        for m in backbone:
            if isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / m.in_features**0.5)
                m.bias.zero_()
    backbone.requires_grad_(False)
    return nn.Sequential(backbone, nn.Linear(128, 10))


REGRESSION = ("diabetes", "friedman", "raw_diabetes", "sparse_regression", "autoencoder", "outliers_l1", "adding",
              "huber_multi")
LOSSES = {"tags": "BCEWithLogitsLoss", **{name: "MSELoss" for name in REGRESSION}, "outliers_l1": "L1Loss",
          "huber_multi": "HuberLoss"}
LOSS_KWARGS = {"smooth_digits": {"label_smoothing": 0.1}, "weighted_classes": {"weight": CLASS_WEIGHTS}}
STYLES = {"tags": "multiclass", **{name: "inv-loss" for name in REGRESSION}}
UNSEEN_TASKS = {
    name: {"model": ("bench.tq_unseen_tasks", f"{name}_model", (), {}),
           "dataset": ("bench.tq_unseen_tasks", f"{name}_dataset", (), {}),
           "loss": ("torch.nn", LOSSES.get(name, "CrossEntropyLoss"), (), LOSS_KWARGS.get(name, {})),
           "style": STYLES.get(name, "classification")}
    for name in ("wine", "diabetes", "shapes", "cancer", "dicts", "friedman", "few_digits", "tokens", "rare",
                 "raw_diabetes", "tags", "many_classes", "gru", "hastie", "sparse_regression", "waves",
                 "noisy_labels", "deep_plain", "res_digits", "autoencoder", "logistic", "outliers_l1", "smooth_digits",
                 "adding", "bag_of_words", "tabular_mixed", "weighted_classes", "huber_multi", "groupnorm_cnn", "segment",
                 "frozen_probe")
}
