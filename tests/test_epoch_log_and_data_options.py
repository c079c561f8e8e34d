"""The per-epoch INFO line (the numbers a plain ignite script prints), and the Data options a plain
script sets on its DataLoaders: the training order (``shuffle``) and the evaluation batch size."""
from __future__ import annotations

import logging

import numpy as np
import pytest
from helpers import CE, FAST_HP, trial_task

from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.trainer import run_trial


def _trial(dataset_kwargs=None, **kw):
    specs = [normalize_spec(s, n) for n, s in (("model", ("tasks", "mlp", (), {})),
                                               ("dataset", ("real_tasks", "blobs_options", (), dataset_kwargs or {})),
                                               ("loss", CE))]
    return run_trial(trial_task(0, *specs, FAST_HP, "classification", seed=3, device="cpu", snapshots_per_epoch=2, **kw))


def test_every_epoch_logs_the_end_of_epoch_snapshot_per_set_at_info(caplog):
    with caplog.at_level(logging.INFO, logger="ignite_seg"):
        out = _trial()
    assert out.status == "completed", out.error_text
    lines = [r.getMessage() for r in caplog.records if " epoch " in r.getMessage()]
    tt = out.throughtime
    assert len(lines) == FAST_HP.epochs
    for epoch, line in enumerate(lines, start=1):
        k = int(np.flatnonzero(tt["epochs"] == epoch)[0])  # the snapshot at the epoch's end
        assert line == (
            f"trial 0 epoch {epoch}/{FAST_HP.epochs}: train loss {tt['losses_train'][k]:.4f} perf {tt['perfs_train'][k]:.4f}"
            f" | clean loss {tt['losses_val'][k]:.4f} perf {tt['perfs_val'][k]:.4f}"
            f" | shifted loss {tt['losses_val_shifted'][k]:.4f} perf {tt['perfs_val_shifted'][k]:.4f}")


def test_the_evaluation_batch_size_changes_no_measurement_and_shuffle_false_trains_otherwise():
    base, small = _trial(), _trial({"eval_batch_size": 5})
    assert base.status == small.status == "completed"
    assert base.model == small.model  # evaluation does not touch training
    for key, values in base.throughtime.items():
        np.testing.assert_allclose(small.throughtime[key], values, rtol=1e-5, err_msg=key)
    assert small.result.metrics == pytest.approx(base.result.metrics, rel=1e-5)
    in_order, again = _trial({"shuffle": False}), _trial({"shuffle": False})
    assert in_order.model == again.model and in_order.model != base.model  # seeded, and another order
