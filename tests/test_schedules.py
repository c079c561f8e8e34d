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
