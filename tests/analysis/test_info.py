"""The extract step: ``*_info`` functions on hand-built arrays, compared by equality."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ignite_seg.analysis.batch import BatchInfo, batch_info
from ignite_seg.analysis.curves import CurveSet, FinalInfo, ThroughTimeInfo, final_info, throughtime_info
from ignite_seg.analysis.hidden import pca_at, pca_info
from ignite_seg.analysis.lr import LRSweepInfo, ScheduleInfo, lr_sweep_info, schedule_info
from ignite_seg.analysis.stats import describe, mean_band, space_of


def eq(a, b):
    np.testing.assert_equal(a._asdict(), b._asdict())


def test_lr_sweep_info_by_equality():
    arrays = {
        "lrs": np.array([1e-3, 1e-2, 1e-1]),
        "losses": np.array([[2.0, 1.0, np.nan], [2.2, 1.2, 3.0]]),
        "perfs": np.array([[0.1, 0.5, np.nan], [0.1, 0.4, 0.2]]),
        "losses_smoothed": np.array([[2.0, 1.0, np.nan], [2.0, 1.4, 3.0]]),
        "perfs_smoothed": np.array([[0.1, 0.5, np.nan], [0.1, 0.3, 0.2]]),
        "loss_deriv": np.array([-1.0, -0.5, 2.0]), "perf_deriv": np.array([0.4, 0.1, -0.3]),
        "lr_range": np.array([1e-3, 1e-2]), "diverged_lr": np.array([0.1, np.nan]),
    }
    expected = LRSweepInfo(
        lrs=arrays["lrs"], losses=arrays["losses"], perfs=arrays["perfs"],
        loss_band=mean_band(arrays["losses"]), perf_band=mean_band(arrays["perfs"]),
        loss_smoothed=np.array([2.0, 1.2, 3.0]), perf_smoothed=np.array([0.1, 0.4, 0.2]),
        loss_deriv=arrays["loss_deriv"], perf_deriv=arrays["perf_deriv"], lr_range=(1e-3, 1e-2),
        diverged_lr=np.array([0.1, np.nan]), n_repeats=2,
    )
    eq(lr_sweep_info(arrays), expected)
    assert lr_sweep_info(arrays).loss_band.n.tolist() == [2, 2, 1]  # NaN after divergence ignored


def test_lr_sweep_info_empty_sweep_is_none():
    assert lr_sweep_info({"lrs": np.zeros(0), "losses": np.zeros((0, 0))}) is None


def test_schedule_info_known_triangle():
    info = schedule_info({"lr_start": 0.1, "lr_end": 1.0, "cycle_size_epochs": 2, "epochs": 3}, points_per_half_cycle=1)
    eq(info, ScheduleInfo(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.1, 1.0, 0.1, 1.0]), 0.1, 1.0, 2.0, 3.0))
    # an end that is not on a half cycle is interpolated on the ramp
    info = schedule_info({"lr_start": 0.1, "lr_end": 1.0, "cycle_size_epochs": 4, "epochs": 3}, points_per_half_cycle=1)
    np.testing.assert_allclose(info.epochs, [0, 2, 3])
    np.testing.assert_allclose(info.lrs, [0.1, 1.0, 0.55])


def test_schedule_info_matches_ignites_scheduler():
    """The figure shows what the trainer does: ignite's LinearCyclicalScheduler per iteration."""
    import torch
    from ignite.engine import Engine, Events
    from ignite.handlers import LinearCyclicalScheduler

    ipe, hp = 10, {"lr_start": 0.05, "lr_end": 0.5, "cycle_size_epochs": 2, "epochs": 5}
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=hp["lr_start"])
    sched = LinearCyclicalScheduler(opt, "lr", start_value=hp["lr_start"], end_value=hp["lr_end"],
                                    cycle_size=hp["cycle_size_epochs"] * ipe)
    seen = []
    engine = Engine(lambda e, b: seen.append(opt.param_groups[0]["lr"]))
    engine.add_event_handler(Events.ITERATION_STARTED, sched)
    engine.run(range(ipe), max_epochs=hp["epochs"])
    info = schedule_info(hp, points_per_half_cycle=ipe)
    x = np.arange(len(seen)) / ipe
    np.testing.assert_allclose(np.interp(x, info.epochs, info.lrs), seen, rtol=1e-9)


