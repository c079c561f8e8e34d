"""What the reports say was done: the batch-size rule that decided, the fallback, the schedule used.

Hand-built rungs and records with the expected sentences (the log, misc.json and the summary share them).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ignite_seg import get_preset
from ignite_seg.analysis.captions import schedule_caption
from ignite_seg.analysis.lr import schedule_info
from ignite_seg.engine.schedule_text import describe_schedule
from ignite_seg.storage.schemas import Rung, RungNote
from ignite_seg.tuning.reasons import batch_decision

FASTEST = get_preset("fastest")  # batch_pts=0: the rule alone
RUNS = dataclasses.replace(get_preset("fast"), batch_rn_min_inits=1, batch_tie_tol=0.03)
NAN = float("nan")


def _last_rung(loss8: float, loss16: float, kept: int) -> Rung:
    return Rung(budget_epochs=2.0, batch_sizes=[8, 16], mean_perf={"8": 0.9, "16": 0.9},
                mean_loss={"8": loss8, "16": loss16}, ranked_by="loss", kept=[kept],
                best_by_score=8 if loss8 < loss16 else 16)


def test_a_noise_scale_that_could_not_be_measured_is_named_as_the_fallback_not_as_the_rule():
    d = batch_decision(FASTEST, NAN, 16, [])
    assert d.rule == "fallback"
    assert d.reason == ("initial_batch_size=16 (the grid batch size nearest it), because the gradient noise scale "
                        "could not be measured; no candidate runs")
    assert "noise scale could not be measured (NaN)" in d.fallback and "nearest" not in d.fallback


def test_a_measured_noise_scale_names_the_rule_and_its_numbers():
    d = batch_decision(FASTEST, 64.0, 16, [])
    assert (d.rule, d.fallback) == ("noise-scale", None)
    assert d.reason == "the grid batch size nearest 0.25 x the noise scale (0.25 x 64 = 16); no candidate runs"


def test_the_tie_rule_is_named_when_the_smaller_batch_had_the_higher_loss():
    d = batch_decision(RUNS, 70.0, 8, [RungNote("first rung"), _last_rung(0.41, 0.40, kept=8)])
    assert d.rule == "tie"
    assert d.reason == "tied with 16 within 3% (held-out loss 0.41 vs 0.4); the smaller batch is ranked first"
    # with repeats, the paired t-test is part of the tie rule and the sentence says so
    tested = batch_decision(dataclasses.replace(RUNS, batch_rn_min_inits=2, batch_tie_test=True), 70.0, 8,
                            [_last_rung(0.41, 0.40, 8)])
    assert tested.reason.startswith("tied with 16 within 3% (or not worse at 95% by a paired t-test over the "
                                    "repeats) (held-out loss 0.41 vs 0.4)")


def test_a_tie_won_by_speed_says_so_with_the_timings():
    # three tied: 16 scored best, 32 no worse than the smallest (8) and faster: 32 ranks first
    rung = Rung(budget_epochs=4.0, batch_sizes=[8, 16, 32], mean_perf={"8": 0.9, "16": 0.9, "32": 0.9},
                mean_loss={"8": 0.220, "16": 0.215, "32": 0.218}, ranked_by="loss", kept=[32], best_by_score=16,
                seconds_per_example={"8": 118e-6, "16": 61e-6, "32": 35e-6})
    d = batch_decision(RUNS, 70.0, 32, [rung])
    assert d.rule == "tie"
    assert d.reason == ("tied with 16 within 3% (held-out loss 0.218 vs 0.215); it trains faster here (35 vs 61 µs "
                        "per training example, each one's fastest run) and scored no worse than the smaller tied batch, so it "
                        "ranks first")
    # the smaller one kept (it scored better than the faster ones): the smaller-batch sentence
    timed = dataclasses.replace(_last_rung(0.41, 0.40, kept=8), seconds_per_example={"8": 64e-6, "16": 40e-6})
    assert batch_decision(RUNS, 70.0, 8, [timed]).reason.endswith("; the smaller batch is ranked first")
    smaller = dataclasses.replace(RUNS, batch_tie_prefer="smaller")
    assert batch_decision(smaller, 70.0, 8, [timed]).reason.endswith("; the smaller batch is ranked first")


def test_the_best_score_is_named_with_the_runner_up_and_the_fallback_centre():
    d = batch_decision(RUNS, 70.0, 8, [_last_rung(0.30, 0.40, kept=8)])
    assert (d.rule, d.fallback) == ("best-score", None)
    assert d.reason == "best held-out loss of the 2 candidate(s) left after successive halving (0.3; 16: 0.4)"
    fell_back = batch_decision(RUNS, NAN, 8, [_last_rung(0.30, 0.40, kept=8)])
    assert fell_back.rule == "best-score" and fell_back.fallback is not None
    assert fell_back.reason.endswith("; the candidates were centred on initial_batch_size=16 because the gradient "
                                     "noise scale could not be measured")
    assert batch_decision(RUNS, 70.0, 8, [RungNote("a single candidate: no runs needed")]).rule == "single-candidate"


HP = {"lr_start": 0.003, "lr_end": 0.05, "batch_size": 64, "cycle_size_epochs": 2, "epochs": 4}


def test_each_schedule_is_described_as_it_runs_warmup_included():
    assert describe_schedule(HP) == "triangular cycles between 0.003 and 0.05, 2 cycles of 2 epochs; 4 epochs"
    assert describe_schedule({**HP, "schedule": "cosine", "warmup_epochs": 1.0}) == \
        "linear warmup from 0 over 1 epochs, then cosine decay from 0.05 to 0.003; 4 epochs"
    assert describe_schedule({**HP, "schedule": "inv-sqrt"}) == "inverse-square-root decay from 0.05 to 0.003; 4 epochs"
    assert describe_schedule({**HP, "schedule": "one-cycle"}) == \
        "one-cycle: up from 0.003 to 0.05, then down to 3e-05; 4 epochs"
    assert describe_schedule({**HP, "schedule": "constant"}) == "constant at 0.05; 4 epochs"
    for schedule in ("cosine", "inv-sqrt", "one-cycle", "constant"):
        assert "cycle" not in describe_schedule({**HP, "schedule": schedule}).replace("one-cycle", "")


def test_the_video_caption_describes_the_schedule_used():
    info = schedule_info({**HP, "schedule": "inv-sqrt", "warmup_epochs": 1.0})
    assert schedule_caption(info) == ("linear warmup from 0 over 1 epochs, then inverse-square-root decay from 0.05 "
                                      "to 0.003; 4 epochs")
    assert np.isfinite(info.lrs).all()
