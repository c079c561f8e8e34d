"""The tuner end to end: real worker processes, real ignite engines, the files it writes."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import ignite_seg
from ignite_seg import ConfigError, HyperparameterSettings, TuningError, get_preset
from ignite_seg.config.hyperparameters import RecipeOptions, TrainingOptions
from ignite_seg.config.specs import normalize_spec
from ignite_seg.runtime.tasks import TaskRunner
from ignite_seg.storage.run_folder import RunFolder
from ignite_seg.tuning.batch_search import centre_batch, scale_lr
from ignite_seg.tuning.recipe import choose_recipe

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})
CE = ("torch.nn", "CrossEntropyLoss", (), {})

LR_KEYS = {"lrs", "losses", "perfs", "losses_smoothed", "perfs_smoothed", "loss_deriv", "perf_deriv", "lr_range",
           "diverged_lr"}
BS_KEYS = {"bss", "perfs", "perfs_smoothed", "bs_range", "noise_scale", "noise_scale_lrs", "noise_scale_values"}
SAMPLED_KEYS = {"bss", "scores", "budget_epochs", "chosen", "losses"}
FINAL_KEYS = {"lr_start", "lr_end", "batch_size", "cycle_size_epochs", "epochs", "optimizer", "momentum",
              "weight_decay", "grad_clip_norm"}

#: small and quick: a short sweep, three candidates, two repeats, a rescan
SMALL = dataclasses.replace(
    get_preset("fast"), lr_min_inits=2, lr_sweep_min_iters=120, lr_sweep_len=2.0, initial_batch_size=16, batch_start=8,
    batch_end=64, batch_pts=3, batch_rn_min_inits=2, batch_sweep_len=2.0, rescan_lr_after_bs=True,
    max_epochs=8, lr_end=30.0,
)


def strict_json(path: Path):
    def no_constants(name):
        raise AssertionError(f"{path.name} holds {name}: not strict JSON")

    return json.loads(path.read_text(), parse_constant=no_constants)


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def runner():
    with TaskRunner(2) as r:
        yield r


def specs(dataset=BLOBS, model=MLP):
    return {"model": normalize_spec(model, "model_loader"), "dataset": normalize_spec(dataset, "dataset_loader"),
            "loss": normalize_spec(CE, "loss_loader")}


def check_lr_file(z, settings, repeats):
    assert LR_KEYS <= set(z)
    p = z["lrs"].size
    assert z["lrs"][0] == pytest.approx(settings.lr_start) and np.all(np.diff(z["lrs"]) > 0)
    for k in ("losses", "perfs", "losses_smoothed", "perfs_smoothed", "holdout_losses", "holdout_losses_smoothed"):
        assert z[k].shape == (repeats, p), k
    # the curve the range was chosen on; the held-out curves stop where the training loss stopped
    assert str(z["choice_curve"]) == ("holdout_losses" if settings.lr_choose_on == "holdout" else "losses")
    assert not (np.isfinite(z["holdout_losses_smoothed"]) & ~np.isfinite(z["losses"])).any()
    assert z["loss_deriv"].shape == z["perf_deriv"].shape == (p,)
    assert z["diverged_lr"].shape == (repeats,)
    lo, hi = z["lr_range"]
    assert settings.lr_start <= lo < hi <= settings.lr_end
    # the losses were recorded per iteration: finite up to where each repeat stopped, NaN after
    for r in range(repeats):
        finite = np.isfinite(z["losses"][r])
        n = int(finite.sum())
        assert n > 10 and finite[:n].all() and not finite[n:].any()
        if math.isfinite(z["diverged_lr"][r]):
            assert z["diverged_lr"][r] == pytest.approx(z["lrs"][n - 1])


def test_train_fastest_writes_every_file_and_trains_with_the_choice(tmp_path):
    res = ignite_seg.train(MLP, BLOBS, CE, folder=tmp_path / "run", hyperparameters="fastest", analysis="none",
                           trials=2, cores=2, seed=3, snapshots_per_epoch=1)
    hp_dir = tmp_path / "run" / "hparams"
    final = strict_json(hp_dir / "final.json")
    assert FINAL_KEYS <= set(final)
    assert ignite_seg.FixedHyperparameters.from_dict(final) == res.hyperparameters
    misc = strict_json(hp_dir / "misc.json")
    assert misc["state"] == "complete" and misc["holdout_from"] == "training set"
    assert {"lr_range", "batch_size", "schedule"} <= set(misc["steps"])
    s = get_preset("fastest")
    lr = load(hp_dir / "lr_vs_perf.npz")
    check_lr_file(lr, s, s.lr_min_inits)
    bs = load(hp_dir / "bs_vs_perf.npz")
    assert BS_KEYS <= set(bs) and bs["bss"].shape == (0,) and bs["noise_scale"].shape == ()
    assert bs["noise_scale_lrs"].shape == bs["noise_scale_values"].shape and bs["noise_scale_lrs"].size > 10
    sampled = load(hp_dir / "bs_sampled.npz")
    assert SAMPLED_KEYS <= set(sampled) and sampled["bss"].size == 0 and int(sampled["chosen"]) == final["batch_size"]
    # fastest: the batch size is the grid point nearest a fraction of the noise scale; LR scaled from the sweep's batch size
    assert final["batch_size"] == centre_batch(
        float(bs["noise_scale"]) * s.noise_batch_frac, s.batch_start, s.batch_end, s.batch_step, fallback=s.initial_batch_size)
    b, b0 = final["batch_size"], s.initial_batch_size
    assert final["lr_start"] == pytest.approx(scale_lr(lr["lr_range"][0], b, b0))
    assert final["lr_end"] == pytest.approx(scale_lr(lr["lr_range"][1], b, b0))
    assert len(res.completed) == 2 and min(t.perf_val for t in res.completed) > 0.8
    run = strict_json(tmp_path / "run" / "run.json")
    assert run["hyperparameters"]["kind"] == "tuned" and run["hyperparameters"]["batch_pts"] == 0


def test_train_custom_settings_search_and_rescan(tmp_path):
    res = ignite_seg.train(MLP, BLOBS, CE, folder=tmp_path / "run", hyperparameters=SMALL, analysis="none",
                           trials=1, trials_strict=True, cores=2, seed=5, snapshots_per_epoch=1)
    hp_dir = tmp_path / "run" / "hparams"
    final = strict_json(hp_dir / "final.json")
    sampled = load(hp_dir / "bs_sampled.npz")
    assert len(sampled["bss"]) == 3 and set(sampled["bss"].tolist()) <= {8, 16, 32, 64}
    assert sampled["scores"].shape == (2, 3) and sampled["budget_epochs"].shape == (3,)
    chosen = int(sampled["chosen"])
    assert chosen == final["batch_size"] == res.hyperparameters.batch_size and chosen in sampled["bss"]
    # successive halving: 3 candidates at 2 epochs, the best 2 at 4 epochs; the pruned one is NaN
    assert sorted(sampled["budget_epochs"].tolist()) == [2.0, 4.0, 4.0]
    pruned = sampled["budget_epochs"] == 2.0
    assert np.isnan(sampled["scores"][:, pruned]).all() and np.isfinite(sampled["scores"][:, ~pruned]).all()
    assert sampled["rung_scores"].shape == (2, 2, 3)
    bs = load(hp_dir / "bs_vs_perf.npz")
    assert bs["perfs"].shape == (2, 3) and np.isfinite(bs["perfs"]).all() and bs["perfs_smoothed"].shape == (3,)
    assert bs["bs_range"].tolist() == [int(sampled["bss"].min()), int(sampled["bss"].max())]
    lr = load(hp_dir / "lr_vs_perf.npz")
    misc = strict_json(hp_dir / "misc.json")
    if chosen == 16:  # the first sweep's own batch size: it measured that curve, no rescan
        assert not bool(lr["rescan"]) and int(lr["batch_size"]) == 16
        assert not (hp_dir / "lr_vs_perf_initial.npz").exists() and "lr_rescan" not in misc["steps"]
        assert misc["steps"]["schedule"]["lr_how"] == "swept at batch size 16, the chosen one"
    else:  # the rescan ran at the chosen batch size and its range is the one used, unscaled
        initial = load(hp_dir / "lr_vs_perf_initial.npz")
        assert bool(lr["rescan"]) and int(lr["batch_size"]) == chosen and int(initial["batch_size"]) == 16
        check_lr_file(initial, SMALL, 2)
        assert misc["steps"]["lr_rescan"]["pooled_repeats"] == 0 and misc["steps"]["lr_rescan"]["repeats_ok"] == 2
    check_lr_file(lr, SMALL, 2)
    assert [final["lr_start"], final["lr_end"]] == pytest.approx(lr["lr_range"].tolist())
    # where the used sweep first diverged is kept; the triangular schedule cycles over the range whatever it is
    used = misc["steps"]["lr_rescan" if bool(lr["rescan"]) else "lr_range"]
    cut = [c for c in used["cut_lr"] if c is not None and math.isfinite(c)]
    sched = misc["steps"]["schedule"]
    assert sched["diverged_lr"] == (pytest.approx(min(cut)) if cut else None)
    assert sched["peak_lifted"] is False
    assert {"lr_range", "batch_size", "schedule"} <= set(misc["steps"])
    assert misc["compute"]["examples"]["batch"] > 0 and misc["compute"]["total_task_seconds"] > 0
    assert final["epochs"] == SMALL.max_epochs  # 96 items: 30k examples would be 312 epochs, capped


def _range_choice_failing(monkeypatch, call: int, error: Exception) -> list[int]:
    """The tuner's range choice raising ``error`` at its ``call``-th use (counted in the returned list,
    which holds each sweep's number of points; clearing it restarts the count)."""
    import ignite_seg.tuning.recipe as recipe

    choose, calls = recipe.choose_lr_range, []

    def choice(*args, **kwargs):
        calls.append(len(args[0]))
        if len(calls) == call:
            raise error
        return choose(*args, **kwargs)

    monkeypatch.setattr(recipe, "choose_lr_range", choice)
    return calls


