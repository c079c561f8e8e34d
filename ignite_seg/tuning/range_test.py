"""A one-call LR range test on live objects, in the caller's own process.

:func:`lr_range_test` is for a model, a dataset and a loss you hold (as fastai's ``lr_find`` and
Lightning's ``Tuner.lr_find`` are), where :func:`ignite_seg.tune` takes recipes and workers. It
runs the tuner's range test: ``repeats`` sweeps from the same initial weights, the loss measured
on a held-out slice of the training set after every step, the range chosen by
:func:`~ignite_seg.tuning.lr_range.choose_lr_range` with the ``fast`` preset's rules, and the
gradient noise scale measured along the way (:mod:`~ignite_seg.tuning.noise_scale`). Like
ignite's ``FastaiLRFinder``, it leaves the model and the optimizer as it found them.
"""
from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from ..config.checks import check_int
from ..config.presets import get_preset
from ..exceptions import ConfigError, ConfigTypeError
from .lr_range import LRRangeChoice, RangeRule, choose_lr_range, geometric_lrs
from .noise_scale import pooled_noise_scale

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure

__all__ = ["lr_range_test", "RangeTestResult", "restored"]

#: Gradient chunks per batch for the noise scale (small batches: batch_size / CHUNKS).
CHUNKS = 4
#: A repeat stops once its held-out loss exceeds this many times its minimum (or is not finite).
STOP_FACTOR = 4.0


