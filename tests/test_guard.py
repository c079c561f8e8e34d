"""The recipe check (tuning/guard.py): known verdicts, the schedule's shape, real short runs that back off."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ignite_seg import FixedHyperparameters, TuningError, get_preset
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.guard_run import compressed
from ignite_seg.engine.schedules import simulate_lrs
from ignite_seg.runtime.tasks import TaskRunner
from ignite_seg.storage.run_folder import RunFolder
from ignite_seg.storage.schemas import MISC_JSON, MiscFile
from ignite_seg.tuning.guard import (
    GUARD_BACKOFF,
    GUARD_MAX_BACKOFFS,
    GUARD_MIN_STEPS,
    GUARD_STEPS,
    guard_recipe,
    guard_steps,
    judge,
)
from ignite_seg.tuning.recipe import _start
from ignite_seg.tuning.schedule import schedule_lrs


def test_judge_known_verdicts():
    assert judge([2.3, 2.3], [1.0, 1.2]).passed
    assert not judge([2.3, 2.3], [2.29, 2.28]).passed  # fell, but by less than the 2% margin
    assert "did not fall enough" in judge([2.3, 2.3], [2.29, 2.28]).reason
    rose = judge([2.3, 2.3], [2.3, 40.0])  # issue 25's trials: train loss ~40 from 2.3
    assert not rose.passed and "rose" in rose.reason
    assert not judge([2.3, 2.3], [0.1, math.nan]).passed  # one repeat diverged: fails whatever the mean
    assert "diverged" in judge([2.3, 2.3], [0.1, math.inf]).reason
    assert not judge([math.nan, 2.3], [0.1, 0.1]).passed


def test_guard_steps_are_a_quarter_of_the_trial_within_bounds():
    assert guard_steps(10) == GUARD_MIN_STEPS
    assert guard_steps(400) == 100
    assert guard_steps(10**6) == GUARD_STEPS


@pytest.mark.parametrize("schedule", ["triangular", "cosine", "one-cycle", "inv-sqrt"])
def test_the_short_run_has_the_trials_schedule_shape(schedule):
    hp = FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=16, cycle_size_epochs=10.0, epochs=20,
                              schedule=schedule, warmup_epochs=2.0)
    full = simulate_lrs(hp, 50)  # 1000 steps
    short = simulate_lrs(compressed(hp), 100)  # the same shape in 100 steps
    assert short.size == 100
    # the same LR at the same fraction of the run (the warmup's end, the peak, the decay), within a short step
    assert np.abs(short - full[::10]).max() <= 1.01 * np.abs(np.diff(short)).max()
    assert short.max() == pytest.approx(full.max(), rel=0.02)


def test_peak_first_schedules_peak_inside_the_range():
    assert schedule_lrs("triangular", 0.01, 0.1)[:2] == (0.01, 0.1)
    assert schedule_lrs("triangular", 0.01, 0.1).peak_at is None  # it cycles over the range
    for name in ("cosine", "one-cycle", "constant"):
        lrs = schedule_lrs(name, 0.01, 0.1)
        assert lrs.lr_end == pytest.approx(10**-1.5) and "geometric centre" in lrs.mapping and lrs.peak_at == "centre"
        # a decay ends at least a decade below its peak: a range a decade wide is not enough for it
        assert lrs.lr_start == (pytest.approx(10**-2.5) if name == "cosine" else 0.01)
    # inverse-sqrt leaves its peak at once: its peak is the top, and it decays a decade to the bottom
    inv = schedule_lrs("inv-sqrt", 0.01, 0.1)
    assert inv[:2] == (0.01, 0.1) and "the tuned range's top" in inv.mapping and not inv.lifted and inv.peak_at == "top"
    assert schedule_lrs("inv-sqrt", 0.01, 0.032)[:2] == (pytest.approx(0.0032), 0.032)  # narrow: a decade below
    assert schedule_lrs("cosine", 1e-4, 0.1).lr_start == 1e-4  # a range wider than two decades: its bottom
    with pytest.raises(ValueError, match="lr_min"):
        schedule_lrs("cosine", 0.1, 0.01)


def test_a_peak_first_peak_is_lifted_towards_a_decade_below_the_divergence():
    # a range that ends far below where the sweep diverged: the peak rises to a decade below it...
    lifted = schedule_lrs("cosine", 0.01, 0.1, diverged_lr=0.5)
    assert lifted.lr_end == pytest.approx(0.05) and lifted.lr_start == pytest.approx(0.005)
    assert "lifted to 10x below where the sweep diverged (0.05; the sweep diverged at 0.5)" in lifted.mapping
    # ... never above the range's top for an adaptive optimizer (or one not named) ...
    for optimizer in ("adamw", None):
        top = schedule_lrs("cosine", 0.01, 0.1, diverged_lr=5.0, optimizer=optimizer)
        assert top.lr_end == pytest.approx(0.1) and "lifted to the top (0.1" in top.mapping
        # inverse-sqrt's peak is the top already: nothing to lift
        inv = schedule_lrs("inv-sqrt", 0.01, 0.1, diverged_lr=5.0, optimizer=optimizer)
        assert inv.lr_end == pytest.approx(0.1) and not inv.lifted and "lifted" not in inv.mapping
    # SGD's inverse-sqrt is lifted from the top when a decade below the divergence lies above it
    inv = schedule_lrs("inv-sqrt", 0.01, 0.1, diverged_lr=5.0, optimizer="sgd")
    assert inv.lifted and inv.lr_end == pytest.approx(0.5) and "above the range's top" in inv.mapping
    assert inv.peak_at == "top" and lifted.peak_at == "centre"  # where the lift started
    assert not schedule_lrs("inv-sqrt", 0.01, 0.1, diverged_lr=0.5, optimizer="sgd").lifted  # 0.05: below the top
    # ... while SGD's goes on to a decade below the divergence (its best peak tracks it), and decays a decade
    sgd = schedule_lrs("cosine", 0.01, 0.1, diverged_lr=5.0, optimizer="sgd")
    assert sgd.lifted and sgd.lr_end == pytest.approx(0.5) and sgd.lr_start == pytest.approx(0.01)
    assert "lifted to 10x below where the sweep diverged, above the range's top (SGD's best peak tracks its " \
        "divergence) (0.5; the sweep diverged at 5)" in sgd.mapping
    assert schedule_lrs("cosine", 0.01, 0.1, diverged_lr=0.5, optimizer="sgd").lr_end == pytest.approx(0.05)
    # a decade below the divergence lies under the centre, or no repeat diverged: the centre
    for diverged in (0.2, None, float("nan")):
        lrs = schedule_lrs("cosine", 0.01, 0.1, diverged_lr=diverged)
        assert lrs.lr_end == pytest.approx(10**-1.5) and "lifted" not in lrs.mapping and not lrs.lifted
    # a schedule that holds its peak keeps the centre
    assert schedule_lrs("constant", 0.01, 0.1, diverged_lr=5.0, optimizer="sgd").lr_end == pytest.approx(10**-1.5)
    # one-cycle anneals its peak away on its way down: lifted as a decay is, and starts (ends / 100) at the bottom
    one = schedule_lrs("one-cycle", 0.01, 0.1, diverged_lr=0.5, optimizer="adamw")
    assert one.lifted and one.lr_end == pytest.approx(0.05) and one.lr_start == 0.01
    assert schedule_lrs("one-cycle", 0.01, 0.1, diverged_lr=5.0, optimizer="adamw").lr_end == pytest.approx(0.1)
    # cycles over the whole range
    assert schedule_lrs("triangular", 0.01, 0.1, diverged_lr=5.0, optimizer="sgd")[:2] == (0.01, 0.1)


# -- real short runs in worker processes ----------------------------------------------------------
def _tune_run(runner, tmp_path, dataset, model, loss):
    specs = {"model": normalize_spec(("tasks", model, (), {}), "model_loader"),
             "dataset": normalize_spec(("tasks", dataset, (), {}), "dataset_loader"),
             "loss": normalize_spec(("torch.nn", loss, (), {}), "loss_loader")}
    style = "classification" if loss == "CrossEntropyLoss" else "inv-loss"
    return _start(runner, RunFolder(tmp_path), get_preset("fastest"), specs, style, 96, 0, "cpu")


@pytest.fixture(scope="module")
def runner():
    with TaskRunner(2) as r:
        yield r


def _guard_record(tmp_path):
    return MiscFile.from_json(json.loads((tmp_path / "hparams" / MISC_JSON).read_text()), strict=True).steps.guard


def test_a_good_recipe_passes_unchanged(runner, tmp_path):
    t = _tune_run(runner, tmp_path, "blobs", "mlp", "CrossEntropyLoss")
    hp = FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=5.0, epochs=5)
    assert guard_recipe(t, hp) == hp
    g = _guard_record(tmp_path)
    assert g.backoffs == 0 and not g.fallback and len(g.attempts) == 1 and g.attempts[0].passed
    assert g.decided_by == "the tuned recipe passed unchanged" and g.lr_end == 0.5
    assert g.attempts[0].end_loss[0] < g.attempts[0].start_loss[0]


def test_a_recipe_whose_range_is_too_high_backs_off_and_says_so(runner, tmp_path, caplog):
    # linear least squares on unit-variance inputs: plain SGD diverges above lr ~0.8 (2 / the Hessian's top
    # eigenvalue ~2.4); the tuned range 3 -> 10 must come down at least two half-decades, to a peak <= 1
    t = _tune_run(runner, tmp_path, "regression", "linear", "MSELoss")
    hp = FixedHyperparameters(lr_start=3.0, lr_end=10.0, batch_size=16, cycle_size_epochs=5.0, epochs=5)
    with caplog.at_level("WARNING", logger="ignite_seg"):
        got = guard_recipe(t, hp)
    g = _guard_record(tmp_path)
    assert g.backoffs >= 2 and not g.fallback and got.lr_end <= 1.0
    assert got.lr_end == pytest.approx(10.0 / GUARD_BACKOFF**g.backoffs)
    assert got.lr_end / got.lr_start == pytest.approx(10.0 / 3.0)
    assert not g.attempts[0].passed and g.attempts[-1].passed and len(g.attempts) == g.backoffs + 1
    assert "backed off" in g.decided_by
    assert any("backed off" in r.getMessage() for r in caplog.records)


def test_a_recipe_that_diverges_at_every_back_off_raises_a_tuning_error(runner, tmp_path):
    t = _tune_run(runner, tmp_path, "regression", "linear", "MSELoss")
    hp = FixedHyperparameters(lr_start=1e4, lr_end=1e5, batch_size=16, cycle_size_epochs=5.0, epochs=5)
    with pytest.raises(TuningError, match="diverged in a .*lower lr_start"):
        guard_recipe(t, hp)
    g = _guard_record(tmp_path)
    assert len(g.attempts) == GUARD_MAX_BACKOFFS + 1 and not any(a.passed for a in g.attempts)


# -- the report: trials whose train loss rose, the recipe check's line ------------------------------
def test_a_trial_whose_train_loss_rose_is_flagged_in_the_caller_log_and_the_summary(caplog):
    from ignite_seg.analysis.outcomes import loss_rise
    from ignite_seg.analysis.text import render_markdown, summary_info, summary_json
    from ignite_seg.engine.trainer import TrialOutcome
    from ignite_seg.run_plan import log_trial
    from ignite_seg.storage.records import TrialResult

    assert loss_rise([2.3, np.nan, 40.0]) == (2.3, 40.0) and loss_rise([2.3, 2.3]) is None and loss_rise([1.0]) is None
    bad = TrialOutcome(TrialResult(trial_id=3, status="completed", seconds=1.0, started_at=0.0, pid=1),
                       throughtime={"losses_train": np.array([2.3, 9.0, 40.0])})
    good = TrialOutcome(TrialResult(trial_id=4, status="completed", seconds=1.0, started_at=0.0, pid=1),
                        throughtime={"losses_train": np.array([2.3, 0.5, 0.1])})
    with caplog.at_level("WARNING", logger="ignite_seg"):
        log_trial(bad)
        log_trial(good)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "trial 3" in warned[0] and "2.3 -> 40" in warned[0]

    tt = {"trial_ids": np.array([3, 4]), "losses_train": np.array([[2.3, 9.0, 40.0], [2.3, 0.5, 0.1]])}
    info = summary_info({"accuracy_style": "classification"}, {}, None, [], throughtimes=tt)
    md = render_markdown(info)
    assert "train loss rose" in md and "trial 3: 2.3 -> 40" in md and "trial 4" not in md.split("train loss rose")[1][:80]
    assert summary_json(info)["trials"]["train_loss_rose"] == [{"trial_id": 3, "first": 2.3, "last": 40.0}]
    assert "train loss rose" not in render_markdown(summary_info({}, {}, None, [], throughtimes=None))


def test_a_trial_that_learned_nothing_from_its_inputs_is_flagged_in_the_caller_log_and_the_summary(caplog):
    """Real trials: every input zero (the best constant output is all a network can learn) ends at that constant's
    loss, which result.json holds (the class shares' entropy on the 48-item training subset: the whole training set);
    the same labels with their inputs learn far below it. Neither rose above its start."""
    from helpers import CE, trial_task

    from ignite_seg.analysis.outcomes import ended_at_constant
    from ignite_seg.analysis.text import render_markdown, summary_info, summary_json
    from ignite_seg.engine.trainer import run_trial
    from ignite_seg.run_plan import log_trial

    hp = FixedHyperparameters(lr_start=0.1, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=4)
    outcomes = []
    for tid, data in enumerate(("blank_inputs", "blobs")):
        specs = [normalize_spec(s, n) for n, s in (("model", ("tasks", "mlp", (), {})),
                                                   ("dataset", ("tasks", data, (), {"n_train": 48, "n_val": 48})),
                                                   ("loss", CE))]
        outcomes.append(run_trial(trial_task(tid, *specs, hp, "classification", seed=0, device="cpu")))
    blank, learned = outcomes
    import tasks  # noqa: PLC0415
    shares = np.bincount(tasks.blobs(48, 48)[0].tensors[1].numpy(), minlength=3) / 48
    entropy = float(-(shares * np.log(shares)).sum())
    assert blank.result.constant_loss_train == pytest.approx(entropy, abs=1e-4)
    assert learned.result.constant_loss_train == pytest.approx(entropy, abs=1e-4)  # the same labels
    assert blank.throughtime["losses_train"][-1] < blank.throughtime["losses_train"][0]  # not a rise
    lowest, _epoch, last = ended_at_constant(blank.throughtime["epochs"], blank.throughtime["losses_train"], entropy)
    assert last == pytest.approx(entropy, rel=0.02) and lowest >= entropy * 0.98
    assert ended_at_constant(learned.throughtime["epochs"], learned.throughtime["losses_train"], entropy) is None
    with caplog.at_level("WARNING", logger="ignite_seg"):
        for o in outcomes:
            log_trial(o)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "trial 0" in warned[0] and "learned nothing from its inputs" in warned[0]

    tt = {"trial_ids": np.array([0, 1]), "epochs": blank.throughtime["epochs"],
          "losses_train": np.stack([o.throughtime["losses_train"] for o in outcomes])}
    info = summary_info({"accuracy_style": "classification"}, {}, None, [o.result.to_json() for o in outcomes],
                        throughtimes=tt)
    md = render_markdown(info)
    assert "learned nothing from the inputs**: 1 trial(s)" in md and "trial 0: " in md and "trial 1: " not in md
    assert [d["trial_id"] for d in summary_json(info)["trials"]["train_loss_at_constant"]] == [0]
    # an older folder's records hold no constant: nothing is said
    old = [{k: v for k, v in o.result.to_json().items() if k != "constant_loss_train"} for o in outcomes]
    assert "learned nothing" not in render_markdown(summary_info({}, {}, None, old, throughtimes=tt))


def test_a_run_whose_inputs_are_blank_says_so_in_its_report_and_draws_the_constant_on_its_loss_panel(tmp_path):
    """End to end (train(), 2 trials in workers, the folder analysed): summary.md's warning, summary.json's list,
    each result.json's constant and the through-time figure's line at their median."""
    import json

    from helpers import CE

    import ignite_seg
    from ignite_seg.analysis import extract
    from ignite_seg.analysis.snapshot import Snapshot

    hp = FixedHyperparameters(lr_start=0.1, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=4)
    folder = tmp_path / "run"
    ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blank_inputs", (), {}), CE, folder=folder,
                     hyperparameters=hp, analysis="text", trials=2, cores=2, seed=0)
    constants = [json.loads((folder / "trials" / str(t) / "result.json").read_text())["constant_loss_train"]
                 for t in (0, 1)]
    assert all(0.9 < c < 1.1 for c in constants)  # near ln 3 (3 classes, 48 items)
    assert "learned nothing from the inputs**: 2 trial(s)" in (folder / "analysis" / "summary.md").read_text()
    listed = json.loads((folder / "analysis" / "summary.json").read_text())["trials"]["train_loss_at_constant"]
    assert [d["trial_id"] for d in listed] == [0, 1]
    info = extract.throughtime_of(Snapshot(str(folder)))
    assert info.constant_train == pytest.approx(float(np.median(constants)))


def test_a_trial_that_learned_and_then_lost_it_all_says_how_low_it_had_been():
    """A spike that undid training (smooth_digits, plain SGD: ~0.05 back to 2.30): the line names the lowest loss; a
    trial whose loss rose above its start is a Rise, not this."""
    from ignite_seg.analysis.outcomes import Dead, dead_lines, ended_at_constant

    e = np.arange(7.0)
    assert ended_at_constant(e, [2.35, 1.0, 0.05, 0.06, 9.0, 2.31, 2.302], 2.303) == (0.05, 2.0, 2.302)
    assert ended_at_constant(e, [2.35, 1.0, 0.05, 0.06, 9.0, 2.31, 2.36], 2.303) is None  # rose: loss_rise's
    assert ended_at_constant(e, [2.35, 1.0, 0.05, 0.06, 0.05, 0.1, 2.25], 2.303) is None  # 2.3% below it
    assert ended_at_constant(e, [2.35, 2.30], None) is None and ended_at_constant(e, [2.30], 2.3) is None
    line = dead_lines([Dead(2, 2.303, 0.05, 2.0, 2.302), Dead(5, 2.303, 2.29, 6.0, 2.30)])[0]
    assert "trial 2: 2.302 (constant 2.303; it had reached 0.05 at epoch 2)" in line
    assert "trial 5: 2.3 (constant 2.303)" in line
    assert "those that had learned lost it: a loss spike" in line and "those that never got clearly below it" in line
    assert "they had learned and lost it" in dead_lines([Dead(2, 2.303, 0.05, 2.0, 2.302)])[0]


def test_a_trial_whose_val_perf_peaked_early_is_flagged_in_the_caller_log_and_the_summary(caplog):
    """Overfitting (session 13: the tuned diabetes trials peaked at epoch ~19 of 100, 0.70 -> 0.64): flagged; a
    run still improving, one that dips mid-run and recovers, and one within the tolerance are not."""
    from ignite_seg.analysis.outcomes import PEAK_TOL, val_peak
    from ignite_seg.analysis.text import render_markdown, summary_info, summary_json
    from ignite_seg.engine.trainer import TrialOutcome
    from ignite_seg.run_plan import log_trial
    from ignite_seg.storage.records import TrialResult

    e = np.linspace(0.1, 100, 1000)
    overfit = 0.70 - 0.0008 * np.abs(e - 19)  # best 0.70 at 19, 0.635 at the end
    improving = 0.70 - 0.3 / e
    recovers = 0.70 - 0.1 * np.exp(-((e - 50) / 5) ** 2)  # a dip at the cycle's LR peak
    flat_end = 0.70 - (PEAK_TOL / 2) * 0.70 * (e > 19)  # ends below, but within the tolerance
    best_epoch, best, last_epoch, last = val_peak(e, overfit)
    assert abs(best_epoch - 19) < 1 and abs(best - 0.70) < 0.002 and last_epoch == 100 and abs(last - 0.636) < 0.002
    assert val_peak(e, improving) is None and val_peak(e, recovers) is None and val_peak(e, flat_end) is None
    assert val_peak(e, np.where(e > 50, np.nan, overfit)) is not None  # NaN tail (a shorter trial): the finite part
    assert val_peak(e[:4], overfit[:4]) is None  # too few snapshots to say

    def outcome(tid, perfs):
        return TrialOutcome(TrialResult(trial_id=tid, status="completed", seconds=1.0, started_at=0.0, pid=1),
                            throughtime={"epochs": e, "perfs_val": perfs, "losses_train": np.linspace(2, 1, e.size)})

    with caplog.at_level("WARNING", logger="ignite_seg"):
        log_trial(outcome(5, overfit))
        log_trial(outcome(6, improving))
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "trial 5" in warned[0] and "peaked at epoch 19" in warned[0] and "fewer epochs" in warned[0]

    tt = {"trial_ids": np.array([5, 6]), "epochs": e, "perfs_val": np.stack([overfit, improving])}
    info = summary_info({"accuracy_style": "classification"}, {}, None, [], throughtimes=tt)
    md = render_markdown(info)
    assert "peaked early" in md and "trial 5: 0.699 at epoch 19 -> 0.6372 at 100" in md and "trial 6" not in md.split("peaked early")[1]
    flagged = summary_json(info)["trials"]["val_perf_peaked_early"]
    assert [p["trial_id"] for p in flagged] == [5] and abs(flagged[0]["best_epoch"] - 19) < 1
    assert "peaked early" not in render_markdown(summary_info({}, {}, None, [], throughtimes=None))


def test_the_recipe_check_is_a_decision_line_of_the_report(runner, tmp_path):
    from ignite_seg.analysis.text import render_markdown, summary_info

    t = _tune_run(runner, tmp_path, "regression", "linear", "MSELoss")
    guard_recipe(t, FixedHyperparameters(lr_start=3.0, lr_end=10.0, batch_size=16, cycle_size_epochs=5.0, epochs=5))
    misc = json.loads((tmp_path / "hparams" / MISC_JSON).read_text())
    md = render_markdown(summary_info({}, {}, None, [], tuner_misc(misc)))
    line = next(ln for ln in md.splitlines() if ln.startswith("- **recipe check**"))
    assert "backed off" in line and "held-out loss fell" in line


def tuner_misc(misc):
    from ignite_seg.analysis.text import TunerFiles

    return TunerFiles(misc=misc)


def test_the_report_says_when_the_plateau_rule_moved_the_range():
    from ignite_seg.analysis.text import TunerFiles, render_markdown, summary_info

    lrs = np.geomspace(1e-4, 10, 50)
    lr = {"lrs": lrs, "losses": np.exp(-lrs)[None, :], "lr_range": np.array([0.0018, 0.0056]),
          "diverged_lr": np.array([0.03])}
    step = {"lr_min": 0.0018, "lr_max": 0.0056, "plateau_lr": [0.00053, 0.0056], "plateau_perf": [0.519, 0.489]}
    misc = {"steps": {"lr_range": step}}
    hp = {"lr_start": 0.0009, "lr_end": 0.0028}
    md = render_markdown(summary_info({}, hp, None, [], TunerFiles(misc=misc, lr=lr)))
    assert "floor from lr 0.00053 to 0.0056" in md and "(0.519 at the start, 0.489 on the floor)" in md
    assert "chosen range [0.0018, 0.0056]: the top of the floor" in md and "steepest sustained" not in md
    step["plateau_lr"] = step["plateau_perf"] = None
    assert "plateau rule" not in render_markdown(summary_info({}, hp, None, [], TunerFiles(misc=misc, lr=lr)))


def test_the_report_says_when_the_window_moved_below_the_settled_loss():
    from ignite_seg.analysis.text import TunerFiles, render_markdown, summary_info

    lrs = np.geomspace(1e-4, 10, 50)
    lr = {"lrs": lrs, "losses": np.exp(-lrs)[None, :], "lr_range": np.array([0.007, 0.064]),
          "diverged_lr": np.array([np.nan])}
    misc = {"steps": {"lr_range": {"lr_min": 0.007, "lr_max": 0.064, "settled_lr": 0.069}}}
    md = render_markdown(summary_info({}, {"lr_start": 0.007, "lr_end": 0.064}, None, [], TunerFiles(misc=misc, lr=lr)))
    assert "the loss at its floor by lr 0.069" in md and "no repeat diverged" in md
    misc["steps"]["lr_range"]["settled_lr"] = None
    assert "at its floor" not in render_markdown(summary_info({}, {"lr_start": 0.007, "lr_end": 0.064}, None, [], TunerFiles(misc=misc, lr=lr)))


def test_a_schedule_that_holds_its_peak_gets_the_quiet_top_rule_and_no_warning(caplog):
    """The plateau rule's range at the top of a floor at the best constant output's loss, next to the divergence, left
    a constant schedule training below the untuned default (the adding problem, bench/RESULTS.md session 25); since
    session 26 the tuner's rule ends such a range at the floor's quiet top for the schedules that hold their peak
    (tests/test_lr_plateau.py has the curves), and the recipe says nothing more about it."""
    import dataclasses
    from types import SimpleNamespace

    from ignite_seg.tuning import recipe
    from ignite_seg.tuning.lr_range import RangeRule

    for schedule, top in (("constant", "quiet"), ("cosine", "floor"), ("one-cycle", "floor"), ("triangular", "floor"),
                          ("inv-sqrt", "floor")):
        s = dataclasses.replace(get_preset("fast"), optimizer="adamw", schedule=schedule, warmup_epochs=0.0)
        rule = RangeRule.from_settings(s, 21)
        assert rule.plateau_top == top and rule.window == 21 and rule.steep_frac == s.lr_steep_frac
        assert rule.flat_floor and not RangeRule.from_settings(dataclasses.replace(s, optimizer="sgd"), 21).flat_floor
        recorded: dict = {}
        t = SimpleNamespace(s=s, n_train=1800, misc=SimpleNamespace(record=recorded.update))
        caplog.clear()
        recipe._schedule(t, recipe._FinalRange(0.77, 2.45, "swept at batch size 8", 0.97), 8)
        assert recorded["schedule"].lr_how == "swept at batch size 8"
        assert not any(r.levelname == "WARNING" for r in caplog.records)
        # on a range that ends at a trivial floor's quiet top, a held peak is that top; the others are unmoved
        step = recorded["schedule"]
        recipe._schedule(t, recipe._FinalRange(0.77, 2.45, "swept at batch size 8", 0.97, True), 8)
        quiet = recorded["schedule"]
        if schedule == "constant":
            assert (quiet.lr_end, quiet.peak_at) == (2.45, "quiet top") and step.lr_end == pytest.approx(
                (0.77 * 2.45) ** 0.5)
            assert "the peak (lr_end) is that top" in quiet.mapping
        else:
            assert (quiet.lr_end, quiet.peak_at) == (step.lr_end, step.peak_at)