def test_a_rescan_that_cannot_choose_falls_back_to_the_first_range_scaled(runner, tmp_path, monkeypatch, caplog):
    """ignite-simple's fashion_mnist example: the first sweep chose a range, the batch runs trained with it,
    and the rescan at the chosen batch size saw too little improvement (1.8% < 2%): the first range,
    scaled to that batch size, is used (a WARNING and misc.json say so), not a TuningError."""
    calls = _range_choice_failing(monkeypatch, 2, TuningError(
        "the loss did not improve over the sweep lr 0.01 -> 30 (relative improvement 0.0183 < 0.02). Widen the sweep"))
    rf = RunFolder(tmp_path / "run")
    settings = dataclasses.replace(SMALL, batch_pts=2, batch_rn_min_inits=1, batch_start=32, batch_end=64)
    hp = choose_recipe(runner, rf, settings, specs(), accuracy_style="classification",
                       facts={"n_train": 96, "n_val": 48}, seed=3, device="cpu")
    assert len(calls) == 2 and hp.batch_size in (32, 64)
    first = load(rf.hparams / "lr_vs_perf.npz")  # the first sweep's file stays the one used
    assert not bool(first["rescan"]) and int(first["batch_size"]) == 16
    assert not (rf.hparams / "lr_vs_perf_initial.npz").exists()
    misc = strict_json(rf.hparams / "misc.json")
    lo, hi = misc["steps"]["lr_range"]["lr_min"], misc["steps"]["lr_range"]["lr_max"]
    sched = misc["steps"]["schedule"]
    assert [sched["range_min"], sched["range_max"]] == pytest.approx([scale_lr(lo, hp.batch_size, 16),
                                                                      scale_lr(hi, hp.batch_size, 16)])
    assert sched["lr_how"].startswith(f"the rescan at batch size {hp.batch_size} could not choose a range (the loss "
                                      "did not improve over the sweep lr 0.01 -> 30 (relative improvement 0.0183 < "
                                      f"0.02)); swept at batch size 16, scaled to {hp.batch_size}")
    assert "lr_rescan" not in misc["steps"]
    assert any("LR rescan: the rescan at batch size" in r.getMessage() for r in caplog.records)


