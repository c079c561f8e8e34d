"""Named validation sets and custom metrics (docs/usage.md, "Keys"): extracted, drawn and summarised
under their names; a plain run's products and files stay as they were."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from fakes import RICH, add_val_sets_and_metric
from matplotlib.figure import Figure

import ignite_seg
from ignite_seg.analysis import extract, products
from ignite_seg.analysis.curves import (
    CurveSet,
    SetCurves,
    curve_set,
    final_panels_info,
    plot_final_panels,
    plot_throughtime,
    throughtime_info,
)
from ignite_seg.analysis.metrics import MetricCurves, metrics_info, plot_metrics
from ignite_seg.analysis.snapshot import Snapshot
from ignite_seg.analysis.stats import describe, mean_band
from ignite_seg.analysis.text import METRICS, final_metrics, render_markdown, summary_info, summary_json
from ignite_seg.storage.result_keys import ResultKeys
from ignite_seg.storage.run_folder import RunFolder

KEYS = ResultKeys(("clean", "noisy"), ("iou",))
IDS = np.array([0, 1, 3])


def _tt(keys: ResultKeys) -> dict[str, np.ndarray]:
    """Every curve of ``keys``: trial t's i-th key is i + t/10 + epoch/10 (3 trials, 4 snapshots)."""
    epochs = np.linspace(0, 1.5, 4)
    tt = {"epochs": epochs, "trial_ids": IDS}
    for i, k in enumerate(keys.curve_keys()):
        tt[k] = i + IDS[:, None] / 10 + epochs[None, :] / 10
    return tt


def _results(keys: ResultKeys) -> dict[str, np.ndarray]:
    res = {"trial_ids": IDS, "seconds": np.ones(3)}
    for i, k in enumerate(keys.final_keys()):
        res[f"final_{k}"] = i + np.array([0.3, 0.1, 0.2])
    return res


