"""The best checkpoint by a named metric: the saved snapshot is the argmin/argmax of the recorded
curve, the saved weights measure the recorded value, and the files and arguments say so."""
from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pytest
import torch
from handler_tasks import measure_loss
from helpers import CE, FAST_HP, trial_task
from tasks import blobs, mlp

import ignite_seg
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.scoring import Scorer
from ignite_seg.engine.trainer import TrialTask, run_trial
from ignite_seg.exceptions import ConfigError, ConfigTypeError
from ignite_seg.storage.collate import Collator
from ignite_seg.storage.records import TrialResult
from ignite_seg.storage.result_keys import BestRecord


def _task(model, dataset, loss, hp=FAST_HP, **kw) -> TrialTask:
    specs = [normalize_spec(s, n) for n, s in (("model", model), ("dataset", dataset), ("loss", loss))]
    return trial_task(0, *specs, hp, "classification", seed=3, device="cpu", **kw)


BLOBS = (("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE)


@pytest.mark.parametrize("metric,mode,curve", [("loss", "min", "losses_val"), ("loss", "max", "losses_val"),
                                               ("perf", "max", "perfs_val")])
def test_the_saved_snapshot_is_the_best_of_the_recorded_curve_and_its_weights_measure_it(metric, mode, curve):
    hp = dataclasses.replace(FAST_HP, ema_decay=0.8)  # snapshots measure the EMA weights: so does the checkpoint
    out = run_trial(_task(*BLOBS, hp, best_metric=metric, best_mode=mode, snapshots_per_epoch=4))
    assert out.status == "completed", out.error_text
    values, epochs = out.throughtime[curve], out.throughtime["epochs"]
    k = int(np.argmin(values) if mode == "min" else np.argmax(values))
    assert out.result.best == BestRecord(metric, mode, epochs[k], values[k])
    model = mlp()
    model.load_state_dict(torch.load(io.BytesIO(out.model_best), weights_only=True))
    _, val = blobs()  # 48 points: the snapshot subset is the whole validation set
    again = Scorer(torch.nn.CrossEntropyLoss(), "classification").measure(model, [tuple(val.tensors)])[metric]
    assert again == pytest.approx(values[k], rel=1e-6)
    if mode == "max" and metric == "loss":  # the worst loss is the untrained model's
        assert k == 0 and out.model_best != out.model


def test_a_custom_metric_picks_its_own_best_snapshot():
    out = run_trial(_task(("real_tasks", "Tagger", (), {}), ("real_tasks", "tagging", (), {}),
                          ("real_tasks", "tagging_loss", (), {}), metrics={"iou": normalize_spec(
                              ("real_tasks", "class_iou", (), {}), "m")}, best_metric="iou", best_mode="max"))
    assert out.status == "completed", out.error_text
    iou = out.throughtime["metric_iou_val"]
    k = int(np.argmax(iou))
    assert out.result.best is not None and (out.result.best.epoch, out.result.best.value) == (out.throughtime["epochs"][k], iou[k])


def test_without_best_metric_nothing_is_kept():
    out = run_trial(_task(*BLOBS))
    assert out.status == "completed" and out.model_best == b"" and out.result.best is None


def test_train_writes_model_best_result_fields_and_results_keys(run_kwargs):
    res = ignite_seg.train(*BLOBS, **run_kwargs, best_metric="loss", best_mode="min")
    folder = res.folder
    with np.load(folder / "results.npz") as r, np.load(folder / "throughtimes.npz") as tt:
        assert r["best_value"].shape == r["best_epoch"].shape == (2,)
        for row, tid in enumerate(r["trial_ids"]):
            result = json.loads((folder / "trials" / str(tid) / "result.json").read_text())["best"]
            k = int(np.argmin(tt["losses_val"][row]))
            assert result["metric"] == "loss" and result["mode"] == "min"
            assert result["epoch"] == r["best_epoch"][row] == tt["epochs"][k]
            assert result["value"] == r["best_value"][row] == tt["losses_val"][row, k]
            model = ignite_seg.load_model(folder, int(tid), model=mlp(), best=True)
            _, val = blobs()
            assert measure_loss(model, *val.tensors) == pytest.approx(result["value"], rel=1e-6)
    assert json.loads((folder / "run.json").read_text())["best_mode"] == "min"
    with pytest.raises(ConfigError, match="initial=True and best=True"):
        ignite_seg.load_model(folder, 0, model=mlp(), initial=True, best=True)
    with pytest.raises(ConfigError, match="the folder's trials kept the best by 'loss', 'min'"):
        ignite_seg.train(*BLOBS, **{**run_kwargs, "is_continuation": True}, best_metric="perf", best_mode="max")


@pytest.mark.parametrize("kw,error,needle", [
    (dict(best_metric="loss"), ConfigError, "best_mode=None with best_metric='loss'"),
    (dict(best_mode="min"), ConfigError, "best_mode='min' without best_metric"),
    (dict(best_metric="iou", best_mode="max"), ConfigError, "use one of ['loss', 'perf']"),
    (dict(best_metric="perf", best_mode="higher"), ConfigError, "'min' (lower is better) or 'max'"),
    (dict(best_metric=3, best_mode="max"), ConfigTypeError, "best_metric must be a metric name"),
])
def test_bad_best_arguments_are_refused_before_anything_runs(run_kwargs, kw, error, needle):
    with pytest.raises(error) as info:
        ignite_seg.train(*BLOBS, **run_kwargs, **kw)
    assert needle in str(info.value)
    assert not run_kwargs["folder"].exists()


def test_a_custom_metric_is_a_known_best_metric():
    from ignite_seg.config.checks import check_best

    assert check_best("iou", "max", ("iou",)) == ("iou", "max")
    with pytest.raises(ConfigError, match=r"\['loss', 'perf', 'iou'\]"):
        check_best("IoU", "max", ("iou",))


def test_collation_keeps_best_arrays_and_pads_a_shorter_trial_with_nan():
    col = Collator({}, smooth_window=1)
    keys = ("losses_train", "losses_val", "perfs_train", "perfs_val")
    full = {"epochs": np.array([0.0, 0.5, 1.0, 1.5]), **{k: np.arange(4.0) for k in keys}}
    short = {"epochs": full["epochs"][:2], **{k: np.arange(2.0) + 10 for k in keys}}
    final = {"loss_train": 1.0, "loss_val": 1.0, "perf_train": 0.5, "perf_val": 0.5}
    col.add(1, TrialResult(trial_id=1, status="completed", metrics=final, best=BestRecord("loss", "min", 0.5, 10.0)), short)
    col.add(0, TrialResult(trial_id=0, status="completed", metrics=final, best=BestRecord("loss", "min", 1.5, 3.0)), full)
    results, tt = col.arrays()
    assert results["best_epoch"].tolist() == [1.5, 0.5] and results["best_value"].tolist() == [3.0, 10.0]
    assert tt["epochs"].tolist() == [0.0, 0.5, 1.0, 1.5]
    np.testing.assert_array_equal(tt["losses_val"], [[0, 1, 2, 3], [10, 11, np.nan, np.nan]])
    with pytest.raises(ValueError, match="has no best checkpoint"):
        col.add(2, TrialResult(trial_id=2, status="completed", metrics=final), full)
    with pytest.raises(ValueError, match="other epochs"):
        col.add(3, TrialResult(trial_id=3, status="completed", metrics=final), {**full, "epochs": full["epochs"] + 0.1})


@pytest.mark.parametrize("mode,values,improving", [
    ("max", [0.5, 0.4, 0.5, float("nan"), 0.7, 0.6, 0.7], [0, 4]),
    ("min", [float("nan"), 0.3, 0.3, float("inf"), 0.2, 0.25], [0, 1, 4]),
])
def test_ignites_checkpoint_is_called_only_when_the_score_improves_and_keeps_what_it_would_alone(mode, values, improving):
    from ignite.engine import Engine

    from ignite_seg.engine.best import BestCheckpoint
    from ignite_seg.engine.recorders import ThroughTimeRecorder

    model, engine = mlp(), Engine(lambda e, b: None)
    bests = []
    for _ in range(2):  # ours, and one whose Checkpoint is called at every snapshot (ignite alone decides)
        recorder = ThroughTimeRecorder(Scorer(torch.nn.CrossEntropyLoss(), "classification"), model, {"val": []}, 10, 1, 0)
        bests.append(BestCheckpoint(model, recorder, "perf", mode))
    calls: list[int] = []
    checkpoint = bests[0].checkpoint
    bests[0].checkpoint = lambda e: (calls.append(len(bests[0].recorder.records["epochs"]) - 1), checkpoint(e))
    for k, v in enumerate(values):
        for best in bests:
            best.recorder.append(epochs=k / 10, perfs_val=v, losses_val=1.0)
        bests[0]._on_snapshot(engine)
        bests[1].checkpoint(engine)  # what the handler did before it compared first
        if bests[1].saver.saves != getattr(bests[1], "_seen", 0):
            bests[1]._seen, bests[1].epoch, bests[1].value = bests[1].saver.saves, k / 10, v
    assert calls == improving
    assert bests[0].saver.saves == bests[1].saver.saves == len(improving)
    assert bests[0].record() == bests[1].record() == BestRecord("perf", mode, improving[-1] / 10, values[improving[-1]])
    assert checkpoint.state_dict() == bests[1].checkpoint.state_dict()


# -- best_over: the mean over several validation sets ------------------------------------------------
TWO_SETS = (("tasks", "mlp", (), {}), ("real_tasks", "two_val_sets", (), {}), CE)


@pytest.mark.parametrize("mode", ["min", "max"])
def test_best_over_two_sets_is_the_argbest_of_the_mean_of_their_curves(mode):
    out = run_trial(_task(*TWO_SETS, best_metric="loss", best_mode=mode, best_parts=("val", "val_shifted"),
                          snapshots_per_epoch=4))
    assert out.status == "completed", out.error_text
    mean = (np.asarray(out.throughtime["losses_val"]) + np.asarray(out.throughtime["losses_val_shifted"])) / 2
    k = int(np.argmin(mean) if mode == "min" else np.argmax(mean))
    assert out.result.best == BestRecord("loss", mode, out.throughtime["epochs"][k], pytest.approx(mean[k], rel=1e-12),
                                  ("val", "val_shifted"))
    model = mlp()
    model.load_state_dict(torch.load(io.BytesIO(out.model_best), weights_only=True))
    _, clean = blobs()
    _, shifted = blobs(seed=1)  # each 48 points: the snapshot subsets are the whole sets
    both = (measure_loss(model, *clean.tensors) + measure_loss(model, *shifted.tensors)) / 2
    assert both == pytest.approx(mean[k], rel=1e-6)


def test_a_synthetic_pair_of_curves_picks_the_best_mean_not_the_best_primary():
    from ignite.engine import Engine

    from ignite_seg.engine.best import BestCheckpoint
    from ignite_seg.engine.recorders import ThroughTimeRecorder

    model, engine = mlp(), Engine(lambda e, b: None)
    sets = {"val": [], "val_noisy": []}
    recorder = ThroughTimeRecorder(Scorer(torch.nn.CrossEntropyLoss(), "classification"), model, sets, 10, 1, 0)
    best = BestCheckpoint(model, recorder, "perf", "max", ("val", "val_noisy"))
    clean, noisy = [0.5, 0.9, 0.8, 0.7], [0.5, 0.3, 0.7, 0.6]  # primary best at 1; mean best (0.75) at 2
    for k, (c, n) in enumerate(zip(clean, noisy)):
        recorder.append(epochs=k / 10, perfs_val=c, perfs_val_noisy=n, losses_val=1.0, losses_val_noisy=1.0)
        best._on_snapshot(engine)
    assert best.record() == BestRecord("perf", "max", 0.2, 0.75, ("val", "val_noisy"))
    assert best.record().to_json()["parts"] == ["val", "val_noisy"]
    assert BestRecord.from_json(best.record().to_json()) == best.record()


def test_best_parts_maps_set_names_to_parts_and_refuses_unknown_names():
    from ignite_seg.engine.best import best_parts

    names = ("clean", "noisy", "far")
    assert best_parts("primary", names) == ("val",)
    assert best_parts("mean", names) == ("val", "val_noisy", "val_far")
    assert best_parts(("far", "clean"), names) == ("val", "val_far")  # dataset order
    with pytest.raises(ConfigError, match=r"names \['nosy'\].*sets are \['clean', 'noisy', 'far'\]"):
        best_parts(("nosy",), names)


def test_train_best_over_mean_writes_the_mean_and_says_so_and_continuation_must_match(run_kwargs):
    res = ignite_seg.train(*TWO_SETS, **run_kwargs, best_metric="perf", best_mode="max", best_over="mean")
    folder = res.folder
    with np.load(folder / "throughtimes.npz") as tt, np.load(folder / "results.npz") as r:
        for row, tid in enumerate(r["trial_ids"]):
            result = json.loads((folder / "trials" / str(tid) / "result.json").read_text())["best"]
            mean = (tt["perfs_val"][row] + tt["perfs_val_shifted"][row]) / 2
            k = int(np.argmax(mean))
            assert result["parts"] == ["val", "val_shifted"]
            assert (result["epoch"], result["value"]) == (tt["epochs"][k], pytest.approx(mean[k]))
    assert json.loads((folder / "run.json").read_text())["best_over"] == "mean"
    with pytest.raises(ConfigError, match=r"best_over='primary' but .* over 'mean'"):
        ignite_seg.train(*TWO_SETS, **{**run_kwargs, "is_continuation": True}, best_metric="perf", best_mode="max")


@pytest.mark.parametrize("kw,error,needle", [
    (dict(best_over="mean"), ConfigError, "best_over='mean' without best_metric"),
    (dict(best_metric="loss", best_mode="min", best_over="average"), ConfigError, "best_over='average' is not a choice"),
    (dict(best_metric="loss", best_mode="min", best_over=[]), ConfigError, "is empty or names a set twice"),
    (dict(best_metric="loss", best_mode="min", best_over=3), ConfigTypeError, "best_over=3 (int)"),
    (dict(best_metric="loss", best_mode="min", best_over=["clean", "noisy"]), ConfigError,
     "names ['noisy'], not validation sets"),
])
def test_bad_best_over_is_refused_before_anything_is_written(run_kwargs, kw, error, needle):
    with pytest.raises(error) as info:
        ignite_seg.train(*TWO_SETS, **run_kwargs, **kw)
    assert needle in str(info.value)
    assert not run_kwargs["folder"].exists()
