"""The loss of the best constant output (what the plateau rule compares a floor with), against known answers."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tasks import blobs
from test_sweeps import recipe
from torch import nn

from ignite_seg.engine.constant_output import constant_output_loss
from ignite_seg.engine.sweeps import LRSweepTask, run_lr_sweep

X = torch.randn(300, 5, generator=torch.Generator().manual_seed(0))


def test_known_answers_for_the_usual_losses():
    g = torch.Generator().manual_seed(1)
    # cross-entropy: the entropy of the class shares, whatever the model's own output (split over two batches)
    y = torch.cat([torch.zeros(150, dtype=torch.long), torch.randint(0, 4, (150,), generator=g)])
    shares = torch.bincount(y, minlength=4).double() / len(y)
    got = constant_output_loss(nn.Linear(5, 4), [(X[:100], y[:100]), (X[100:], y[100:])], nn.CrossEntropyLoss())
    assert got == pytest.approx(float(-(shares * shares.log()).sum()), rel=1e-4)
    # MSE: the targets' variance (the mean predicted); L1: the mean distance to their median
    t = torch.randn(300, 2, generator=g) * torch.tensor([3.0, 0.5]) + 7
    assert constant_output_loss(nn.Linear(5, 2), [(X, t)], nn.MSELoss()) == pytest.approx(
        float(t.var(0, unbiased=False).mean()), rel=1e-4)
    med = t[:, :1].median()
    assert constant_output_loss(nn.Linear(5, 1), [(X, t[:, :1])], nn.L1Loss()) == pytest.approx(
        float((t[:, :1] - med).abs().mean()), rel=1e-3)
    # multi-label BCE: each label's own share
    b = (torch.rand(300, 3, generator=g) < torch.tensor([0.1, 0.5, 0.8])).double()
    p = b.mean(0)
    want = float(-(p * p.log() + (1 - p) * (1 - p).log()).mean())
    assert constant_output_loss(nn.Linear(5, 3), [(X, b.float())], nn.BCEWithLogitsLoss()) == pytest.approx(want,
                                                                                                           rel=1e-3)


class Dropped(nn.Module):
    """Dropout before a linear layer: in train mode its forward draws from torch's RNG."""

    def __init__(self) -> None:
        super().__init__()
        self.drop, self.lin = nn.Dropout(0.5), nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(self.drop(x))


def test_the_model_is_left_as_it_was_and_no_random_number_is_drawn():
    model = Dropped().train()
    before = [p.detach().clone() for p in model.parameters()]
    state = torch.random.get_rng_state()
    y = torch.randint(0, 3, (300,), generator=torch.Generator().manual_seed(2))
    assert math.isfinite(constant_output_loss(model, [(X, y)], nn.CrossEntropyLoss()))
    assert model.training and torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


class Pair(nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": x}


def test_nan_where_no_single_constant_output_applies():
    y = torch.zeros(300, dtype=torch.long)
    assert math.isnan(constant_output_loss(Pair(), [(X, y)], nn.CrossEntropyLoss()))  # not one tensor
    assert math.isnan(constant_output_loss(nn.Identity(), [(X[:, :3], y[:100]), (X[:, :4], y[:100])],
                                           nn.CrossEntropyLoss()))  # the outputs' shapes differ
    def fussy(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return out.view(-1, 7).sum()  # a loss that does not take the output it is given

    assert math.isnan(constant_output_loss(nn.Linear(5, 2), [(X, y)], fussy))
    assert math.isnan(constant_output_loss(nn.Linear(5, 2), [], nn.CrossEntropyLoss()))


def test_a_sweep_repeat_reports_its_held_out_slices_constant_loss_and_trains_as_before():
    rec = recipe()
    train, _ = blobs()
    y = train.tensors[1][list(rec.holdout)]
    shares = torch.bincount(y, minlength=3).double() / len(y)
    shares = shares[shares > 0]
    task = LRSweepTask(key=0, recipe=rec, init_seed=3, data_seed=4, batch_size=16, lr_start=1e-3, lr_end=1.0,
                       iterations=30, diverge_th=2.0, diverge_regain=0.5, smooth_f=0.1, noise_chunks=4)
    a = run_lr_sweep(task)
    assert a.error is None and a.constant_loss == pytest.approx(float(-(shares * shares.log()).sum()), rel=1e-4)
    # its curves do not depend on it: the same seeds give the same losses as a repeat that never measured it
    from ignite_seg.engine import sweeps

    real = sweeps.constant_output_loss
    try:
        sweeps.constant_output_loss = lambda *args: math.nan  # type: ignore[assignment]
        b = run_lr_sweep(task)
    finally:
        sweeps.constant_output_loss = real  # type: ignore[assignment]
    assert math.isnan(b.constant_loss)
    np.testing.assert_array_equal(a.arrays["losses"], b.arrays["losses"])
