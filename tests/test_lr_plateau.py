"""The plateau rule on synthetic curves whose right answer is known (issue 25: a loss on a trivial floor)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from test_lr_range import logistic_curve, with_divergence

from ignite_seg.tuning.lr_plateau import PLATEAU_DECADES, find_plateau, flat_floor
from ignite_seg.tuning.lr_range import LossDidNotImprove, RangeRule, choose_lr_range, geometric_lrs
from ignite_seg.tuning.lr_valley import VALLEY_BOTTOM_TOL

RULE = RangeRule(window=9, diverge_th=2.0, regain=0.8, steep_frac=0.3, window_decades=1.0, min_span_decades=0.5)
LRS = geometric_lrs(1e-4, 1.0, 400)
X = np.log10(LRS)
#: the floor starts rising at X_RISE (quadratically, A per decade squared) and diverges past X_DIV
X_RISE, A, X_DIV = -2.3, 1.0, -1.6


def floor_curve() -> np.ndarray:
    """gaussian_blobs_delayed_class's shape: an MSE falling from ~1 to the trivial 0.25 around lr 10**-3.6,
    flat on that floor for over a decade, rising from 10**-2.3 and diverging."""
    loss = logistic_curve(LRS, -3.6, 0.1, depth=0.75, top=1.0) + np.where(X > X_RISE, A * (X - X_RISE) ** 2, 0.0)
    return with_divergence(LRS, loss, X_DIV)


def floor_top(loss: np.ndarray) -> float:
    """Where the rise leaves the floor: VALLEY_BOTTOM_TOL of the improvement (from the first window's mean) above it."""
    gain = float(np.mean(loss[: RULE.window])) - 0.25
    return X_RISE + math.sqrt(VALLEY_BOTTOM_TOL * gain / A)


def test_a_loss_on_a_trivial_floor_with_no_held_out_gain_gets_the_floors_top():
    # the held-out perf stays at chance all along: the network learned only its output offset. The old
    # rule (no perf given) chose on the floor's flat lower part, near-zero slopes at the window's bottom (as
    # on the RNN: [0.00055, 0.0017] at batch 16); the plateau rule the floor's top and half a decade below it
    loss = floor_curve()
    old = choose_lr_range(LRS, loss[None, :], RULE)
    assert old.plateau_lrs is None and old.lr_max < 10 ** (floor_top(loss) - 0.4)
    chance = np.full((1, LRS.size), 0.5)
    c = choose_lr_range(LRS, loss[None, :], RULE, perf_curves=chance)
    assert math.log10(c.lr_max) == pytest.approx(floor_top(loss), abs=0.05)
    assert math.log10(c.lr_min) == pytest.approx(math.log10(c.lr_max) - RULE.plateau_span_decades, abs=1e-9)
    assert c.lr_max < 10 ** (X_DIV - 0.3) and not c.hit_end and not c.anchored_at_minimum  # safely below divergence
    assert c.plateau_lrs is not None and c.plateau_perfs == pytest.approx((0.5, 0.5))
    assert math.log10(c.plateau_lrs[0]) == pytest.approx(-3.6 + 0.1 * math.log(9), abs=0.05)
    assert c.plateau_lrs[1] == pytest.approx(c.lr_max)


def test_the_plateau_rule_holds_on_noisy_repeats():
    # 4 repeats with 5% batch noise on the loss and a 512-item slice's noise (sd 0.022) on a chance perf
    rng = np.random.default_rng(0)
    loss = floor_curve()[None, :] * np.exp(rng.normal(0, 0.05, (4, LRS.size)))
    perf = 0.5 + rng.normal(0, 0.022, (4, LRS.size))
    c = choose_lr_range(LRS, loss, RULE, perf_curves=perf)
    assert c.plateau_lrs is not None
    assert math.log10(c.lr_max) == pytest.approx(floor_top(floor_curve()), abs=0.1)


def test_no_plateau_when_the_held_out_perf_rose():
    # the same loss, but the held-out perf rose from chance to 0.9 with the fall (the network learned on the
    # way down): the ordinary choice stands, unchanged
    loss = floor_curve()
    learned = (0.5 + 0.4 / (1 + np.exp(-(X + 3.6) / 0.1)))[None, :]
    old = choose_lr_range(LRS, loss[None, :], RULE)
    c = choose_lr_range(LRS, loss[None, :], RULE, perf_curves=learned)
    assert c.plateau_lrs is None and (c.lr_min, c.lr_max) == (old.lr_min, old.lr_max)
    # a perf that improves by more than 10% of its start only on the floor itself blocks the rule as well
    late = (0.5 + 0.15 / (1 + np.exp(-(X + 2.8) / 0.1)))[None, :]
    assert choose_lr_range(LRS, loss[None, :], RULE, perf_curves=late).plateau_lrs is None


def test_no_plateau_on_a_task_learned_within_the_sweep():
    # the mnist collapse case (tests/test_lr_range.py): nothing diverges and the loss sits at ~0 up to the
    # sweep's end. Its floor runs to the last usable LR, so the rule does not fire whatever the perf says
    # (the settled-window rule decides), and the range is the one without the perf
    lrs = geometric_lrs(1e-4, 10.0, 500)
    x = np.log10(lrs)
    loss = logistic_curve(lrs, -1.8, 0.2, depth=2.3, top=2.3) + 1e-3 * 10 ** (-x / 2)
    rule = RangeRule(window=15, diverge_th=2.0, regain=0.8, steep_frac=0.5, window_decades=1.0, min_span_decades=0.5)
    old = choose_lr_range(lrs, loss[None, :], rule)
    for perf in (0.1 + 0.9 / (1 + np.exp(-(x + 1.8) / 0.2)), np.full(lrs.size, 0.1)):
        c = choose_lr_range(lrs, loss[None, :], rule, perf_curves=perf[None, :])
        assert c.plateau_lrs is None and (c.lr_min, c.lr_max) == (old.lr_min, old.lr_max)
        assert c.settled_lr is not None


def test_no_plateau_on_an_ordinary_sgd_curve():
    # a drop followed by a valley narrower than a decade, then divergence: even at chance perf (a slow task)
    # the floor is too short to be a plateau, and the steepest stretch stands
    loss = with_divergence(LRS, logistic_curve(LRS, -2.0, 0.3), -0.8)
    old = choose_lr_range(LRS, loss[None, :], RULE)
    c = choose_lr_range(LRS, loss[None, :], RULE, perf_curves=np.full((1, LRS.size), 0.5))
    assert c.plateau_lrs is None and (c.lr_min, c.lr_max) == (old.lr_min, old.lr_max)


def test_find_plateau_needs_a_decade_and_a_finite_perf():
    x = np.linspace(-4.0, -1.0, 151)
    for width in (PLATEAU_DECADES - 0.1, PLATEAU_DECADES + 0.1):
        top = -3.38 + width  # the floor runs from ~-3.38 (the fall's 90%) to top, where the rise is 0.1 x 0.74
        loss = 0.25 + 0.75 / (1 + np.exp((x + 3.6) / 0.1)) + np.where(x > top - 0.27, (x - top + 0.27) ** 2, 0.0)
        p = find_plateau(x, loss, np.full(x.size, 0.5), 5)
        assert (p is not None) == (width > PLATEAU_DECADES)
    assert find_plateau(x, loss, None, 5) is None
    nan_perf = np.full(x.size, 0.5)
    nan_perf[60] = np.nan  # on the floor
    assert find_plateau(x, loss, nan_perf, 5) is None


def offset_curve(lrs: np.ndarray, x_div: float) -> np.ndarray:
    """The adding problem's shape (an LSTM under MSE, bench/RESULTS.md session 20): the loss falls from 1.2 to 0.19,
    just above the 0.167 of predicting the targets' mean, around lr 10**-3.3, lies flat on it for three decades,
    then explodes at ``lr = 10**x_div`` with no rise before it."""
    return with_divergence(lrs, logistic_curve(lrs, -3.3, 0.12, depth=1.01, top=1.2), x_div)


def test_a_floor_at_the_best_constants_loss_is_trivial_though_the_perf_rose():
    # a regression's inv-loss perf rises as the network learns the targets' mean, so the perf test cannot see that
    # this floor is trivial; the best constant output's loss (0.167) can. The floor ends in the divergence (most
    # repeats still run past the first one's): it ends at the first repeat's divergence, and the range is its top
    lrs = geometric_lrs(1e-4, 10.0, 500)
    rule = RangeRule(window=15, diverge_th=2.0, regain=0.8, steep_frac=0.3, window_decades=1.0, min_span_decades=0.5)
    losses = np.stack([offset_curve(lrs, x_div) for x_div in (0.2, 0.5, 0.6, 0.7)])
    perf = np.tile(1 / (1 + logistic_curve(lrs, -3.3, 0.12, depth=1.01, top=1.2)), (4, 1))  # rises 0.45 -> 0.84
    old = choose_lr_range(lrs, losses, rule, perf_curves=perf)
    assert old.plateau_lrs is None and old.lr_max < 10**-2.5  # the fall onto the floor (the settled rule's range)
    c = choose_lr_range(lrs, losses, rule, perf_curves=perf, constant_loss=0.167)
    assert c.plateau_lrs is not None and c.plateau_constant_loss == pytest.approx(0.167)
    first_cut = float(np.nanmin(c.diverged_lr))
    assert 10**0.1 < first_cut <= 10**0.25  # the early repeat's cut (its loss explodes past 10**0.2)
    assert c.lr_max == pytest.approx(first_cut) and c.n_valid > np.searchsorted(lrs, first_cut)
    assert math.log10(c.lr_min) == pytest.approx(math.log10(c.lr_max) - rule.plateau_span_decades, abs=1e-9)
    assert math.log10(c.plateau_lrs[0]) == pytest.approx(-3.3 + 0.12 * math.log(9), abs=0.1)  # where the fall ends
    assert c.settled_lr is None and not c.anchored_at_minimum and not c.hit_end
    # without a perf (none measured), the constant alone decides
    assert choose_lr_range(lrs, losses, rule, constant_loss=0.167).lr_max == pytest.approx(c.lr_max)


def test_a_floor_well_below_the_constants_loss_is_not_trivial():
    # the mnist case (a network that learned within the sweep): the loss sits at ~0, far below the 2.3 of the class
    # shares; and a floor 3-20% below the constant's loss (a network that learned some of the signal): neither
    # moves, whether the sweep diverged or not; 1% below is the constant's level (CONSTANT_TOL, 2%)
    lrs = geometric_lrs(1e-4, 10.0, 500)
    x = np.log10(lrs)
    rule = RangeRule(window=15, diverge_th=2.0, regain=0.8, steep_frac=0.5, window_decades=1.0, min_span_decades=0.5)
    learned = logistic_curve(lrs, -1.8, 0.2, depth=2.3, top=2.3) + 1e-3 * 10 ** (-x / 2)
    old = choose_lr_range(lrs, learned[None, :], rule)
    c = choose_lr_range(lrs, learned[None, :], rule, constant_loss=2.3)
    assert c.plateau_lrs is None and (c.lr_min, c.lr_max) == (old.lr_min, old.lr_max) and c.settled_lr is not None
    some = offset_curve(lrs, 0.2)[None, :]
    old = choose_lr_range(lrs, some, rule)
    for below in (0.2, 0.08, 0.03):  # the 90/10 class split's sweeps lay 8-13% below the shares' entropy
        c = choose_lr_range(lrs, some, rule, constant_loss=0.19 / (1 - below))
        assert c.plateau_lrs is None and (c.lr_min, c.lr_max) == (old.lr_min, old.lr_max)
    assert choose_lr_range(lrs, some, rule, constant_loss=0.19 / (1 - 0.01)).plateau_lrs is not None


def test_a_trivial_floor_that_runs_to_the_sweeps_end_is_left_to_the_settled_rule():
    # nothing diverged: the sweep ended on the floor, so there is no top to move to (the rule needs a divergence)
    lrs = geometric_lrs(1e-4, 1.0, 400)
    flat = logistic_curve(lrs, -3.3, 0.12, depth=1.01, top=1.2)[None, :]
    rule = RangeRule(window=9, diverge_th=2.0, regain=0.8, steep_frac=0.3, window_decades=1.0, min_span_decades=0.5)
    c, old = choose_lr_range(lrs, flat, rule, constant_loss=0.167), choose_lr_range(lrs, flat, rule)
    assert c.plateau_lrs is None and (c.lr_min, c.lr_max) == (old.lr_min, old.lr_max)
    x = np.log10(lrs)
    assert find_plateau(x, flat[0], None, 9, constant_loss=0.167) is None
    assert find_plateau(x, flat[0], None, 9, constant_loss=0.167, x_diverged=-0.5).x_hi == -0.5


def creeping_floor(lrs: np.ndarray, x_div: float) -> np.ndarray:
    """The adding problem's sweep as measured (bench/RESULTS.md, session 26): the fall onto the constant's loss (0.19),
    then a creep up the floor, 5% of the loss per decade from lr 10**-2.5 (2% above the constant's by 10**-2.1),
    within the valley's bottom (10% of the fall, 0.1) until it diverges at ``lr = 10**x_div``."""
    x = np.log10(lrs)
    return with_divergence(lrs, logistic_curve(lrs, -3.3, 0.12, depth=1.01, top=1.2)
                           + np.where(x > -2.5, 0.0095 * (x + 2.5), 0.0), x_div)


def test_a_schedule_that_holds_its_peak_ends_the_range_at_the_floors_quiet_top():
    # "floor": the range ends at the floor's top, the divergence (a decay leaves it behind); "quiet": where the
    # held-out loss last lay within 2% of the constant's, 2.3 decades lower (a constant schedule holds its peak)
    lrs = geometric_lrs(1e-4, 10.0, 500)
    losses = np.stack([creeping_floor(lrs, x_div) for x_div in (0.2, 0.5)])
    top = RangeRule(window=15, diverge_th=2.0, regain=0.8, steep_frac=0.3, window_decades=1.0, min_span_decades=0.5)
    quiet = dataclasses.replace(top, plateau_top="quiet")
    f = choose_lr_range(lrs, losses, top, constant_loss=0.19)
    q = choose_lr_range(lrs, losses, quiet, constant_loss=0.19)
    assert f.plateau_top == "floor"
    assert math.log10(f.lr_max) == pytest.approx(math.log10(float(np.nanmin(f.diverged_lr))), abs=0.05)
    assert q.plateau_top == "quiet" and q.plateau_lrs == f.plateau_lrs  # the same floor, a lower top
    raw = creeping_floor(lrs, 0.2)  # the first LR 2% of the constant's loss above the floor's lowest (smoothing aside)
    k = int(np.nanargmin(raw))
    assert math.log10(q.lr_max) == pytest.approx(np.log10(lrs)[k + np.argmax(raw[k:] > raw[k] + 0.0038)], abs=0.05)
    assert -2.2 < math.log10(q.lr_max) < -1.8
    assert q.plateau_quiet_lr == pytest.approx(q.lr_max) and f.plateau_quiet_lr == pytest.approx(q.lr_max)
    assert math.log10(q.lr_min) == pytest.approx(math.log10(q.lr_max) - quiet.plateau_span_decades, abs=1e-9)
    # a floor judged by the perf (no constant measured) has no quiet top: both rules end at its top
    chance = np.full(losses.shape, 0.5)
    assert choose_lr_range(lrs, losses, quiet, perf_curves=chance).lr_max == pytest.approx(
        choose_lr_range(lrs, losses, top, perf_curves=chance).lr_max)
    assert choose_lr_range(lrs, losses, quiet, perf_curves=chance).plateau_quiet_lr is None
    # no floor (an ordinary curve): the rule changes nothing
    ordinary = floor_curve()[None, :]
    a, b = choose_lr_range(LRS, ordinary, dataclasses.replace(RULE, plateau_top="quiet")), choose_lr_range(
        LRS, ordinary, RULE)
    assert (a.lr_min, a.lr_max, a.plateau_top) == (b.lr_min, b.lr_max, None)


def test_a_loss_that_sat_on_the_constants_loss_from_the_start_gets_that_floor_not_an_error():
    # standardised targets (or balanced classes): the output starts at the constant, so a late learner's sweep has no
    # fall, only the floor, creeping up from lr 10**-2 and diverging at 10**0 (the multiplication problem's LSTM,
    # bench/RESULTS.md session 26). It is the plateau rule's floor from the sweep's start to its quiet top
    lrs = geometric_lrs(1e-4, 10.0, 500)
    x = np.log10(lrs)
    flat = 0.89 + np.where(x > -2, 0.02 * (x + 2), 0.0)
    losses = np.stack([with_divergence(lrs, flat, x_div) for x_div in (0.0, 0.3)])
    with pytest.raises(LossDidNotImprove, match="did not improve"):
        choose_lr_range(lrs, losses, RULE)  # no constant measured: nothing says the floor is trivial
    c = choose_lr_range(lrs, losses, RULE, constant_loss=0.885)
    assert c.improvement < RULE.min_improvement and c.plateau_constant_loss == pytest.approx(0.885)
    assert c.plateau_lrs[0] == pytest.approx(1e-4) and c.plateau_top == "floor"
    assert math.log10(c.lr_max) == pytest.approx(-2 + (0.89 + 0.0177 - 0.89) / 0.02, abs=0.05)  # 2% above 0.885
    assert math.log10(c.lr_min) == pytest.approx(math.log10(c.lr_max) - RULE.plateau_span_decades, abs=1e-9)
    # SGD's rule keeps the error (its step scales with a plateau's small gradient: RangeRule.flat_floor)
    with pytest.raises(LossDidNotImprove):
        choose_lr_range(lrs, losses, dataclasses.replace(RULE, flat_floor=False), constant_loss=0.885)
    # an output that starts a little off the mean falls onto the floor by less than the rule needs (2.5% above the
    # constant's, 1.7% down: the multiplication problem, seed 2): the same floor, its quiet top past its lowest point
    fall = logistic_curve(lrs, -3.3, 0.2, depth=0.015, top=0.905)  # 0.905 -> 0.89 around lr 10**-3.3
    c = choose_lr_range(lrs, np.stack([with_divergence(lrs, fall + flat - 0.89, d) for d in (0.0, 0.3)]), RULE,
                        constant_loss=0.885)
    assert c.improvement < RULE.min_improvement and math.log10(c.lr_max) == pytest.approx(-1.115, abs=0.05)
    # a sweep that never diverged (its floor may go on), or one whose floor lay below the constant's loss (it learned
    # something): the error stands
    with pytest.raises(LossDidNotImprove):
        choose_lr_range(lrs, np.stack([flat, flat]), RULE, constant_loss=0.885)
    with pytest.raises(LossDidNotImprove):
        choose_lr_range(lrs, losses, RULE, constant_loss=0.95)
    assert flat_floor(x[:60], flat[:60], 0.885, x_diverged=float(x[59])) is None  # under PLATEAU_DECADES wide
