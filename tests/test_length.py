"""The length check (tuning/length.py): known cuts on known curves, the early stop, the slices, and real
full-length runs that cut an overfitting recipe and keep a healthy one."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ignite_seg import FixedHyperparameters, get_preset
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.length_run import LengthResult, StopWhenFallen
from ignite_seg.engine.schedules import simulate_lrs
from ignite_seg.runtime.tasks import TaskRunner
from ignite_seg.storage.run_folder import RunFolder
from ignite_seg.storage.schemas import MISC_JSON, MiscFile
from ignite_seg.tuning import length as length_mod
from ignite_seg.tuning.length import (
    check_length,
    combine,
    compare_ends,
    cooled,
    hold_end,
    judge_length,
    length_slices,
    short_schedule,
    spike_verdict,
    stop_patience,
)
from ignite_seg.tuning.recipe import _start


def _rise_and_fall(epochs: int, peak: int, top: float = 0.7, fall: float = 0.004) -> np.ndarray:
    """A held-out perf that climbs to ``top`` by epoch ``peak``, then loses ``fall`` an epoch (overfitting)."""
    e = np.arange(1, epochs + 1, dtype=np.float64)
    return np.where(e <= peak, top * (1 - np.exp(-e / (peak / 4))), top * (1 - np.exp(-4.0)) - fall * (e - peak))


def test_a_curve_that_falls_after_its_best_is_cut_to_its_best_epoch():
    perfs = _rise_and_fall(100, 20)  # best ~0.687 at epoch 20, ~0.37 at the end
    d = judge_length(perfs, epochs=100, min_epochs=5, rel_tol=0.02)
    assert d.cut and d.best_epoch == 20
    assert d.tol == pytest.approx(0.02 * d.best)  # 2% of the best: the end lies far below it
    # to the best, not to where the curve leaves the tolerance (~3.4 epochs later, falling 0.004 an epoch)
    assert d.epochs == 20
    assert "the trials train 20 epochs (to its best)" in d.reason


def test_a_slow_decline_inside_the_tolerance_for_many_epochs_is_cut_to_the_best():
    # the shape of the tags task (bench/RESULTS.md, session 15): best at 4, losing 0.0015 an epoch after it;
    # it stays within 2% of the best (0.016) for ~10 epochs, ends 0.024 below it
    e = np.arange(1, 21, dtype=np.float64)
    perfs = np.where(e <= 4, 0.76 + 0.0075 * e, 0.79 - 0.0015 * (e - 4))
    d = judge_length(perfs, epochs=20, min_epochs=3, rel_tol=0.02)
    assert d.cut and d.best_epoch == d.epochs in (4, 5)  # the 3-epoch mean may put the peak one epoch on


def test_a_curve_still_improving_or_flat_within_the_tolerance_keeps_the_epochs():
    e = np.arange(1, 101, dtype=np.float64)
    assert not judge_length(0.9 - 0.5 / e, 100, 5, 0.02).cut  # improving to the end
    rng = np.random.default_rng(0)
    flat = 0.9 + rng.uniform(-0.005, 0.005, 100)  # noise well inside 2% of 0.9
    d = judge_length(flat, 100, 5, 0.02)
    assert not d.cut and d.epochs == 100 and "the 100 epochs stand" in d.reason


def test_the_items_of_an_accuracy_widen_the_tolerance():
    # a fall of one item of 40 (0.025) is the grain of the measurement, not overfitting: kept with the 2
    # items' tolerance (0.05), cut without it
    perfs = np.r_[np.full(10, 0.9), np.full(30, 0.875)]
    assert judge_length(perfs, 40, 5, 0.02).cut
    assert not judge_length(perfs, 40, 5, 0.02, abs_tol=2 / 40).cut


def test_the_cut_is_never_below_min_epochs_nor_above_the_epochs():
    d = judge_length(_rise_and_fall(60, 2, fall=0.02), epochs=60, min_epochs=8, rel_tol=0.02)
    assert d.cut and d.best_epoch < d.epochs == 8 and "at least min_epochs" in d.reason
    # a fall that starts within the last min_epochs... of a run whose every epoch would be cut away: kept
    late = judge_length(np.r_[np.linspace(0.5, 0.9, 8), [0.8, 0.7]], epochs=10, min_epochs=10, rel_tol=0.02)
    assert not late.cut and late.epochs == 10


def test_the_trials_are_cut_only_when_every_run_fell_to_the_latest_best():
    fell = judge_length(_rise_and_fall(100, 20), 100, 5, 0.02)
    later = judge_length(_rise_and_fall(100, 30), 100, 5, 0.02)
    kept = judge_length(0.9 - 0.5 / np.arange(1, 101), 100, 5, 0.02)
    assert combine([fell, later], 100)[0] == later.epochs == later.best_epoch > fell.epochs
    early = judge_length(_rise_and_fall(100, 3), 100, 5, 0.02)  # best at 3, clamped to min_epochs = 5
    assert combine([early, early], 100)[0] == 5 and "best epochs (at least min_epochs)" in combine([early, early], 100)[1]
    epochs, why = combine([fell, kept], 100)
    assert epochs == 100 and "fell in 1 of 2 runs, not in every one" in why
    assert "did not fall by more than the tolerance" in combine([kept], 100)[1]
    assert combine([], 100)[0] == 100


def test_a_length_run_stops_once_its_perf_has_stayed_fallen_for_the_patience():
    perfs: list[float] = []
    stop = StopWhenFallen(perfs, rel_tol=0.02, abs_tol=0.0, patience=3)
    curve = _rise_and_fall(100, 10, fall=0.01)
    stopped_at = next(k for k in range(1, 101) if stop.fallen(list(curve[:k])))
    # best at 10; the smoothed curve leaves 2% of it after ~2 epochs, then 3 epochs of patience (+1 for the smoothing)
    assert 14 <= stopped_at <= 17
    assert not any(stop.fallen(list(0.9 - 0.5 / np.arange(1, k + 1))) for k in range(1, 60))  # improving: never
    assert stop_patience(30) == 3 and stop_patience(100) == 10


def test_the_slices_are_the_tuners_then_disjoint_ones_of_the_same_size():
    first = (1, 5, 9, 30)
    slices = length_slices(100, first, 3, seed=0)
    assert slices[0] == first and [len(s) for s in slices] == [4, 4, 4]
    assert len(set().union(*map(set, slices))) == 12  # disjoint
    assert slices == length_slices(100, first, 3, seed=0) != length_slices(100, first, 3, seed=1)
    small = length_slices(6, (0, 1, 2), 2, seed=0)  # too few items left: drawn from the whole set
    assert len(small[1]) == 3 and all(0 <= i < 6 for i in small[1])


@pytest.mark.parametrize("schedule, warmup", [("cosine", 2.0), ("triangular", 0.0), ("one-cycle", 0.0),
                                              ("inv-sqrt", 1.5)])
def test_the_shorter_schedule_is_the_same_shape_over_fewer_epochs(schedule, warmup):
    hp = FixedHyperparameters(lr_start=0.001, lr_end=0.01, batch_size=16, epochs=15, cycle_size_epochs=15.0,
                              schedule=schedule, warmup_epochs=warmup)
    short = short_schedule(hp, 1 / 3, min_epochs=5)
    assert short is not None and short.epochs == 5 and short.cycle_size_epochs == 5.0
    assert short.warmup_epochs == pytest.approx(warmup / 3)
    full, compressed = simulate_lrs(hp, 30), simulate_lrs(short, 30)
    assert compressed.size * 3 == full.size
    # the same LR at the same fraction of the run: where it peaks, where it ends
    np.testing.assert_allclose(compressed, full[1::3], rtol=0.2, atol=0.0015)
    assert np.argmax(compressed) == pytest.approx(np.argmax(full) / 3, abs=2)
    assert compressed[-1] == pytest.approx(full[-1], rel=0.25)


def test_no_shorter_schedule_below_min_epochs_or_when_switched_off():
    hp = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=16, epochs=12, cycle_size_epochs=6.0)
    assert short_schedule(hp, 1 / 3, min_epochs=5).epochs == 5  # 4 is below min_epochs
    assert short_schedule(hp, 1 / 3, min_epochs=12) is None and short_schedule(hp, 0.0, min_epochs=1) is None
    assert short_schedule(dataclasses.replace(hp, warmup_epochs=0.0, warmup_steps=90), 0.5, 1).warmup_steps == 45


def _ran(key, perfs, status="completed", abs_tol=0.01):
    return LengthResult(key, status, {"perfs": np.asarray(perfs, float), "losses": np.zeros(len(perfs))},
                        len(perfs), abs_tol=abs_tol)


def test_the_ends_are_compared_by_their_sign_a_tie_or_a_failed_run_never_wins():
    flat = _ran(0, [0.70, 0.76, 0.75])  # its end: 0.755, the mean of its last two epochs
    assert compare_ends(flat, _ran(1, [0.7, 0.76, 0.76])) == (0.755, 0.76, 0.0, True)  # any margin counts
    assert not compare_ends(flat, _ran(1, [0.7, 0.75, 0.76])).better  # a tie
    assert not compare_ends(flat, _ran(1, [0.7, 0.70, 0.80])).better  # one high last epoch: 0.75
    assert not compare_ends(flat, _ran(1, [0.9], status="failed")).better
    assert not compare_ends(flat, _ran(1, [0.7, float("nan")], status="diverged")).better
    assert not compare_ends(_ran(0, [0.7, float("nan")], status="diverged"), _ran(1, [0.7, 0.8])).better


class _Curves:
    """Stands in for the worker runs: each length task's perf curve by its slice and schedule (``cool``: the cooler
    recipe's, by default its full run's: it falls the same); records each call."""

    def __init__(self, full, short, cool=None):
        self.full, self.short, self.calls = full, short, []
        self.cool = full if cool is None else cool

    def __call__(self, t, fn, tasks, desc, stage, failed):
        self.calls.append([task.key for task in tasks])
        out = {}
        for task in tasks:
            kind, r = task.key if isinstance(task.key, tuple) else ("full", task.key)
            curve = {"full": self.full, "short": self.short, "cool": self.cool}[kind][r]
            assert len(curve) == task.hparams.epochs  # the short run trains the compressed schedule
            out[task.key] = _ran(task.key, curve, "completed", abs_tol=2 / 50)
        return out


def _check_with(runner, monkeypatch, tmp_path, full, short, epochs=15, cool=None, schedule="cosine", **settings):
    t = _tune_run(runner, tmp_path, "blobs", {}, "CrossEntropyLoss", 500, **settings)
    curves = _Curves(full, short, cool)
    monkeypatch.setattr(length_mod, "run_tasks", curves)
    hp = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=16, epochs=epochs,
                              cycle_size_epochs=float(epochs), schedule=schedule,
                              warmup_epochs=1.5 if schedule == "cosine" else 0.0)
    return hp, check_length(t, hp), _length_record(tmp_path), curves.calls


FLAT = [0.6, 0.7, 0.74, 0.75, 0.76, 0.74, 0.75, 0.76, 0.75, 0.74, 0.76, 0.75, 0.75, 0.76, 0.75]  # never fell


def test_a_shorter_schedule_that_ends_better_on_every_slice_is_what_the_trials_train(runner, monkeypatch, tmp_path):
    # the GRU of bench/RESULTS.md (session 15): a tuned peak too hot for 15 epochs, right for 5; its slice curve flat
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [FLAT] * 3, [[0.7, 0.78, 0.8, 0.82, 0.84]] * 3)
    # each pair side by side, the next only after a win: three slices, though the fall rule needs two full runs
    assert calls == [[0, ("short", 0)], [1, ("short", 1)], [2, ("short", 2)]]
    assert got == short_schedule(hp, 1 / 3, 5) and got.epochs == 5 and got.warmup_epochs == pytest.approx(0.5)
    assert g.short_won and g.cut and g.epochs == 5 and g.epochs_planned == 15 and g.short_epochs == 5
    assert g.runs == 3 and len(g.short_perfs) == 3 and g.short_status == ["completed"] * 3
    assert ("yet the recipe compressed to 5 epochs ended above the full 15-epoch schedule on every one of 3 slices "
            "(0.83 against 0.755, ") in g.decided_by


def test_a_small_margin_on_every_slice_is_enough_and_length_short_runs_sets_the_slices(runner, monkeypatch, tmp_path):
    # tags' AdamW recipe (bench/RESULTS.md, session 17): +0.007..+0.009 on each of three slices, inside any tolerance
    small = [0.6, 0.7, 0.74, 0.76, 0.765]  # its end 0.7625 against the full runs' 0.755
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [FLAT] * 3, [small] * 3)
    assert got.epochs == 5 and g.short_won and len(calls) == 3
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path / "b", [FLAT] * 4, [small] * 4, length_short_runs=4)
    assert got.epochs == 5 and calls[-1] == [3, ("short", 3)] and "every one of 4 slices" in g.decided_by
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path / "c", [FLAT], [small], length_short_runs=1)
    assert got.epochs == 5 and calls == [[0, ("short", 0)]] and "every one of 1 slice (" in g.decided_by


def test_the_report_says_the_trials_train_the_compressed_schedule_and_its_figure_shows_both(runner, monkeypatch,
                                                                                              tmp_path):
    from ignite_seg.analysis.length import length_caption, length_info, plot_length

    monkeypatch.setattr(length_mod, "run_tasks", _Curves([FLAT] * 3, [[0.7, 0.78, 0.8, 0.82, 0.84]] * 3))
    t = _tune_run(runner, tmp_path, "blobs", {}, "CrossEntropyLoss", 500)
    t.misc.record(schedule=_schedule_step(15))
    hp = check_length(t, FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=16, epochs=15,
                                              cycle_size_epochs=15.0))
    misc, line, schedule = _report_lines(tmp_path, hp)
    assert "15 -> 5 epochs (compressed)" in line and "3 of the recipe compressed to 5 epochs" in line
    assert "the length check compressed the planned 15" in schedule
    info = length_info(misc)
    assert info.short_won and info.short_epochs == 5 and len(info.short_perfs) == 3
    assert "No run's perf fell below its tolerance" in length_caption(info)
    assert "on every one of the 3 slices (a sign test" in length_caption(info) and info.short_slices == 3
    assert "the trials train the compressed 5-epoch schedule" in length_caption(info)
    # a folder from before the sign test (no short_slices) was decided by a margin: reanalysed, it still says so
    del misc["steps"]["length"]["short_slices"]
    old = length_caption(length_info(misc))
    assert "ended above the full schedule by more than the tolerance on every one of the 3 slices, so" in old
    assert "sign test" not in old
    assert len(plot_length(info).axes[0].get_lines()) > 2 * 3  # each run, its mean, its best; each shorter run


def test_the_shorter_schedule_must_win_on_every_slice_and_a_lost_first_pair_ends_the_check(runner, monkeypatch, tmp_path):
    from ignite_seg.analysis.length import length_caption, length_info

    win = [0.7, 0.78, 0.8, 0.82, 0.84]
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [FLAT] * 3, [win, win, [0.7, 0.72, 0.74, 0.76, 0.75]])
    assert got == hp and not g.cut and g.short_won is False and len(calls) == 3  # a tie on the third: 0.755
    assert "did not end above the full 15-epoch schedule on slice 3 (0.83 against 0.755, 0.83 against 0.755, 0.755 against 0.755)" in g.decided_by
    caption = length_caption(length_info(json.loads((tmp_path / "hparams" / MISC_JSON).read_text())))
    assert "It did not end above the full schedule on slice 3" in caption and "the full schedule stands" in caption
    assert "a further run is made when the last one fell, or for the compressed schedule's next slice" in caption
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path / "b", [FLAT, FLAT], [[0.6, 0.7, 0.72, 0.74, 0.76]] * 2)
    assert got == hp and calls == [[0, ("short", 0)]]  # it lost on the first slice: nothing more is run
    assert g.runs == 1 and len(g.short_perfs) == 1 and "the 15 epochs stand" in g.decided_by


def test_when_every_full_run_fell_the_trials_are_cut_to_the_best_and_the_shorter_is_not_taken(runner, monkeypatch, tmp_path):
    fell = [0.6, 0.7, 0.8, 0.82, 0.8, 0.75, 0.7, 0.68, 0.66, 0.65, 0.64, 0.63, 0.62, 0.61, 0.6]
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [fell, fell], [[0.7, 0.78, 0.8, 0.82, 0.9]] * 2)
    assert got.epochs == 5 and got.warmup_epochs == hp.warmup_epochs  # cut to its best (at least min_epochs)
    # the cooler recipe ran on slice 1 and fell as the full runs did: not taken
    assert g.cut and not g.short_won and calls == [[0, ("short", 0)], [1], [("cool", 0)]] and g.cool_won is False
    from ignite_seg.analysis.length import length_caption, length_info, plot_length

    info = length_info(json.loads((tmp_path / "hparams" / MISC_JSON).read_text()))
    caption = length_caption(info)  # the 5-epoch schedule is no shorter than the cut to 5: it was not compared
    assert "It is not shorter than the cut, so it was not compared." in caption and "did not reach" not in caption
    assert "compared with the run's best" not in caption
    fig = plot_length(info)  # and no open circle marks a full run's end as compared (only its end-of-run markers)
    assert not [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "o" and ln.get_markerfacecolor() == "white"]
    assert "fell from its best in every run" in g.decided_by and g.short_against is None  # 5 is not fewer than 5


LATE_FALL = [0.5, 0.55, 0.6, 0.65, 0.7, 0.72, 0.74, 0.76, 0.78, 0.8, 0.78, 0.74, 0.7, 0.66, 0.62]  # best after epoch 10


def test_when_every_run_fell_a_shorter_schedule_that_reaches_their_best_is_taken_over_the_cut(runner, monkeypatch,
                                                                                               tmp_path):
    # the GRU's AdamW recipe (bench/RESULTS.md, session 17): its runs peaked after epochs 5 and 10 and fell; the cut
    # to the latest best (10) trained 0.774, the 5-epoch schedule reached the best of the runs
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [LATE_FALL, LATE_FALL],
                                    [[0.6, 0.7, 0.76, 0.78, 0.79]] * 2)
    # the cooler recipe first (it fell on slice 1), then the second shorter run only once the first reached
    assert calls == [[0, ("short", 0)], [1], [("cool", 0)], [("short", 1)]]
    assert got == short_schedule(hp, 1 / 3, 5) and g.short_won and g.short_against == "best" and g.epochs == 5
    assert "ended within the tolerance of the runs' best on every one of 2 slices" in g.decided_by and "rather than the 10 of the cut" in g.decided_by
    from ignite_seg.analysis.length import length_caption, length_info, plot_length

    info = length_info(json.loads((tmp_path / "hparams" / MISC_JSON).read_text()))
    assert "rather than the 10 epochs of the latest best" in length_caption(info)
    assert "reached the runs' best" in plot_length(info).axes[0].get_title()


def test_when_every_run_fell_the_shorter_must_reach_their_best_on_every_slice(runner, monkeypatch, tmp_path):
    from ignite_seg.analysis.length import length_caption, length_info

    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [LATE_FALL, LATE_FALL],
                                    [[0.6, 0.7, 0.76, 0.78, 0.79], [0.6, 0.66, 0.68, 0.7, 0.7]])
    assert got.epochs == 10 and g.cut and g.short_won is False and g.short_against == "best"
    assert calls == [[0, ("short", 0)], [1], [("cool", 0)], [("short", 1)]]
    assert "did not end within the tolerance of the runs' best on slice 2" in g.decided_by
    misc = json.loads((tmp_path / "hparams" / MISC_JSON).read_text())
    caption = length_caption(length_info(misc))
    assert "Every run's perf fell" in caption and "the trials train 10 epochs" in caption
    assert "did not reach the runs' best" in caption
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path / "b", [LATE_FALL, LATE_FALL],
                                    [[0.6, 0.66, 0.68, 0.7, 0.7]] * 2)
    assert got.epochs == 10 and calls == [[0, ("short", 0)], [1], [("cool", 0)]]  # it missed on slice 1: no second


HOT = [0.5, 0.58, 0.64, 0.7, 0.74, 0.78, 0.8, 0.7, 0.72, 0.66, 0.7, 0.68, 0.64, 0.66, 0.65]  # best ~0.77, then jumps
COOL = [0.4, 0.5, 0.56, 0.62, 0.66, 0.7, 0.72, 0.74, 0.76, 0.78, 0.8, 0.82, 0.84, 0.86, 0.87]  # slower, and higher


def test_when_every_run_fell_a_cooler_recipe_that_reaches_their_best_is_taken_at_the_planned_epochs(
        runner, monkeypatch, tmp_path):
    # the autoencoder's SGD recipe (bench/RESULTS.md, session 19): its runs fell near the peak of their cycle and its
    # trials diverged in 3 of 12; at a third of the learning rate it trained every one, and better
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [HOT, HOT], [[0.6, 0.7, 0.72, 0.74, 0.76]] * 2,
                                    cool=[COOL, COOL])
    # the second only once the first favoured it, beside the shorter schedule on its slice (compared with both)
    assert calls == [[0, ("short", 0)], [1], [("cool", 0)], [("cool", 1), ("short", 1)]]
    assert got == cooled(hp) and got.epochs == 15 and got.lr_end == pytest.approx(hp.lr_end / 10**0.5)
    assert (got.schedule, got.warmup_epochs, got.batch_size) == (hp.schedule, hp.warmup_epochs, hp.batch_size)
    assert g.cool_won and not g.cut and g.epochs == 15 and g.cool_factor == pytest.approx(10**0.5)
    assert g.lr_end == pytest.approx(got.lr_end) and len(g.cool_perfs) == 2 and g.cool_status == ["completed"] * 2
    assert g.short_against is None and g.short_won is False  # the shorter schedule was not compared
    assert "too hot rather than too long, so the trials train it, the planned 15 epochs" in g.decided_by
    from ignite_seg.analysis.length import length_caption, length_info, plot_length

    misc = json.loads((tmp_path / "hparams" / MISC_JSON).read_text())
    info = length_info(misc)
    caption = length_caption(info)
    assert "Every run's perf fell below its tolerance. The recipe at its learning rates / 3.16" in caption
    assert "the trials train it, the planned 15 epochs." in caption
    fig = plot_length(info)
    assert "learning rates / 3.16 ended above the runs' best" in fig.axes[0].get_title()
    assert sum("learning rates / 3.16" in str(line.get_label()) for line in fig.axes[0].get_lines()) == 2
    misc, line, schedule = _report_lines(tmp_path, got)
    assert "2 of the recipe at its learning rates / 3.16" in line and "15 epochs kept, learning rates / 3.16" in line
    from ignite_seg.analysis.text import TunerFiles, render_markdown, summary_info

    md = render_markdown(summary_info({"hp_kind": "tuned"}, got.to_dict(), None, [], TunerFiles(misc=misc)))
    lr_line = next(ln for ln in md.splitlines() if ln.startswith("- **learning rate**"))
    assert "then / 3.16 by the length check (its runs fell from being too hot)" in lr_line  # not the range's own


def test_a_cooler_recipe_must_reach_the_best_on_every_slice_before_the_shorter_is_compared(runner, monkeypatch,
                                                                                             tmp_path):
    from ignite_seg.analysis.length import length_caption, length_info

    # it reached on slice 1, not on slice 2: the cut (and its shorter rival) decide as before
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [LATE_FALL, LATE_FALL],
                                    [[0.6, 0.66, 0.68, 0.7, 0.7]] * 2, cool=[COOL, [0.4, 0.5, 0.55, 0.6] + [0.62] * 11])
    assert calls == [[0, ("short", 0)], [1], [("cool", 0)], [("cool", 1), ("short", 1)]]
    assert got.epochs == 10 and got.lr_end == hp.lr_end and g.cut and g.cool_won is False
    assert "the recipe at its learning rates / 3.16 did not end above the runs' best by more than the tolerance and " \
        "above the compressed schedule's end (where it ran beside) on slice 2" in g.decided_by
    assert "the trials train 10 epochs" in g.decided_by
    caption = length_caption(length_info(json.loads((tmp_path / "hparams" / MISC_JSON).read_text())))
    assert "(and above the compressed schedule's end where it ran beside) on every slice. So the trials train 10 " \
        "epochs" in caption
    misc, line, schedule = _report_lines(tmp_path, got)
    assert "2 of the recipe at its learning rates / 3.16" in line and "15 -> 10 epochs" in line
    # digits with 30% of its labels flipped (session 19): ending above the runs' best within the tolerance is not
    # enough (the runs truly overfit; the cooler recipe over the planned epochs trained 0.885 on val, the cut 0.937)
    near = [0.5, 0.6, 0.7, 0.75] + [0.8] * 11  # LATE_FALL's best: 0.787 on the 3-epoch mean, tolerance 0.056
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path / "b", [LATE_FALL, LATE_FALL],
                                    [[0.6, 0.66, 0.68, 0.7, 0.7]] * 2, cool=[near, near])
    assert got.epochs == 10 and g.cool_won is False and calls == [[0, ("short", 0)], [1], [("cool", 0)]]
    assert "(0.8 against 0.7867 (tolerance 0.0557))" in g.decided_by
    # dicts' SGD recipe (session 19): above the runs' best by more than the tolerance, but below the compressed
    # schedule's end on the same slice (0.703 against 0.737; val: cooler 0.677, the cut 0.693): the shorter decides
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path / "c", [LATE_FALL, LATE_FALL],
                                    [[0.6, 0.7, 0.8, 0.88, 0.9]] * 2, cool=[COOL, COOL])
    assert calls == [[0, ("short", 0)], [1], [("cool", 0)], [("short", 1)]]
    assert g.cool_won is False and g.short_won and got == short_schedule(hp, 1 / 3, 5)


# the autoencoder's momentum SGD recipe (bench/RESULTS.md, session 23): its length run lost 0.06 at epoch 8 and
# recovered to 0.81; 3 of 4 trials of the same recipe ended at the constant output's loss (0.51), at lr / sqrt(10)
# all four trained (0.79)
SPIKE = [0.5, 0.6, 0.7, 0.74, 0.76, 0.5, 0.45, 0.6, 0.7, 0.74, 0.76, 0.77, 0.78, 0.78, 0.78]
HOLDS = [0.4, 0.5, 0.6, 0.65, 0.7, 0.72, 0.73, 0.74, 0.75, 0.76, 0.77, 0.78, 0.78, 0.78, 0.78]  # as high: holds


def test_a_dip_the_run_recovered_from_is_a_spike_a_fall_or_a_wobble_inside_the_tolerance_is_not():
    spike = judge_length(SPIKE, 15, 5, 0.02, 2 / 50)
    assert not spike.cut and spike.spiked and spike.dip == pytest.approx(2.2 / 3 - 1.55 / 3)  # epochs 3-5 against 6-8
    assert spike.dip > spike.tol == pytest.approx(0.02 * 0.78 + 0.04)
    assert not judge_length(FLAT, 15, 5, 0.02, 2 / 50).spiked  # wobbles of 0.02: inside the tolerance
    fell = judge_length(HOT, 15, 5, 0.02, 2 / 50)
    assert fell.cut and fell.dip > fell.tol and not fell.spiked  # it did not recover: the fall rule's case
    assert not judge_length([0.5, float("nan"), 0.7], 3, 1, 0.02).spiked  # a non-finite epoch is no dip
    held = hold_end(spike, _ran(1, HOLDS))
    assert held.better and held.full == pytest.approx(0.78) and held.short == pytest.approx(0.78)  # a tie holds
    # 0.005 below, inside the tolerance (0.056), does not: the Transformer of bench/RESULTS.md, session 23, whose
    # cooler recipe ended 0.005 below its run and trained 0.806 / 0.898 on val where the lifted peak trains ~0.92
    assert not hold_end(spike, _ran(1, HOLDS[:-2] + [0.775, 0.775])).better
    assert not hold_end(spike, _ran(1, HOLDS, status="failed")).better
    failed = spike_verdict(spike, hold_end(spike, _ran(1, HOLDS, status="failed")), 15, False, 10**0.5)
    assert failed.endswith("the recipe at its learning rates / 3.16 did not finish a run on the same slice, so it is "
                           "not taken")


def test_a_run_that_dipped_and_recovered_on_a_decaying_schedule_trains_the_cooler_recipe_when_it_ends_as_well(
        runner, monkeypatch, tmp_path):
    from ignite_seg.analysis.length import length_caption, length_info, plot_length

    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [SPIKE], [[0.6, 0.7, 0.72, 0.74, 0.76]],
                                    cool=[HOLDS])
    assert calls == [[0, ("short", 0)], [("cool", 0)]]  # one run of the cooler recipe, on the first run's slice
    assert got == cooled(hp) and got.epochs == 15 and not g.cut and g.cool_won and g.cool_because == "spiked"
    assert g.short_against is None and g.short_won is False  # the compressed schedule was not compared
    assert "the first run's held-out perf dipped 0.217 below its best so far, more than the tolerance (0.0556), " \
        "and recovered" in g.decided_by
    assert "ended at least as high as the run after the planned 15 epochs on the same slice (0.78 against 0.78), " \
        "so the trials train it" in g.decided_by
    misc = json.loads((tmp_path / "hparams" / MISC_JSON).read_text())
    info = length_info(misc)
    caption = length_caption(info)
    assert "The run's perf did not fall below its tolerance, but it dipped more than its tolerance below its best " \
        "so far (cross) and recovered" in caption and "Every run's perf fell" not in caption
    assert "it ended at least as high as the run (open circle: the run's end), so the trials train it, the planned 15 " \
        "epochs. The recipe compressed to 5 epochs (dashed, squares) trained beside the first run and was not " \
        "compared." in caption
    ax = plot_length(info).axes[0]
    assert "the run dipped; the recipe at its learning rates / 3.16 ended as high" in ax.get_title()
    ends = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and ln.get_markerfacecolor() == "white"]
    assert len(ends) == 1 and ends[0].get_xdata()[0] == 15  # the run's end it was compared with
    dip = [ln for ln in ax.get_lines() if ln.get_marker() == "x"]
    assert len(dip) == 1 and dip[0].get_xdata()[0] == 7 and "run 1's dip: 0.217 below its best so far" in \
        dip[0].get_label()
    misc, line, schedule = _report_lines(tmp_path, got)
    assert "1 of the recipe at its learning rates / 3.16" in line and "15 epochs kept, learning rates / 3.16" in line
    from ignite_seg.analysis.text import TunerFiles, render_markdown, summary_info

    md = render_markdown(summary_info({"hp_kind": "tuned"}, got.to_dict(), None, [], TunerFiles(misc=misc)))
    lr_line = next(ln for ln in md.splitlines() if ln.startswith("- **learning rate**"))
    assert "then / 3.16 by the length check (its first run's held-out perf dipped and recovered: a recipe at the " \
        "edge of stability)" in lr_line


def test_a_cooler_recipe_that_ends_lower_after_a_dip_is_not_taken_and_the_shorter_is_compared_as_before(
        runner, monkeypatch, tmp_path):
    from ignite_seg.analysis.length import length_caption, length_info

    low = HOLDS[:-3] + [0.77] * 3  # 0.01 below the run's end
    win = [0.7, 0.78, 0.8, 0.82, 0.84]
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [SPIKE] * 3, [win] * 3, cool=[low])
    assert calls == [[0, ("short", 0)], [("cool", 0)], [1, ("short", 1)], [2, ("short", 2)]]
    assert got == short_schedule(hp, 1 / 3, 5) and g.cool_won is False and g.cool_because == "spiked"
    assert "ended below the run on the same slice (0.77 against 0.78), so it is not taken" in g.decided_by
    caption = length_caption(length_info(json.loads((tmp_path / "hparams" / MISC_JSON).read_text())))
    assert "it ended below the run (open circle: the run's end) and is not taken" in caption
    assert "so the trials train the compressed 5-epoch schedule" in caption


@pytest.mark.parametrize("schedule", ["triangular", "one-cycle", "constant"])
def test_a_dip_on_a_schedule_that_does_not_decay_from_its_peak_runs_no_cooler_recipe(runner, monkeypatch, tmp_path,
                                                                                     schedule):
    # on a triangular cycle the dip comes at its peak, mid-run: measured on seven SGD tunes, the cooler recipe
    # trained from 0.037 worse to 0.016 better on val (bench/RESULTS.md, session 23); one-cycle and constant: not
    # measured
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [SPIKE], [[0.6, 0.7, 0.72, 0.74, 0.76]],
                                    cool=[HOLDS], schedule=schedule)
    assert calls == [[0, ("short", 0)]] and got == hp and g.cool_perfs is None and g.cool_because is None


def test_length_short_0_compares_no_shorter_schedule(runner, monkeypatch, tmp_path):
    hp, got, g, calls = _check_with(runner, monkeypatch, tmp_path, [FLAT], [], length_short=0.0)
    assert got == hp and calls == [[0]] and g.short_epochs is None and g.short_perfs is None


# -- real full-length runs in worker processes ----------------------------------------------------------
@pytest.fixture(scope="module")
def runner():
    with TaskRunner(2) as r:
        yield r


def _tune_run(runner, tmp_path, dataset, model_kw, loss, n_train, **settings):
    specs = {"model": normalize_spec(("tasks", "mlp", (), model_kw), "model_loader"),
             "dataset": normalize_spec(("tasks", dataset, (), {}), "dataset_loader"),
             "loss": normalize_spec(("torch.nn", loss, (), {}), "loss_loader")}
    style = {"CrossEntropyLoss": "classification", "BCEWithLogitsLoss": "multiclass"}.get(loss, "inv-loss")
    s = dataclasses.replace(get_preset("fast"), **settings)
    return _start(runner, RunFolder(tmp_path), s, specs, style, n_train, 0, "cpu")


def _length_record(tmp_path):
    return MiscFile.from_json(json.loads((tmp_path / "hparams" / MISC_JSON).read_text()), strict=True).steps.length


def test_an_overfitting_recipe_trains_fewer_epochs_and_its_runs_stop_early(runner, tmp_path):
    # a wide MLP on 160 noisy items: its held-out loss is lowest after a few epochs, then it fits the noise
    t = _tune_run(runner, tmp_path, "noisy_few", {"n_in": 16, "n_hidden": 256, "n_out": 1}, "MSELoss", 160)
    hp = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=8, cycle_size_epochs=30.0, epochs=30)
    cut = check_length(t, hp)
    g = _length_record(tmp_path)
    assert g.cut and cut.epochs == g.epochs < 30 and g.epochs_planned == 30
    assert cut.cycle_size_epochs == pytest.approx(30.0 * cut.epochs / 30)  # one cycle still: shortened with the run
    assert (cut.lr_start, cut.lr_end, cut.batch_size) == (hp.lr_start, hp.lr_end, hp.batch_size)
    assert g.runs == 2 and g.slice_items == [16, 16] and g.item_tol == [0.0, 0.0]  # a regression: no items
    assert max(g.run_epochs) < 30 and "stopped" in g.run_status  # the runs did not train what they would only confirm
    assert [len(p) for p in g.perfs] == g.run_epochs == [len(p) for p in g.losses]
    assert all("held-out perf fell from its best" in d for d in g.run_decisions)
    assert "fell from its best in every run" in g.decided_by


def test_a_healthy_recipe_keeps_its_epochs(runner, tmp_path):
    t = _tune_run(runner, tmp_path, "blobs", {}, "CrossEntropyLoss", 96)
    hp = FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=20.0, epochs=20)
    assert check_length(t, hp) == hp
    g = _length_record(tmp_path)
    # the first run did not fall: that settles it (a cut needs every run to fall), the second is not run
    assert not g.cut and g.epochs == 20 and g.runs == 1 and g.run_epochs == [20] and g.run_status == ["completed"]
    assert g.item_tol == pytest.approx([2 / 10]) and "stand" in g.decided_by  # 2 of its 10 items
    # beside it, on another worker, the recipe compressed to 7 epochs; it did not end better, so 20 stand
    assert g.short_epochs == 7 and [len(p) for p in g.short_perfs] == [7] and g.short_won is False


def test_a_multi_label_accuracy_moves_by_one_label_and_its_tolerance_counts_labels(runner, tmp_path):
    # the perf's grain on the slice is one label of one item (10 items x 3 labels), not one item: a tolerance
    # of 2 items (2/10) hid tags' 1.7-point overfitting in bench/RESULTS.md, session 15
    t = _tune_run(runner, tmp_path, "multilabel", {"n_out": 3}, "BCEWithLogitsLoss", 96)
    hp = FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=8.0, epochs=8)
    check_length(t, hp)
    g = _length_record(tmp_path)
    assert g.slice_items[0] == 10 and g.item_tol[0] == pytest.approx(2 / 30)


@pytest.mark.parametrize("settings, epochs, why", [({"length_runs": 0}, 20, "length_runs=0"),
                                                   ({}, 5, "min_epochs=5 epochs already")])
def test_no_run_when_switched_off_or_nothing_could_be_cut(runner, tmp_path, settings, epochs, why):
    t = _tune_run(runner, tmp_path, "blobs", {}, "CrossEntropyLoss", 96, **settings)
    hp = FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=float(epochs), epochs=epochs)
    assert check_length(t, hp) == hp
    g = _length_record(tmp_path)
    assert g.runs == 0 and not g.cut and why in g.decided_by
    assert "length" not in t.misc.misc.compute.task_seconds  # no worker ran


def test_a_killed_tune_resumes_from_its_finished_length_runs(runner, tmp_path):
    t = _tune_run(runner, tmp_path, "blobs", {}, "CrossEntropyLoss", 96)
    hp = FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=6.0, epochs=6)
    check_length(t, hp)
    first = _length_record(tmp_path)
    again = _tune_run(runner, tmp_path, "blobs", {}, "CrossEntropyLoss", 96)
    assert check_length(again, hp) == hp
    assert _length_record(tmp_path).perfs == first.perfs
    assert again.misc.misc.compute.task_seconds.get("length", 0.0) == 0.0  # kept results, nothing run again


def test_the_length_check_is_a_decision_line_of_the_report_and_explains_the_epochs(runner, tmp_path):
    t = _tune_run(runner, tmp_path, "noisy_few", {"n_in": 16, "n_hidden": 256, "n_out": 1}, "MSELoss", 160)
    t.misc.record(schedule=_schedule_step(30))
    hp = check_length(t, FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=8, cycle_size_epochs=30.0,
                                              epochs=30))
    _, line, schedule = _report_lines(tmp_path, hp)
    assert f"30 -> {hp.epochs} epochs" in line and "held-out perf fell" in line
    assert "the length check cut the planned 30" in schedule


def _schedule_step(epochs):
    from ignite_seg.storage.schemas import ScheduleStep

    return ScheduleStep(epochs=epochs, cycle_size_epochs=float(epochs), cycles=1, train_examples=4800, n_train=160)


def test_tune_says_when_the_length_check_cut_the_epochs(tmp_path):
    import ignite_seg

    settings = dataclasses.replace(get_preset("fastest"), length_runs=2)  # 100 epochs on 160 items
    res = ignite_seg.tune(("tasks", "mlp", (), {"n_in": 16, "n_hidden": 256, "n_out": 1}), ("tasks", "noisy_few", (), {}),
                          ("torch.nn", "MSELoss", (), {}), folder=tmp_path / "t", hyperparameters=settings,
                          accuracy_style="inv-loss", cores=2, seed=0)
    g = _length_record(tmp_path / "t")
    assert g.cut and res.epochs_planned == 100 and res.hyperparameters.epochs == g.epochs < 100
    assert f"{g.epochs} epochs (the length check cut 100" in str(res)
    assert json.loads((tmp_path / "t" / "hparams" / "final.json").read_text())["epochs"] == g.epochs


def test_a_length_run_trains_as_a_trial_with_every_option_of_the_recipe():
    # AdamW, warmup then cosine, clipping and EMA, run in this process: it scores every epoch, ends completed, and
    # the same task gives the same curve
    from ignite_seg.engine.length_run import LengthTask, run_length
    from ignite_seg.engine.sweeps import RecipeSpec

    rec = RecipeSpec(model=normalize_spec(("tasks", "mlp", (), {}), "m"),
                     dataset=normalize_spec(("tasks", "blobs", (), {}), "d"),
                     loss=normalize_spec(("torch.nn", "CrossEntropyLoss", (), {}), "l"), accuracy_style="classification",
                     holdout=tuple(range(0, 96, 8)), device="cpu")
    hp = FixedHyperparameters(lr_start=1e-3, lr_end=1e-2, batch_size=16, cycle_size_epochs=6.0, epochs=6,
                              optimizer="adamw", weight_decay=0.01, schedule="cosine", warmup_epochs=1.0,
                              grad_clip_norm=1.0, ema_decay=0.9)
    task = LengthTask(0, rec, hp, seed=5, stop_rel_tol=0.02, stop_steps=2, stop_patience=3)
    a, b = run_length(task), run_length(task)
    assert a.error is None and a.status == "completed" and a.epochs == 6 and a.abs_tol == pytest.approx(2 / 12)
    assert a.arrays["perfs"].shape == a.arrays["losses"].shape == (6,) and np.isfinite(a.arrays["losses"]).all()
    assert a.examples == 6 * 84  # 84 items trained on, 6 epochs (each epoch's last batch is short: counted as it is)
    np.testing.assert_array_equal(a.arrays["losses"], b.arrays["losses"])


def test_a_length_run_whose_user_code_raises_returns_the_traceback_and_its_seconds():
    from ignite_seg.engine.length_run import LengthTask, run_length
    from ignite_seg.engine.sweeps import RecipeSpec

    rec = RecipeSpec(model=normalize_spec(("tasks", "mlp", (), {}), "m"),
                     dataset=normalize_spec(("tasks", "no_such_dataset", (), {}), "d"),
                     loss=normalize_spec(("torch.nn", "CrossEntropyLoss", (), {}), "l"), accuracy_style="classification",
                     holdout=(0, 1), device="cpu")
    hp = FixedHyperparameters(lr_start=1e-3, lr_end=1e-2, batch_size=16, cycle_size_epochs=2.0, epochs=2)
    r = run_length(LengthTask(0, rec, hp, seed=5, stop_rel_tol=0.02, stop_steps=2, stop_patience=3))
    assert r.status == "failed" and r.epochs == 0 and r.seconds > 0
    assert "no_such_dataset" in r.error and r.error.startswith("Traceback")


@pytest.mark.parametrize("bad", [1.0, -0.1, 1.5])
def test_length_short_outside_0_to_1_is_refused_with_the_fix(bad):
    from ignite_seg.exceptions import ConfigError

    with pytest.raises(ConfigError, match=r"length_short.*1/3"):
        dataclasses.replace(get_preset("fast"), length_short=bad)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_length_short_runs_below_1_or_not_an_int_is_refused(bad):
    from ignite_seg.exceptions import ConfigError

    with pytest.raises(ConfigError, match="length_short_runs"):
        dataclasses.replace(get_preset("fast"), length_short_runs=bad)


def _report_lines(tmp_path, hp):
    """The folder's misc.json, and its report's length-check and schedule lines."""
    from ignite_seg.analysis.text import TunerFiles, render_markdown, summary_info

    misc = json.loads((tmp_path / "hparams" / MISC_JSON).read_text())
    md = render_markdown(summary_info({"hp_kind": "tuned"}, hp.to_dict(), None, [], TunerFiles(misc=misc))).splitlines()
    return misc, next(ln for ln in md if ln.startswith("- **length check**")), next(
        ln for ln in md if ln.startswith("- **schedule**"))
