"""The trial engine's parts, in this process (the workers run the same code)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from tasks import blobs, mlp

from ignite_seg.engine.data import Batches, TensorData
from ignite_seg.engine.metrics import Probe, evaluate
from ignite_seg.engine.trainer import ThroughTimeRecorder, create_trainer, make_optimizer


def test_make_optimizer_takes_the_name_and_the_numbers_it_needs():
    model = mlp()
    sgd = make_optimizer(model, "sgd", lr=0.1, momentum=0.9, weight_decay=1e-4)
    assert type(sgd) is torch.optim.SGD
    assert (sgd.defaults["lr"], sgd.defaults["momentum"], sgd.defaults["weight_decay"]) == (0.1, 0.9, 1e-4)
    adamw = make_optimizer(model, "adamw", lr=0.01, weight_decay=0.5)
    assert type(adamw) is torch.optim.AdamW and (adamw.defaults["lr"], adamw.defaults["weight_decay"]) == (0.01, 0.5)


def test_through_time_recorder_measures_with_its_probe_at_the_snapshot_epochs():
    torch.manual_seed(0)
    train, _ = blobs()
    d = TensorData(*train.tensors)
    model, loss_fn, cpu = mlp(), torch.nn.CrossEntropyLoss(), torch.device("cpu")
    probe = Probe(model, loss_fn, "classification", cpu)
    batch = (d.x[:20], d.y[:20])
    assert probe(batch) == evaluate(model, loss_fn, [batch], "classification", cpu)
    opt = make_optimizer(model, "sgd", lr=0.1)
    engine = create_trainer(model, opt, loss_fn, cpu)
    rec = ThroughTimeRecorder(probe, batch, batch, iters_per_epoch=6, epochs=2, per_epoch=2)
    rec.attach(engine)
    rec.attach(engine)  # attach twice: still one snapshot per event
    engine.run(Batches(d, 16, torch.Generator().manual_seed(0)), max_epochs=2)
    arrays = rec.arrays()
    np.testing.assert_array_equal(arrays["epochs"], [0.0, 0.5, 1.0, 1.5, 2.0])
    assert arrays["losses_train"][-1] == pytest.approx(probe(batch)[0])
    np.testing.assert_array_equal(arrays["losses_train"], arrays["losses_val"])