@dataclass(frozen=True)
class RangeTestResult:
    """The curves of :func:`lr_range_test` and the range chosen on them.

    Attributes:
        lrs: the learning rate of each step (P,).
        losses: training loss of each repeat's batch at each step (R, P); NaN after a repeat stopped.
        holdout_losses: loss on the held-out slice after each step (R, P).
        lr_min, lr_max: the chosen range (steepest sustained improvement below divergence).
        steepest_lr: where the mean loss falls fastest.
        noise_scale: the gradient noise scale ``B_simple`` (NaN when it could not be measured);
            good batch sizes lie around a fraction of it.
        batch_size: the batch size of the sweep (the range holds for it).
        choice: the full record of the range choice (smoothed curves, derivative, divergence).
    """

    lrs: np.ndarray
    losses: np.ndarray
    holdout_losses: np.ndarray
    lr_min: float
    lr_max: float
    steepest_lr: float
    noise_scale: float
    batch_size: int
    choice: LRRangeChoice

    def plot(self) -> Figure:
        """The repeats' held-out loss against the learning rate, the chosen range shaded."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6.4, 4.0))
        ax = fig.add_subplot()
        for r, curve in enumerate(self.holdout_losses):
            ax.plot(self.lrs, curve, color="C0", alpha=0.5, lw=1, label="held-out loss" if r == 0 else None)
        ran = np.isfinite(self.losses)
        mean = np.where(ran.any(axis=0), np.nansum(self.losses, axis=0) / np.maximum(ran.sum(axis=0), 1), np.nan)
        ax.plot(self.lrs, mean, color="C1", lw=1, label="training loss (mean)")
        ax.axvspan(self.lr_min, self.lr_max, color="C2", alpha=0.2,
                   label=f"range {self.lr_min:.3g} - {self.lr_max:.3g}")
        ax.set_xscale("log")
        finite = self.holdout_losses[np.isfinite(self.holdout_losses)]
        if finite.size:
            ax.set_ylim(0.0, 1.5 * float(np.max(finite[: max(1, finite.size // 2)])))
        ax.set_xlabel("learning rate")
        ax.set_ylabel("loss")
        ax.set_title(f"LR range test, batch size {self.batch_size}")
        ax.legend(loc="best", fontsize="small")
        return fig


@contextlib.contextmanager
def restored(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> Iterator[None]:
    """Run the block, then put the model's weights and mode and the optimizer's state back."""
    model_state = copy.deepcopy(model.state_dict())
    optimizer_state = copy.deepcopy(optimizer.state_dict()) if optimizer is not None else None
    training = model.training
    try:
        yield
    finally:
        model.load_state_dict(model_state)
        model.train(training)
        if optimizer is not None and optimizer_state is not None:
            optimizer.load_state_dict(optimizer_state)


def lr_range_test(
    model: torch.nn.Module,
    train_set: Any,
    loss_fn: Callable[..., torch.Tensor],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    batch_size: int = 32,
    lr_start: float = 1e-5,
    lr_end: float = 10.0,
    steps: int = 200,
    repeats: int = 3,
    holdout: float = 0.1,
    seed: int = 0,
) -> RangeTestResult:
    """Sweep the learning rate from ``lr_start`` to ``lr_end`` and choose a range; the model and
    optimizer are left as found.

    Args:
        model: the model, on the device it should run on.
        train_set: a map-style dataset of ``(x, y)`` items.
        loss_fn: ``loss_fn(model(x), y)``, a scalar mean over the batch.
        optimizer: the optimizer to sweep (its learning rate is overwritten during the test and
            restored after); ``None``: plain SGD.
        batch_size: the batch size the range is for (at least 4: it is split to measure the noise scale).
        lr_start, lr_end: the sweep's bounds (geometric steps).
        steps: optimizer steps per repeat.
        repeats: sweeps, each from the same initial weights, on its own batch order.
        holdout: fraction of ``train_set`` held out to measure the loss after each step.
        seed: seeds the held-out slice and the batch orders.

    Raises:
        ConfigError: a bad argument (the message names it); TuningError: no range (the loss never
            improves, or diverges at once).

    Example:
        >>> res = ignite_seg.lr_range_test(model, train_set, torch.nn.MSELoss(), batch_size=64)  # doctest: +SKIP
        >>> res.lr_min, res.lr_max; res.plot().savefig("lr.png")  # doctest: +SKIP
    """
    import torch

    _check(model, train_set, batch_size, (lr_start, lr_end), (steps, repeats, holdout, seed))
    train_idx, held_idx = _split(len(train_set), holdout, seed)
    held = _batch(train_set, held_idx)
    lrs = geometric_lrs(lr_start, lr_end, steps)
    opt = optimizer if optimizer is not None else torch.optim.SGD(model.parameters(), lr=lr_start)
    runs = []
    with restored(model, opt):
        for r in range(repeats):
            with restored(model, opt):  # every repeat starts from the weights the caller had
                order = np.random.default_rng([seed, r]).choice(train_idx, size=(steps, batch_size))
                runs.append(_sweep(model, opt, loss_fn, lrs, (train_set, order, held)))
    return _result(lrs, runs, batch_size)


def _check(model: Any, train_set: Any, batch_size: Any, bounds: tuple[Any, Any], counts: tuple[Any, ...]) -> None:
    import torch

    if not isinstance(model, torch.nn.Module):
        raise ConfigTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if not (hasattr(train_set, "__len__") and hasattr(train_set, "__getitem__")):
        raise ConfigTypeError(f"train_set must be a map-style dataset (len and [i]), got {type(train_set).__name__}.")
    steps, repeats, holdout, seed = counts
    check_int("batch_size", batch_size, CHUNKS)
    check_int("steps", steps, 10)
    check_int("repeats", repeats, 1)
    check_int("seed", seed, 0)
    lo, hi = bounds
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 < lo < hi and math.isfinite(hi)):
        raise ConfigError(f"lr_start and lr_end must be positive numbers with lr_start < lr_end, got {lo!r}, {hi!r}.")
    if not (isinstance(holdout, float) and 0 < holdout < 1):
        raise ConfigError(f"holdout must be a fraction between 0 and 1, e.g. 0.1, got {holdout!r}.")
    if len(train_set) - max(1, round(holdout * len(train_set))) < batch_size:
        raise ConfigError(f"train_set has {len(train_set)} items: too few for batch_size={batch_size} after "
                          f"holding out {holdout:.0%}. Lower batch_size.")


def _split(n: int, holdout: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and held-out indices (a seeded random slice of ``holdout`` of the items)."""
    perm = np.random.default_rng([seed, 2**31]).permutation(n)
    m = max(1, int(round(holdout * n)))
    return np.sort(perm[m:]), np.sort(perm[:m])


