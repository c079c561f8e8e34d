"""The handlers trials and sweeps share: one divergence stop, one recorder base."""
from __future__ import annotations

import math

import numpy as np
from ignite.engine import Engine, Events

from ignite_seg.engine.handlers import CurveRecorder, DivergenceStop
from ignite_seg.smoothing import DivergenceMonitor


def engine_of(losses):
    """An engine whose iteration ``i`` (1-based) returns ``losses[i - 1]``."""
    return Engine(lambda engine, _batch: losses[engine.state.iteration - 1])


def test_stop_without_monitor_ends_at_the_first_non_finite_loss():
    losses = [1.0, 5.0, 1e9, math.nan, 2.0, 1.0]
    engine = engine_of(losses)
    stop = DivergenceStop()
    stop.attach(engine)
    stop.attach(engine)  # attach twice: still one handler
    assert sum(1 for h in engine._event_handlers[Events.ITERATION_COMPLETED] if h[0] == stop._check) == 1
    state = engine.run(range(len(losses)), max_epochs=1)
    assert stop.diverged_at == 4 and state.iteration == 4
    assert not hasattr(state, "diverged_at")  # a typed attribute of the handler, not of engine.state


def test_stop_with_monitor_ends_where_the_monitor_says():
    losses = [3.0, 1.0, 1.5, 2.5, 1.0, 1.0]  # the monitor's doctest: diverges at the 4th loss
    engine = engine_of(losses)
    stop = DivergenceStop(DivergenceMonitor(diverge_th=2.0, smooth_f=1.0))
    stop.attach(engine)
    assert engine.run(range(len(losses)), max_epochs=1).iteration == 4
    assert stop.diverged_at == 4


def test_stop_stays_none_on_finite_losses_and_detaches():
    engine = engine_of([3.0, 1.0, 2.5, 9.0])  # 9 > 2 * 1, but without a monitor only non-finite stops
    stop = DivergenceStop()
    stop.attach(engine)
    assert engine.run(range(4), max_epochs=1).iteration == 4 and stop.diverged_at is None
    stop.detach(engine)
    assert not engine.has_event_handler(stop._check, Events.ITERATION_COMPLETED)


def test_curve_recorder_keeps_one_list_per_key_and_returns_float64_arrays():
    class Two(CurveRecorder):
        KEYS = ("a", "b")

    rec = Two()
    rec.append(a=1, b=0.5)
    rec.append(b=2.0, a=3)
    arrays = rec.arrays()
    assert list(arrays) == ["a", "b"] and all(v.dtype == np.float64 for v in arrays.values())
    np.testing.assert_array_equal(arrays["a"], [1.0, 3.0])
    np.testing.assert_array_equal(arrays["b"], [0.5, 2.0])
    assert Two().arrays()["a"].shape == (0,)