def test_a_capped_first_sweep_too_flat_to_choose_on_runs_again_at_full_length(runner, tmp_path, monkeypatch):
    """ignite-simple's fashion_mnist CNN barely moved its loss in a 500-step sweep (1-4%, under the 2% the rule
    needs) though it learns in longer runs: a sweep cut short by lr_sweep_max_examples that cannot choose is
    run once more over its full lr_sweep_len epochs, and misc.json and the report say why."""
    from ignite_seg.tuning.lr_range import LossDidNotImprove

    calls = _range_choice_failing(monkeypatch, 1, LossDidNotImprove(
        "the loss did not improve over the sweep lr 0.01 -> 30 (relative improvement 0.0119 < 0.02). Widen the sweep"))
    rf = RunFolder(tmp_path / "run")
    # 96 items at batch 16: 6 steps an epoch; 40 epochs = 240 steps, capped at 960 examples -> the 120-step floor
    settings = dataclasses.replace(SMALL, lr_sweep_len=40.0, lr_sweep_max_examples=960, rescan_lr_after_bs=False,
                                   batch_pts=2, batch_rn_min_inits=1)
    choose_recipe(runner, rf, settings, specs(), accuracy_style="classification", facts={"n_train": 96, "n_val": 48},
                  seed=3, device="cpu")
    assert calls == [120, 240]
    step = strict_json(rf.hparams / "misc.json")["steps"]["lr_range"]
    assert step["iterations"] == 240 and step["capped_by_max_examples"] is False
    assert step["longer_after"] == ("the sweep of 120 iterations (capped by lr_sweep_max_examples=960) could not "
                                    "choose a range (the loss did not improve over the sweep lr 0.01 -> 30 (relative "
                                    "improvement 0.0119 < 0.02)); this one ran the full lr_sweep_len=40 epochs (240 "
                                    "iterations)")
    assert load(rf.hparams / "lr_vs_perf.npz")["lrs"].size == 240
    # an uncapped sweep that cannot choose still raises: nothing longer to try
    calls.clear()
    uncapped = dataclasses.replace(settings, lr_sweep_max_examples=None)
    with pytest.raises(TuningError, match="did not improve") as err:
        choose_recipe(runner, RunFolder(tmp_path / "other"), uncapped, specs(), accuracy_style="classification",
                      facts={"n_train": 96, "n_val": 48}, seed=3, device="cpu")
    assert calls == [240]
    # SGD is told what moves a deep network (an 8-layer ReLU MLP: at chance at every peak with plain SGD, session 19;
    # no fall over a whole sweep with momentum 0.9, session 22): plain SGD momentum or AdamW, momentum SGD AdamW
    assert "With plain SGD (no momentum)" in str(err.value) and "optimizer='adamw'" in str(err.value)
    calls.clear()
    with pytest.raises(TuningError, match="did not improve") as err:
        choose_recipe(runner, RunFolder(tmp_path / "third"), dataclasses.replace(uncapped, momentum=0.9), specs(),
                      accuracy_style="classification", facts={"n_train": 96, "n_val": 48}, seed=3, device="cpu")
    assert "plain SGD" not in str(err.value) and "momentum=0.9, a deep network" in str(err.value)
    assert str(err.value).endswith("optimizer='adamw', weight_decay=0.01).")
    calls.clear()
    with pytest.raises(TuningError, match="did not improve") as err:
        choose_recipe(runner, RunFolder(tmp_path / "fourth"), dataclasses.replace(uncapped, optimizer="adamw"), specs(),
                      accuracy_style="classification", facts={"n_train": 96, "n_val": 48}, seed=3, device="cpu")
    assert "SGD" not in str(err.value)


