"""The schedules of a trial: each LR equals its formula step by step; the default is today's."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from ignite.engine import Engine, Events
from ignite.handlers import LinearCyclicalScheduler

from ignite_seg.config.hyperparameters import FixedHyperparameters, HyperparameterSettings
from ignite_seg.engine.schedules import ONE_CYCLE_FINAL_DIV, ONE_CYCLE_PEAK, build_scheduler, simulate_lrs
from ignite_seg.exceptions import ConfigError, ConfigTypeError

HP = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=8, cycle_size_epochs=2, epochs=5)
IPE = 7  # iterations per epoch
N = HP.epochs * IPE


def engine_lrs(hp: FixedHyperparameters, ipe: int) -> list[float]:
    """The LR of every step when the scheduler runs on an ignite Engine, as in the trainer."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=hp.lr_start)
    seen: list[float] = []
    engine = Engine(lambda e, b: seen.append(opt.param_groups[0]["lr"]))
    engine.add_event_handler(Events.ITERATION_STARTED, build_scheduler(hp, ipe, opt))
    engine.run(range(ipe), max_epochs=hp.epochs)
    return seen


def test_default_is_todays_linear_cyclical_scheduler_bit_for_bit():
    assert HP.schedule == "triangular" and HP.warmup_epochs == 0
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=HP.lr_start)
    today = LinearCyclicalScheduler(opt, "lr", start_value=HP.lr_start, end_value=HP.lr_end,
                                    cycle_size=max(2, int(round(HP.cycle_size_epochs * IPE))))
    seen: list[float] = []
    engine = Engine(lambda e, b: seen.append(opt.param_groups[0]["lr"]))
    engine.add_event_handler(Events.ITERATION_STARTED, today)
    engine.run(range(IPE), max_epochs=HP.epochs)
    assert engine_lrs(HP, IPE) == seen  # exact equality, not approx
    assert simulate_lrs(HP, IPE).tolist() == seen


def formula(hp: FixedHyperparameters, k: int, n: int) -> float:
    """The documented LR at step k of an n-step schedule (docs/usage.md, "Schedules")."""
    a, b = hp.lr_start, hp.lr_end
    if hp.schedule == "one-cycle":
        last = n - 1
        peak = round(ONE_CYCLE_PEAK * last)
        if k <= peak:
            return a + (b - a) * k / peak
        return b + (a / ONE_CYCLE_FINAL_DIV - b) * (k - peak) / (last - peak)
    if hp.schedule == "cosine":
        return b + (a - b) * (1 - math.cos(math.pi * k / n)) / 2
    if hp.schedule == "inv-sqrt":
        return b / math.sqrt(1 + ((b / a) ** 2 - 1) * k / n)
    assert hp.schedule == "constant"
    return b


@pytest.mark.parametrize("schedule", ["one-cycle", "cosine", "inv-sqrt", "constant"])
def test_each_schedule_follows_its_formula(schedule):
    hp = dataclasses.replace(HP, schedule=schedule)
    lrs = engine_lrs(hp, IPE)
    np.testing.assert_allclose(lrs, [formula(hp, k, N) for k in range(N)], rtol=1e-12)
    np.testing.assert_allclose(simulate_lrs(hp, IPE), lrs, rtol=1e-12)


def test_inv_sqrt_and_one_cycle_reach_the_documented_ends():
    inv = engine_lrs(dataclasses.replace(HP, schedule="inv-sqrt"), IPE)
    assert inv[0] == pytest.approx(HP.lr_end) and inv[-1] == pytest.approx(HP.lr_start, rel=0.05)
    one = engine_lrs(dataclasses.replace(HP, schedule="one-cycle"), IPE)
    assert max(one) == pytest.approx(HP.lr_end) and one[-1] == pytest.approx(HP.lr_start / ONE_CYCLE_FINAL_DIV)


@pytest.mark.parametrize("schedule", ["triangular", "one-cycle", "cosine", "inv-sqrt", "constant"])
def test_warmup_is_linear_from_zero_then_the_schedule_over_the_remaining_steps(schedule):
    hp = dataclasses.replace(HP, schedule=schedule, warmup_epochs=1.5)
    w = round(1.5 * IPE)  # 10 warmup steps: step w - 1 is the schedule's first step
    lrs = engine_lrs(hp, IPE)
    plain = dataclasses.replace(hp, warmup_epochs=0.0)
    rest = N - (w - 1)
    if schedule == "triangular":  # the cycle keeps its length in steps
        first = HP.lr_start
        expected_rest = engine_lrs(plain, IPE)[:rest]
    else:
        first = formula(plain, 0, rest)
        expected_rest = [formula(plain, k, rest) for k in range(rest)]
    np.testing.assert_allclose(lrs[:w], [first * k / (w - 1) for k in range(w)], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lrs[w - 1:], expected_rest, rtol=1e-12)
    assert lrs[0] == 0.0


