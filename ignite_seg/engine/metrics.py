"""Performance measures for the three accuracy styles; "perf" is always higher-is-better."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Literal, get_args

import torch

__all__ = ["AccuracyStyle", "ACCURACY_STYLES", "LossFn", "batch_perf_sum", "evaluate", "Probe"]

#: How perf is measured: argmax accuracy, per-label accuracy of multi-hot outputs, or ``1 / (1 + loss)``.
AccuracyStyle = Literal["classification", "multiclass", "inv-loss"]
ACCURACY_STYLES: tuple[str, ...] = get_args(AccuracyStyle)
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def batch_perf_sum(output: torch.Tensor, target: torch.Tensor, style: AccuracyStyle) -> float:
    """Sum over the batch of the per-sample perf (``inv-loss`` is handled by :func:`evaluate`).

    ``classification``: argmax accuracy; targets are class indices or one-hot/probabilities.
    ``multiclass``: outputs thresholded at 0.5 against multi-hot targets, averaged per label.
    """
    if style == "classification":
        pred = output.argmax(dim=1)
        tgt = target.argmax(dim=1) if target.ndim > 1 else target
        return float((pred == tgt).sum().item())
    if style == "multiclass":
        correct = ((output > 0.5) == (target > 0.5)).float()
        return float(correct.reshape(correct.shape[0], -1).mean(dim=1).sum().item())
    raise ValueError(f"no per-sample perf for accuracy_style={style!r}")


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    loss_fn: LossFn,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    style: AccuracyStyle,
    device: torch.device | str = "cpu",
) -> tuple[float, float]:
    """Mean loss and mean perf of ``model`` over ``batches``, in eval mode; restores the mode."""
    was_training = model.training
    model.eval()
    loss_sum, perf_sum, n = 0.0, 0.0, 0
    try:
        for x, y in batches:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            out = model(x)
            k = int(x.shape[0])
            loss_sum += float(loss_fn(out, y).item()) * k
            if style != "inv-loss":
                perf_sum += batch_perf_sum(out, y, style)
            n += k
    finally:
        model.train(was_training)
    loss = loss_sum / max(n, 1)
    perf = 1.0 / (1.0 + loss) if style == "inv-loss" else perf_sum / max(n, 1)
    return loss, perf


@dataclass(frozen=True)
class Probe:
    """A model, its loss and its perf measure, bound once: ``probe(batch)`` is :func:`evaluate` on one batch.

    The recorders measure the same model on fixed batches many times; the batch should already be
    on ``device``.
    """

    model: torch.nn.Module
    loss_fn: LossFn
    style: AccuracyStyle
    device: torch.device

    def __call__(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, float]:
        return evaluate(self.model, self.loss_fn, [batch], self.style, self.device)

    def to_device(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch`` moved to the probe's device."""
        return batch[0].to(self.device), batch[1].to(self.device)
