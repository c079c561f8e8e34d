"""The LR range choice on synthetic curves whose right answer is known."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ignite_seg import TuningError
from ignite_seg.smoothing import DivergenceMonitor
from ignite_seg.tuning.lr_range import (
    RangeRule,
    choose_lr_range,
    divergence_index,
    geometric_lrs,
    log_lr_derivative,
    mean_curve,
    smooth_curves,
)
from ignite_seg.tuning.lr_valley import VALLEY_BOTTOM_TOL

#: For a logistic drop ``1/(1+exp(-(x-x0)/w))`` the slope is half its peak at ``|x-x0| = 2w·acosh(√2)``.
HALF_WIDTH = 2 * math.acosh(math.sqrt(2))


def logistic_curve(lrs: np.ndarray, x0: float, w: float, depth: float = 1.8, top: float = 2.0) -> np.ndarray:
    x = np.log10(lrs)
    return top - depth / (1 + np.exp(-(x - x0) / w))


def with_divergence(lrs: np.ndarray, loss: np.ndarray, x_div: float) -> np.ndarray:
    """The loss explodes past ``lr = 10**x_div`` (a fast exponential rise, then NaN as a sweep stops)."""
    x = np.log10(lrs)
    out = loss + np.where(x > x_div, np.expm1(8 * (x - x_div)), 0.0)
    out[x > x_div + 0.6] = np.nan
    return out


def test_geometric_lrs_endpoints_and_ratio():
    lrs = geometric_lrs(1e-4, 10.0, 6)
    assert lrs[0] == pytest.approx(1e-4) and lrs[-1] == pytest.approx(10.0)
    np.testing.assert_allclose(lrs[1:] / lrs[:-1], 10.0)
    with pytest.raises(ValueError):
        geometric_lrs(1.0, 0.1, 5)


def test_clean_curve_range_is_the_known_half_slope_interval():
    lrs = geometric_lrs(1e-4, 10.0, 400)
    x0, w = -1.0, 0.25
    loss = with_divergence(lrs, logistic_curve(lrs, x0, w), x_div=0.4)
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=5, diverge_th=2.0, steep_frac=0.5))
    assert math.log10(c.steepest_lr) == pytest.approx(x0, abs=0.03)
    assert math.log10(c.lr_min) == pytest.approx(x0 - HALF_WIDTH * w, abs=0.05)
    assert math.log10(c.lr_max) == pytest.approx(x0 + HALF_WIDTH * w, abs=0.05)
    assert not c.hit_end
    assert np.isfinite(c.diverged_lr[0]) and c.diverged_lr[0] > 10**0.4


def test_steep_frac_narrows_the_interval_as_expected():
    lrs = geometric_lrs(1e-4, 10.0, 400)
    loss = logistic_curve(lrs, -2.0, 0.2)
    wide = choose_lr_range(lrs, loss[None, :], RangeRule(window=3, steep_frac=0.25))
    narrow = choose_lr_range(lrs, loss[None, :], RangeRule(window=3, steep_frac=0.75))
    # half-width at fraction f of the peak slope of a logistic: 2w·acosh(1/sqrt(f))
    for c, f in ((wide, 0.25), (narrow, 0.75)):
        hw = 2 * 0.2 * math.acosh(1 / math.sqrt(f))
        assert math.log10(c.lr_max) - math.log10(c.lr_min) == pytest.approx(2 * hw, abs=0.06)


def test_noisy_repeats_average_to_the_known_range():
    rng = np.random.default_rng(0)
    lrs = geometric_lrs(1e-4, 10.0, 500)
    clean = with_divergence(lrs, logistic_curve(lrs, -0.5, 0.3), x_div=0.6)
    noisy = clean[None, :] + rng.normal(0, 0.08, size=(4, lrs.size))
    c = choose_lr_range(lrs, noisy, RangeRule(window=31, diverge_th=2.0))
    assert math.log10(c.lr_min) == pytest.approx(-0.5 - HALF_WIDTH * 0.3, abs=0.15)
    assert math.log10(c.lr_max) == pytest.approx(-0.5 + HALF_WIDTH * 0.3, abs=0.15)
    assert c.smoothed.shape == (4, 500)
    # one noisy dip must not win over the sustained improvement: add a narrow spike down early
    dipped = noisy.copy()
    dipped[:, 40:44] -= 0.6
    c2 = choose_lr_range(lrs, dipped, RangeRule(window=31, diverge_th=2.0))
    assert math.log10(c2.steepest_lr) == pytest.approx(-0.5, abs=0.2)


def test_window_ignores_the_young_model_drop_far_below_divergence():
    # two drops: a big early one at lr 1e-4 (the young model) and the real one at 0.03, divergence at 0.3
    lrs = geometric_lrs(1e-5, 10.0, 600)
    loss = logistic_curve(lrs, -4.0, 0.1, depth=0.5, top=2.0) + logistic_curve(lrs, -1.5, 0.15, depth=0.4, top=0.0)
    loss = with_divergence(lrs, loss, x_div=-0.5)
    whole = choose_lr_range(lrs, loss[None, :], RangeRule(window=5))
    assert math.log10(whole.steepest_lr) == pytest.approx(-4.0, abs=0.05)
    windowed = choose_lr_range(lrs, loss[None, :], RangeRule(window=5, window_decades=1.5))
    assert math.log10(windowed.steepest_lr) == pytest.approx(-1.5, abs=0.05)
    assert math.log10(windowed.lr_min) == pytest.approx(-1.5 - HALF_WIDTH * 0.15, abs=0.05)
    assert math.log10(windowed.lr_max) == pytest.approx(-1.5 + HALF_WIDTH * 0.15, abs=0.05)


def test_a_narrow_interval_is_widened_downwards():
    lrs = geometric_lrs(1e-4, 10.0, 400)
    loss = logistic_curve(lrs, -1.0, 0.03)  # a very sharp drop: half-slope width 0.1 decades
    narrow = choose_lr_range(lrs, loss[None, :], RangeRule(window=3))
    wide = choose_lr_range(lrs, loss[None, :], RangeRule(window=3, min_span_decades=0.5))
    assert math.log10(narrow.lr_max / narrow.lr_min) < 0.2
    assert wide.lr_max == narrow.lr_max and math.log10(wide.lr_max / wide.lr_min) == pytest.approx(0.5)


def test_non_diverging_curve_gives_a_range_below_lr_end():
    lrs = geometric_lrs(1e-4, 1.0, 300)
    loss = logistic_curve(lrs, -2.0, 0.3)  # improves, then plateaus: never diverges
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=5))
    assert np.isnan(c.diverged_lr[0]) and c.n_valid == 300
    assert 1e-4 <= c.lr_min < 10**-2 < c.lr_max <= 1.0


def test_improvement_until_the_end_reports_hit_end():
    lrs = geometric_lrs(1e-4, 1.0, 200)
    loss = 2.0 - np.log10(lrs / 1e-4) ** 2 / 16 * 1.5  # accelerating improvement, steepest at lr_end
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=3))
    assert c.hit_end and c.lr_max == pytest.approx(1.0, rel=1e-6)


def test_nan_from_the_start_raises_tuning_error_naming_the_fix():
    lrs = geometric_lrs(1e-4, 10.0, 100)
    with pytest.raises(TuningError, match="not finite even at the sweep's first"):
        choose_lr_range(lrs, np.full((2, 100), np.nan), RangeRule(window=5))


def test_immediate_divergence_raises_and_says_lower_lr_start():
    lrs = geometric_lrs(1e-4, 10.0, 100)
    loss = np.full(100, np.nan)
    loss[:3] = [1.0, 5.0, 50.0]
    with pytest.raises(TuningError, match=r"lower lr_start .*e\.g\. hyperparameters=dataclasses\.replace\("
                                          r"ignite_seg\.get_preset\('fast'\), lr_start=1e-06\)"):
        choose_lr_range(lrs, loss[None, :], RangeRule(window=1))


def test_flat_curve_raises_tuning_error():
    lrs = geometric_lrs(1e-4, 10.0, 200)
    rng = np.random.default_rng(1)
    flat = 1.0 + rng.normal(0, 0.002, size=(2, 200))
    with pytest.raises(TuningError, match=r"did not improve.*e\.g\. hyperparameters=dataclasses\.replace\("
                                          r"ignite_seg\.get_preset\('fast'\), lr_start=1e-05, lr_end=100, "):
        choose_lr_range(lrs, flat, RangeRule(window=9))


def test_divergence_index_and_monitor_agree_on_a_clean_rise():
    y = np.array([3.0, 2.0, 1.0, 1.5, 1.9, 2.1, 5.0])
    assert divergence_index(y, 2.0) == 5
    assert divergence_index(np.array([3.0, 2.0, 1.0]), 2.0) is None
    assert divergence_index(np.array([1.0, np.nan, 0.5]), 2.0) == 1
    m = DivergenceMonitor(2.0, smooth_f=1.0)
    assert [m.update(v) for v in y].index(True) == 5
    assert DivergenceMonitor(2.0, 0.5).update(float("nan"))


def test_a_loss_below_zero_is_not_read_as_diverged():
    """A Poisson or Gaussian negative log-likelihood goes below zero: twice a negative minimum lies below it, so the
    ratio rule read every later point as diverged (the sweep ended where the loss crossed zero). Below zero only the
    regain rule and a non-finite loss end a sweep, and they still do."""
    falling = np.array([1.0, 0.4, -0.2, -1.0, -2.5, -3.0, -3.1])
    assert divergence_index(falling, 2.0, regain=0.8) is None
    m = DivergenceMonitor(2.0, smooth_f=1.0, regain=0.8)
    assert not any(m.update(v) for v in falling)
    # rising back by more than 0.8 of the 4.1 it gained (to above 0.18), then blowing up
    back = np.concatenate([falling, [-2.0, 0.5, 40.0]])
    assert divergence_index(back, 2.0, regain=0.8) == 8
    m = DivergenceMonitor(2.0, smooth_f=1.0, regain=0.8)
    assert [m.update(v) for v in back].index(True) == 8
    assert divergence_index(np.array([-1.0, -2.0, np.inf]), 2.0) == 2
    # a loss above zero keeps the ratio rule
    assert divergence_index(np.array([1.0, 0.5, 0.9, 1.1]), 2.0) == 3
    # on its way down through zero the minimum is tiny and a little noise is twice it: a loss known to go below
    # zero (zero_floor=False) is left to the regain rule; the monitor learns it from the first negative loss
    nearing = np.array([1.0, 0.4, 0.05, 0.12, 0.02, -0.3, -0.5])
    assert divergence_index(nearing, 2.0, regain=0.8) == 3
    assert divergence_index(nearing, 2.0, regain=0.8, zero_floor=False) is None
    m = DivergenceMonitor(2.0, smooth_f=1.0, regain=0.8)
    assert not any(m.update(v) for v in (1.0, -0.1, 0.4, 0.05, 0.12, 0.02, -0.3)) and not m.zero_floor


def test_a_sweep_whose_loss_goes_below_zero_is_cut_by_the_regain_rule_alone():
    """Training curves shaped as a Poisson NLL's were in a sweep (session 27): a fall from 1 to 0.1, a decade lingering
    there, a second fall to -0.3, a blow-up from lr 2; batch noise 0.15. Where a repeat lingered just above zero
    the ratio rule read its noise as twice the minimum and cut it at lr 0.011; with a loss known to go below zero,
    every repeat runs to its blow-up."""
    lrs = geometric_lrs(1e-4, 10.0, 400)
    x = np.log10(lrs)
    base = (0.1 + 0.9 / (1 + np.exp((x + 3.0) / 0.2)) - 0.4 / (1 + np.exp(-(x + 1.5) / 0.2))
            + np.where(x > 0.3, 50.0 * (x - 0.3), 0.0))
    losses = base[None, :] + np.random.default_rng(0).normal(0, 0.15, (3, lrs.size))
    choice = choose_lr_range(lrs, losses, RangeRule(window=21))
    assert np.all((choice.diverged_lr > 1.5) & (choice.diverged_lr < 2.5)), choice.diverged_lr


def test_regain_rule_catches_a_saturating_loss_that_never_doubles():
    # cross-entropy of 10 classes: 2.3 at start, best 1.5, back to 2.3 when the net dies (< 2 x 1.5)
    y = np.array([2.3, 2.1, 1.8, 1.5, 1.6, 1.8, 2.0, 2.3, 2.3])
    assert divergence_index(y, 2.0) is None
    assert divergence_index(y, 2.0, regain=0.5) == 6  # 2.0 - 1.5 > 0.5 * (2.3 - 1.5)
    # no improvement yet (a flat start): the regain rule stays quiet, only noise
    assert divergence_index(np.array([2.3, 2.29, 2.31, 2.3]), 2.0, regain=0.5) is None
    m = DivergenceMonitor(2.0, smooth_f=1.0, regain=0.5)
    assert [m.update(v) for v in y].index(True) == 6
    # a noisy MSE that improved a little and wobbles back up by less than 0.8 of the gain goes on
    assert divergence_index(np.array([1.0, 0.8, 0.67, 0.85, 0.7]), 2.0, regain=0.8) is None
    assert divergence_index(np.array([1.0, 0.8, 0.67, 0.95, 0.7]), 2.0, regain=0.8) == 3
    # end to end: the sweep is cut there, and the range lies below the cut
    lrs = geometric_lrs(1e-3, 10.0, 300)
    x = np.log10(lrs)
    loss = logistic_curve(lrs, -1.0, 0.2, depth=0.8, top=2.3) + np.where(x > 0, np.minimum(4 * x, 0.8), 0)
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=5, diverge_th=2.0, regain=0.5))
    assert 10**0 < c.diverged_lr[0] < 10**0.3 and c.lr_max < 1.0


def test_a_lucky_first_batch_is_not_a_divergence():
    # per-batch losses are noisy: a low first batch must not set the minimum that the rest "exceed"
    y = np.array([0.3, 1.0, 1.1, 0.9, 1.0, 0.95, 0.9, 0.85])
    assert divergence_index(y, 2.0) == 1
    assert divergence_index(y, 2.0, warmup=2) is None
    assert divergence_index(np.array([1.0, np.nan, 1.0]), 2.0, warmup=2) == 1  # NaN counts in the warm-up
    m = DivergenceMonitor(2.0, smooth_f=0.5)  # warm-up: the first ceil(1/0.5) - 1 = 1 loss
    assert [m.update(v) for v in (0.3, 1.0, 1.0)] == [False, False, False]


def test_monitor_ema_lags_a_single_spike():
    m = DivergenceMonitor(2.0, smooth_f=0.1)
    assert not any(m.update(v) for v in [1.0] * 20 + [2.5] + [1.0] * 5)  # one spike: no stop
    assert any(m.update(3.0) for _ in range(30))  # a sustained rise: stop


def test_smoothing_keeps_nan_tail_and_derivative_is_exact_on_a_line():
    curves = np.array([[1.0, 2.0, 3.0, np.nan], [1.0, 1.0, 1.0, 1.0]])
    s = smooth_curves(curves, 3)
    assert np.isnan(s[0, 3]) and s[1].tolist() == [1.0, 1.0, 1.0, 1.0]
    lrs = geometric_lrs(1e-3, 1.0, 4)
    d = log_lr_derivative(np.array([0.0, -1.0, -2.0, np.nan]), lrs)
    np.testing.assert_allclose(d[:3], -1.0)
    assert np.isnan(d[3])
    m = mean_curve(np.array([[1.0, 3.0, np.nan], [3.0, np.nan, np.nan]]))
    assert m[0] == 2.0 and m[1] == 3.0 and np.isnan(m[2])


def test_monitor_patience_known_answer():
    # smooth_f=1 (the EMA is the loss itself), explicit patience 2: the rule must hold on 3 updates in a row
    m = DivergenceMonitor(2.0, smooth_f=1.0, patience=2)
    assert [m.update(v) for v in (1.0, 0.5, 1.2, 0.6, 1.1, 1.3, 1.4)] == [False] * 6 + [True]
    # default patience: ceil(1 / smooth_f) - 1 updates, the EMA's memory
    assert DivergenceMonitor(2.0, smooth_f=0.1).patience == 9
    assert DivergenceMonitor(2.0, smooth_f=1.0).patience == 0
    with pytest.raises(ValueError):
        DivergenceMonitor(2.0, smooth_f=0.5, patience=-1)


def test_one_heavy_batch_after_a_noisy_improvement_does_not_stop_the_sweep():
    # the regression sweep's failure: a noisy start makes the first EMA high (a fake 35% improvement),
    # then one heavy-tailed MSE batch lifts the EMA past "gives back 0.8 of the gain" for two updates
    losses = [0.9] * 10 + [0.55] * 20 + [3.5] + [0.6] * 20
    eager = DivergenceMonitor(2.0, smooth_f=0.1, regain=0.8, patience=0)
    assert [eager.update(v) for v in losses].index(True) == 30  # the spike itself
    m = DivergenceMonitor(2.0, smooth_f=0.1, regain=0.8)
    assert not any(m.update(v) for v in losses)
    assert any(m.update(v) for v in [1.5] * 30)  # a sustained give-back still stops


def test_a_slow_rise_past_the_minimum_anchors_the_window_at_the_minimum():
    # a steep start-up transient at 1e-4, learning around 1e-2, then a slow rise past 10**-1.5 that
    # never doubles nor gives back 0.8 of the gain: below the sweep's end (1 decade) the loss only rises
    lrs = geometric_lrs(1e-4, 1.0, 400)
    x = np.log10(lrs)
    loss = (logistic_curve(lrs, -2.0, 0.15, depth=0.5, top=1.0) + 0.3 * np.exp(-(x + 4) / 0.1)
            + np.where(x > -1.5, 0.1 * (x + 1.5), 0.0))
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=5, diverge_th=2.0, regain=0.8, steep_frac=0.3,
                        window_decades=1.0, min_span_decades=0.5))
    assert c.n_valid == lrs.size  # no divergence was found
    assert 10**-2.2 < c.steepest_lr < 10**-1.8  # the learning, not the start-up transient
    assert c.lr_min > 10**-3
    # the loss improves up to its flat minimum: the range ends in the valley's bottom, the stretch
    # within VALLEY_BOTTOM_TOL (10%) of the improvement (0.58) of the minimum: from where the learning
    # has saturated to where the rise (0.1 per decade from 10**-1.5) has climbed 0.058, i.e. 10**-0.92;
    # its centre
    y = loss
    bottom = np.log10(lrs[y <= y.min() + VALLEY_BOTTOM_TOL * (c.mean[:5].mean() - y.min())])
    assert c.anchored_at_minimum and 10**-1.5 < c.lr_max < 10**-1.0
    assert math.log10(c.lr_max) == pytest.approx((bottom.min() + bottom.max()) / 2, abs=0.05)
    # without the window the start-up transient is the steepest stretch (the confound the window avoids)
    assert choose_lr_range(lrs, loss[None, :], RangeRule(window=5, regain=0.8, steep_frac=0.3)).steepest_lr < 2e-4


def test_a_dip_after_a_rise_is_not_chosen():
    # learning around 1e-2 down to 0.6, then a rise to 0.9 (no divergence rule trips:
    # the gain is small and the loss never doubles) and a second dip just before the sweep's end:
    # the dip's slope is steep, but it lies above the loss minimum, so it is not a better LR
    lrs = geometric_lrs(1e-4, 1.0, 600)
    x = np.log10(lrs)
    loss = logistic_curve(lrs, -2.0, 0.2, depth=0.2, top=0.8) + 0.3 / (1 + np.exp(-(x + 0.8) / 0.05))
    loss[x > -0.3] -= 0.6 * (x[x > -0.3] + 0.3)  # the late dip, steeper than the learning, ends at 0.72 > 0.6
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=5, diverge_th=2.0, regain=0.8, steep_frac=0.3,
                        window_decades=1.0, min_span_decades=0.5))
    assert c.lr_max < 10**-1.0 and 10**-2.4 < c.steepest_lr < 10**-1.6


def test_range_chosen_on_clean_held_out_curves_cut_where_training_diverged():
    # the training loss is the same logistic with heavy batch noise and diverges at 10**0.2; the
    # held-out loss is clean (a fixed slice, no batch noise) and drops at 10**-1 as well
    rng = np.random.default_rng(3)
    lrs = geometric_lrs(1e-4, 10.0, 500)
    x0, w = -1.0, 0.25
    train = with_divergence(lrs, logistic_curve(lrs, x0, w), x_div=0.2)[None, :] + rng.normal(0, 0.1, (2, 500))
    held = np.tile(logistic_curve(lrs, x0, w), (2, 1))  # never diverges by itself
    c = choose_lr_range(lrs, train, RangeRule(window=15, diverge_th=2.0, steep_frac=0.5), curves=held)
    assert math.log10(c.lr_min) == pytest.approx(x0 - HALF_WIDTH * w, abs=0.05)
    assert math.log10(c.lr_max) == pytest.approx(x0 + HALF_WIDTH * w, abs=0.05)
    # cut where the training loss diverged, though the held-out curve is finite there
    assert np.isfinite(c.diverged_lr).all() and (c.diverged_lr < 10**0.9).all()
    assert not np.isfinite(c.smoothed[:, lrs > 10**0.9]).any()
    with pytest.raises(ValueError, match="disagree"):
        choose_lr_range(lrs, train, RangeRule(window=5), curves=held[:1])


def test_lucky_first_batches_do_not_pass_for_the_loss_minimum():
    # the slow-rise curve above, whose first three batches happen to score far below the valley: in
    # the partial first half-window of the smoothing they would be the loss minimum and anchor the
    # range at the sweep's start
    lrs = geometric_lrs(1e-4, 1.0, 400)
    x = np.log10(lrs)
    loss = logistic_curve(lrs, -2.0, 0.15, depth=0.5, top=1.0) + np.where(x > -1.5, 0.1 * (x + 1.5), 0.0)
    loss[:3] = 0.0
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=9, diverge_th=2.0, regain=0.8, steep_frac=0.3,
                        window_decades=1.0, min_span_decades=0.5))
    assert c.anchored_at_minimum and 10**-1.5 < c.lr_max < 10**-1.0
    assert c.improvement < 0.9  # not measured down to the lucky batches' zero loss


def test_valley_curves_locate_the_minimum_that_a_noisy_training_loss_misplaces():
    # the slow-rise curve again as the clean held-out loss; the training loss is the same curve with
    # a run of lucky batches at the valley's left edge (10**-1.75) that dips far below it: on the
    # training loss alone the range anchors at that dip
    lrs = geometric_lrs(1e-4, 1.0, 400)
    x = np.log10(lrs)
    held_out = logistic_curve(lrs, -2.0, 0.15, depth=0.5, top=1.0) + np.where(x > -1.5, 0.1 * (x + 1.5), 0.0)
    train = held_out - 0.2 * np.exp(-(((x + 1.75) / 0.05) ** 2))
    rule = RangeRule(window=5, diverge_th=2.0, regain=0.8, steep_frac=0.3, window_decades=1.0, min_span_decades=0.5)
    alone = choose_lr_range(lrs, train[None, :], rule)
    assert alone.anchored_at_minimum and alone.lr_max < 10**-1.65
    c = choose_lr_range(lrs, train[None, :], rule, valley_curves=held_out[None, :])
    assert c.anchored_at_minimum and 10**-1.5 < c.lr_max < 10**-1.0  # the held-out valley's bottom
    assert c.valley_on_other_curves and not alone.valley_on_other_curves
    # a held-out loss that is not finite where it is needed is not used
    broken = held_out.copy()
    broken[200] = np.nan
    assert not choose_lr_range(lrs, train[None, :], rule, valley_curves=broken[None, :]).valley_on_other_curves
    assert c.improvement == alone.improvement  # the improvement is still the training loss's
    with pytest.raises(ValueError, match="valley_curves"):
        choose_lr_range(lrs, train[None, :], rule, valley_curves=held_out[None, :-1])


def test_a_task_learned_within_the_sweep_gets_its_steep_part_not_the_flat_top():
    # issue 25: the network learns the task long before the sweep's end and nothing diverges; the
    # loss then only creeps towards 0 (a slope of ~1e-3 per decade) up to lr 10. The window below the
    # sweep's end lies all on that floor, so the steepest "sustained" slope there is noise-level: the
    # old rule chose [1, 3], where the trials trained at chance. The known answer is the drop's own
    # half-slope interval around 10**-1.8
    lrs = geometric_lrs(1e-4, 10.0, 500)
    x0, w = -1.8, 0.2
    rng = np.random.default_rng(0)
    clean = logistic_curve(lrs, x0, w, depth=2.3, top=2.3) + 1e-3 * 10 ** (-np.log10(lrs) / 2)
    noisy = clean[None, :] * np.exp(rng.normal(0, 0.05, (3, lrs.size)))  # 5% multiplicative batch noise
    rule = RangeRule(window=15, diverge_th=2.0, regain=0.8, steep_frac=0.5, window_decades=1.0,
                     min_span_decades=0.5)
    for losses in (clean[None, :], noisy):
        c = choose_lr_range(lrs, losses, rule)
        assert not np.isfinite(c.diverged_lr).any() and c.n_valid == lrs.size
        assert math.log10(c.lr_max) == pytest.approx(x0 + HALF_WIDTH * w, abs=0.08)
        assert math.log10(c.lr_min) == pytest.approx(x0 - HALF_WIDTH * w, abs=0.08)
        # moved because the loss had settled (95% of its improvement made) at x0 + w ln(19)
        assert c.settled_lr is not None
        assert math.log10(c.settled_lr) == pytest.approx(x0 + w * math.log(19), abs=0.08)



def test_one_repeat_blowing_up_on_the_floor_does_not_lift_the_floor_of_the_others():
    # session 19 (the flaky mnist-shape example): the task is learned within the sweep; one repeat of three blows
    # up on the floor (its losses jump from ~1e-3 to ~100, as they did there: the training loss past lr 2.5, the
    # held-out loss, measured every few steps and interpolated between, from 2.2); the others sit on the floor
    # to the sweep's end. Smoothed before they were cut, the blown-up values leaked half a window below the cut
    # into the held-out valley, the window did not look settled, and the range came out on the flat top
    # ([0.66, 2.1] here; 1 fastest range in 4 on that example). The known answer is the drop's own interval
    lrs = geometric_lrs(1e-4, 10.0, 500)
    x0, w = -1.8, 0.2
    clean = logistic_curve(lrs, x0, w, depth=2.3, top=2.3) + 1e-3 * 10 ** (-np.log10(lrs) / 2)
    train = np.repeat(clean[None, :], 3, axis=0) * np.exp(np.random.default_rng(1).normal(0, 0.05, (3, lrs.size)))
    held_out = np.repeat(clean[None, :], 3, axis=0)
    train[0, lrs > 2.5] *= 1e5
    held_out[0, lrs > 2.2] *= 1e5
    rule = RangeRule(window=15, diverge_th=2.0, regain=0.8, steep_frac=0.5, window_decades=1.0,
                     min_span_decades=0.5)
    c = choose_lr_range(lrs, train, rule, valley_curves=held_out)
    assert 1.5 < c.diverged_lr[0] <= 2.5 and np.isnan(c.diverged_lr[1:]).all()  # cut on its smoothed loss
    assert c.settled_lr is not None
    assert math.log10(c.lr_max) == pytest.approx(x0 + HALF_WIDTH * w, abs=0.08)
    assert math.log10(c.lr_min) == pytest.approx(x0 - HALF_WIDTH * w, abs=0.08)


def test_a_curve_still_falling_at_the_sweeps_end_keeps_the_window_below_the_end():
    # the converse: no divergence, but the loss is still far from its floor in the last decade, so
    # the window stays below the sweep's end (settled_lr None) and the range is that steep stretch
    lrs = geometric_lrs(1e-4, 1.0, 400)
    loss = logistic_curve(lrs, -0.2, 0.3)
    c = choose_lr_range(lrs, loss[None, :], RangeRule(window=5, steep_frac=0.5, window_decades=1.0))
    assert c.settled_lr is None and c.lr_max > 10**-0.5
