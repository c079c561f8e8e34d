"""A one-call LR range test on live objects, in the caller's own process.

:func:`lr_range_test` is for a model, a dataset and a loss you hold (as fastai's ``lr_find`` and
Lightning's ``Tuner.lr_find`` are), where :func:`ignite_seg.tune` takes recipes and workers. It
runs the tuner's range test: ``repeats`` sweeps from the same initial weights, the loss measured
on a held-out slice of the training set after every step, the range chosen by
:func:`~ignite_seg.tuning.lr_range.choose_lr_range` with the ``fast`` preset's rules, and the
gradient noise scale measured along the way (:mod:`~ignite_seg.tuning.noise_scale`). Like
ignite's ``FastaiLRFinder``, it leaves the model and the optimizer as it found them.

It takes what :func:`ignite_seg.train` takes: a plain dataset of any items with ``collate_fn`` and
``prepare_batch`` (ignite's signature), or an :class:`ignite_seg.Data` record carrying them; a loss
instance or class. It runs with one torch thread unless told otherwise (restoring the caller's
count), and warns when the range it chose touches either end of the sweep.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import numpy as np

from ..config.checks import check_int
from ..config.presets import get_preset
from ..engine.batching import BatchSource, Data, PrepareBatch, default_prepare_batch
from ..engine.constant_output import constant_output_loss
from ..engine.noise_trainer import split_input, splittable
from ..exceptions import ConfigError, ConfigTypeError
from ..smoothing import above_ratio
from .lr_range import LRRangeChoice, RangeRule, choose_lr_range, geometric_lrs
from .noise_scale import pooled_noise_scale
from .range_warnings import edge_warnings

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure

__all__ = ["lr_range_test", "RangeTestResult", "restored", "torch_threads", "edge_warnings"]

#: Gradient chunks per batch for the noise scale (small batches: batch_size / CHUNKS).
CHUNKS = 4
#: The noise is measured on every NOISE_EVERY-th step, from the first (the ``fast`` preset's
#: ``noise_every``); the steps between are plain updates, a third of the cost on a small model.
NOISE_EVERY = get_preset("fast").noise_every
#: A repeat stops once its held-out loss exceeds this many times its minimum (while no loss went below zero), or
#: is not finite.
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
        warnings: what to distrust in the range (it touches an end of the sweep), also issued
            with ``warnings.warn``; empty when the range lies inside the sweep.
        constant_loss: the held-out slice's loss under the best constant output, one output for every item
            (NaN when not measurable): a loss floor at that level learned nothing from the inputs, and the
            range moves to its top (``choice.plateau_lrs``), as in :func:`ignite_seg.tune`.
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
    warnings: tuple[str, ...] = ()
    constant_loss: float = math.nan

    def __repr__(self) -> str:  # the arrays are in the attributes; a repr that prints them all hides the answer
        return (f"RangeTestResult(lr_min={self.lr_min:.4g}, lr_max={self.lr_max:.4g}, steepest_lr={self.steepest_lr:.4g}, "
                f"noise_scale={self.noise_scale:.4g}, batch_size={self.batch_size}, repeats={self.losses.shape[0]}, "
                f"points={self.lrs.size}, warnings={len(self.warnings)})")

    def plot(self) -> Figure:
        """The repeats' held-out loss against the learning rate, the chosen range shaded."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6.4, 4.0), layout="constrained")  # room for the axis labels
        ax = fig.add_subplot()
        for r, curve in enumerate(self.holdout_losses):
            ax.plot(self.lrs, curve, color="C0", alpha=0.5, lw=1, label="held-out loss" if r == 0 else None)
        ran = np.isfinite(self.losses)
        mean = np.where(ran.any(axis=0), np.nansum(self.losses, axis=0) / np.maximum(ran.sum(axis=0), 1), np.nan)
        ax.plot(self.lrs, mean, color="C1", lw=1, label="training loss (mean)")
        ax.axvspan(self.lr_min, self.lr_max, color="C2", alpha=0.2,
                   label=f"range {self.lr_min:.3g} - {self.lr_max:.3g}")
        if math.isfinite(self.constant_loss):
            ax.axhline(self.constant_loss, color="grey", ls="--", lw=1,
                       label=f"best constant output ({self.constant_loss:.3g})")
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


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads (``None``: as they are), then restore the count."""
    import torch

    saved = torch.get_num_threads()
    if threads is not None and threads != saved:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != saved:
            torch.set_num_threads(saved)


def lr_range_test(
    model: torch.nn.Module,
    train_set: Any,
    loss_fn: Callable[..., torch.Tensor] | type,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    batch_size: int = 32,
    lr_start: float = 1e-5,
    lr_end: float = 10.0,
    steps: int = 200,
    repeats: int = 3,
    holdout: float = 0.1,
    seed: int = 0,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    prepare_batch: PrepareBatch | None = None,
    threads: int | None = 1,
) -> RangeTestResult:
    """Sweep the learning rate from ``lr_start`` to ``lr_end`` and choose a range; the model and
    optimizer are left as found.

    Args:
        model: the model, on the device it should run on.
        train_set: a map-style dataset (items of any kind, batched by ``collate_fn``), or an
            :class:`ignite_seg.Data` record (its ``train`` set, ``collate_fn`` and ``prepare_batch``).
        loss_fn: ``loss_fn(model(x), y)``, a scalar mean over the batch; a loss class (such as
            ``torch.nn.CrossEntropyLoss``) is instantiated without arguments.
        optimizer: the optimizer to sweep (its learning rate is overwritten during the test and
            restored after); ``None``: plain SGD.
        batch_size: the batch size the range is for (at least 4; a multiple of 4 measures the
            noise scale, from 4 chunks of every second batch).
        lr_start, lr_end: the sweep's bounds (geometric steps).
        steps: optimizer steps per repeat.
        repeats: sweeps, each from the same initial weights, on its own batch order.
        holdout: fraction of ``train_set`` held out to measure the loss after each step.
        seed: seeds the held-out slice and the batch orders.
        collate_fn: turns a list of items into a batch (default: torch's ``default_collate``).
        prepare_batch: ``prepare_batch(batch, device, non_blocking) -> (x, y)`` (default: a batch
            that is an ``(x, y)`` pair, moved to the model's device).
        threads: torch threads during the test (``None``: leave the caller's count); the
            caller's count is restored afterwards. One thread is fastest on a busy machine.

    Raises:
        ConfigError: a bad argument or a batch the model and loss cannot take (the message names
            it and the fix); TuningError: no range (the loss never improves, or diverges at once).

    Example:
        >>> res = ignite_seg.lr_range_test(model, train_set, torch.nn.MSELoss(), batch_size=64)  # doctest: +SKIP
        >>> res.lr_min, res.lr_max, res.warnings; res.plot().savefig("lr.png")  # doctest: +SKIP
    """
    import torch

    data = _as_data(train_set, collate_fn, prepare_batch)
    loss = _as_loss(loss_fn)
    _check(model, data.train, batch_size, (lr_start, lr_end), (steps, repeats, holdout, seed, threads))
    train_idx, held_idx = _split(len(data.train), holdout, seed)
    lrs = geometric_lrs(lr_start, lr_end, steps)
    opt = optimizer if optimizer is not None else torch.optim.SGD(model.parameters(), lr=lr_start)
    runs = []
    with torch_threads(threads), restored(model, opt):
        source = BatchSource(data.train, data)
        prepare = data.prepare_batch or default_prepare_batch
        device = _device(model)
        _probe(model, loss, source, prepare, device, train_idx[:2])
        held = [prepare(b, device, False) for b in source.fixed(held_idx.tolist())]
        constant = constant_output_loss(model, held, loss)  # eval mode, no random number drawn
        for r in range(repeats):
            with restored(model, opt):  # every repeat starts from the weights the caller had
                order = np.random.default_rng([seed, r]).choice(train_idx, size=(steps, batch_size))
                runs.append(_sweep(model, opt, loss, lrs, _Feed(source, prepare, device, order, held)))
    result = _result(lrs, runs, batch_size, constant, adaptive=not isinstance(opt, torch.optim.SGD))
    for message in result.warnings:
        warnings.warn(message, stacklevel=2)
    return result


def _as_data(train_set: Any, collate_fn: Any, prepare_batch: Any) -> Data:
    """``train_set`` as a :class:`Data` record; the arguments set what the record leaves unset."""
    for name, value in (("collate_fn", collate_fn), ("prepare_batch", prepare_batch)):
        if value is not None and not callable(value):
            raise ConfigTypeError(f"{name} must be callable or None, got {value!r}.")
        if value is not None and isinstance(train_set, Data) and getattr(train_set, name) is not None:
            raise ConfigError(f"{name} is given twice: as an argument and on the Data record train_set; "
                              "pass it in one place.")
    if isinstance(train_set, Data):
        return Data(train_set.train, train_set.train, collate_fn=collate_fn or train_set.collate_fn,
                    prepare_batch=prepare_batch or train_set.prepare_batch, cache=train_set.cache)
    return Data(train_set, train_set, collate_fn=collate_fn, prepare_batch=prepare_batch)


def _as_loss(loss_fn: Any) -> Callable[..., Any]:
    """A loss instance; a loss class is instantiated (``CrossEntropyLoss`` -> ``CrossEntropyLoss()``)."""
    if isinstance(loss_fn, type):
        try:
            return loss_fn()  # type: ignore[no-any-return]
        except Exception as e:
            raise ConfigTypeError(
                f"loss_fn={loss_fn.__name__} is a class and {loss_fn.__name__}() failed ({type(e).__name__}: {e}); "
                f"pass an instance, e.g. loss_fn={loss_fn.__name__}(...) with its arguments."
            ) from e
    if not callable(loss_fn):
        raise ConfigTypeError(f"loss_fn must be a loss (a callable such as torch.nn.MSELoss()), got {loss_fn!r}.")
    return loss_fn  # type: ignore[no-any-return]


def _check(model: Any, train_set: Any, batch_size: Any, bounds: tuple[Any, Any], counts: tuple[Any, ...]) -> None:
    import torch

    if not isinstance(model, torch.nn.Module):
        raise ConfigTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if not (hasattr(train_set, "__len__") and hasattr(train_set, "__getitem__")):
        raise ConfigTypeError(f"train_set must be a map-style dataset (len and [i]) or an ignite_seg.Data record, "
                              f"got {type(train_set).__name__}.")
    steps, repeats, holdout, seed, threads = counts
    check_int("batch_size", batch_size, CHUNKS)
    check_int("steps", steps, 10)
    check_int("repeats", repeats, 1)
    check_int("seed", seed, 0)
    if threads is not None:
        check_int("threads", threads, 1)
    lo, hi = bounds
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 < lo < hi and math.isfinite(hi)):
        raise ConfigError(f"lr_start and lr_end must be positive numbers with lr_start < lr_end, got {lo!r}, {hi!r}.")
    if not (isinstance(holdout, float) and 0 < holdout < 1):
        raise ConfigError(f"holdout must be a fraction between 0 and 1, e.g. 0.1, got {holdout!r}.")
    if len(train_set) - max(1, round(holdout * len(train_set))) < batch_size:
        raise ConfigError(f"train_set has {len(train_set)} items: too few for batch_size={batch_size} after "
                          f"holding out {holdout:.0%}. Lower batch_size.")


def _probe(model: torch.nn.Module, loss_fn: Callable[..., Any], source: BatchSource, prepare: PrepareBatch,
           device: torch.device, idx: np.ndarray) -> None:
    """Two items through the batching, ``prepare_batch``, the model and the loss, or a ConfigError saying which failed."""
    import torch

    fix = ("pass collate_fn= (items -> batch) and prepare_batch= (batch -> (x, y)), or an ignite_seg.Data "
           "record with them, as train() takes")
    item = type(source.dataset[int(idx[0])]).__name__
    try:
        batch = source.take([int(i) for i in idx])
    except Exception as e:
        raise ConfigError(f"train_set's items ({item}) could not be made into a batch "
                          f"({type(e).__name__}: {e}); {fix}.") from e
    try:
        x, y = prepare(batch, device, False)
    except Exception as e:
        raise ConfigError(f"a batch of train_set's items ({item}) is not an (x, y) pair ({type(e).__name__}: {e}); "
                          f"{fix}.") from e
    try:
        with torch.no_grad():
            value = loss_fn(model(x), y)
        ok = isinstance(value, torch.Tensor) and value.numel() == 1
    except Exception as e:
        raise ConfigError(f"loss_fn(model(x), y) failed on a batch of 2 items ({type(e).__name__}: {e}); check that "
                          "model takes x and loss_fn takes (model(x), y), or pass prepare_batch=.") from e
    if not ok:
        raise ConfigError(f"loss_fn(model(x), y) must be a scalar tensor (a mean over the batch), got {value!r}.")


def _split(n: int, holdout: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and held-out indices (a seeded random slice of ``holdout`` of the items)."""
    perm = np.random.default_rng([seed, 2**31]).permutation(n)
    m = max(1, int(round(holdout * n)))
    return np.sort(perm[m:]), np.sort(perm[:m])


def _device(model: torch.nn.Module) -> torch.device:
    import torch

    return next((p.device for p in model.parameters()), torch.device("cpu"))


class _Feed(NamedTuple):
    """Where one repeat's batches come from: the items, how a batch becomes ``(x, y)``, the order."""

    source: BatchSource
    prepare: PrepareBatch
    device: torch.device
    order: np.ndarray  # (steps, batch_size) item indices
    held: list[tuple[Any, Any]]  # the held-out slice, prepared on the device


def _sweep(model: torch.nn.Module, opt: torch.optim.Optimizer, loss_fn: Callable[..., Any], lrs: np.ndarray,
           feed: _Feed) -> dict[str, np.ndarray]:
    """One repeat: a step per LR; training and held-out loss and gradient norms per step."""
    out = {k: np.full(lrs.size, np.nan) for k in ("losses", "holdout_losses", "sq_small", "sq_big")}
    params = [p for p in model.parameters() if p.requires_grad]
    best, zero_floor = math.inf, True  # a training loss below zero: no floor for the ratio (smoothing.above_ratio)
    for i, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = float(lr)
        x, y = feed.prepare(feed.source.take(feed.order[i].tolist()), feed.device, False)
        model.train()
        chunks = CHUNKS if i % NOISE_EVERY == 0 else 1  # the noise measured on every NOISE_EVERY-th step
        out["losses"][i], out["sq_small"][i], out["sq_big"][i] = _chunked_grad(model, loss_fn, params, x, y, chunks)
        opt.step()
        held_loss = _held_out_loss(model, loss_fn, feed.held)
        out["holdout_losses"][i] = held_loss
        best, zero_floor = min(best, held_loss), zero_floor and not out["losses"][i] < 0
        if not math.isfinite(held_loss) or (zero_floor and above_ratio(held_loss, best, STOP_FACTOR)):
            break
    return out


def _held_out_loss(model: torch.nn.Module, loss_fn: Callable[..., Any], held: list[tuple[Any, Any]]) -> float:
    """The loss on the held-out batches, their mean weighted by their sizes."""
    import torch

    model.eval()
    total = count = 0.0
    with torch.no_grad():
        for x, y in held:
            n = float(_length(y) or 1)
            total += float(loss_fn(model(x), y)) * n
            count += n
    return total / count


def _length(y: Any) -> int | None:
    import torch

    return int(y.shape[0]) if isinstance(y, torch.Tensor) and y.ndim >= 1 else None


def _chunked_grad(model: torch.nn.Module, loss_fn: Callable[..., Any], params: list[Any], x: Any,
                  y: Any, chunks: int) -> tuple[float, float, float]:
    """Set the batch's mean gradient on ``params``; return the loss and the squared gradient norms
    of the chunks (their mean) and of the batch, for the noise scale (NaN when ``chunks`` is 1 or
    the batch does not split into ``chunks`` equal chunks)."""
    import torch

    n = _length(y)
    k = chunks if n is not None and n % chunks == 0 and splittable(x, n) else 1
    total: list[Any] = [torch.zeros_like(p) for p in params]
    losses, sq_chunks = [], []
    for cx, cy in zip(split_input(x, k), split_input(y, k)):
        loss = loss_fn(model(cx), cy)
        raw = torch.autograd.grad(loss, params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for g, p in zip(raw, params)]
        sq_chunks.append(float(sum((g.double() ** 2).sum() for g in grads)))
        total = [t + g for t, g in zip(total, grads)]
        losses.append(float(loss.detach()))
    for p, t in zip(params, total):
        p.grad = t / k
    sq_big = float(sum((p.grad.double() ** 2).sum() for p in params))
    if k == 1:
        return losses[0], math.nan, math.nan
    return float(np.mean(losses)), float(np.mean(sq_chunks)), sq_big


def _result(lrs: np.ndarray, runs: list[dict[str, np.ndarray]], batch_size: int, constant: float, *,
            adaptive: bool) -> RangeTestResult:
    """Choose the range on the repeats with the ``fast`` preset's rules (the plateau rule reading the best constant
    output's loss ``constant``; a loss that never fell is its floor for an ``adaptive`` optimizer, as in the tuner);
    measure the noise scale."""
    s = get_preset("fast")
    stacked = {k: np.vstack([r[k] for r in runs]) for k in runs[0]}
    window = max(1, int(round(s.lr_smooth_frac * lrs.size))) | 1
    rule = dataclasses.replace(RangeRule.from_settings(s, window), flat_floor=adaptive)
    choice = choose_lr_range(lrs, stacked["losses"], rule, valley_curves=stacked["holdout_losses"],
                             constant_loss=constant)
    b_small = batch_size / CHUNKS
    _, noise = pooled_noise_scale(stacked["sq_small"], stacked["sq_big"], b_small, float(batch_size),
                                  s.noise_ema_beta, lrs <= choice.lr_max)
    return RangeTestResult(
        lrs=lrs, losses=stacked["losses"], holdout_losses=stacked["holdout_losses"], lr_min=choice.lr_min,
        lr_max=choice.lr_max, steepest_lr=choice.steepest_lr, noise_scale=noise, batch_size=batch_size,
        choice=choice, warnings=edge_warnings(lrs, choice, stacked["holdout_losses"], window, rule.min_improvement),
        constant_loss=constant,
    )
