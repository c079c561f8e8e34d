"""The loss of the best constant output: what a network that learned nothing from its inputs scores.

A sweep's loss can fall steeply and then lie flat for decades: the network learned the offset of its
output (the targets' mean under MSE, the class shares under cross-entropy) and nothing yet from its
inputs. Whether a floor is that trivial one cannot be read off the held-out perf when the perf is a
function of the loss (a regression's ``inv-loss``: predicting the mean raises it), so the sweep measures
the trivial level itself: :func:`constant_output_loss` fits one output, the same for every item, to the
held-out slice under the user's loss, and reports its loss there. The rule that reads it is
:func:`~ignite_seg.tuning.lr_plateau.find_plateau`. Every trial measures it too, on its fixed training
subset before it trains (``result.json`` ``constant_loss_train``): a trial whose training loss ends there
learned nothing from its inputs (:func:`at_constant`; the caller's log and the summary flag it).

Importing this module imports no torch (the analysis reads :data:`CONSTANT_TOL`).

Example:
    >>> import torch
    >>> from torch import nn
    >>> x, y = torch.randn(64, 3), torch.arange(64.0)[:, None]
    >>> round(constant_output_loss(nn.Linear(3, 1), [(x, y)], nn.MSELoss()), 1)  # the targets' variance
    341.2
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    import torch

__all__ = ["CONSTANT_TOL", "at_constant", "constant_output_loss"]

#: A loss less than this fraction below the best constant output's loss learned nothing beyond that constant: the
#: recipe check's margin (``GUARD_MARGIN``), the smallest fall it counts as an improvement. 10% was too loose for
#: the plateau rule: on a 90/10 class split a plain-SGD sweep's floor lay 8-13% below the class shares' entropy,
#: real learning the trials built on (0.95 against 0.92 when the range moved to that floor's top;
#: bench/RESULTS.md, session 20).
CONSTANT_TOL = 0.02


def at_constant(loss: float, constant: float | None) -> bool:
    """Whether ``loss`` is no better than the best constant output's ``constant``: less than :data:`CONSTANT_TOL`
    of it below, or above it (False when either is missing or not finite).

    Example:
        >>> at_constant(2.29, 2.30), at_constant(2.0, 2.30), at_constant(2.29, None)
        (True, False, False)
    """
    return (constant is not None and math.isfinite(loss) and math.isfinite(constant)
            and loss >= constant - CONSTANT_TOL * abs(constant))

#: L-BFGS iterations for the constant (a handful of parameters: it converges in a few).
CONSTANT_FIT_ITERS = 50


def constant_output_loss(model: torch.nn.Module, batches: Sequence[tuple[Any, Any]],
                         loss_fn: Callable[..., torch.Tensor]) -> float:
    """The lowest mean ``loss_fn`` over ``batches`` (prepared ``(x, y)`` pairs) of one output shared by every item.

    The model only gives the output's shape (one forward pass in eval mode, its mode restored). NaN when
    that cannot be measured: the model returns something other than one floating tensor with items
    along dimension 0, the items' outputs differ in shape, or the loss does not take such an output.
    """
    import torch

    was_training = model.training
    model.eval()
    shapes: list[tuple[torch.Size, torch.dtype]] = []
    start: torch.Tensor | None = None
    try:
        with torch.no_grad():  # only each batch's output shape is kept (an LM's slice of logits may be large)
            for x, _ in batches:
                out = model(x)
                if not (isinstance(out, torch.Tensor) and out.is_floating_point() and out.dim() >= 1):
                    return math.nan
                shapes.append((out.shape, out.dtype))
                if start is None:
                    start = out.detach().float().mean(0, keepdim=True)
    finally:
        model.train(was_training)
    if start is None or any(shape[1:] != shapes[0][0][1:] for shape, _ in shapes):
        return math.nan
    targets = [y for _, y in batches]
    n = sum(shape[0] for shape, _ in shapes)
    constant = start.clone().requires_grad_(True)

    def mean_loss() -> torch.Tensor:
        total = constant.new_zeros(())
        for (shape, dtype), y in zip(shapes, targets):
            total = total + loss_fn(constant.expand(shape).to(dtype), y).float() * shape[0]
        return total / n

    optimizer = torch.optim.LBFGS([constant], max_iter=CONSTANT_FIT_ITERS, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = mean_loss()
        loss.backward()
        return loss

    try:
        optimizer.step(closure)
        with torch.no_grad():
            value = float(mean_loss())
    except (RuntimeError, TypeError, ValueError):  # a loss that does not take a broadcast output
        return math.nan
    return value if math.isfinite(value) else math.nan