def test_a_capped_first_sweep_that_barely_learned_runs_again_longer_within_four_caps(runner, tmp_path, monkeypatch,
                                                                                    caplog):
    """Session 21's bag-of-words task under plain SGD: its 500 capped steps fell 2-4% and put the range's top at
    0.57-0.79 (val 0.84-0.95); over its full 6 epochs the ranges topped out at 1-1.8 (0.94-0.95). A capped sweep
    whose loss fell less than WEAK_SWEEP runs once more, over lr_sweep_len epochs but at most WEAK_SWEEP_LONGER
    caps (the tune's cost stays bounded); one that learned more is used as it is."""
    import ignite_seg.tuning.recipe as recipe
    from ignite_seg.tuning.recipe import WEAK_SWEEP, WEAK_SWEEP_LONGER

    choose, calls = recipe.choose_lr_range, []

    def weak_first(*args, **kwargs):  # the first sweep (a real one) reads as barely learned
        calls.append(len(args[0]))
        got = choose(*args, **kwargs)
        return dataclasses.replace(got, improvement=0.031) if len(calls) == 1 else got

    monkeypatch.setattr(recipe, "choose_lr_range", weak_first)
    # 96 items at batch 16: 6 steps an epoch; 80 epochs = 480 steps; capped at 960 examples -> the 120-step floor;
    # the longer sweep: 4 x 960 examples = 240 steps, still short of the 480
    settings = dataclasses.replace(SMALL, lr_sweep_len=80.0, lr_sweep_max_examples=960, rescan_lr_after_bs=False,
                                   batch_pts=2, batch_rn_min_inits=1)
    rf = RunFolder(tmp_path / "run")
    with caplog.at_level("INFO", logger="ignite_seg"):
        choose_recipe(runner, rf, settings, specs(), accuracy_style="classification",
                      facts={"n_train": 96, "n_val": 48}, seed=3, device="cpu")
    assert WEAK_SWEEP_LONGER == 4 and calls == [120, 960 * WEAK_SWEEP_LONGER // 16]
    step = strict_json(rf.hparams / "misc.json")["steps"]["lr_range"]
    assert step["iterations"] == 240 and step["capped_by_max_examples"] is True
    assert step["longer_after"] == (f"the sweep of 120 iterations (capped by lr_sweep_max_examples=960) improved its "
                                    f"loss only 3.1% (under {WEAK_SWEEP:.0%}: too little learning to read a range on); "
                                    "this one ran 4x lr_sweep_max_examples (240 iterations)")
    assert step["relative_improvement"] >= WEAK_SWEEP  # the longer sweep's own, as measured
    assert load(rf.hparams / "lr_vs_perf.npz")["lrs"].size == 240
    assert any("improved its loss only 3.1%" in r.getMessage() for r in caplog.records)
    from ignite_seg.analysis.text import TunerFiles, render_markdown, summary_info

    md = render_markdown(summary_info({"hp_kind": "tuned"}, strict_json(rf.hparams / "final.json"), None, [],
                                      TunerFiles(misc=strict_json(rf.hparams / "misc.json"))))
    lr_line = next(ln for ln in md.splitlines() if ln.startswith("- **learning rate**"))
    assert "; a longer sweep: the sweep of 120 iterations (capped by lr_sweep_max_examples=960) improved" in lr_line
    # a sweep that learned (the blobs fall far more than 10% in 120 steps) is used as it is
    calls.clear()
    monkeypatch.setattr(recipe, "choose_lr_range", lambda *a, **k: calls.append(len(a[0])) or choose(*a, **k))
    choose_recipe(runner, RunFolder(tmp_path / "other"), settings, specs(), accuracy_style="classification",
                  facts={"n_train": 96, "n_val": 48}, seed=3, device="cpu")
    assert calls == [120]


def test_validation_set_is_never_read_and_the_holdout_comes_from_training(runner, tmp_path):
    from tuner_tasks import read_log

    log_dir = tmp_path / "log"
    log_dir.mkdir()
    rf = RunFolder(tmp_path / "run")
    settings = dataclasses.replace(SMALL, rescan_lr_after_bs=False, batch_pts=2, batch_rn_min_inits=1)
    hp = choose_recipe(runner, rf, settings, specs(("tuner_tasks", "logged_blobs", (str(log_dir),), {})),
              accuracy_style="classification", facts={"n_train": 96, "n_val": 48}, seed=0, device="cpu")
    assert hp.batch_size in (8, 16, 32, 64)
    train_reads = read_log(str(log_dir), "train")
    assert len(train_reads) >= 96 * 3  # every worker task read the training set (so the logging works)
    assert set(train_reads) == set(range(96))
    assert read_log(str(log_dir), "val") == []  # ... and never one validation item


def test_same_seed_same_choice_other_seed_other_holdout(runner, tmp_path):
    settings = dataclasses.replace(SMALL, rescan_lr_after_bs=False, batch_pts=2, batch_rn_min_inits=1)
    kw = dict(accuracy_style="classification", facts={"n_train": 96, "n_val": 48}, device="cpu")
    a = choose_recipe(runner, RunFolder(tmp_path / "a"), settings, specs(), seed=11, **kw)
    b = choose_recipe(runner, RunFolder(tmp_path / "b"), settings, specs(), seed=11, **kw)
    assert a == b
    za, zb = load(tmp_path / "a/hparams/lr_vs_perf.npz"), load(tmp_path / "b/hparams/lr_vs_perf.npz")
    np.testing.assert_array_equal(za["losses"], zb["losses"])
    np.testing.assert_array_equal(load(tmp_path / "a/hparams/bs_sampled.npz")["scores"],
                                  load(tmp_path / "b/hparams/bs_sampled.npz")["scores"])
    c = choose_recipe(runner, RunFolder(tmp_path / "c"), settings, specs(), seed=12, **kw)
    zc = load(tmp_path / "c/hparams/lr_vs_perf.npz")
    assert not np.array_equal(np.nan_to_num(za["losses"]), np.nan_to_num(zc["losses"]))
    seeds_a = strict_json(tmp_path / "a/hparams/misc.json")["steps"]["lr_range"]["init_seeds"]
    seeds_c = strict_json(tmp_path / "c/hparams/misc.json")["steps"]["lr_range"]["init_seeds"]
    assert len(set(seeds_a)) == len(seeds_a) == settings.lr_min_inits  # one initialisation per repeat
    assert not set(seeds_a) & set(seeds_c)
    assert c.lr_end > 0
    # lr_shared_init: every repeat from one initialisation (the same model before the first step)
    shared = dataclasses.replace(settings, lr_shared_init=True)
    choose_recipe(runner, RunFolder(tmp_path / "d"), shared, specs(), seed=11, **kw)
    misc_d = strict_json(tmp_path / "d/hparams/misc.json")["steps"]["lr_range"]
    assert len(set(misc_d["init_seeds"])) == 1 and misc_d["shared_init"] is True


def test_nan_from_the_start_is_a_clear_tuning_error_and_leaves_no_final(runner, tmp_path):
    rf = RunFolder(tmp_path / "run")
    with pytest.raises(TuningError, match="not finite even at the sweep's first"):
        choose_recipe(runner, rf, dataclasses.replace(SMALL, lr_min_inits=1), specs(model=("tuner_tasks", "NaNOut", (), {})),
             accuracy_style="classification", facts={"n_train": 96, "n_val": 48}, seed=0, device="cpu")
    assert not (rf.hparams / "final.json").exists()  # so a continuation re-tunes
    assert strict_json(rf.hparams / "misc.json")["state"] == "running"


def test_a_failed_tune_is_recorded_in_the_folder_and_reanalyze_says_what_failed(tmp_path, caplog):
    """train() whose tune fails: run.json says failed with the error (not "running"), and reanalyze
    says what failed and what to change instead of advising to continue the same run."""
    from ignite_seg.reanalyze import main

    folder = tmp_path / "current"
    with pytest.raises(TuningError, match="not finite even at the sweep's first"):
        ignite_seg.train(("tuner_tasks", "NaNOut", (), {}), BLOBS, CE, folder=folder,
                         hyperparameters=dataclasses.replace(SMALL, lr_min_inits=1), analysis="none", trials=1,
                         cores=2, seed=0)
    run = strict_json(folder / "run.json")
    assert run["state"] == "failed"
    assert run["error"]["stage"] == "tuning" and run["error"]["type"] == "TuningError"
    assert "not finite even at the sweep's first" in run["error"]["message"]
    assert main([str(folder), "--analysis", "text"]) == 2
    said = caplog.text
    assert "failed while tuning (TuningError): the loss is not finite" in said and "Change what the error says" in said
    assert "finish it with" not in said


def test_bad_presets_and_settings_raise_with_the_fix():
    with pytest.raises(ConfigError, match=r"'fastest', 'slow', 'slowest'"):
        get_preset("fastets")
    with pytest.raises(ConfigError, match="not a preset"):
        ignite_seg.train(MLP, BLOBS, CE, folder="/tmp/never-created-by-ignite-seg", hyperparameters="quick")
    with pytest.raises(ConfigError, match="lr_end"):
        HyperparameterSettings(lr_start=1.0, lr_end=0.1)
    with pytest.raises(ConfigError, match="noise_chunks"):
        dataclasses.replace(get_preset("fast"), initial_batch_size=2, noise_chunks=4)
    with pytest.raises(ConfigError, match="noise_every"):
        dataclasses.replace(get_preset("fast"), noise_every=0)
    with pytest.raises(ConfigError, match="lr_choose_on must be 'holdout' or 'train'"):
        dataclasses.replace(get_preset("fast"), lr_choose_on="val")
    with pytest.raises(ConfigError, match="batch_tie_tol"):
        dataclasses.replace(get_preset("fast"), batch_tie_tol=1.5)
    with pytest.raises(ConfigError, match="batch_tie_prefer must be 'faster' or 'smaller', got 'fast'"):
        dataclasses.replace(get_preset("fast"), batch_tie_prefer="fast")
    with pytest.raises(ConfigError, match="batch_tie_speed_margin"):
        dataclasses.replace(get_preset("fast"), batch_tie_speed_margin=-0.1)
    with pytest.raises(TypeError, match="lr_shared_init must be True or False"):
        dataclasses.replace(get_preset("fast"), lr_shared_init=1)
    with pytest.raises(TypeError, match="batch_pts must be an int"):
        dataclasses.replace(get_preset("fast"), batch_pts=2.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_preset("fast").lr_end = 1.0  # type: ignore[misc]
    assert not Path("/tmp/never-created-by-ignite-seg").exists()


def test_presets_are_ordered_by_effort_and_round_trip():
    names = ["fastest", "fast", "slow", "slowest"]
    presets = [get_preset(n) for n in names]
    assert presets[0].batch_pts == 0 and all(p.batch_pts > 0 for p in presets[1:])
    effort = [p.lr_min_inits * p.lr_sweep_len + p.batch_pts * p.batch_rn_min_inits * p.batch_sweep_len
              for p in presets]
    assert effort == sorted(effort) and len(set(effort)) == 4
    assert presets[3].rescan_lr_after_bs
    for p in presets:
        assert HyperparameterSettings.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_every_settings_field_is_used_by_the_tuner():
    src = "".join((Path(ignite_seg.__file__).parent / f).read_text() for f in ("tuning/recipe.py", "engine/sweeps.py",
                                                                                  "tuning/batch_runs.py", "tuning/reasons.py",
                                                                                  "tuning/budget.py", "tuning/length.py",
                                                                                  "tuning/lr_range.py"))  # RangeRule
    # the update options travel as one record (settings.options), read whole by the tuning runs; the
    # recipe's options (optimizer, update options, schedule shape, EMA) are copied whole into the recipe
    options = {f.name for f in dataclasses.fields(TrainingOptions)} | {f.name for f in dataclasses.fields(RecipeOptions)}
    assert "settings.options" in src and "recipe.options" in src and "RecipeOptions.values(s)" in src
    for f in dataclasses.fields(HyperparameterSettings):
        assert f"s.{f.name}" in src or f"settings.{f.name}" in src or f.name in options, \
            f"{f.name} is never read by the tuner"


def test_a_single_candidate_is_chosen_without_runs(runner, tmp_path):
    # batch_pts=1: the one grid batch size nearest the centre; the tune used to fail writing bs_sampled.npz
    settings = dataclasses.replace(SMALL, batch_pts=1, rescan_lr_after_bs=False, lr_min_inits=1)
    rf = RunFolder(tmp_path / "run")
    hp = choose_recipe(runner, rf, settings, specs(), accuracy_style="classification", facts={"n_train": 96, "n_val": 48},
              seed=0, device="cpu")
    bs = load(rf.hparams / "bs_vs_perf.npz")
    centre = float(bs["noise_scale"]) * settings.noise_batch_frac
    assert hp.batch_size == centre_batch(centre, settings.batch_start, settings.batch_end, settings.batch_step,
                                         fallback=settings.initial_batch_size)
    sampled = load(rf.hparams / "bs_sampled.npz")
    assert sampled["bss"].tolist() == [hp.batch_size] and sampled["scores"].shape == (0, 1)
    misc = strict_json(rf.hparams / "misc.json")
    assert misc["steps"]["batch_size"]["rungs"] == [{"note": "a single candidate: no runs needed"}]


def test_a_noise_scale_that_cannot_be_measured_is_logged_and_recorded_as_the_fallback(runner, tmp_path, caplog):
    # a batch of 4 in 4 chunks cannot be split in two sizes: no noise scale
    settings = dataclasses.replace(SMALL, batch_pts=0, rescan_lr_after_bs=False, lr_min_inits=1, initial_batch_size=4,
                                   noise_chunks=4, lr_sweep_min_iters=60)
    rf = RunFolder(tmp_path / "run")
    with caplog.at_level("INFO", logger="ignite_seg"):
        hp = choose_recipe(runner, rf, settings, specs(), accuracy_style="classification", facts={"n_train": 96, "n_val": 48},
                  seed=0, device="cpu")
    step = strict_json(rf.hparams / "misc.json")["steps"]["batch_size"]
    assert step["noise_scale"] is None and step["rule"] == "fallback" and hp.batch_size == 8  # grid point nearest 4
    assert "could not be measured" in step["reason"] and "could not be measured" in step["fallback"]
    assert "could not be measured" in caplog.text and "x the noise scale)" not in caplog.text
    schedule = strict_json(rf.hparams / "misc.json")["steps"]["schedule"]
    assert schedule["schedule"] == "triangular" and schedule["description"].startswith("triangular cycles between")