def test_batch_info_by_equality_and_absent_files():
    bs = {"bss": np.array([16.0, 32.0]), "perfs": np.array([[0.5, 0.7], [0.6, 0.8]]),
          "perfs_smoothed": np.array([0.55, 0.75]), "bs_range": np.array([16.0, 32.0]), "noise_scale": np.array(24.0),
          "noise_scale_lrs": np.array([0.01]), "noise_scale_values": np.array([24.0])}
    sampled = {"bss": np.array([16.0, 24.0, 32.0]), "scores": np.array([[0.7, np.nan, 0.8]]),
               "budget_epochs": np.array([1.0, 0.5, 1.0]), "chosen": np.array(32.0)}
    expected = BatchInfo(
        bss=bs["bss"], perfs=bs["perfs"], band=mean_band(bs["perfs"]), perfs_smoothed=bs["perfs_smoothed"],
        bs_range=(16.0, 32.0), noise_scale=24.0, noise_scale_lrs=np.array([0.01]),
        noise_scale_values=np.array([24.0]), cand_bss=sampled["bss"], cand_scores=sampled["scores"],
        cand_band=mean_band(sampled["scores"]), cand_budget=sampled["budget_epochs"], chosen=32.0,
        final_batch_size=32.0,
    )
    eq(batch_info(bs, sampled, 32), expected)
    assert batch_info(None, None) is None
    only = batch_info(None, sampled)
    assert only.bss.size == 0 and math.isnan(only.noise_scale) and only.chosen == 32.0


def test_throughtime_info_by_equality():
    tt = {"epochs": np.array([0.0, 0.5, 1.0]), "trial_ids": np.array([0, 2])}
    for i, k in enumerate(("losses_train", "losses_val", "perfs_train", "perfs_val")):
        grid = np.arange(6, dtype=float).reshape(2, 3) + i
        tt[k] = grid + 1 if k.startswith("losses") else grid / 10
    info = throughtime_info(tt, "classification")
    # losses: bands in log space (geometric mean), perf: clipped to [0, 1]
    cs = [CurveSet(tt[k], mean_band(tt[k], space_of(k))) for k in ("losses_train", "losses_val", "perfs_train", "perfs_val")]
    eq(info, ThroughTimeInfo(tt["epochs"], np.array([0, 2]), *cs, "accuracy"))
    np.testing.assert_allclose(info.loss_val.band.mean, [np.sqrt(10), np.sqrt(18), np.sqrt(28)])
    np.testing.assert_allclose(info.perf_val.band.mean, [0.45, 0.55, 0.65])
    assert info.perf_val.band.high[0] == 1.0  # clipped
    assert throughtime_info({"epochs": np.zeros(0), "trial_ids": np.zeros(0)}) is None


def test_final_info_direction_from_metric():
    res = {"trial_ids": np.array([0, 1, 2]), "final_perf_val": np.array([0.8, 0.9, 0.7]),
           "final_loss_val": np.array([0.3, 0.2, 0.4])}
    perf = final_info(res, "final_perf_val", "final val accuracy", n_failed=1)
    eq(perf, FinalInfo(res["trial_ids"], res["final_perf_val"], describe(res["final_perf_val"], res["trial_ids"], "max", "unit"),
                       "final val accuracy", 1, 0, "unit"))
    assert perf.stats.best_trial == 1
    assert final_info(res, "final_loss_val", "val loss").stats.best_trial == 1  # lowest loss
    assert final_info({"trial_ids": np.zeros(0)}) is None


def test_pca_info_known_components_and_sign_alignment():
    x0 = np.array([[2.0, 0, 0], [-2, 0, 0], [0, 1, 0], [0, -1, 0]])
    hidden = {"epochs": np.array([0.0, 1.0]), "targets": np.array([0, 0, 1, 1]), "layer_names": np.array(["fc"]),
              "layer_0": np.stack([x0, -x0]).astype(np.float32)}
    info = pca_info(hidden)
    assert info.layer_name == "fc" and info.categorical and info.n_features == 3
    np.testing.assert_allclose(np.abs(info.coords[0]), [[2, 0, 0], [2, 0, 0], [0, 1, 0], [0, 1, 0]], atol=1e-12)
    np.testing.assert_allclose(info.explained, [[0.8, 0.2, 0.0], [0.8, 0.2, 0.0]], atol=1e-12)
    # epoch 1 is epoch 0 mirrored: after sign alignment the coordinates agree, so a movie does not flip
    np.testing.assert_allclose(info.coords[1], info.coords[0], atol=1e-12)
    np.testing.assert_allclose(pca_at(info, 0.5), info.coords[0], atol=1e-12)
    np.testing.assert_equal(info.labels, [0, 0, 1, 1])


def test_pca_info_one_hot_targets_and_few_features():
    hidden = {"epochs": np.array([0.0]), "targets": np.array([[0, 1], [1, 0], [0, 1]]), "layer_names": np.array(["a"]),
              "layer_0": np.array([[[1.0, 0], [0, 1], [1, 1]]])}
    info = pca_info(hidden)
    np.testing.assert_equal(info.labels, [1, 0, 1])
    assert info.coords.shape == (1, 3, 3) and np.all(info.coords[0, :, 2] == 0)  # padded third component
    assert pca_info({"layer_names": np.zeros(0)}) is None


@pytest.mark.parametrize("style,label", [("classification", "accuracy"), ("inv-loss", "perf = 1 / (1 + loss)")])
def test_perf_label_follows_accuracy_style(style, label):
    tt = {"epochs": np.array([0.0, 1.0]), "trial_ids": np.array([0])}
    for k in ("losses_train", "losses_val", "perfs_train", "perfs_val"):
        tt[k] = np.ones((1, 2))
    assert throughtime_info(tt, style).perf_label == label
