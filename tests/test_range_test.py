"""ignite_seg.lr_range_test on live objects: a known stable bound, and the model left as found."""
from __future__ import annotations

import io

import pytest
import torch

import ignite_seg
from ignite_seg import ConfigError


def _regression(n: int = 1024, d: int = 4):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    y = x @ torch.randn(d, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    # MSE of a linear model: Hessian 2/n X^T X; SGD diverges above 2 / lambda_max
    bound = 2.0 / float(torch.linalg.eigvalsh(2.0 / n * x.T @ x).max())
    return torch.utils.data.TensorDataset(x, y), bound


def test_the_chosen_range_lies_below_the_divergence_bound_and_within_a_decade_of_it():
    ds, bound = _regression()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False)
    res = ignite_seg.lr_range_test(model, ds, torch.nn.MSELoss(), batch_size=128, lr_start=1e-4, lr_end=10.0,
                                   repeats=2, seed=0)
    assert bound / 10 < res.lr_max < bound
    assert res.lr_min < res.lr_max
    assert res.losses.shape == res.holdout_losses.shape == (2, res.lrs.size)
    # the sweep ran past the bound and stopped there: held-out loss exploded above it
    assert (res.lrs[torch.isfinite(torch.as_tensor(res.holdout_losses[0])).numpy()].max()) > bound
    assert res.noise_scale > 0
    fig = res.plot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"


def test_model_and_optimizer_are_left_as_found():
    ds, _ = _regression(256)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model(ds.tensors[0][:8]).pow(2).mean().backward()
    opt.step()  # the optimizer has momentum buffers to restore
    model.eval()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    buffers = {i: s["momentum_buffer"].clone() for i, s in enumerate(opt.state.values())}
    ignite_seg.lr_range_test(model, ds, torch.nn.MSELoss(), optimizer=opt, batch_size=32, lr_start=1e-4,
                             lr_end=10.0, steps=60, repeats=2, seed=0)
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(buffers[i], s["momentum_buffer"]) for i, s in enumerate(opt.state.values()))
    assert opt.param_groups[0]["lr"] == 0.01 and not model.training


def test_repeats_start_from_the_same_weights():
    ds, _ = _regression(256)
    model = torch.nn.Linear(4, 1, bias=False)
    res = ignite_seg.lr_range_test(model, ds, torch.nn.MSELoss(), batch_size=32, steps=40, repeats=3, seed=0)
    # same initial weights, different batches: the first held-out loss is nearly equal, not identical
    first = res.holdout_losses[:, 0]
    assert abs(first[0] - first[1]) < 0.05 * first[0] and first[0] != first[1]


@pytest.mark.parametrize("kw, match", [
    ({"lr_start": 1.0, "lr_end": 0.1}, "lr_start < lr_end"),
    ({"holdout": 2}, "holdout must be a fraction"),
    ({"batch_size": 2}, "batch_size must be >= 4"),
])
def test_bad_arguments_name_the_argument(kw, match):
    ds, _ = _regression(64)
    with pytest.raises(ConfigError, match=match):
        ignite_seg.lr_range_test(torch.nn.Linear(4, 1), ds, torch.nn.MSELoss(), **kw)