def _batch(dataset: Any, idx: np.ndarray) -> tuple[Any, Any]:
    import torch

    xs, ys = zip(*(dataset[int(i)] for i in idx))
    return torch.stack([torch.as_tensor(x) for x in xs]), torch.stack([torch.as_tensor(y) for y in ys])


def _device(model: torch.nn.Module) -> torch.device:
    import torch

    return next((p.device for p in model.parameters()), torch.device("cpu"))


def _sweep(model: torch.nn.Module, opt: torch.optim.Optimizer, loss_fn: Callable[..., Any], lrs: np.ndarray,
           data: tuple[Any, np.ndarray, tuple[Any, Any]]) -> dict[str, np.ndarray]:
    """One repeat: a step per LR; training and held-out loss and gradient norms per step."""
    import torch

    dataset, order, held = data
    dev = _device(model)
    hx, hy = held[0].to(dev), held[1].to(dev)
    out = {k: np.full(lrs.size, np.nan) for k in ("losses", "holdout_losses", "sq_small", "sq_big")}
    params = [p for p in model.parameters() if p.requires_grad]
    best = math.inf
    for i, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = float(lr)
        x, y = _batch(dataset, order[i])
        model.train()
        out["losses"][i], out["sq_small"][i], out["sq_big"][i] = _chunked_grad(model, loss_fn, params, x.to(dev),
                                                                               y.to(dev))
        opt.step()
        model.eval()
        with torch.no_grad():
            held_loss = float(loss_fn(model(hx), hy))
        out["holdout_losses"][i] = held_loss
        best = min(best, held_loss)
        if not math.isfinite(held_loss) or held_loss > STOP_FACTOR * best:
            break
    return out


def _chunked_grad(model: torch.nn.Module, loss_fn: Callable[..., Any], params: list[Any], x: Any,
                  y: Any) -> tuple[float, float, float]:
    """Set the batch's mean gradient on ``params``; return the loss and the squared gradient norms
    of the chunks (their mean) and of the batch, for the noise scale."""
    import torch

    total: list[Any] = [torch.zeros_like(p) for p in params]
    losses, sq_chunks = [], []
    for cx, cy in zip(torch.chunk(x, CHUNKS), torch.chunk(y, CHUNKS)):
        loss = loss_fn(model(cx), cy)
        raw = torch.autograd.grad(loss, params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for g, p in zip(raw, params)]
        sq_chunks.append(float(sum((g.double() ** 2).sum() for g in grads)))
        total = [t + g for t, g in zip(total, grads)]
        losses.append(float(loss.detach()))
    n = len(losses)
    for p, t in zip(params, total):
        p.grad = t / n
    sq_big = float(sum((p.grad.double() ** 2).sum() for p in params))
    return float(np.mean(losses)), float(np.mean(sq_chunks)), sq_big


def _result(lrs: np.ndarray, runs: list[dict[str, np.ndarray]], batch_size: int) -> RangeTestResult:
    """Choose the range on the repeats with the ``fast`` preset's rules; measure the noise scale."""
    s = get_preset("fast")
    stacked = {k: np.vstack([r[k] for r in runs]) for k in runs[0]}
    window = max(1, int(round(s.lr_smooth_frac * lrs.size))) | 1
    rule = RangeRule(window=window, diverge_th=s.diverge_th, regain=s.diverge_regain, steep_frac=s.lr_steep_frac,
                     window_decades=s.lr_window_decades, min_span_decades=s.lr_min_span_decades)
    choice = choose_lr_range(lrs, stacked["losses"], rule, valley_curves=stacked["holdout_losses"])
    b_small = batch_size / CHUNKS
    _, noise = pooled_noise_scale(stacked["sq_small"], stacked["sq_big"], b_small, float(batch_size),
                                  s.noise_ema_beta, lrs <= choice.lr_max)
    return RangeTestResult(
        lrs=lrs, losses=stacked["losses"], holdout_losses=stacked["holdout_losses"], lr_min=choice.lr_min,
        lr_max=choice.lr_max, steepest_lr=choice.steepest_lr, noise_scale=noise, batch_size=batch_size,
        choice=choice,
    )
