"""Tag spans in variable-length sequences with a small GRU: the reference recipe's loop, no workarounds.

Run from the repository root (about a minute on 2 cores)::

    python examples/sequence_tagging.py [--trials 2] [--cores 2] [--epochs 12] [--analysis images]

The task (synthetic): each token is a noise token, a ``start`` marker or an ``end`` marker, seen
through a noisy one-hot (a marker is sometimes misread), with two random features. A token belongs to a span (class 1) from a ``start`` marker up to the next
``end`` marker, else it is outside (class 0); telling them apart needs the tokens before it, so
the tagger is recurrent. Sequences have 8 to 40 tokens: a ``collate_fn`` pads them into a
:class:`Batch`, targets padded with the loss's ``ignore_index``; ``prepare_batch`` turns a batch
into ``(inputs, targets)`` on the device. The custom metric is the IoU of the span tokens.

The recipe is fixed (no tuning) and reads like the reference training script's: AdamW (betas
0.9/0.98), gradient clipping at 1.0, the "noam" schedule (linear warmup over 60 *steps* up to the peak
LR ``lr_end`` = 1e-2, then ``peak * sqrt(W / k)``; ``lr_start`` is not used by it), an EMA of the weights (0.99), two named validation sets
("clean" and "noisy", the markers misread more often), and each trial keeps its best snapshot by the
per-token accuracy *averaged over both validation sets* (``best_over="mean"``) in
``trials/<i>/model_best.pt``. The IoU is measured on the validation sets only
(``val_only_metrics``); the model returns ``(N, L, C)`` logits as a sequence model does
(``Data(class_dim=-1)``) and the loss flattens them. Every epoch logs one line per trial with loss,
accuracy and IoU per set, as the script's own per-epoch print did.

The loaders below are module-level functions of this script; the worker processes import this
file to build them, hence the ``if __name__ == "__main__"`` guard.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import torch
from ignite.metrics import Metric
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import Dataset

PAD = -1  # the loss's ignore_index: padded positions count nowhere
NOISE, START, END = 0, 1, 2
N_FEATURES = 3 + 2  # the token kind (one-hot, blurred by noise) and two random features
NOISE_STD = 0.45  # how much the kind's one-hot is blurred: a marker is sometimes misread
NOISY_STD = 0.7  # the "noisy" validation set: markers misread more often


@dataclass
class Batch:
    """A padded batch: features ``(N, L, F)``, lengths ``(N,)``, targets ``(N, L)`` (``PAD`` past the end)."""

    features: torch.Tensor
    lengths: torch.Tensor
    targets: torch.Tensor


class Spans(Dataset):
    """``n`` sequences of 8-40 tokens; a token is in a span (1) from a START up to the next END."""

    def __init__(self, n: int, seed: int, noise: float = NOISE_STD) -> None:
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for length in torch.randint(8, 41, (n,), generator=g).tolist():
            kinds = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), length, replacement=True, generator=g)
            labels, inside = torch.zeros(length, dtype=torch.long), False
            for t, kind in enumerate(kinds.tolist()):
                inside = inside or kind == START
                labels[t] = int(inside)  # a span runs from its START up to its END, both included
                inside = inside and kind != END
            kind = nn.functional.one_hot(kinds, 3).float() + noise * torch.randn(length, 3, generator=g)
            x = torch.cat([kind, torch.randn(length, 2, generator=g)], dim=1)
            self.items.append((x, labels))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.items[i]


def pad_collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> Batch:
    lengths = torch.tensor([len(x) for x, _ in items])
    features = torch.zeros(len(items), int(lengths.max()), N_FEATURES)
    targets = torch.full((len(items), int(lengths.max())), PAD, dtype=torch.long)
    for i, (x, y) in enumerate(items):
        features[i, : len(x)], targets[i, : len(y)] = x, y
    return Batch(features, lengths, targets)


def prepare_batch(batch: Batch, device: torch.device | str | None = None, non_blocking: bool = False):
    inputs = (batch.features.to(device, non_blocking=non_blocking), batch.lengths)
    return inputs, batch.targets.to(device, non_blocking=non_blocking)


def dataset(n_train: int = 2000, n_val: int = 500):
    import ignite_seg

    val = {"clean": Spans(n_val, seed=1), "noisy": Spans(n_val, seed=2, noise=NOISY_STD)}
    return ignite_seg.Data(Spans(n_train, seed=0), val, collate_fn=pad_collate, prepare_batch=prepare_batch,
                           class_dim=-1, eval_batch_size=256)


class GRUTagger(nn.Module):
    """``(features, lengths) -> (N, L, 2)`` logits: a one-layer GRU over the packed sequences."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.gru = nn.GRU(N_FEATURES, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 2)

    def forward(self, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        features, lengths = inputs
        packed = pack_padded_sequence(features, lengths.cpu(), batch_first=True, enforce_sorted=False)
        states, _ = pad_packed_sequence(self.gru(packed)[0], batch_first=True, total_length=features.shape[1])
        return self.out(states)


class TokenLoss(nn.Module):
    """Cross-entropy over every real token of ``(N, L, C)`` logits; ``ignore_index`` also tells perf the padding."""

    ignore_index = PAD

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=PAD)


