"""EMA of the weights: the closed form on a toy model, and a trial that evaluates and saves it."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import CE, FAST_HP, trial_task
from tasks import blobs, mlp

from ignite_seg.config.hyperparameters import OptimizerSpec
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.ema import attach_ema
from ignite_seg.engine.scoring import Scorer
from ignite_seg.engine.trainer import create_trainer, make_optimizer, run_trial


def test_ema_weights_after_n_steps_equal_the_closed_form():
    # one weight w, loss = g_k * w on step k, plain SGD with lr: w_k = w_{k-1} - lr * g_k
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(2.0)
    decay, lr, grads = 0.8, 0.5, [1.0, -3.0, 0.5, 2.0, 4.0, -1.0]
    opt = make_optimizer(model, OptimizerSpec(), lr=lr)
    engine = create_trainer(model, opt, lambda out, g: (out * g).sum(), torch.device("cpu"))
    ema_model = attach_ema(engine, model, decay)
    assert attach_ema(engine, model, decay) is ema_model  # attached once
    engine.run([(torch.ones(1, 1), torch.tensor([[g]])) for g in grads], max_epochs=1)

    w = [2.0]
    for g in grads:
        w.append(w[-1] - lr * g)
    n = len(grads)
    # ema_0 = w_0, ema_k = d ema_{k-1} + (1 - d) w_k  =>  ema_n = d^n w_0 + (1 - d) sum_k d^(n-k) w_k
    closed = decay**n * w[0] + (1 - decay) * sum(decay ** (n - k) * w[k] for k in range(1, n + 1))
    assert model.weight.item() == pytest.approx(w[-1])
    assert ema_model.weight.item() == pytest.approx(closed, rel=1e-6)
    assert ema_model.weight.item() != pytest.approx(w[-1])


def test_without_decay_the_model_itself_is_evaluated():
    model = mlp()
    engine = create_trainer(model, make_optimizer(model, OptimizerSpec(), lr=0.1), CE_FN, torch.device("cpu"))
    assert attach_ema(engine, model, None) is model


CE_FN = torch.nn.CrossEntropyLoss()


def test_a_trial_with_ema_evaluates_and_saves_the_average_and_keeps_the_raw_weights():
    spec = {name: normalize_spec(s, name) for name, s in
            (("model", ("tasks", "mlp", (), {})), ("dataset", ("tasks", "blobs", (), {})), ("loss", CE))}
    hp = dataclasses.replace(FAST_HP, ema_decay=0.9, schedule="cosine", warmup_epochs=1.0)
    task = trial_task(0, spec["model"], spec["dataset"], spec["loss"], hp, "classification", seed=0, device="cpu")
    out = run_trial(task)
    assert out.status == "completed", out.error_text
    assert out.model_raw and out.model != out.model_raw
    _, val = blobs()
    for blob, expected in ((out.model, out.result.metrics["loss_val"]), (out.model_raw, None)):
        model = mlp()
        model.load_state_dict(torch.load(__import__("io").BytesIO(blob), weights_only=True))
        loss_val = Scorer(CE_FN, "classification").measure(model, [tuple(val.tensors)])["loss"]
        if expected is not None:
            assert loss_val == pytest.approx(expected, rel=1e-6)  # final metrics are the EMA model's
        else:
            assert loss_val != pytest.approx(out.result.metrics["loss_val"], rel=1e-6)
    plain = run_trial(dataclasses.replace(task, hparams=dataclasses.replace(hp, ema_decay=None)))
    assert plain.model_raw == b"" and plain.model == out.model_raw  # same raw training either way


def test_the_list_wise_update_is_ignites_bit_for_bit():
    from ignite.handlers import EMAHandler

    from ignite_seg.engine.ema import ForeachEMAHandler

    x, y = blobs()[0].tensors
    averaged = []
    for handler_class in (EMAHandler, ForeachEMAHandler):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 3))
        engine = create_trainer(model, make_optimizer(model, OptimizerSpec(), lr=0.1), CE_FN, torch.device("cpu"))
        ema = handler_class(model, momentum=0.1)
        ema.attach(engine, name="ema_momentum")
        engine.run([(x[i:i + 16], y[i:i + 16]) for i in range(0, 96, 16)], max_epochs=3)
        averaged.append(ema.ema_model.state_dict())
    assert averaged[0].keys() == averaged[1].keys()
    assert all(torch.equal(averaged[0][k], averaged[1][k]) for k in averaged[0])
