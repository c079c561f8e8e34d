"""Batch-size candidates, successive halving, ranking and the schedule decision."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ignite_seg.tuning.batch_search import (
    batch_candidates,
    batch_grid,
    centre_batch,
    halving_survivors,
    not_worse_paired,
    rank_scores,
    rank_with_ties,
    scale_lr,
)
from ignite_seg.tuning.schedule import choose_schedule


def test_grid_and_centre():
    assert batch_grid(8, 512) == [8, 16, 32, 64, 128, 256, 512]
    assert batch_grid(10, 100, 3.0) == [10, 30, 90]
    assert centre_batch(45.0, 8, 512) == 32 and centre_batch(46.0, 8, 512) == 64  # sqrt(32*64) ≈ 45.25
    assert centre_batch(1e6, 8, 512) == 512 and centre_batch(0.1, 8, 512) == 8
    assert centre_batch(float("nan"), 8, 512, fallback=100) == 128
    assert centre_batch(float("nan"), 8, 512) == 64


def test_candidates_centred_and_clipped():
    assert batch_candidates(64.0, 8, 512, 4) == [32, 64, 128, 256]
    assert batch_candidates(64.0, 8, 512, 5) == [16, 32, 64, 128, 256]
    assert batch_candidates(9.0, 8, 512, 3) == [8, 16, 32]
    assert batch_candidates(5000.0, 8, 512, 3) == [128, 256, 512]
    assert batch_candidates(64.0, 8, 32, 10) == [8, 16, 32]
    assert batch_candidates(64.0, 8, 512, 0) == []


def test_ranking_by_perf_then_loss_and_halving():
    perfs = np.array([[0.9, 0.95, 0.95, np.nan], [0.92, 0.95, 0.95, np.nan]])
    losses = np.array([[0.3, 0.20, 0.10, np.nan], [0.3, 0.20, 0.12, np.nan]])
    assert rank_scores(perfs, losses, "perf").tolist() == [2, 1, 0, 3]  # perf ties: lower loss first
    ranked = rank_scores(perfs, losses, "loss")
    assert ranked.tolist() == [2, 1, 0, 3]
    # by loss, a lower loss beats a higher perf; an infinite (diverged) loss ranks just before pruned
    assert rank_scores(np.array([[0.9, 0.8, 0.0, np.nan]]), np.array([[0.3, 0.2, np.inf, np.nan]]), "loss").tolist() \
        == [1, 0, 2, 3]
    assert halving_survivors(ranked, 4, 2).tolist() == [2, 1]
    assert halving_survivors(ranked[:3], 3, 2).tolist() == [2, 1]
    assert halving_survivors(ranked[:1], 1, 3).tolist() == [2]
    with pytest.raises(ValueError):
        halving_survivors(ranked, 4, 1)


def pick(*args):
    return int(rank_with_ties(*args)[0])


def test_ties_rank_the_smaller_batch_first():
    bss = [8, 16, 32, 64]
    nan = np.nan
    # last rung: 16 and 32 alive (8, 64 pruned: NaN); 32 is 1% better, a tie within 3% -> 16
    perfs = np.array([[nan, 0.95, 0.95, nan], [nan, 0.96, 0.95, nan]])
    losses = np.array([[nan, 0.202, 0.200, nan], [nan, 0.204, 0.202, nan]])
    assert pick(bss, perfs, losses, "loss", 0.03) == 1
    assert pick(bss, perfs, losses, "loss", 0.0) == 2  # no tolerance: the best scored
    assert pick(bss, perfs, losses, "loss", 0.005) == 2  # 1% apart is not a tie at 0.5%
    # 32 clearly better (20% lower loss): no tie
    assert pick(bss, perfs, np.array([[nan, 0.25, 0.20, nan]] * 2), "loss", 0.03) == 2
    # by perf: 0.955 vs 0.95 is within 3% of 0.955 -> the smaller batch (16)
    assert pick(bss, perfs, losses, "perf", 0.03) == 1
    assert pick(bss, np.array([[nan, 0.50, 0.95, nan]]), losses[:1], "perf", 0.03) == 2
    # a diverged candidate (inf loss) never ties; all failed: the best ranked is returned
    assert pick([8, 16], np.array([[0.0, 0.9]]), np.array([[np.inf, 0.3]]), "loss", 0.5) == 1
    assert pick([8, 16], np.array([[nan, nan]]), np.array([[nan, nan]]), "loss", 0.03) == 0  # order kept
    with pytest.raises(ValueError):
        rank_with_ties(bss, perfs, losses, "loss", -0.1)


def test_ties_at_a_pruning_rung_keep_the_smaller_batches():
    # four candidates after the first rung: 32 scores best, 8 and 16 within 1%, 64 far behind;
    # halving keeps 2: the tied smaller ones (8, 16), not 32 and the next by score
    bss = [8, 16, 32, 64]
    losses = np.array([[0.1495, 0.1494, 0.1485, 0.40]])
    perfs = np.array([[0.95, 0.95, 0.95, 0.80]])
    ranked = rank_with_ties(bss, perfs, losses, "loss", 0.03)
    assert ranked.tolist() == [0, 1, 2, 3]
    assert halving_survivors(ranked, 4, 2).tolist() == [0, 1]
    assert rank_with_ties(bss, perfs, losses, "loss", 0.0).tolist() == rank_scores(perfs, losses, "loss").tolist()
    # outside the tolerance the order is by score
    assert rank_with_ties(bss, perfs, np.array([[0.30, 0.20, 0.1485, 0.40]]), "loss", 0.03).tolist() == [2, 1, 0, 3]


def test_a_faster_tied_batch_that_scored_no_worse_passes_the_smaller_one():
    bss = [8, 16, 32, 64]
    perfs = np.array([[0.95, 0.95, 0.95, 0.80]])
    # 8, 16, 32 tied within 3%; 64 far behind. 16 and 32 scored better than 8
    losses = np.array([[0.1495, 0.1494, 0.1485, 0.40]])
    cost = np.array([[200e-6, 110e-6, 70e-6, 50e-6]])  # seconds per training example: larger is cheaper here
    ranked = rank_with_ties(bss, perfs, losses, "loss", 0.03, cost=cost)
    assert ranked.tolist() == [2, 0, 1, 3]  # the fastest of those no worse than 8 (32), then the smaller first
    assert halving_survivors(ranked, 4, 2).tolist() == [2, 0]
    # 32 scored worse than 8 (within the band): only 16 passes
    worse32 = np.array([[0.1495, 0.1494, 0.1510, 0.40]])
    assert rank_with_ties(bss, perfs, worse32, "loss", 0.03, cost=cost).tolist() == [1, 0, 2, 3]
    # both larger ones scored worse than 8: the smaller-first order stands whatever the speed (the
    # noisy-regression case: the larger tied batch lost val perf in trials)
    worse = np.array([[0.1485, 0.1494, 0.1495, 0.40]])
    assert rank_with_ties(bss, perfs, worse, "loss", 0.03, cost=cost).tolist() == [0, 1, 2, 3]
    # by perf (higher is better): 16 at least as good as 8 and faster
    assert rank_with_ties([8, 16], np.array([[0.90, 0.91]]), np.array([[0.3, 0.3]]), "perf", 0.03,
                          cost=np.array([2e-4, 1e-4])).tolist() == [1, 0]
    # a speed within the margin is a wash: the smaller batch stays first
    close = np.array([[75e-6, 72e-6, 70e-6, 50e-6]])
    assert rank_with_ties(bss, perfs, losses, "loss", 0.03, cost=close).tolist() == [0, 1, 2, 3]
    assert rank_with_ties(bss, perfs, losses, "loss", 0.03, cost=close, speed_margin=0.05).tolist() == [2, 0, 1, 3]
    # repeats are averaged; a pruned candidate (NaN) is not used
    two = np.array([[200e-6, 110e-6, 60e-6, np.nan], [200e-6, 110e-6, 80e-6, np.nan]])
    assert rank_with_ties(bss, np.vstack([perfs, perfs]), np.vstack([losses, losses]), "loss", 0.03,
                          cost=two)[0] == 2
    # a tied candidate without a timing (0: not measured): the smaller batch first, as without costs
    untimed = np.array([[200e-6, 0.0, 70e-6, 50e-6]])
    assert rank_with_ties(bss, perfs, losses, "loss", 0.03, cost=untimed).tolist() == [0, 1, 2, 3]
    # no ties: the speed does not matter
    apart = np.array([[0.30, 0.20, 0.1485, 0.40]])
    assert rank_with_ties(bss, perfs, apart, "loss", 0.03, cost=cost).tolist() == [2, 1, 0, 3]
    with pytest.raises(ValueError, match="speed_margin"):
        rank_with_ties(bss, perfs, losses, "loss", 0.03, cost=cost, speed_margin=-0.1)


def test_paired_test_ties_a_noisy_lead_and_keeps_a_consistent_one():
    # 3 repeats (one initialisation each, shared by the candidates); losses of batches 8, 16, 32
    bss = [8, 16, 32]
    # 32 leads by 3.6% on average, but repeat 2 reverses it: not worse at 95%, so 16 ties
    noisy = np.array([[0.1000, 0.1000, 0.0906], [0.0897, 0.0897, 0.0900], [0.0962, 0.0962, 0.0950]])
    # 32 leads by ~3% in every repeat: a consistent difference, no tie, though under 3.5%
    steady = np.array([[0.1267, 0.1267, 0.1229], [0.1317, 0.1313, 0.1269], [0.1312, 0.1305, 0.1266]])
    perfs = np.zeros((3, 3))
    assert not_worse_paired(noisy, 2).tolist() == [True, True, True]
    assert not_worse_paired(steady, 2).tolist() == [False, False, True]
    assert rank_with_ties(bss, perfs, noisy, "loss", 0.03, paired_test=True)[0] == 0
    assert rank_with_ties(bss, perfs, noisy, "loss", 0.03)[0] == 2  # the fixed 3% band alone: 32
    assert rank_with_ties(bss, perfs, steady, "loss", 0.03, paired_test=True)[0] == 2
    # perf (higher is better) and a single repeat (no test possible: the band alone decides)
    assert not_worse_paired(-noisy, 2, lower_is_better=False).tolist() == [True, True, True]
    assert not_worse_paired(noisy[:1], 2).tolist() == [False, False, True]
    # a repeat missing for one candidate is left out of its pairs
    gappy = noisy.copy()
    gappy[1, 0] = np.nan
    assert not_worse_paired(gappy, 2)[0]


def test_lr_scaling_is_linear_down_and_square_root_up():
    # down: the linear rule (a quarter of the batch, a quarter of the LR)
    assert scale_lr(0.1, 8, 32) == pytest.approx(0.025)
    assert scale_lr(0.1, 32, 32) == pytest.approx(0.1)
    # up: 4x the batch, 2x the LR (linearly it was 0.4, which diverged on the benchmark's CNN)
    assert scale_lr(0.1, 128, 32) == pytest.approx(0.2)
    assert scale_lr(0.5, 32, 16) == pytest.approx(0.5 * 2**0.5)


def test_schedule_from_dataset_size():
    assert choose_schedule(1437, train_examples=30_000, min_epochs=5, max_epochs=100, cycles=1) == (21.0, 21)
    assert choose_schedule(100_000, train_examples=30_000, min_epochs=5, max_epochs=100, cycles=1) == (5.0, 5)
    assert choose_schedule(10, train_examples=30_000, min_epochs=5, max_epochs=100, cycles=1) == (100.0, 100)
    cyc, ep = choose_schedule(1437, train_examples=30_000, min_epochs=5, max_epochs=100, cycles=4)
    assert ep == 24 and math.isclose(cyc * 4, ep)


def test_the_search_compares_each_candidates_fastest_run(monkeypatch):
    """Timings of concurrent runs on a loaded machine can invert in one rung: the search keeps each
    candidate's least seconds per example over the rungs, so one slow run does not decide."""
    import dataclasses
    from types import SimpleNamespace

    from ignite_seg import get_preset
    from ignite_seg.tuning import batch_runs

    s = dataclasses.replace(get_preset("fast"), batch_rn_min_inits=1)
    nan = np.nan
    rungs = iter([
        # rung 1: 8 and 16 tied, 16 scored better and ran faster; 32 far behind
        (np.array([[0.9, 0.9, 0.8]]), np.array([[0.226, 0.225, 0.288]]), np.array([[150e-6, 79e-6, 34e-6]])),
        # rung 2: 16 scored better again, but its run was slowed by other load (160 vs 121 µs)
        (np.array([[0.95, 0.95, nan]]), np.array([[0.1229, 0.1216, nan]]), np.array([[121e-6, 160e-6, nan]])),
    ])
    monkeypatch.setattr(batch_runs, "_scores", lambda t, cands, tasks, alive: next(rungs))
    t = SimpleNamespace(s=s, recipe=None, seed=0, misc=SimpleNamespace(record=lambda **kw: None))
    search = batch_runs.batch_search(t, [8, 16, 32], 0.1, 0.3, 2.0)
    assert search.chosen == 16
    assert search.seconds_per_example.tolist() == pytest.approx([121e-6, 79e-6, 34e-6])
    assert search.rungs[-1].seconds_per_example == pytest.approx({"8": 121e-6, "16": 79e-6})
    # told to prefer the smaller batch: the timings do not matter
    rungs = iter([
        (np.array([[0.9, 0.9, 0.8]]), np.array([[0.226, 0.225, 0.288]]), np.array([[150e-6, 79e-6, 34e-6]])),
        (np.array([[0.95, 0.95, nan]]), np.array([[0.1229, 0.1216, nan]]), np.array([[121e-6, 60e-6, nan]])),
    ])
    t.s = dataclasses.replace(s, batch_tie_prefer="smaller")
    assert batch_runs.batch_search(t, [8, 16, 32], 0.1, 0.3, 2.0).chosen == 8


