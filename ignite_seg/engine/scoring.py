"""Perf as ignite ``Metric``s for the three accuracy styles, and the scorer that measures them.

"perf" is always higher-is-better:

* ``classification``: argmax accuracy over dimension 1 of ``(N, C, *)`` outputs against ``(N, *)``
  class indices (or one-hot ``(N, C, *)`` targets); targets equal to the loss's ``ignore_index``
  (padding) are not counted. Per token / per pixel outputs are counted token by token.
* ``multiclass``: multi-hot targets; each output is thresholded at 0 when it is a logit and at 0.5
  when it is a probability (see :func:`multiclass_threshold`), averaged over labels per sample.
* ``inv-loss``: ``1 / (1 + loss)``; for a loss below zero (a likelihood's) its mirror image, ``2 - 1 / (1 - loss)``
  (:func:`inv_loss_perf`).

Custom metrics are any ignite ``Metric`` fed ``(y_pred, y)``; :class:`Scorer` measures them beside
``loss`` and ``perf``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Collection, Iterable, Literal, Mapping

import ignite.distributed as idist
import torch
from ignite.exceptions import NotComputableError
from ignite.metrics import Loss, Metric, MetricsLambda
from ignite.metrics.metric import reinit__is_reduced, sync_all_reduce

__all__ = [
    "AccuracyStyle",
    "ACCURACY_STYLES",
    "TokenAccuracy",
    "MultiLabelAccuracy",
    "multiclass_threshold",
    "perf_metric",
    "inv_loss_perf",
    "SumLoss",
    "Scorer",
]

AccuracyStyle = Literal["classification", "multiclass", "inv-loss"]
ACCURACY_STYLES: tuple[str, ...] = ("classification", "multiclass", "inv-loss")
#: Names the evaluator gives its own metrics; custom metrics may not take them.
RESERVED = ("loss", "perf")


class TokenAccuracy(Metric):
    """Argmax accuracy over dimension 1, counted per item (``(N, C)``) or per token (``(N, C, *)``);
    over dimension ``class_dim`` when it is not 1 (``-1`` for ``(N, T, C)`` sequence outputs).

    Targets are class indices of shape ``(N, *)`` or one-hot/probabilities of the output's shape;
    index targets equal to ``ignore_index`` are not counted.

    Example:
        >>> m = TokenAccuracy(ignore_index=-1)
        >>> out = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])  # (N=1, C=2, L=3)
        >>> m.update((out, torch.tensor([[0, -1, 1]])))
        >>> m.compute()
        1.0
    """

    def __init__(self, ignore_index: int | None = None, output_transform: Callable[[Any], Any] = lambda x: x,
                 device: str | torch.device = "cpu", class_dim: int = 1) -> None:
        self.ignore_index, self.class_dim = ignore_index, class_dim
        super().__init__(output_transform=output_transform, device=device)

    @reinit__is_reduced
    def reset(self) -> None:
        self._correct = 0
        self._counted = 0

    @reinit__is_reduced
    def update(self, output: tuple[torch.Tensor, torch.Tensor]) -> None:
        y_pred, y = _detached(output[0]), _detached(output[1])
        if self.class_dim != 1:  # (N, *, C, *) -> (N, C, *): one-hot targets of the output's shape move alike
            y = y.movedim(self.class_dim, 1) if y.shape == y_pred.shape else y
            y_pred = y_pred.movedim(self.class_dim, 1)
        pred = y_pred.argmax(dim=1)
        if y.shape == y_pred.shape and y_pred.ndim >= 2:  # one-hot / probabilities
            right, counted = pred == y.argmax(dim=1), pred.numel()
        elif self.ignore_index is None:
            right, counted = pred == y, y.numel()
        else:
            valid = y != self.ignore_index
            right, counted = pred == y, int(valid.sum())
            if 0 <= self.ignore_index < y_pred.shape[1]:  # else no prediction can equal it: no mask needed
                right &= valid
        self._correct += int(right.sum())
        self._counted += counted

    @sync_all_reduce("_correct", "_counted")
    def compute(self) -> float:
        return self.compute_local()

    def compute_local(self) -> float:
        """:meth:`compute` over this process's updates alone (no reduction across processes)."""
        if self._counted == 0:
            raise NotComputableError("TokenAccuracy needs at least one counted target")
        return float(self._correct) / float(self._counted)

    @property
    def grain(self) -> float:
        """The smallest step of the accuracy over the targets counted since the last reset: one target."""
        return 1.0 / self._counted if self._counted else math.nan


