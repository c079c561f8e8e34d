"""ignite_seg.lr_range_test on live objects: a known stable bound, the model left as found, what train() takes,
warnings at the sweep's ends, one torch thread."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import ignite_seg
from ignite_seg import ConfigError, ConfigTypeError
from ignite_seg.tuning.lr_range import RangeRule, choose_lr_range
from ignite_seg.tuning.range_warnings import edge_warnings


def _regression(n: int = 1024, d: int = 4):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    y = x @ torch.randn(d, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    # MSE of a linear model: Hessian 2/n X^T X; SGD diverges above 2 / lambda_max
    bound = 2.0 / float(torch.linalg.eigvalsh(2.0 / n * x.T @ x).max())
    return torch.utils.data.TensorDataset(x, y), bound


def test_the_chosen_range_lies_below_the_divergence_bound_and_ends_where_the_loss_settled():
    ds, bound = _regression()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False)
    res = ignite_seg.lr_range_test(model, ds, torch.nn.MSELoss(), batch_size=128, lr_start=1e-4, lr_end=10.0,
                                   repeats=2, seed=0)
    # the held-out loss reaches its noise floor a decade below the bound and stays there until the sweep
    # diverges: the decade below the divergence is all floor (no slope to read), so the range ends where the
    # loss settled (issue 25's rule), below the bound and not far below it
    assert res.choice.settled_lr is not None and res.lr_max <= 1.5 * res.choice.settled_lr
    assert bound / 30 < res.lr_max < bound / 2
    assert res.lr_min < res.lr_max
    assert res.losses.shape == res.holdout_losses.shape == (2, res.lrs.size)
    # the sweep ran past the bound and stopped there: held-out loss exploded above it
    assert (res.lrs[torch.isfinite(torch.as_tensor(res.holdout_losses[0])).numpy()].max()) > bound
    assert res.noise_scale > 0
    fig = res.plot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"


def test_a_poisson_loss_that_goes_below_zero_is_swept_to_its_divergence():
    """Poisson counts of rate ~e^2 under ``PoissonNLLLoss`` (``exp(x) - y x``): the loss's minimum is about -13.
    The ratio test ("the loss above 4x its minimum") read the first negative held-out loss as a divergence, so each
    repeat ended where the loss crossed zero (lr ~0.0025, the loss -0.09) and the range ended there too."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 4, generator=g)
    y = torch.poisson(torch.exp(2.0 + 0.5 * x @ torch.tensor([[1.0], [-0.5], [0.3], [0.0]])), generator=g)
    torch.manual_seed(0)
    res = ignite_seg.lr_range_test(torch.nn.Linear(4, 1), torch.utils.data.TensorDataset(x, y),
                                   torch.nn.PoissonNLLLoss(), batch_size=64, lr_start=1e-4, lr_end=10.0, repeats=2,
                                   seed=0)
    for held in res.holdout_losses:
        crossed = res.lrs[np.flatnonzero(held < 0)[0]]
        assert res.lrs[np.isfinite(held)].max() > 30 * crossed  # swept on, a decade and a half past zero
        assert np.nanmin(held) < -10
    assert res.lr_max > 3 * crossed and res.lr_min > crossed


def test_a_floor_at_the_best_constant_outputs_loss_moves_the_range_to_its_top(monkeypatch):
    """Targets the inputs cannot predict (every input zero): the held-out loss falls to the targets' variance, the
    best constant output's MSE (measured: a known answer), and lies there until the bias diverges at lr 1. As in
    tune(), the plateau rule reads that level: the range is the floor's top, not the fall onto it (0.05-0.16)."""
    from ignite_seg.tuning.lr_finder import _split

    g = torch.Generator().manual_seed(0)
    y = 3 + torch.randn(1024, 1, generator=g)
    ds = torch.utils.data.TensorDataset(torch.zeros(1024, 4), y)
    torch.manual_seed(0)
    res = ignite_seg.lr_range_test(torch.nn.Linear(4, 1), ds, torch.nn.MSELoss(), batch_size=128, lr_start=1e-4,
                                   lr_end=10.0, repeats=2, seed=0)
    held = y[torch.as_tensor(_split(1024, 0.1, 0)[1])]
    assert res.constant_loss == pytest.approx(float(held.var(unbiased=False)), rel=1e-4)
    assert res.choice.plateau_constant_loss == res.constant_loss and res.choice.plateau_lrs[0] < 0.1
    assert 0.3 < res.lr_max < 2.0 and res.lr_min < res.lr_max
    # not measurable (NaN): no plateau, the range is the fall onto the floor
    monkeypatch.setattr("ignite_seg.tuning.lr_finder.constant_output_loss", lambda *a: float("nan"))
    torch.manual_seed(0)
    res2 = ignite_seg.lr_range_test(torch.nn.Linear(4, 1), ds, torch.nn.MSELoss(), batch_size=128, lr_start=1e-4,
                                    lr_end=10.0, repeats=2, seed=0)
    assert res2.choice.plateau_lrs is None and res2.lr_max < 0.3


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