def _legend(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    return buf.getvalue()


def test_throughtime_info_adds_the_other_val_sets_by_name():
    tt = _tt(KEYS)
    info = throughtime_info(tt, "classification", KEYS)
    assert info.val_label == "val (clean)"
    # one space per kind for every set (a loss curve holds 0 and the perfs pass 1: plain means for all)
    assert (info.loss_space, info.perf_space) == ("linear", "linear")
    expected = (SetCurves("noisy", curve_set(tt, "losses_val_noisy", "linear"), curve_set(tt, "perfs_val_noisy", "linear")),)
    np.testing.assert_equal([m._asdict() for m in info.more_val], [m._asdict() for m in expected])
    np.testing.assert_allclose(info.more_val[0].perf.band.mean, 5 + 0.4 / 3 + tt["epochs"] / 10)  # perfs_val_noisy: i=5
    plain = throughtime_info(tt, "classification")  # without the names: the primary set alone, as before
    assert plain.more_val == () and plain.val_label == "val"


def test_metrics_info_one_entry_per_metric_train_first():
    tt = _tt(KEYS)
    info = metrics_info(tt, KEYS)
    assert [m.name for m in info.metrics] == ["iou"]
    (iou,) = info.metrics
    assert iou.mode == "max" and [name for name, _ in iou.splits] == ["train", "val (clean)", "noisy"]
    y = tt["metric_iou_val_noisy"]
    np.testing.assert_equal(iou.splits[2][1]._asdict(), CurveSet(y, mean_band(y))._asdict())
    assert metrics_info(tt, ResultKeys(("clean", "noisy"))) is None  # no custom metric: nothing to draw
    assert metrics_info({"epochs": np.zeros(0), "trial_ids": np.zeros(0)}, KEYS) is None
    assert isinstance(iou, MetricCurves)


def test_final_panels_every_val_set_then_every_metric_with_its_direction():
    keys = ResultKeys(("clean", "noisy"), ("iou", "mae"), (("mae", "min"),))
    res = _results(keys)
    info = final_panels_info(res, keys, "accuracy", n_failed=1)
    assert [p.label for p in info.panels] == [
        "final val (clean) accuracy", "final noisy accuracy", "final iou on val (clean)", "final iou on noisy",
        "final mae on val (clean)", "final mae on noisy"]
    by_label = {p.label: p for p in info.panels}
    assert by_label["final iou on noisy"].stats.best_trial == 0  # highest
    assert by_label["final mae on noisy"].stats.best_trial == 1  # lowest: mae is recorded as "min"
    assert by_label["final mae on noisy"].stats == describe(res["final_metric_mae_val_noisy"], IDS, "min")
    plain = final_panels_info(_results(ResultKeys()), ResultKeys(), "accuracy")
    assert [p.label for p in plain.panels] == ["final val accuracy"]  # as final_perf.png was labelled


def test_figures_draw_every_val_set_and_metric_by_name():
    fig = plot_throughtime(throughtime_info(_tt(KEYS), "classification", KEYS))
    _png(fig)
    texts = _legend(fig)
    assert "val (clean): each trial (N=3)" in texts and "noisy: mean of 3 trials" in texts
    assert "noisy: 95% CI of the mean (N=3)" in texts
    assert len(fig.axes[0].lines) == 2 * (3 + 1) + 1  # train and val: each trial and the mean; noisy: the mean
    assert fig.axes[0].lines[-1].get_linestyle() == "--"

    fig = plot_metrics(metrics_info(_tt(KEYS), KEYS))
    _png(fig)
    assert fig.axes[0].get_title() == "iou through time (higher is better)" and fig.axes[0].get_ylabel() == "iou"
    assert {"train: mean of 3 trials", "val (clean): mean of 3 trials", "noisy: mean of 3 trials"} <= set(_legend(fig))

    fig = plot_final_panels(final_panels_info(_results(KEYS), KEYS, "accuracy"))
    _png(fig)
    assert [ax.get_xlabel() for ax in fig.axes] == ["final val (clean) accuracy", "final noisy accuracy",
                                                    "final iou on val (clean)", "final iou on noisy"]


def test_summary_lists_every_final_key_under_its_name():
    run = {"hyperparameters": {"kind": "fixed"}, "accuracy_style": "classification", **RICH}
    res = _results(KEYS)
    info = summary_info(run, {}, res, [{"trial_id": int(t), "status": "completed"} for t in IDS])
    assert [k for k, _, _ in info.metrics] == [f"final_{k}" for k in KEYS.final_keys()]
    assert info.stats["final_metric_iou_val_noisy"] == describe(res["final_metric_iou_val_noisy"], IDS, "max")
    data = json.loads(json.dumps(summary_json(info)))
    final = data["trials"]["final"]
    assert set(final) == {f"final_{k}" for k in KEYS.final_keys()}
    assert final["final_perf_val_noisy"]["mean"] == pytest.approx(res["final_perf_val_noisy"].mean())
    assert final["final_metric_iou_train"]["best_trial"] == 0 and final["final_metric_iou_train"]["mode"] == "max"
    assert data["trials"]["val_names"] == ["clean", "noisy"] and data["trials"]["metric_names"] == ["iou"]
    md = render_markdown(info)
    assert "| iou on noisy | 3 |" in md and "| noisy perf (accuracy) | 3 |" in md and "| val (clean) loss | 3 |" in md
    assert "- validation sets: clean (primary: `val` in the keys), noisy (`val_noisy`)" in md
    assert final_metrics(ResultKeys()) == METRICS  # a plain run's table as before


def test_rich_folder_collated_analysed_and_summarised(tiny_run: Path):
    add_val_sets_and_metric(tiny_run)
    rf = RunFolder(tiny_run)
    with np.load(rf.throughtimes) as z:
        tt = {k: z[k] for k in z.files}
    with np.load(rf.results) as z:
        res = {k: z[k] for k in z.files}
    t, s = tt["losses_train"].shape
    for k in KEYS.curve_keys():
        assert tt[k].shape == tt[f"{k}_smoothed"].shape == (t, s), k
    for k in KEYS.final_keys():
        assert res[f"final_{k}"].shape == (t,), k
    np.testing.assert_allclose(res["final_perf_val_noisy"], res["final_perf_val"] - 0.2)
    np.testing.assert_allclose(tt["metric_iou_val_noisy"], 0.8 * (tt["perfs_val"] - 0.2))

    ignite_seg.analyze(tiny_run, analysis="images", cores=1)
    a = tiny_run / "analysis"
    assert {"throughtime.png", "metrics.png", "final_perf.png"} <= {p.name for p in a.iterdir()}
    summary = json.loads((a / "summary.json").read_text())
    final = summary["trials"]["final"]
    assert final["final_metric_iou_val"]["mean"] == pytest.approx(0.8 * res["final_perf_val"].mean())
    assert final["final_loss_val_noisy"]["n"] == t
    page = (a / "index.html").read_text()
    assert 'src="metrics.png"' in page and "Custom metrics through time" in page
    assert len(extract.final_panels_of(Snapshot(str(tiny_run))).panels) == 4  # 2 val sets, then iou on each


def test_plain_folder_gives_todays_products_and_files(tiny_run: Path):
    rf = RunFolder(tiny_run)
    available = [p.name for p in products.PRODUCTS if p.available(Snapshot(rf.path))]
    assert "metrics_png" not in available
    ignite_seg.analyze(tiny_run, analysis="images", cores=1)
    assert {p.name for p in (tiny_run / "analysis").iterdir()} == {
        "summary.md", "summary.json", "index.html", ".manifest.json", "lr_schedule.png", "throughtime.png",
        "final_perf.png", "final_train_vs_val.png", "hidden_pca.png"}
    summary = json.loads((tiny_run / "analysis" / "summary.json").read_text())
    assert list(summary["trials"]["final"]) == [k for k, _, _ in METRICS]
    assert summary["trials"]["val_names"] == ["val"] and summary["trials"]["metric_names"] == []
    with np.load(rf.throughtimes) as z:
        assert not [k for k in z.files if "noisy" in k or k.startswith("metric_")]