class MultiLabelAccuracy(Metric):
    """Share of labels right per sample (outputs thresholded), averaged over samples.

    ``threshold=None`` decides per batch: outputs outside ``[0, 1]`` are logits (threshold 0),
    others probabilities (0.5); pass the threshold when the loss says which (see
    :func:`multiclass_threshold`).

    Example:
        >>> m = MultiLabelAccuracy(threshold=0.0)
        >>> m.update((torch.tensor([[0.3, -0.3]]), torch.tensor([[1.0, 0.0]])))
        >>> m.compute()
        1.0
    """

    def __init__(self, threshold: float | None = None, output_transform: Callable[[Any], Any] = lambda x: x,
                 device: str | torch.device = "cpu") -> None:
        self.threshold = threshold
        super().__init__(output_transform=output_transform, device=device)

    @reinit__is_reduced
    def reset(self) -> None:
        self._sum = 0.0  # a Python float is a float64
        self._n = 0
        self._labels = 0

    @reinit__is_reduced
    def update(self, output: tuple[torch.Tensor, torch.Tensor]) -> None:
        y_pred, y = _detached(output[0]), _detached(output[1])
        threshold = self.threshold
        if threshold is None:
            threshold = 0.5 if bool(((y_pred >= 0) & (y_pred <= 1)).all()) else 0.0
        right = ((y_pred > threshold) == (y > 0.5)).float()
        self._sum += float(right.reshape(right.shape[0], -1).mean(dim=1).sum())
        self._n += right.shape[0]
        self._labels += right.numel()

    @sync_all_reduce("_sum", "_n")
    def compute(self) -> float:
        return self.compute_local()

    def compute_local(self) -> float:
        """:meth:`compute` over this process's updates alone (no reduction across processes)."""
        if self._n == 0:
            raise NotComputableError("MultiLabelAccuracy needs at least one sample")
        return self._sum / self._n

    @property
    def grain(self) -> float:
        """The smallest step of the accuracy since the last reset: one label of one sample."""
        return 1.0 / self._labels if self._labels else math.nan


class SumLoss(Loss):
    """ignite's ``Loss`` (the batch-size-weighted mean of the batch losses) summed in float64.

    ignite sums in float32; summing ``loss * n`` in float64 keeps the mean of many batches exact to
    the float32 losses themselves.
    """

    @reinit__is_reduced
    def reset(self) -> None:
        self._total = 0.0  # a Python float is a float64
        self._num_examples = 0

    @reinit__is_reduced
    def update(self, output: Any) -> None:
        y_pred, y = output[0], output[1]
        average_loss = self._loss_fn(y_pred, y)  # read as a float below: nothing keeps its graph
        if average_loss.ndim != 0:
            raise ValueError("loss_fn did not return the average loss.")
        n = self._batch_size(y)
        self._total += float(average_loss) * n
        self._num_examples += n

    @sync_all_reduce("_total", "_num_examples")
    def compute(self) -> float:
        return self.compute_local()

    def compute_local(self) -> float:
        """:meth:`compute` over this process's updates alone (no reduction across processes)."""
        if self._num_examples == 0:
            raise NotComputableError("Loss must have at least one example before it can be computed.")
        return self._total / self._num_examples


def _detached(t: torch.Tensor) -> torch.Tensor:
    """``t`` without its graph; ``t`` itself when it has none (under ``no_grad``: a snapshot's outputs)."""
    return t.detach() if t.requires_grad else t


#: The metrics with a :meth:`compute_local` (``compute`` without the reduction across processes).
_LOCAL = (TokenAccuracy, MultiLabelAccuracy, SumLoss)


def multiclass_threshold(loss_fn: Any) -> float | None:
    """0 for a loss on logits (``BCEWithLogitsLoss``), 0.5 for one on probabilities (``BCELoss``),
    ``None`` (decide from the outputs) for any other loss."""
    if isinstance(loss_fn, torch.nn.BCEWithLogitsLoss):
        return 0.0
    if isinstance(loss_fn, (torch.nn.BCELoss, torch.nn.MSELoss)):
        return 0.5
    return None


def inv_loss_perf(loss: float) -> float:
    """``inv-loss``'s perf of a loss: ``1 / (1 + loss)`` for a loss of zero or more, and below zero (a Poisson or
    Gaussian negative log-likelihood goes there) its mirror image about ``(0, 1)``, ``2 - 1 / (1 - loss)``.

    Decreasing in the loss everywhere, 1 at zero, between 1 and 2 below it; ``1 / (1 + loss)`` alone grows without
    bound towards a loss of -1 and turns negative past it, so a better model read as a worse one.

    Example:
        >>> [inv_loss_perf(v) for v in (3.0, 0.0, -1.0, -3.0)]
        [0.25, 1.0, 1.5, 1.75]
    """
    return 1.0 / (1.0 + loss) if loss >= 0 else 2.0 - 1.0 / (1.0 - loss)


def perf_metric(style: str, loss_fn: Any, loss: Metric | None = None, class_dim: int = 1) -> Metric:
    """The ``perf`` metric of ``style`` for this loss (``inv-loss`` derives it from ``loss``); ``class_dim``:
    the outputs' class dimension for ``classification``."""
    if style == "classification":
        return TokenAccuracy(ignore_index=getattr(loss_fn, "ignore_index", None), class_dim=class_dim)
    if style == "multiclass":
        return MultiLabelAccuracy(threshold=multiclass_threshold(loss_fn))
    if style == "inv-loss":
        base = loss if loss is not None else SumLoss(loss_fn)
        return MetricsLambda(inv_loss_perf, base)
    raise ValueError(f"unknown accuracy_style {style!r}; expected one of {ACCURACY_STYLES}")