class _DictItems(torch.utils.data.Dataset):
    """The same items as a TensorDataset, each a dict ``{"x": ..., "y": ...}``."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, y = self.ds[i]
        return {"x": x, "y": y}


def _dict_prepare(batch, device, non_blocking):
    return batch["x"].to(device), batch["y"].to(device)


def _run(train_set, loss=None, **kw):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False)
    return ignite_seg.lr_range_test(model, train_set, loss if loss is not None else torch.nn.MSELoss(),
                                    batch_size=32, lr_start=1e-3, lr_end=10.0, steps=60, repeats=2, seed=0, **kw)


def test_a_dict_dataset_a_data_record_and_a_loss_class_give_the_tensor_pairs_answer():
    ds, _ = _regression(256)
    pairs = _run(ds)
    dicts = _run(_DictItems(ds), prepare_batch=_dict_prepare)  # default_collate makes a dict of tensors
    record = _run(ignite_seg.Data(_DictItems(ds), _DictItems(ds), prepare_batch=_dict_prepare))
    a_class = _run(ds, loss=torch.nn.MSELoss)  # instantiated: MSELoss()
    for res in (dicts, record, a_class):
        np.testing.assert_array_equal(res.holdout_losses, pairs.holdout_losses)
        assert (res.lr_min, res.lr_max) == (pairs.lr_min, pairs.lr_max)


def test_a_collate_fn_batches_padded_sequences():
    g = torch.Generator().manual_seed(0)
    items = [(torch.randn(int(n), 2, generator=g), int(n) % 2) for n in torch.randint(1, 6, (160,), generator=g)]

    def pad(batch):
        xs, ys = zip(*batch)
        return torch.nn.utils.rnn.pad_sequence(xs, batch_first=True).sum(dim=1), torch.tensor(ys)

    res = ignite_seg.lr_range_test(torch.nn.Linear(2, 2), items, torch.nn.CrossEntropyLoss(), collate_fn=pad,
                                   batch_size=16, steps=30, repeats=1)
    assert np.isfinite(res.holdout_losses[0, :10]).all() and np.isfinite(res.noise_scale)


@pytest.mark.parametrize("kw, match", [
    ({}, r"not an \(x, y\) pair .*prepare_batch="),  # dict items without prepare_batch
    ({"prepare_batch": lambda b, d, nb: (b["x"], b["missing"])}, r"not an \(x, y\) pair .*KeyError"),
    ({"prepare_batch": _dict_prepare, "loss": torch.nn.CrossEntropyLoss(weight=torch.ones(3))}, "loss_fn"),
])
def test_a_batch_the_recipe_cannot_take_is_a_config_error_naming_the_fix(kw, match):
    ds, _ = _regression(64)
    with pytest.raises(ConfigError, match=match):
        _run(_DictItems(ds), **kw)


def test_a_loss_class_that_needs_arguments_and_arguments_given_twice_are_refused():
    class NeedsArgs(torch.nn.Module):
        def __init__(self, scale):
            super().__init__()

    ds, _ = _regression(64)
    with pytest.raises(ConfigTypeError, match=r"loss_fn=NeedsArgs is a class .*pass an instance"):
        _run(ds, loss=NeedsArgs)
    with pytest.raises(ConfigError, match="prepare_batch is given twice"):
        _run(ignite_seg.Data(_DictItems(ds), ds, prepare_batch=_dict_prepare), prepare_batch=_dict_prepare)


def test_a_range_at_the_sweeps_end_warns_and_says_so_in_the_result():
    ds, bound = _regression(256)
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="ends at the sweep's end"):
        res = ignite_seg.lr_range_test(torch.nn.Linear(4, 1, bias=False), ds, torch.nn.MSELoss(), batch_size=32,
                                       lr_start=1e-4, lr_end=bound / 20, steps=40, repeats=1)
    assert len(res.warnings) == 1 and "lr_end" in res.warnings[0] and res.lr_max == pytest.approx(bound / 20)


def test_the_edge_warnings_name_each_end_with_known_curves():
    lrs = np.geomspace(1e-3, 1.0, 61)
    rule = RangeRule(window=5, window_decades=1.0)
    falling = np.linspace(2.0, 0.1, 61)[None, :]  # falls to the end: the range runs up to the sweep's end
    choice = choose_lr_range(lrs, falling, rule)
    (end,) = edge_warnings(lrs, choice, falling, 5)
    assert "ends at the sweep's end" in end and "x its start" not in end
    rising = np.linspace(2.0, 4.0, 61)[None, :]  # the held-out loss there twice its start
    assert "2x its start" in edge_warnings(lrs, choice, rising, 5)[-1]
    # falls from the first point and diverges a decade later: the range starts at the sweep's start
    early = np.r_[np.linspace(2.0, 1.0, 12), np.geomspace(1.0, 50, 49)][None, :]
    (start,) = edge_warnings(lrs, choose_lr_range(lrs, early, rule), early, 5)
    assert "starts at the sweep's start (lr_min=0.001, lr_start=0.001)" in start and "smaller lr_start" in start
    # on the constant's loss from the start until it diverged: the plateau rule's floor, and a warning that no fall
    # was measured (an ordinary range has none)
    flat = np.r_[np.full(45, 1.0), np.geomspace(1.0, 50, 16)][None, :]
    floor = choose_lr_range(lrs, flat, rule, constant_loss=1.0)
    (guess,) = edge_warnings(lrs, floor, flat, 5)
    assert "never fell below the best constant output's (1)" in guess and "late learner" in guess
    assert not any("constant" in w for w in edge_warnings(lrs, choice, falling, 5))


def test_one_torch_thread_by_default_and_the_callers_count_restored():
    ds, _ = _regression(256)
    seen = []

    def loss(out, y):
        seen.append(torch.get_num_threads())
        return torch.nn.functional.mse_loss(out, y)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _run(ds, loss=loss)
        assert set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        _run(ds, loss=loss, threads=None)
        assert set(seen) == {2} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_loss_at_the_constants_from_the_start_is_the_floor_for_adam_and_the_error_for_sgd():
    # y = sign(x1 x2): a linear model's best fit is the constant 0, where its zeroed weights start, so no learning
    # rate moves its loss until one diverges (a late learner's sweep with standardised targets looks the same)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 2, generator=g)
    ds = torch.utils.data.TensorDataset(x, torch.sign(x[:, :1] * x[:, 1:]))

    def model():
        m = torch.nn.Linear(2, 1)
        torch.nn.init.zeros_(m.weight)
        torch.nn.init.zeros_(m.bias)
        return m

    adam = model()
    with pytest.warns(UserWarning, match="never fell below the best constant output's"):
        res = ignite_seg.lr_range_test(adam, ds, torch.nn.MSELoss(), optimizer=torch.optim.Adam(adam.parameters()),
                                       batch_size=32, lr_start=1e-4, lr_end=30.0, steps=200, repeats=2)
    assert res.choice.plateau_lrs is not None and res.choice.plateau_lrs[0] == pytest.approx(1e-4)
    assert res.lr_max == pytest.approx(res.choice.plateau_quiet_lr) and res.lr_max < np.nanmin(res.choice.diverged_lr)
    sgd = model()
    with pytest.raises(ignite_seg.TuningError, match="did not improve"):
        ignite_seg.lr_range_test(sgd, ds, torch.nn.MSELoss(), batch_size=32, lr_start=1e-4, lr_end=30.0, steps=200,
                                 repeats=2)