def test_a_candidate_none_of_whose_runs_scored_is_recorded_as_null_without_a_warning(monkeypatch):
    """A candidate whose every run failed has no mean: the rung records None (JSON null), not NaN, and the
    ranking puts it last without numpy's "Mean of empty slice" warning."""
    import dataclasses
    import warnings
    from types import SimpleNamespace

    from ignite_seg import get_preset
    from ignite_seg.tuning import batch_runs

    nan = np.nan
    rungs = iter([
        (np.array([[0.9, nan, 0.8]]), np.array([[0.2, nan, 0.3]]), np.array([[150e-6, nan, 34e-6]])),
        (np.array([[0.95, nan, 0.85]]), np.array([[0.1, nan, 0.25]]), np.array([[121e-6, nan, 30e-6]])),
    ])
    monkeypatch.setattr(batch_runs, "_scores", lambda t, cands, tasks, alive: next(rungs))
    t = SimpleNamespace(s=dataclasses.replace(get_preset("fast"), batch_rn_min_inits=1), recipe=None, seed=0,
                        misc=SimpleNamespace(record=lambda **kw: None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search = batch_runs.batch_search(t, [8, 16, 32], 0.1, 0.3, 2.0)
    assert search.chosen == 8
    first = search.rungs[0]
    assert first.mean_loss["16"] is None and first.mean_perf["16"] is None and first.kept == [8, 32]
