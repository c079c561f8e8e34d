"""A sweep's points overlapping on one pool (issue 29): the same results as one point at a time,
the points' trials interleaved on the workers, log lines naming the point, the shared slots."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg.runtime.slots import Slots
from ignite_seg.storage.sweep_file import SweepRecord

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def _sweep(folder: Path, at_once: int, **kw):
    args = dict(folder=folder, history_folder=folder.parent / "history", grid={"n_hidden": [4, 16]},
                hyperparameters=FAST_HP, analysis="none", trials=3, trials_strict=True, cores=2, seed=3,
                max_concurrent_points=at_once)
    return ignite_seg.sweep(MLP, BLOBS, CE, **{**args, **kw})


def _spans(folder: Path) -> list[tuple[float, float]]:
    out = []
    for path in sorted(folder.glob("trials/*/result.json")):
        res = json.loads(path.read_text())
        out.append((res["started_at"], res["started_at"] + res["seconds"]))
    return out


def test_overlapping_points_give_the_results_of_one_point_at_a_time(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="ignite_seg"):
        both = _sweep(tmp_path / "both", at_once=2)
    one = _sweep(tmp_path / "one", at_once=1)
    got, want = SweepRecord.read(tmp_path / "both" / "sweep.npz"), SweepRecord.read(tmp_path / "one" / "sweep.npz")
    for key in ("final_loss_train", "final_loss_val", "final_perf_train", "final_perf_val", "trial_ids"):
        np.testing.assert_array_equal(getattr(got, key), getattr(want, key), err_msg=key)  # same seeds, same numbers
    assert [r.hyperparameters for r in both.runs] == [r.hyperparameters for r in one.runs]
    # the points ran at the same time: a trial of point 1 ran while one of point 0 did
    spans0, spans1 = _spans(tmp_path / "both" / "points" / "0"), _spans(tmp_path / "both" / "points" / "1")
    assert any(s0 < e1 and s1 < e0 for s0, e0 in spans0 for s1, e1 in spans1), (spans0, spans1)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("point 0 (n_hidden=4): ") and "trial" in line for line in lines), lines[:20]
    assert any(line.startswith("point 1 (n_hidden=16): ") and "trial" in line for line in lines), lines[:20]
    assert any("up to 2 at a time on 2 worker(s)" in line for line in lines)
    assert not any("while other threads run" in line for line in lines)  # the workers started before the drivers


@pytest.mark.parametrize("value, kind", [(0, ignite_seg.ConfigError), (True, ignite_seg.ConfigTypeError),
                                          ("2", ignite_seg.ConfigTypeError), (1.5, ignite_seg.ConfigTypeError)])
def test_max_concurrent_points_is_checked_before_anything_is_written(tmp_path, value, kind):
    with pytest.raises(kind, match=r"max_concurrent_points must be an int >= 1 .*1 runs them one after the other"):
        _sweep(tmp_path / "sweep", at_once=value)
    assert not (tmp_path / "sweep").exists()


def test_slots_go_to_the_waiting_caller_that_holds_fewest():
    slots = Slots(2)
    assert slots.take("a") and slots.take("a")
    assert not slots.take("b")  # full: b waits
    wake = slots.wake_up("b")
    assert wake is not None and not wake.done()
    slots.give("a")
    assert wake.done()  # b is woken when a slot is given back
    assert not slots.take("a")  # a holds 1 and b, waiting, holds 0: b goes first
    assert slots.take("b") and slots.used == 2
    assert slots.wake_up("b") is None  # b waits no more
    slots.give("b")
    assert slots.take("a") and slots.used == 2  # a holds 1 and nobody waits: it takes one
    slots.leave("a")
    assert slots.wake_up("a") is None


def test_slots_never_exceed_the_capacity_and_ties_go_to_whoever_asks():
    slots = Slots(3)
    assert [slots.take("a"), slots.take("b"), slots.take("a")] == [True, True, True]
    assert not slots.take("b") and not slots.take("c")
    assert slots.used == 3
    slots.give("a")  # a: 1, b: 1 waiting, c: 0 waiting -> c first
    assert not slots.take("b") and slots.take("c")
    slots.give("c")  # a 1, b 1 (waiting), c 0: nobody waits with fewer than b
    assert slots.take("b") and slots.used == 3
