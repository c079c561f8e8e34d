"""The records of the tuner's files: round trips, the tuner's real files read strictly, old folders."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ignite_seg import FixedHyperparameters, get_preset
from ignite_seg.analysis import extract
from ignite_seg.analysis.snapshot import Snapshot
from ignite_seg.analysis.text import TunerFiles, summary_info
from ignite_seg.config.specs import normalize_spec
from ignite_seg.runtime.tasks import TaskRunner
from ignite_seg.storage.atomic import to_jsonable, write_json, write_npz
from ignite_seg.storage.run_folder import RunFolder
from ignite_seg.storage.schemas import (
    BS_NPZ,
    FINAL_JSON,
    LR_INITIAL_NPZ,
    LR_NPZ,
    MISC_JSON,
    SAMPLED_NPZ,
    BatchSampledFile,
    BatchSearchProgress,
    BatchSizeStep,
    BatchSweepFile,
    LRRangeStep,
    LRSweepFile,
    MiscFile,
    MiscSteps,
    Rung,
    RungNote,
    SchemaError,
    read_final,
)
from ignite_seg.tuning.recipe import choose_recipe

SPECS = {"model": normalize_spec(("tasks", "mlp", (), {}), "model_loader"),
         "dataset": normalize_spec(("tasks", "blobs", (), {}), "dataset_loader"),
         "loss": normalize_spec(("torch.nn", "CrossEntropyLoss", (), {}), "loss_loader")}


def same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def lr_file() -> LRSweepFile:
    lrs = np.geomspace(1e-3, 1.0, 6)
    losses = np.array([[2.0, 1.8, 1.2, 0.9, np.nan, np.nan], [2.1, 1.7, 1.1, 0.8, 1.5, np.nan]])
    return LRSweepFile(
        lrs=lrs, losses=losses, perfs=1 - losses / 3, losses_smoothed=losses, perfs_smoothed=1 - losses / 3,
        loss_deriv=np.linspace(-1, 1, 6), perf_deriv=np.linspace(1, -1, 6), lr_range=np.array([1e-2, 1e-1]),
        diverged_lr=np.array([lrs[4], lrs[5]]), holdout_losses=losses + 0.1, holdout_losses_smoothed=losses + 0.1,
        choice_curve="holdout_losses", batch_size=16, rescan=True,
    )


def misc_file() -> MiscFile:
    rung = Rung(budget_epochs=2.0, batch_sizes=[8, 16], mean_perf={"8": 0.9, "16": float("nan")},
                mean_loss={"8": 0.3, "16": 0.4}, ranked_by="loss", kept=[8], best_by_score=8)
    steps = MiscSteps(
        lr_range=LRRangeStep(batch_size=16, lr_min=0.01, lr_max=0.1, stopped_lr=[0.5, float("nan")],
                             anchored_at_loss_minimum=True, noise_scale=float("nan")),
        batch_size=BatchSizeStep(noise_scale=40.0, candidates=[8, 16], chosen=8, reason="best",
                                 rungs=[rung, dataclasses.replace(rung, tie="within tol")]),
    )
    return MiscFile(state="running", seed=3, settings={"lr_start": 1e-4}, n_train=96, holdout_size=9,
                    holdout_from="training set", steps=steps)


def test_npz_records_round_trip_through_their_files(tmp_path):
    bs = BatchSweepFile.of_rungs([8, 16, 32], 16, [np.array([[0.5, 0.7, np.nan], [0.6, 0.8, np.nan]])], 40.0,
                                 np.array([0.01, 0.1]), np.array([38.0, 42.0]))
    # the mean over the repeats, then a centred 3-point moving average that shrinks at the ends: [0.55, 0.75, nan]
    np.testing.assert_allclose(bs.perfs_smoothed, [0.55, 0.65, np.nan])
    assert bs.bs_range.tolist() == [8, 32] and bs.batch_size == 16
    sampled = BatchSampledFile.of_rungs([8, 16, 32], 16, [1.0, 2.0], [np.full((1, 3), 0.5), np.array([[np.nan, 0.7, 0.6]])],
                                        [np.ones((1, 3)), np.array([[np.nan, 0.2, 0.3]])])
    assert sampled.budget_epochs.tolist() == [1.0, 2.0, 2.0] and sampled.rung_scores.shape == (2, 1, 3)
    for rec, cls in ((lr_file(), LRSweepFile), (bs, BatchSweepFile), (sampled, BatchSampledFile)):
        rec.write(tmp_path / "f.npz")
        back = cls.read(tmp_path / "f.npz", strict=True)
        same_arrays(back.to_npz(), rec.to_npz())
    back = LRSweepFile.read(tmp_path / "f.npz.missing")
    assert back is None


def test_misc_record_round_trips_and_keeps_the_json_shape(tmp_path):
    rec = misc_file()
    rec.write(tmp_path / MISC_JSON)
    data = json.loads((tmp_path / MISC_JSON).read_text())
    # the shape of ignite_seg's misc.json: steps not reached and a rung's missing tie are left out, NaN is null
    assert list(data) == ["state", "seed", "settings", "n_train", "holdout_size", "holdout_from", "steps", "compute"]
    assert list(data["steps"]) == ["lr_range", "batch_size"]
    assert "tie" not in data["steps"]["batch_size"]["rungs"][0] and data["steps"]["batch_size"]["rungs"][1]["tie"]
    assert data["steps"]["lr_range"]["noise_scale"] is None and data["steps"]["lr_range"]["stopped_lr"] == [0.5, None]
    assert data["compute"] == {"task_seconds": {}, "examples": {}, "wall_seconds": {}}
    back = MiscFile.from_json(data, strict=False)
    assert to_jsonable(back.to_json()) == data
    assert back.steps.batch_size.rungs[1].tie == "within tol" and back.steps.used_lr_range.anchored_at_loss_minimum
    # the progress record of a running search, and the single-candidate note, are told apart by their keys
    running = MiscSteps.from_json({"batch_size": {"candidates": [8], "rungs": [{"note": "one"}], "state": "running"}},
                                  strict=True)
    assert isinstance(running.batch_size, BatchSearchProgress) and running.batch_size.rungs == [RungNote("one")]


def test_strict_reading_refuses_an_unknown_or_a_missing_key():
    arrays = lr_file().to_npz()
    LRSweepFile.from_npz(arrays, strict=True)
    with pytest.raises(SchemaError, match="'lr_ranges'"):
        LRSweepFile.from_npz({**arrays, "lr_ranges": arrays["lr_range"]}, strict=True)
    renamed = {("lr_span" if k == "lr_range" else k): v for k, v in arrays.items()}
    with pytest.raises(SchemaError, match="'lr_span'"):
        LRSweepFile.from_npz(renamed, strict=True)
    with pytest.raises(SchemaError, match="lacks the key 'lr_range'"):
        LRSweepFile.from_npz({k: v for k, v in arrays.items() if k != "lr_range"}, strict=True)
    # leniently (reading a folder), a missing optional key reads as its default, a renamed one is ignored
    assert LRSweepFile.from_npz(renamed).lr_range is None
    # the key that says what the file is about is required either way
    with pytest.raises(SchemaError, match="lacks the key 'bss'"):
        BatchSampledFile.from_npz({"scores": np.zeros((0, 0))})
    with pytest.raises(SchemaError, match="'tie_reason'"):
        Rung.from_json({"budget_epochs": 1.0, "tie_reason": "x"}, strict=True)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """Two real tunes on tiny data: ``fastest`` (no candidate runs) and a search with a rescan."""
    root = tmp_path_factory.mktemp("schemas")
    search = dataclasses.replace(
        # initial batch 12, off the candidates' grid: whatever candidate wins, the rescan runs
        get_preset("fast"), lr_min_inits=2, lr_sweep_min_iters=100, lr_sweep_len=2.0, initial_batch_size=12,
        batch_start=8, batch_end=32, batch_pts=2, batch_rn_min_inits=1, batch_sweep_len=1.0, rescan_lr_after_bs=True,
        max_epochs=8, lr_end=30.0,
    )
    out = {}
    with TaskRunner(2) as runner:
        for name, settings in (("fastest", get_preset("fastest")), ("search", search)):
            rf = RunFolder(root / name)
            hp = choose_recipe(runner, rf, settings, SPECS, accuracy_style="classification", facts={"n_train": 96},
                      seed=1, device="cpu")
            out[name] = (rf, hp)
    return out


@pytest.mark.parametrize("name", ["fastest", "search"])
def test_every_file_the_tuner_writes_reads_strictly_through_its_record(tuned, name):
    rf, hp = tuned[name]
    h = rf.hparams
    assert read_final(h / FINAL_JSON, strict=True) == hp
    misc = MiscFile.read(h / MISC_JSON, strict=True)
    assert misc.state == "complete" and misc.final == hp.to_dict() and misc.compute.total_examples > 0
    assert isinstance(misc.steps.batch_size, BatchSizeStep) and misc.steps.batch_size.chosen == hp.batch_size
    assert misc.steps.schedule.epochs == hp.epochs
    lr = LRSweepFile.read(h / LR_NPZ, strict=True)
    bs = BatchSweepFile.read(h / BS_NPZ, strict=True)
    sampled = BatchSampledFile.read(h / SAMPLED_NPZ, strict=True)
    assert sampled.chosen == bs.batch_size == hp.batch_size
    if name == "search":
        assert lr.rescan and lr.batch_size == hp.batch_size and misc.steps.lr_rescan is not None
        assert LRSweepFile.read(h / LR_INITIAL_NPZ, strict=True).batch_size == 12
        assert all(isinstance(r, Rung) for r in misc.steps.batch_size.rungs) and len(sampled.bss) == 2
        # each rung records what its candidates' runs cost per training example (the tie rule's speeds)
        for rung in misc.steps.batch_size.rungs:
            assert isinstance(rung, Rung) and set(rung.seconds_per_example) == {str(b) for b in rung.batch_sizes}
            assert all(0 < v < 1 for v in rung.seconds_per_example.values())
        assert [hp.lr_start, hp.lr_end] == pytest.approx(lr.lr_range.tolist())
    else:
        assert not lr.rescan and sampled.bss.size == 0 and bs.bss.size == 0 and misc.steps.lr_rescan is None
    # ... and the analysis reads them: the figures' data agree with the records
    folder = str(rf.path)
    assert extract.lr_of(Snapshot(folder)).lr_range == tuple(lr.lr_range.tolist())
    batch = extract.batch_of(Snapshot(folder))
    assert batch is None if name == "fastest" else batch.chosen == hp.batch_size
    assert extract.schedule_of(Snapshot(folder)).n_epochs == hp.epochs


def test_a_folder_written_before_the_records_still_reads(tmp_path):
    """The keys of an older version: no held-out curves, no choice_curve/batch_size/rescan, fewer misc keys."""
    rf = RunFolder(tmp_path / "old")
    h = rf.hparams
    lrs = np.geomspace(1e-3, 1.0, 4)
    write_npz(h / LR_NPZ, lrs=lrs, losses=np.array([[2.0, 1.0, 0.5, np.nan]]), perfs=np.array([[0.1, 0.5, 0.8, np.nan]]),
              losses_smoothed=np.array([[2.0, 1.0, 0.5, np.nan]]), perfs_smoothed=np.array([[0.1, 0.5, 0.8, np.nan]]),
              loss_deriv=np.array([-1.0, -2.0, -1.0, np.nan]), perf_deriv=np.zeros(4), lr_range=np.array([2e-3, 0.1]),
              diverged_lr=np.array([1.0]))
    write_npz(h / BS_NPZ, bss=np.array([16.0, 32.0]), perfs=np.array([[0.7, 0.8]]), perfs_smoothed=np.array([0.7, 0.8]),
              bs_range=np.array([16.0, 32.0]), noise_scale=np.array(24.0), noise_scale_lrs=np.array([0.01]),
              noise_scale_values=np.array([24.0]))
    write_npz(h / SAMPLED_NPZ, bss=np.array([16.0, 32.0]), scores=np.array([[0.7, 0.8]]),
              budget_epochs=np.array([1.0, 1.0]), chosen=np.array(32.0))
    write_json(h / FINAL_JSON, {"lr_start": 0.01, "lr_end": 0.1, "batch_size": 32, "cycle_size_epochs": 2.0,
                                "epochs": 4})
    old_misc = {"state": "complete", "steps": {"lr_range": {"lr_min": 2e-3, "lr_max": 0.1},
                                               "batch_size": {"chosen": 32, "reason": "best of 2"}}}
    write_json(h / MISC_JSON, old_misc)
    lr = extract.lr_of(Snapshot(str(rf.path)))
    assert lr.loss_label == "training loss" and lr.lr_range == (2e-3, 0.1) and lr.n_repeats == 1
    batch = extract.batch_of(Snapshot(str(rf.path)))
    assert batch.chosen == 32.0 and batch.final_batch_size == 32.0 and batch.noise_scale == 24.0
    assert extract.schedule_of(Snapshot(str(rf.path))).lr_end == 0.1
    assert read_final(h / FINAL_JSON) == FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=32,
                                                              cycle_size_epochs=2.0, epochs=4)
    info = summary_info({}, read_final(h / FINAL_JSON).to_dict(), None, [], TunerFiles(
        old_misc, LRSweepFile.read(h / LR_NPZ), BatchSweepFile.read(h / BS_NPZ), BatchSampledFile.read(h / SAMPLED_NPZ)))
    assert "chosen: 32 (best of 2)" in info.evidence["batch_size"] and info.misc == old_misc
    assert not any("valley" in line for line in info.evidence["lr_end"])  # no anchoring recorded: none claimed
    # what the old folder lacks is named when it is read strictly
    with pytest.raises(SchemaError, match="lacks the key 'holdout_losses'"):
        LRSweepFile.read(h / LR_NPZ, strict=True)
