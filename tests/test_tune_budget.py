"""What a tune costs (issue 25): sweeps capped in steps, the held-out curve sampled and
interpolated in log LR, the batch candidates' runs capped in examples; the choice holds."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from test_lr_range import logistic_curve, with_divergence
from test_sweeps import recipe

from ignite_seg import ConfigError, ConfigTypeError
from ignite_seg.config.hyperparameters import HyperparameterSettings
from ignite_seg.config.presets import get_preset
from ignite_seg.engine.sweeps import LRSweepTask, run_lr_sweep
from ignite_seg.tuning.budget import batch_budget_epochs, fill_sampled, holdout_measured_at, sweep_plan
from ignite_seg.tuning.lr_range import RangeRule, choose_lr_range, geometric_lrs

DIGITS_FIT = 1293  # digits' training items less the held-out slice


def test_small_datasets_keep_their_epoch_sized_sweeps_large_ones_are_capped():
    fast = get_preset("fast")
    assert sweep_plan(fast, DIGITS_FIT, 16).iterations == 486 and not sweep_plan(fast, DIGITS_FIT, 16).capped
    for n in (19_488, 49_488):  # 20k and 50k items: 6 epochs would be 7,308 and 18,558 steps
        assert sweep_plan(fast, n, 16) == (500, 17, True)
    uncapped = dataclasses.replace(fast, lr_sweep_max_examples=None, lr_holdout_evals=None)
    assert sweep_plan(uncapped, 19_488, 16) == (7308, 1, False)  # the old size: 6 epochs, every step measured
    # the floor of lr_sweep_min_iters wins over a smaller cap
    assert sweep_plan(dataclasses.replace(fast, lr_sweep_max_examples=50), 19_488, 16).iterations == 200
    # the cap is in examples: a rescan at batch 8 takes twice the steps (digits' 972 kept), at 64 a quarter
    assert sweep_plan(fast, DIGITS_FIT, 8) == (972, 32, False)
    assert sweep_plan(fast, 19_488, 8).iterations == 1000
    assert sweep_plan(fast, 19_488, 32).iterations == 250 and sweep_plan(fast, 19_488, 64).iterations == 200
    for name, steps in (("fastest", 243), ("slow", 648), ("slowest", 810)):  # and their rescans at batch 8
        assert sweep_plan(get_preset(name), DIGITS_FIT, 16).iterations == steps
        assert not sweep_plan(get_preset(name), DIGITS_FIT, 8).capped


def test_held_out_evaluations_per_repeat_stay_within_the_budget():
    for evals in (2, 10, 32, 100):
        s = dataclasses.replace(get_preset("fast"), lr_holdout_evals=evals)
        for n in (200, 1293, 19_488):
            plan = sweep_plan(s, n, 16)
            assert plan.holdout_evals <= evals + 1  # the last step is always measured
            assert plan.holdout_evals >= 0.6 * min(evals, plan.iterations)  # ceil(steps / evals) apart
    measured = holdout_measured_at(10, 4)
    assert np.flatnonzero(measured).tolist() == [0, 4, 8, 9]


def test_batch_candidates_get_epochs_or_the_example_cap_whichever_is_fewer():
    fast = get_preset("fast")
    assert batch_budget_epochs(fast, DIGITS_FIT) == 2.0
    assert batch_budget_epochs(fast, 19_488) == pytest.approx(4096 / 19_488)
    assert batch_budget_epochs(dataclasses.replace(fast, batch_sweep_max_examples=None), 19_488) == 2.0


def test_the_cost_fields_are_checked_with_the_fix():
    with pytest.raises(ConfigError, match="lr_sweep_max_examples"):
        HyperparameterSettings(lr_sweep_max_examples=0)
    with pytest.raises(ConfigTypeError, match="lr_holdout_evals"):
        HyperparameterSettings(lr_holdout_evals=2.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="batch_sweep_max_examples"):
        HyperparameterSettings(batch_sweep_max_examples=0)
    assert HyperparameterSettings(lr_sweep_max_examples=None, lr_holdout_evals=None, batch_sweep_max_examples=None)


def test_fill_sampled_is_exact_on_a_curve_linear_in_log_lr_and_keeps_nan_where_nothing_was_measured():
    lrs = geometric_lrs(1e-4, 10.0, 21)
    curve = 3.0 - 0.4 * np.log10(lrs)
    mask = holdout_measured_at(21, 5).astype(float)
    sampled = np.where(mask == 1, curve, np.nan)
    np.testing.assert_allclose(fill_sampled(sampled[None], mask[None])[0], curve)
    # a measured NaN stays NaN; past the row's last finite measurement nothing is invented
    row = sampled.copy()
    row[20] = np.nan
    out = fill_sampled(row[None], mask[None])[0]
    assert np.isnan(out[16:]).all() and np.isfinite(out[:16]).all()
    # every step measured: unchanged
    np.testing.assert_array_equal(fill_sampled(curve[None], np.ones((1, 21)))[0], curve)


@pytest.mark.parametrize("every", [5, 16])
def test_the_range_chosen_on_a_sampled_curve_is_the_full_curves(every):
    lrs = geometric_lrs(1e-4, 10.0, 486)
    x0, w = -1.0, 0.25
    rng = np.random.default_rng(0)
    full = with_divergence(lrs, logistic_curve(lrs, x0, w), x_div=0.4)[None] + rng.normal(0, 0.01, (1, 486))
    mask = holdout_measured_at(486, every).astype(float)[None]
    mask[:, np.isnan(full[0])] = np.nan  # the sweep stopped there
    filled = fill_sampled(np.where(mask == 1, full, np.nan), mask)
    rule = RangeRule(window=49, diverge_th=2.0, steep_frac=0.3)
    a, b = choose_lr_range(lrs, full, rule), choose_lr_range(lrs, filled, rule)
    assert math.log10(b.lr_min) == pytest.approx(math.log10(a.lr_min), abs=0.05)
    assert math.log10(b.lr_max) == pytest.approx(math.log10(a.lr_max), abs=0.05)


def test_a_sweep_measures_the_held_out_slice_where_planned_with_the_values_of_an_every_step_sweep():
    task = LRSweepTask(key=0, recipe=recipe(), init_seed=3, data_seed=4, batch_size=16, lr_start=1e-3, lr_end=1.0,
                       iterations=40, diverge_th=50.0, diverge_regain=1.0, smooth_f=0.1, noise_chunks=4)
    every = run_lr_sweep(task)
    sampled = run_lr_sweep(dataclasses.replace(task, holdout_every=7))
    assert every.status == sampled.status == "completed"
    measured = sampled.arrays["holdout_measured"] == 1
    assert np.flatnonzero(measured).tolist() == [0, 7, 14, 21, 28, 35, 39]  # every 7th, and the last
    np.testing.assert_array_equal(sampled.arrays["losses"], every.arrays["losses"])  # training is unchanged
    np.testing.assert_array_equal(sampled.arrays["holdout_losses"][measured], every.arrays["holdout_losses"][measured])
    assert np.isnan(sampled.arrays["holdout_losses"][~measured]).all()
    assert (every.arrays["holdout_measured"] == 1).all()


def test_a_sweep_cut_by_divergence_measures_its_last_step():
    task = LRSweepTask(key=0, recipe=recipe(), init_seed=3, data_seed=4, batch_size=16, lr_start=1e-3, lr_end=1e3,
                       iterations=120, diverge_th=2.0, diverge_regain=0.5, smooth_f=0.1, noise_chunks=4,
                       holdout_every=50)
    res = run_lr_sweep(task)
    assert res.status == "diverged"
    n = res.arrays["losses"].size
    assert n < 120 and res.arrays["holdout_measured"][n - 1] == 1


def test_a_tune_with_binding_caps_writes_the_sampled_curves_and_what_was_measured(tmp_path):
    from test_tuner import SMALL, load, specs, strict_json

    from ignite_seg.runtime.tasks import TaskRunner
    from ignite_seg.storage.run_folder import RunFolder
    from ignite_seg.tuning.recipe import choose_recipe

    s = dataclasses.replace(SMALL, lr_sweep_len=20.0, lr_sweep_min_iters=20, lr_sweep_max_examples=960, lr_holdout_evals=8,
                            batch_sweep_max_examples=100, rescan_lr_after_bs=False, batch_pts=2, batch_rn_min_inits=1)
    with TaskRunner(2) as runner:
        choose_recipe(runner, RunFolder(tmp_path / "r"), s, specs(), accuracy_style="classification",
             facts={"n_train": 96, "n_val": 48}, seed=3, device="cpu")
    z = load(tmp_path / "r/hparams/lr_vs_perf.npz")
    misc = strict_json(tmp_path / "r/hparams/misc.json")
    plan = sweep_plan(s, 86, 16)  # 96 items less the 10 held out: 20 epochs would be 120 steps
    assert plan == (60, 9, True) and z["lrs"].size == 60
    lr = misc["steps"]["lr_range"]
    assert lr["iterations"] == 60 and lr["holdout_every"] == 9 and lr["capped_by_max_examples"] is True
    for r in range(s.lr_min_inits):
        ran = np.isfinite(z["losses"][r])
        measured = z["holdout_measured"][r] == 1
        assert 2 <= measured.sum() <= 9 and measured[0] and not (measured & ~ran).any()
        # between measurements the held-out curve is interpolated: finite wherever the repeat ran
        assert np.isfinite(z["holdout_losses"][r][ran]).all() and np.isfinite(z["perfs"][r][ran]).all()
    assert misc["steps"]["batch_size"]["rungs"][0]["budget_epochs"] == pytest.approx(100 / 86)
