"""The update options (AdamW's betas and eps, clipping, AMP) reach the optimizer, the trials and the tuning runs."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from tasks import mlp
from test_sweeps import recipe

import ignite_seg
from ignite_seg import get_preset
from ignite_seg.config.hyperparameters import OptimizerSpec, TrainingOptions
from ignite_seg.engine.sweeps import BatchRunTask, LRSweepTask, run_batch_trial, run_lr_sweep
from ignite_seg.engine.trainer import make_optimizer
from ignite_seg.tuning.lr_range import RangeRule, choose_lr_range


def test_make_optimizer_passes_betas_and_eps_to_adamw():
    opt = make_optimizer(mlp(), OptimizerSpec(optimizer="adamw", betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1), lr=0.01)
    assert type(opt) is torch.optim.AdamW
    assert (opt.defaults["betas"], opt.defaults["eps"], opt.defaults["weight_decay"]) == ((0.8, 0.95), 1e-6, 0.1)
    assert make_optimizer(mlp(), OptimizerSpec(optimizer="adamw"), lr=0.01).defaults["betas"] == (0.9, 0.999)


def sweep(iterations=150, **optimizer):
    task = LRSweepTask(key=0, recipe=dataclasses.replace(recipe(), options=TrainingOptions(**optimizer)), init_seed=3, data_seed=4,
                       batch_size=16, lr_start=1e-4, lr_end=1e2, iterations=iterations, diverge_th=2.0, diverge_regain=0.8,
                       smooth_f=0.1, noise_chunks=4)
    result = run_lr_sweep(task)
    assert result.error is None
    return result.arrays


def test_the_lr_range_test_sweeps_with_the_recipes_optimizer():
    sgd, adamw = sweep(optimizer="sgd"), sweep(optimizer="adamw")
    rule = RangeRule(window=5, window_decades=1.0)
    chose_sgd = choose_lr_range(sgd["lrs"], sgd["losses"][None, :], rule)
    chose_adamw = choose_lr_range(adamw["lrs"], adamw["losses"][None, :], rule)
    # AdamW's steps are about lr in size whatever the gradient: on this task its range sits ~10x lower
    # (SGD 0.15-0.39, AdamW 0.021-0.034)
    assert chose_adamw.lr_max < chose_sgd.lr_max / 4 and chose_adamw.lr_min < chose_sgd.lr_min / 4
    # and its betas reach the sweep: other betas, other losses from the same initialisation and batches
    other = sweep(optimizer="adamw", betas=(0.5, 0.6))
    n = min(other["losses"].size, adamw["losses"].size)
    assert other["losses"][0] == adamw["losses"][0] and not np.array_equal(other["losses"][:n], adamw["losses"][:n])


def clip_spy(monkeypatch):
    """Count the calls of ``torch.nn.utils.clip_grad_norm_`` (and still clip)."""
    calls = []
    real = torch.nn.utils.clip_grad_norm_

    def spy(params, max_norm, *args, **kwargs):
        calls.append(float(max_norm))
        return real(params, max_norm, *args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    return calls


def test_the_lr_sweep_clips_the_gradient_norm_of_every_step(monkeypatch):
    calls = clip_spy(monkeypatch)
    plain = sweep(40)
    assert calls == []
    clipped = sweep(40, grad_clip_norm=1e-3)
    n = clipped["losses"].size
    assert calls == [1e-3] * n  # every step of the sweep clipped, at the recipe's norm
    # the same first batch and initialisation, then other steps: the clipped ones are at most lr x 1e-3 long
    assert clipped["losses"][0] == plain["losses"][0] and not np.allclose(clipped["losses"][1:], plain["losses"][1:])
    # the noise scale is measured on the raw gradients: clipping the step does not change the first norms
    assert clipped["sq_big"][0] == plain["sq_big"][0]


def test_the_lr_sweep_runs_under_bfloat16_autocast_on_the_cpu_with_amp():
    plain, amp = sweep(40), sweep(40, amp=True)
    # the same first batch, the forward pass in bfloat16: close to, but not equal to, the float32 loss
    assert amp["losses"][0] == pytest.approx(plain["losses"][0], rel=0.02) and amp["losses"][0] != plain["losses"][0]
    assert np.isfinite(amp["losses"]).all() and amp["losses"].size == 40
    # the gradient norms measured as without amp (NaN on the short last batch of an epoch, which does not split)
    np.testing.assert_array_equal(np.isfinite(amp["sq_big"]), np.isfinite(plain["sq_big"]))
    assert np.isfinite(amp["sq_big"]).sum() > 30


def test_the_batch_size_runs_clip_and_use_amp(monkeypatch):
    calls = clip_spy(monkeypatch)
    rec = dataclasses.replace(recipe(), options=TrainingOptions(grad_clip_norm=0.5, amp=True))
    run = run_batch_trial(BatchRunTask(key=0, recipe=rec, seed=0, batch_size=16, lr_min=0.05, lr_max=0.5, epochs=2.0))
    assert run.status == "completed", run.error
    assert calls == [0.5] * run.iterations == [0.5] * 12  # 84 items / 16 = 6 batches an epoch


def test_a_tuned_run_clips_and_uses_amp_in_the_sweep_and_the_trials(tmp_path):
    settings = dataclasses.replace(get_preset("fastest"), grad_clip_norm=1.0, amp=True, lr_min_inits=1,
                                   min_epochs=2, max_epochs=2)
    res = ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}),
                           folder=tmp_path / "run", hyperparameters=settings, analysis="none", trials=1, cores=1,
                           seed=0, snapshots_per_epoch=1)
    final = json.loads((tmp_path / "run" / "hparams" / "final.json").read_text())
    assert (final["grad_clip_norm"], final["amp"]) == (1.0, True)
    assert (res.hyperparameters.grad_clip_norm, res.hyperparameters.amp) == (1.0, True)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (run["hyperparameters"]["grad_clip_norm"], run["hyperparameters"]["amp"]) == (1.0, True)
    assert [t.status for t in res.trials] == ["completed"]