class Scorer:
    """Measures ``loss``, ``perf`` and custom ignite metrics of a model over batches.

    A plain loop that feeds ``(y_pred, y)`` to each metric's ``update`` (the ``Metric`` API an
    evaluator ``Engine`` would call), without an engine's per-run cost: the tuner scores a held-out
    slice after every step of a sweep.

    Args:
        loss_fn: the recipe's loss (``loss`` is its batch-size-weighted mean, as ignite's ``Loss``,
            summed in float64: :class:`SumLoss`).
        style: the accuracy style of ``perf``.
        extra: custom metrics by name (not ``loss`` or ``perf``).
        prepare_batch: ``(batch, device, non_blocking) -> (x, y)``; the default takes an ``(x, y)`` pair.
        val_only: custom metrics not measured on the part ``train`` of :meth:`measure_parts` (NaN there).
        class_dim: the outputs' class dimension for ``perf`` (``Data(class_dim=...)``).
    """

    def __init__(
        self,
        loss_fn: Callable[[Any, Any], torch.Tensor],
        style: str,
        extra: Mapping[str, Metric] | None = None,
        prepare_batch: Callable[[Any, Any, bool], tuple[Any, Any]] | None = None,
        val_only: Collection[str] = (),
        class_dim: int = 1,
    ) -> None:
        loss = SumLoss(loss_fn)
        self.metrics: dict[str, Metric] = {"loss": loss, "perf": perf_metric(style, loss_fn, loss, class_dim)}
        for name, metric in (extra or {}).items():
            if name in RESERVED:
                raise ValueError(f"metric name {name!r} is reserved ({RESERVED})")
            self.metrics[name] = metric
        self._updated = [m for m in self.metrics.values() if not isinstance(m, MetricsLambda)]
        unknown = sorted(set(val_only) - set(extra or {}))
        if unknown:
            raise ValueError(f"val_only={sorted(val_only)} names {unknown}, not custom metrics ({sorted(extra or {})})")
        self.val_only = frozenset(val_only)
        #: the metrics updated on the training set: the custom ones in ``val_only`` left out
        self._updated_train = [m for name, m in self.metrics.items()
                               if name not in self.val_only and not isinstance(m, MetricsLambda)]
        self.prepare_batch = prepare_batch or _pair
        # In one process, ignite_seg's own metrics are computed without ignite's ``sync_all_reduce``
        # (a no-op there that asks ignite.distributed for the world size on every call: as much as a
        # metric update); with several, every metric's ``compute`` reduces as before.
        local = idist.get_world_size() == 1
        self._compute = {name: m.compute_local if local and isinstance(m, _LOCAL) else m.compute
                         for name, m in self.metrics.items()}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.metrics)

    def perf_grain(self) -> float:
        """The smallest step ``perf`` could take on the batches last measured: one item, token or label of
        an accuracy (1 / the targets counted); 0 for a continuous perf (``inv-loss``); NaN before a measure.

        Example:
            >>> s = Scorer(torch.nn.CrossEntropyLoss(), "classification")
            >>> _ = s.measure(torch.nn.Linear(3, 2), [(torch.zeros(8, 3), torch.zeros(8, dtype=torch.long))])
            >>> s.perf_grain()
            0.125
        """
        perf = self.metrics["perf"]
        return float(perf.grain) if isinstance(perf, (TokenAccuracy, MultiLabelAccuracy)) else 0.0

    def measure(self, model: torch.nn.Module, batches: Iterable[Any], device: torch.device | str = "cpu") -> dict[str, float]:
        """Every metric over ``batches`` in eval mode; the model's mode is restored afterwards."""
        return self.measure_parts(model, {"": batches}, device)[""]

    @torch.no_grad()
    def measure_parts(
        self, model: torch.nn.Module, parts: Mapping[str, Iterable[Any]], device: torch.device | str = "cpu"
    ) -> dict[str, dict[str, float]]:
        """:meth:`measure` of each set of batches in ``parts``, switching the model's mode once."""
        was_training = model.training
        model.eval()
        try:
            return {part: self._measure(model, batches, device, part == "train") for part, batches in parts.items()}
        finally:
            model.train(was_training)

    def _measure(
        self, model: torch.nn.Module, batches: Iterable[Any], device: torch.device | str, train: bool = False
    ) -> dict[str, float]:
        updated = self._updated_train if train else self._updated
        for metric in updated:
            metric.reset()
        for batch in batches:
            x, y = self.prepare_batch(batch, device, True)
            out = model(x)
            for metric in updated:
                metric.update((out, y))
        skipped = self.val_only if train else frozenset()
        return {name: float("nan") if name in skipped else _value(compute) for name, compute in self._compute.items()}


def _pair(batch: Any, device: Any, non_blocking: bool) -> tuple[Any, Any]:
    x, y = batch
    return x.to(device, non_blocking=non_blocking), y.to(device, non_blocking=non_blocking)


def _value(compute: Callable[[], Any]) -> float:
    try:
        value = compute()
    except NotComputableError:
        return float("nan")
    return float(value.item() if isinstance(value, torch.Tensor) else value)