def test_loop_fields_validate_and_round_trip_through_json():
    hp = dataclasses.replace(HP, schedule="cosine", warmup_epochs=0.5, betas=(0.8, 0.99), eps=1e-6, ema_decay=0.9)
    again = FixedHyperparameters.from_dict(json.loads(json.dumps(hp.to_dict())))
    assert again == hp and again.betas == (0.8, 0.99)
    old = {k: v for k, v in HP.to_dict().items() if k not in ("schedule", "warmup_epochs", "betas", "eps", "ema_decay")}
    assert FixedHyperparameters.from_dict(old) == HP  # files written before these fields read as the defaults
    assert (HP.schedule, HP.warmup_epochs, HP.betas, HP.eps, HP.ema_decay) == ("triangular", 0.0, (0.9, 0.999), 1e-8,
                                                                              None)
    s = HyperparameterSettings(schedule="one-cycle", betas=[0.5, 0.9], ema_decay=0.99)
    assert HyperparameterSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    bad = [
        ({"schedule": "linear"}, ConfigError, "schedule"),
        ({"warmup_epochs": -1}, ConfigError, "warmup_epochs"),
        ({"warmup_epochs": 5}, ConfigError, "below epochs=5"),
        ({"betas": (0.9,)}, ConfigTypeError, "betas"),
        ({"betas": (0.9, 1.0)}, ConfigError, r"betas\[1\]"),
        ({"eps": 0}, ConfigError, "eps"),
        ({"ema_decay": 1.0}, ConfigError, "ema_decay"),
        ({"ema_decay": "0.9"}, ConfigTypeError, "ema_decay"),
    ]
    for change, error, match in bad:
        with pytest.raises(error, match=match):
            dataclasses.replace(HP, **change)
    with pytest.raises(ConfigError, match="below min_epochs=5"):
        HyperparameterSettings(warmup_epochs=5)


# -- warmup in steps, and the peak-and-warmup inverse-sqrt ("noam") ----------------------------------
@pytest.mark.parametrize("warmup", [dict(warmup_steps=6), dict(warmup_epochs=6 / IPE)])
def test_noam_is_peak_times_min_of_k_over_w_and_sqrt_w_over_k(warmup):
    hp = dataclasses.replace(HP, schedule="noam", **warmup)
    lrs = engine_lrs(hp, IPE)
    k = np.arange(1, N + 1)
    np.testing.assert_allclose(lrs, HP.lr_end * np.minimum(k / 6, np.sqrt(6 / k)), rtol=1e-12)
    assert max(lrs) == pytest.approx(HP.lr_end) and int(np.argmax(lrs)) == 5  # the peak at step k = W
    np.testing.assert_allclose(simulate_lrs(hp, IPE), lrs, rtol=1e-12)


@pytest.mark.parametrize("schedule", ["triangular", "cosine", "inv-sqrt"])
def test_warmup_steps_is_the_same_warmup_as_the_epochs_that_make_those_steps(schedule):
    in_steps = dataclasses.replace(HP, schedule=schedule, warmup_steps=10)
    in_epochs = dataclasses.replace(HP, schedule=schedule, warmup_epochs=10 / IPE)
    assert engine_lrs(in_steps, IPE) == engine_lrs(in_epochs, IPE)
    assert engine_lrs(in_steps, 3)[:10] != engine_lrs(in_epochs, 3)[:10]  # steps do not scale with the epoch


@pytest.mark.parametrize("record", [
    lambda **kw: dataclasses.replace(HP, **kw),
    lambda **kw: HyperparameterSettings(**kw),
])
@pytest.mark.parametrize("kw,error,needle", [
    (dict(warmup_steps=-1), ConfigError, "warmup_steps"),
    (dict(warmup_steps=2.5), ConfigTypeError, "warmup_steps"),
    (dict(warmup_steps=10, warmup_epochs=1.0), ConfigError, "warmup_steps=10 and warmup_epochs=1.0: give the warmup "
                                                            "in steps or in epochs, not both"),
    (dict(schedule="noam"), ConfigError, "schedule='noam' (lr = peak * min(k / W, sqrt(W / k)), peak = lr_end) needs "
                                         "its warmup W: pass warmup_steps="),
])
def test_bad_warmups_name_the_field_on_fixed_and_tuned_records(record, kw, error, needle):
    with pytest.raises(error) as info:
        record(**kw)
    assert needle in str(info.value)


def test_the_tuned_records_carry_warmup_steps_into_the_trials_recipe():
    s = HyperparameterSettings(schedule="noam", warmup_steps=60)
    assert HyperparameterSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    hp = dataclasses.replace(HP, schedule="noam", warmup_steps=60)
    assert FixedHyperparameters.from_dict(json.loads(json.dumps(hp.to_dict()))) == hp
    assert FixedHyperparameters.from_dict({k: v for k, v in HP.to_dict().items() if k != "warmup_steps"}) == HP


def test_the_schedule_figure_draws_a_warmup_in_steps_over_the_epochs_it_spans():
    from ignite_seg.analysis.lr import _schedule_title, schedule_info

    hp = dataclasses.replace(HP, schedule="noam", warmup_steps=14)
    info = schedule_info(hp, iters_per_epoch=IPE)  # 14 steps of 7 a epoch: the peak after 2 epochs
    assert info.warmup_steps == 14 and info.warmup_epochs == 2.0
    assert info.epochs[int(np.argmax(info.lrs))] == pytest.approx(2.0, abs=1 / 40)
    assert "up to lr_end over 14 steps" in _schedule_title(info)
