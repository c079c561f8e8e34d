"""AdamW's betas and eps reach the optimizer, the trials and the LR range test."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch
from tasks import mlp
from test_sweeps import recipe

from ignite_seg.engine.sweeps import LRSweepTask, run_lr_sweep
from ignite_seg.engine.trainer import make_optimizer
from ignite_seg.tuning.lr_range import RangeRule, choose_lr_range


def test_make_optimizer_passes_betas_and_eps_to_adamw():
    opt = make_optimizer(mlp(), "adamw", lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    assert type(opt) is torch.optim.AdamW
    assert (opt.defaults["betas"], opt.defaults["eps"], opt.defaults["weight_decay"]) == ((0.8, 0.95), 1e-6, 0.1)
    assert make_optimizer(mlp(), "adamw", lr=0.01).defaults["betas"] == (0.9, 0.999)


def sweep(**optimizer):
    task = LRSweepTask(key=0, recipe=dataclasses.replace(recipe(), **optimizer), init_seed=3, data_seed=4,
                       batch_size=16, lr_start=1e-4, lr_end=1e2, iterations=150, diverge_th=2.0, diverge_regain=0.8,
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
