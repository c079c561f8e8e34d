"""ignite_seg.sweep: points on one pool, sweep.npz, the report, continuation, bad points."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg.analysis.sweep_report import sweep_info, sweep_markdown
from ignite_seg.param_sweep.points import SweepPoint, check_points, param_table
from ignite_seg.param_sweep.run import collate, point_seed
from ignite_seg.run_plan import TrainResult, TrialSummary
from ignite_seg.storage.sweep_file import SweepRecord

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})
LINEAR = ("tasks", "linear", (), {})
REGRESSION = ("tasks", "regression", (), {})
MSE = ("torch.nn", "MSELoss", (), {})


def _kwargs(tmp_path, **kw):
    return {**dict(folder=tmp_path / "sweep", history_folder=tmp_path / "history", hyperparameters=FAST_HP,
                   analysis="images", trials=2, trials_strict=True, cores=2, seed=0), **kw}


def test_sweep_three_points_two_trials_on_two_workers(tmp_path):
    res = ignite_seg.sweep(MLP, BLOBS, CE, grid={"n_hidden": [2, 8, 32]}, **_kwargs(tmp_path))
    root = tmp_path / "sweep"
    assert [p.label for p in res.points] == ["n_hidden=2", "n_hidden=8", "n_hidden=32"]
    for k, hidden in enumerate([2, 8, 32]):
        run = json.loads((root / "points" / str(k) / "run.json").read_text())
        assert run["state"] == "complete" and run["seed"] == point_seed(0, k)
        assert f"tasks.mlp(n_hidden={hidden})" == run["loaders"]["model"]["describe"]
        assert len(res.runs[k].completed) == 2
        model = ignite_seg.load_model(root / "points" / str(k), 0, model=("tasks", "mlp", (), {"n_hidden": hidden}))
        assert model[0].out_features == hidden  # the point's argument reached the model loader
    rec = SweepRecord.read(root / "sweep.npz")
    assert list(rec.param_names) == ["n_hidden"]
    np.testing.assert_array_equal(rec.param_values[:, 0], [2, 8, 32])
    assert rec.final_perf_val.shape == (3, 2) and rec.trial_ids.tolist() == [[0, 1]] * 3
    np.testing.assert_array_equal(rec.n_completed, [2, 2, 2])
    np.testing.assert_array_equal(rec.batch_size, [16, 16, 16])
    np.testing.assert_allclose(rec.lr_start, [0.05] * 3)
    for k, run in enumerate(res.runs):  # the collated numbers are the runs' own
        np.testing.assert_allclose(rec.final_perf_val[k], [t.perf_val for t in run.completed])
        np.testing.assert_allclose(rec.final_loss_train[k], [t.loss_train for t in run.completed])
    assert rec.final_perf_val[2].mean() > 0.9  # blobs are easy for the widest net
    for name in ("sweep_perf.png", "sweep_hparams.png", "summary.md"):
        assert (root / "analysis" / name).stat().st_size > 0
    assert json.loads((root / "sweep.json").read_text())["state"] == "complete"


def test_sweep_tunes_each_point(tmp_path):
    kw = {**_kwargs(tmp_path), "hyperparameters": "fastest", "analysis": "none", "trials": 1}
    res = ignite_seg.sweep(LINEAR, REGRESSION, MSE, points=[{"n_in": 4}, (4, 1)], accuracy_style="inv-loss", **kw)
    for k in range(2):
        folder = tmp_path / "sweep" / "points" / str(k)
        assert (folder / "hparams" / "lr_vs_perf.npz").is_file()  # tuned, not given
        final = json.loads((folder / "hparams" / "final.json").read_text())
        assert final["lr_start"] == res.runs[k].hyperparameters.lr_start
    rec = SweepRecord.read(tmp_path / "sweep" / "sweep.npz")
    assert list(rec.param_names) == ["arg0", "arg1", "n_in"]
    assert not (tmp_path / "sweep" / "analysis").exists()


def test_continuation_keeps_finished_points_and_finishes_the_rest(tmp_path):
    kw = _kwargs(tmp_path, analysis="none")
    first = ignite_seg.sweep(MLP, BLOBS, CE, points=[{"n_hidden": 4}, {"n_hidden": 8}], **kw)
    root = tmp_path / "sweep"
    # simulate a kill during point 1: its run is interrupted after trial 0, the sweep unfinished
    p1 = root / "points" / "1"
    run = json.loads((p1 / "run.json").read_text())
    (p1 / "run.json").write_text(json.dumps({**run, "state": "running"}))
    for name in ("results.npz", "throughtimes.npz"):
        (p1 / name).unlink()
    import shutil

    shutil.rmtree(p1 / "trials" / "1")
    (root / "sweep.npz").unlink()
    kept = (root / "points" / "0" / "trials" / "0" / "model.pt").read_bytes()
    again = ignite_seg.sweep(MLP, BLOBS, CE, points=[{"n_hidden": 4}, {"n_hidden": 8}],
                             **{**kw, "is_continuation": True})
    assert (root / "points" / "0" / "trials" / "0" / "model.pt").read_bytes() == kept
    np.testing.assert_array_equal(again.record.final_perf_val, first.record.final_perf_val)  # same seeds
    assert json.loads((p1 / "run.json").read_text())["state"] == "complete"
    with pytest.raises(ignite_seg.ConfigError, match="differ from the sweep"):
        ignite_seg.sweep(MLP, BLOBS, CE, points=[{"n_hidden": 5}, {"n_hidden": 8}], **{**kw, "is_continuation": True})
    # a new sweep archives the old one
    ignite_seg.sweep(MLP, BLOBS, CE, points=[{"n_hidden": 4}], **kw)
    assert len(list((tmp_path / "history").iterdir())) == 1


@pytest.mark.parametrize("points, grid, match", [
    (None, None, "exactly one of"),
    ([{"n_hidden": 4}], {"n_hidden": [4]}, "exactly one of"),
    ([], None, "non-empty list"),
    ([{"n_hidden": 4}, {"n_hidden": 4}], None, r"points\[1\] .* repeats points\[0\]"),
    (None, {"n_hidden": []}, r"grid\['n_hidden'\] must be a non-empty list"),
    (None, {"n_hidden": "abc"}, r"grid\['n_hidden'\] must be a non-empty list"),
    ([5], None, r"points\[0\] must be a dict"),
])
def test_bad_points_raise_config_error(tmp_path, points, grid, match):
    with pytest.raises(ignite_seg.ConfigError, match=match):
        ignite_seg.sweep(MLP, BLOBS, CE, points=points, grid=grid, **_kwargs(tmp_path))
    assert not (tmp_path / "sweep").exists()


def test_trials_below_one_is_refused(tmp_path):
    with pytest.raises(ignite_seg.ConfigError, match="trials must be an int >= 1"):
        ignite_seg.sweep(MLP, BLOBS, CE, points=[{"n_hidden": 4}], **{**_kwargs(tmp_path), "trials": 0})


def test_a_point_the_loader_refuses_is_refused_before_any_run(tmp_path):
    with pytest.raises(ignite_seg.ConfigError):
        ignite_seg.sweep(MLP, BLOBS, CE, points=[{"n_hidden": 4}, {"n_in": 5}], **_kwargs(tmp_path))
    assert not (tmp_path / "sweep").exists()


def test_a_folder_that_is_no_sweep_is_refused(tmp_path):
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "notes.txt").write_text("mine")
    with pytest.raises(ignite_seg.FolderError, match="not an ignite_seg sweep folder"):
        ignite_seg.sweep(MLP, BLOBS, CE, points=[{"n_hidden": 4}], **_kwargs(tmp_path))


def test_grid_expands_first_key_slowest_and_param_table():
    pts = check_points(None, {"a": [1, 2], "act": ["relu", "tanh"]})
    assert [p.label for p in pts] == ["a=1, act='relu'", "a=1, act='tanh'", "a=2, act='relu'", "a=2, act='tanh'"]
    names, table = param_table(pts)
    assert names == ["a", "act"]
    np.testing.assert_array_equal(table[:, 0], [1, 1, 2, 2])
    assert np.isnan(table[:, 1]).all()  # names, not numbers


def _run(perfs, hp=FAST_HP):
    trials = tuple(TrialSummary(i, "completed", 1.0, 1.0 + i, p, p, 1.0) for i, p in enumerate(perfs))
    return TrainResult(folder=None, hyperparameters=hp, trials=trials)  # type: ignore[arg-type]


def test_sweep_info_known_answers_and_markdown():
    pts = (SweepPoint(0, kwargs={"h": 1}), SweepPoint(1, kwargs={"h": 100}))
    rec = collate(pts, [_run([0.5, 0.7]), _run([0.9])])
    assert rec.final_perf_val.shape == (2, 2) and np.isnan(rec.final_perf_val[1, 1])
    assert rec.trial_ids.tolist() == [[0, 1], [0, -1]]
    info = sweep_info(rec)
    assert info.numeric and info.log_x and info.x_name == "h"
    np.testing.assert_allclose(info.x, [1, 100])
    assert info.perf_val[0].mean == pytest.approx(0.6) and info.perf_val[0].n == 2
    # t(0.975, 1) = 12.706; std of (0.5, 0.7) = 0.1414; half width = 12.706 * 0.1414 / sqrt(2)
    assert info.perf_val[0].ci_high == pytest.approx(0.6 + 12.706 * 0.1, rel=1e-3)
    assert info.perf_val[1].n == 1 and np.isnan(info.perf_val[1].ci_low)
    md = sweep_markdown(info)
    assert "Best point by mean val perf: **h=100** (0.9)" in md
    cat = sweep_info(collate((SweepPoint(0, ("relu",)), SweepPoint(1, ("tanh",))), [_run([0.5]), _run([0.6])]))
    assert not cat.numeric and cat.x.tolist() == [0, 1]


def test_report_figures_render(tmp_path):
    from ignite_seg.analysis.sweep_report import build_sweep_report

    pts = (SweepPoint(0, kwargs={"h": 1}), SweepPoint(1, kwargs={"h": 4}), SweepPoint(2, kwargs={"h": 16}))
    files = build_sweep_report(collate(pts, [_run([0.5, 0.7]), _run([0.9, 0.8]), _run([0.95, 0.97])]))
    assert files["sweep_perf.png"][:8] == b"\x89PNG\r\n\x1a\n" and files["sweep_hparams.png"][:4] == b"\x89PNG"
