"""An ignite ``Engine`` that also measures the gradient noise: the LR sweeps' trainer.

:func:`create_noise_trainer` steps on the batch's mean gradient computed chunk by chunk and keeps
the squared gradient norms at two batch sizes (:class:`GradNorms`) from which
:mod:`ignite_seg.tuning.noise_scale` estimates the gradient noise scale.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, NamedTuple

import torch
from ignite.engine import Engine

from .batching import PrepareBatch, default_prepare_batch

__all__ = ["GradNorms", "NoiseSampling", "NoiseTrainer", "create_noise_trainer", "splittable", "split_input"]


class GradNorms(NamedTuple):
    """Squared gradient norms of one noise-trainer step, at two batch sizes (see :mod:`ignite_seg.tuning.noise_scale`)."""

    sq_small: float  #: mean over the chunks of ``|g_c|²``
    sq_big: float  #: ``|mean g_c|²``, the whole batch's
    b_small: float  #: examples per chunk
    b_big: float  #: examples in the batch


class NoiseSampling(NamedTuple):
    """Which steps of a noise trainer measure the gradient noise, and how.

    Example:
        >>> NoiseSampling(chunks=4, every=2).measures(3), NoiseSampling(chunks=4, every=2).measures(4)
        (True, False)
    """

    #: each measured batch is split into this many chunks (1: no step measures)
    chunks: int
    #: iterations 1, ``1 + every``, ``1 + 2 every``, ... measure; the steps between are plain updates
    every: int = 1

    def measures(self, iteration: int) -> bool:
        """Whether the step of ``iteration`` (1-based, as ignite counts) measures the norms."""
        return self.chunks > 1 and (iteration - 1) % self.every == 0


class NoiseTrainer(Engine):
    """An ``Engine`` whose step also measures gradient norms; the last step's are in ``grad_norms``."""

    def __init__(self, process_function: Callable[[Engine, Any], Any]) -> None:
        super().__init__(process_function)
        self.grad_norms: GradNorms | None = None


def create_noise_trainer(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    device: torch.device,
    sampling: NoiseSampling,
    prepare_batch: PrepareBatch | None = None,
    grad_clip_norm: float | None = None,
    amp: bool = False,
) -> NoiseTrainer:
    """An ``Engine`` whose step is one SGD update on the batch's mean gradient, computed chunk by chunk.

    On the steps ``sampling`` measures, the batch of ``B`` is split into ``sampling.chunks`` chunks
    of ``B / chunks``; with ``g_c`` the chunk gradients, the update uses ``mean(g_c)`` (the batch gradient), and the step keeps
    ``trainer.grad_norms = GradNorms(mean |g_c|², |mean g_c|², B / chunks, B)``, the squared norms at
    two batch sizes from which :mod:`ignite_seg.tuning.noise_scale` estimates the noise scale. The
    other steps (``sampling.every`` > 1: on a small model a measured step costs about three plain
    ones), batches that do not split evenly, and every batch with ``chunks=1`` (a sweep that needs
    no noise scale) get plain updates and no norms. Raw batches go through ``prepare_batch`` (ignite's
    default when ``None``); an input ``x`` is split along its first dimension, tensor by tensor
    inside tuples, lists and dicts (an input of any other type gets plain updates).

    ``grad_clip_norm`` and ``amp`` are those of :func:`~ignite_seg.engine.trainer.create_trainer`
    (the sweep trains as the trials will): the norms are measured on the raw (unscaled, unclipped)
    chunk gradients, then the batch gradient is clipped before the step.
    """
    if sampling.chunks < 1 or sampling.every < 1:
        raise ValueError(f"create_noise_trainer needs chunks >= 1 and every >= 1, got {sampling!r}")
    chunks = sampling.chunks
    params = [p for p in model.parameters() if p.requires_grad]
    prepare = prepare_batch or default_prepare_batch
    update = _Update(optimizer, params, device, grad_clip_norm, amp)

    def step(engine: Engine, batch: Any) -> float:
        model.train()
        x, y = prepare(batch, device, True)
        n = int(y.shape[0])
        measured = sampling.measures(engine.state.iteration) and n % chunks == 0 and n >= 2 * chunks
        k = chunks if measured and splittable(x, n) else 1
        if k == 1:  # a plain update: no norms to measure (chunks=1, not due, or a batch that does not split)
            optimizer.zero_grad(set_to_none=True)
            loss = update.backward(lambda: loss_fn(model(x), y))
            update.step()
            trainer.grad_norms = None
            return loss
        total = None
        sq_small = 0.0
        loss_sum = 0.0
        for xc, yc in zip(split_input(x, k), y.chunk(k)):
            optimizer.zero_grad(set_to_none=True)
            loss_sum += update.backward(lambda: loss_fn(model(xc), yc))  # noqa: B023 (called at once)
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
            sq_small += float(flat.dot(flat))
            total = flat if total is None else total + flat
        assert total is not None
        mean = total / k
        offset = 0
        for p in params:
            p.grad = mean[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        unscale = update.scale() ** 2  # the gradients of a scaled loss are scaled too
        norms = GradNorms(sq_small / k / unscale, float(mean.dot(mean)) / unscale, n / k, float(n))
        trainer.grad_norms = norms if math.isfinite(norms.sq_small) and math.isfinite(norms.sq_big) else None
        update.step()
        return loss_sum / k

    trainer = NoiseTrainer(step)
    return trainer


class _Update:
    """The backward pass and the optimizer step of one update, with AMP and clipping as the trials'."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter], device: torch.device,
                 grad_clip_norm: float | None, amp: bool) -> None:
        self.optimizer, self.params, self.device = optimizer, params, device
        self.grad_clip_norm, self.amp = grad_clip_norm, amp
        self.dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
        self.scaler = torch.amp.GradScaler(device.type) if amp and device.type == "cuda" else None

    def backward(self, forward: Callable[[], torch.Tensor]) -> float:
        """Run ``forward`` (under autocast with ``amp``) and its backward pass; the loss."""
        with torch.autocast(self.device.type, dtype=self.dtype) if self.amp else contextlib.nullcontext():
            loss = forward()
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        return float(loss.detach())

    def scale(self) -> float:
        """The factor the gradients are scaled by (1 without a gradient scaler)."""
        return float(self.scaler.get_scale()) if self.scaler is not None else 1.0

    def step(self) -> None:
        """Clip the gradient norm (unscaled first) and step; a scaler skips steps with inf/NaN gradients."""
        if self.scaler is not None:
            if self.grad_clip_norm is not None:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return
        if self.grad_clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip_norm)
        self.optimizer.step()


def splittable(x: Any, n: int) -> bool:
    """Whether :func:`split_input` can cut ``x`` into chunks along a first dimension of ``n``."""
    if isinstance(x, torch.Tensor):
        return x.ndim >= 1 and int(x.shape[0]) == n
    if isinstance(x, (tuple, list)):
        return len(x) > 0 and all(splittable(v, n) for v in x)
    if isinstance(x, dict):
        return len(x) > 0 and all(splittable(v, n) for v in x.values())
    return False


def split_input(x: Any, k: int) -> list[Any]:
    """``x`` (a tensor, or tuples/lists/dicts of them) cut into ``k`` equal chunks along dimension 0."""
    if isinstance(x, torch.Tensor):
        return list(x.chunk(k))
    if isinstance(x, dict):
        parts = {key: split_input(v, k) for key, v in x.items()}
        return [{key: p[i] for key, p in parts.items()} for i in range(k)]
    return [type(x)(chunk) for chunk in zip(*(split_input(v, k) for v in x))]