def loss() -> nn.Module:
    return TokenLoss()


class SpanIoU(Metric):
    """Intersection over union of the tokens predicted and labelled as span, padding left out."""

    def reset(self) -> None:
        self.inter, self.union = 0, 0

    def update(self, output: tuple[torch.Tensor, torch.Tensor]) -> None:
        y_pred, y = output
        real = y != PAD
        pred, true = (y_pred.argmax(dim=-1) == 1) & real, (y == 1) & real
        self.inter += int((pred & true).sum())
        self.union += int((pred | true).sum())

    def compute(self) -> float:
        return self.inter / max(self.union, 1)


def main() -> None:
    import ignite_seg
    from ignite_seg.storage import RunFolder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--n-train", type=int, default=2000, help="training sequences (500 for validation)")
    parser.add_argument("--analysis", default="images", help="analysis preset, e.g. none, text, images")
    parser.add_argument("--folder", default="out/sequence_tagging/current")
    args = parser.parse_args()

    recipe = ignite_seg.FixedHyperparameters(
        optimizer="adamw", betas=(0.9, 0.98), lr_start=1e-3, lr_end=1e-2, batch_size=32,
        cycle_size_epochs=args.epochs, epochs=args.epochs, schedule="noam", warmup_steps=60,
        grad_clip_norm=1.0, ema_decay=0.99, weight_decay=1e-4,
    )
    result = ignite_seg.train(
        GRUTagger, (__name__, "dataset", (), {"n_train": args.n_train}), loss,
        folder=args.folder, hyperparameters=recipe, analysis=args.analysis, trials=args.trials,
        cores=args.cores, seed=0, snapshots_per_epoch=4,
        metrics={"iou": SpanIoU}, metric_modes={"iou": "max"}, val_only_metrics=["iou"],
        best_metric="perf", best_mode="max", best_over="mean",
    )
    for trial in result.completed:
        res = RunFolder(result.folder).read_result(trial.trial_id)  # trials/<i>/result.json, as a record
        assert res is not None and res.best is not None
        print(f"trial {trial.trial_id}: final per-token accuracy clean {res.metric('perf_val'):.3f} / noisy "
              f"{res.metric('perf_val_noisy'):.3f}, IoU clean {res.metric('metric_iou_val'):.3f} (EMA weights, whole "
              f"sets); best snapshot at epoch {res.best.epoch:.2f} with mean accuracy {res.best.value:.3f}")
    if result.completed:
        model = ignite_seg.load_model(result.folder, result.completed[0].trial_id, model=GRUTagger(), best=True)
        print(f"the best checkpoint: {sum(p.numel() for p in model.parameters())} parameters, "
              f"in {result.folder / 'trials' / str(result.completed[0].trial_id) / 'model_best.pt'}")
    if args.analysis != "none":
        print(f"report: {result.folder / 'analysis' / 'index.html'}")


if __name__ == "__main__":
    main()
