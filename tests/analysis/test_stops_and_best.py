"""Early stops and best checkpoints in the report: the summary's lines and table, and the through-time
figures' per-point trial counts, stop lines, bands and best-checkpoint marks (known answers)."""
from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
from fakes import stop_and_keep_best

from ignite_seg.analysis import extract
from ignite_seg.analysis.captions import metrics_caption, throughtime_caption
from ignite_seg.analysis.curves import plot_throughtime, throughtime_info
from ignite_seg.analysis.metrics import metrics_info, plot_metrics
from ignite_seg.analysis.outcomes import Outcomes, TrialBest, best_marks, outcomes_info
from ignite_seg.analysis.snapshot import Snapshot
from ignite_seg.analysis.text import render_markdown, summary_info, summary_json
from ignite_seg.reanalyze import main
from ignite_seg.storage.records import TrialResult
from ignite_seg.storage.result_keys import BestRecord, ResultKeys, StopRecord

RUN = {"hyperparameters": {"kind": "fixed"}, "accuracy_style": "classification", "state": "complete",
       "planned_trials": [0, 1, 2, 3]}
RESULTS = {"trial_ids": np.array([0, 1, 2, 3]), "final_loss_train": np.array([0.2, 0.1, 0.3, 0.2]),
           "final_loss_val": np.array([0.3, 0.2, 0.4, 0.3]), "final_perf_train": np.array([0.95, 0.97, 0.9, 0.9]),
           "final_perf_val": np.array([0.9, 0.8, 1.0, 0.9]), "seconds": np.ones(4)}


def _rec(tid: int, best: tuple[float, float] | None = None, stopped: float | None = None, **extra) -> TrialResult:
    rec = TrialResult(trial_id=tid, status="completed", stop=StopRecord(stopped),
                      best=None if best is None else BestRecord("iou", "max", *best))
    return dataclasses.replace(rec, **extra)


RECORDS = [_rec(0, (9.0, 0.78)), _rec(1, (14.0, 0.81)), _rec(2, (12.0, 0.80), stopped=12.5), _rec(3, (10.5, 0.79)),
           TrialResult(trial_id=4, status="diverged", best=BestRecord("iou", "max", 1.0, 0.1))]
RICH = {**RUN, "val_names": ["val"], "metric_names": ["iou"], "best_metric": "iou", "best_mode": "max",
        "handlers": ["ignite.handlers:EarlyStopping"]}


def test_outcomes_from_the_records_completed_trials_only():
    o = outcomes_info(RICH, RECORDS)
    assert o == Outcomes((0, 1, 2, 3), "iou", "max", (TrialBest(0, 9.0, 0.78), TrialBest(1, 14.0, 0.81),
                                                      TrialBest(2, 12.0, 0.80), TrialBest(3, 10.5, 0.79)),
                         ((2, 12.5),), 1)
    assert outcomes_info(RUN, [_rec(0), _rec(1)]) == Outcomes((0, 1))  # no best, no stop, no handler
    assert TrialResult.from_json({"status": "failed"}, trial_id=0).stop is None  # older or unfinished trials say nothing


def test_summary_says_which_checkpoint_and_which_trials_stopped():
    md = render_markdown(summary_info(RICH, {}, RESULTS, RECORDS))
    decisions = md.split("## Decisions")[1].split("## Chosen")[0]
    assert ("- **best checkpoint** (`model_best.pt`) by val iou (max): epochs 9–14 across 4 trials, value mean 0.795 "
            "[min 0.78, max 0.81]") in decisions
    assert "- **early stops**: 1 of 4 completed trials stopped early by a handler (trial 2: epoch 12.5)" in decisions
    table = [line for line in decisions.splitlines() if line.startswith("|")]
    assert table == ["| trial | best epoch | best val iou | stopped early at epoch |", "|---|---|---|---|",
                     "| 0 | 9 | 0.78 | — |", "| 1 | 14 | 0.81 | — |", "| 2 | 12 | 0.8 | 12.5 |", "| 3 | 10.5 | 0.79 | — |"]
    data = json.loads(json.dumps(summary_json(summary_info(RICH, {}, RESULTS, RECORDS))))["trials"]
    assert data["best_checkpoint"]["metric"] == "iou" and data["best_checkpoint"]["trials"][3] == {
        "trial_id": 3, "epoch": 10.5, "value": 0.79}
    assert data["stopped_early"] == [{"trial_id": 2, "epoch": 12.5}]


def test_summary_condenses_many_trials_and_names_the_best():
    records = [_rec(t, (float(5 + t % 4), 0.5 + t / 100), stopped=float(3 + t) if t % 2 else None) for t in range(12)]
    md = render_markdown(summary_info(RICH, {}, None, records))
    assert ("by val iou (max): epochs 5–8 across 12 trials, value mean 0.555 [min 0.5, max 0.61]; best trial 11 "
            "(epoch 8, value 0.61)") in md
    assert ("- **early stops**: 6 of 12 completed trials stopped early by a handler (trial 1: epoch 4, trial 3: "
            "epoch 6, trial 5: epoch 8, trial 7: epoch 10, trial 9: epoch 12, trial 11: epoch 14)") in md
    assert "| trial | best epoch" not in md  # no table for many trials
    one = render_markdown(summary_info(RICH, {}, None, [_rec(0, (3.25, 0.7))]))
    assert "by val iou (max): trial 0 at epoch 3.25, value 0.7\n" in one and "| trial | best epoch" not in one
    assert "- **early stops**: the one completed trial was not stopped early by a handler" in one  # no stop
    none = render_markdown(summary_info(RICH, {}, None, [_rec(0, (3.25, 0.7)), _rec(1, (2.0, 0.6))]))
    assert "- **early stops**: none of the 2 completed trials was stopped early by a handler" in none


def test_a_run_without_stops_or_best_checkpoint_reads_as_before():
    plain = [{"trial_id": t, "status": "completed"} for t in range(4)]  # records without the new fields
    before = render_markdown(summary_info(RUN, {}, RESULTS, plain))
    now = render_markdown(summary_info(RUN, {}, RESULTS, [_rec(t) for t in range(4)]))  # stopped_early: false
    assert now == before
    assert "best checkpoint" not in now and "early stops" not in now and "\n\n\n" not in now
    assert "stopped_early" not in summary_json(summary_info(RUN, {}, RESULTS, [_rec(t) for t in range(4)]))["trials"]


def _tt(trials: int) -> dict[str, np.ndarray]:
    """``trials`` trials over 6 points; trial 1 stops after point 3 and trial 2 after point 1 (NaN after)."""
    epochs = np.arange(6) * 0.5
    tt = {"epochs": epochs, "trial_ids": np.arange(trials)}
    for i, k in enumerate(("losses_train", "losses_val", "perfs_train", "perfs_val", "metric_iou_train",
                           "metric_iou_val")):
        y = 0.1 + 0.05 * i + 0.1 * np.arange(trials)[:, None] + 0.02 * epochs[None, :]
        for tid, last in ((1, 3), (2, 1)):
            if tid < trials:
                y[tid, last + 1:] = np.nan
        tt[k] = y
    return tt


def _legend(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def _filled_x(ax) -> set[float]:
    """The x of every vertex of the bands drawn on ``ax``."""
    return {round(float(x), 6) for c in ax.collections for p in c.get_paths() for x in p.vertices[:, 0]}


def test_throughtime_counts_the_finite_trials_and_draws_no_band_from_one():
    info = throughtime_info(_tt(3))
    np.testing.assert_array_equal(info.counts, [3, 3, 2, 2, 1, 1])
    assert info.stops == ((1, 1.5), (2, 0.5))
    fig = plot_throughtime(info)
    fig.savefig(io.BytesIO(), format="png")
    texts = _legend(fig)
    assert "train: each trial (N=3→1)" in texts and "val: 95% CI of the mean (N=3→1)" in texts
    assert "train: geometric mean of 3→1 trials" in texts and "a trial stopped early (N drops after)" in texts
    assert "N=3→1 completed trials, 2 stopped early" in fig.get_suptitle()
    loss = fig.axes[0]
    mean = next(ln for ln in loss.lines if ln.get_label() == "val: geometric mean of 3→1 trials")
    assert np.isfinite(mean.get_ydata()).tolist() == [True] * 4 + [False] * 2  # no mean of one trial
    assert _filled_x(loss) <= {0.0, 0.5}  # the 95% CI needs 3 trials: only the first two points
    assert sorted(ln.get_xdata()[0] for ln in loss.lines if ln.get_linestyle() == ":") == [0.5, 1.5]
    assert {"trial 1 stopped", "trial 2 stopped"} <= {t.get_text() for t in loss.texts}
    cap = throughtime_caption(info)
    assert "95% CI of the mean (N=3→1)" in cap and "where 2 of 3 trials stopped early" in cap

    two = throughtime_info(_tt(2))  # below 3 trials: the min-max band, where 2 trials remain
    np.testing.assert_array_equal(two.counts, [2, 2, 2, 2, 1, 1])
    fig = plot_throughtime(two)
    assert _filled_x(fig.axes[1]) <= {0.0, 0.5, 1.0, 1.5} and 1.5 in _filled_x(fig.axes[1])
    assert "val: min–max of 2→1 trials" in _legend(fig)


def test_figures_count_the_recorded_stops_as_the_summary_does():
    """Every trial stopped early: the one that stopped last ends at the curves' last point, so the curves
    alone show one stop fewer. With the stops the trials recorded, title, caption and summary agree."""
    tt = _tt(2)  # trial 1 ends after point 3; trial 0 runs to the last point but was stopped there too
    recorded = ((0, 2.5), (1, 1.5))
    assert throughtime_info(tt).stops == ((1, 1.5),)  # read off the curves: one
    info = throughtime_info(tt, stops=recorded)
    assert info.stops == recorded
    fig = plot_throughtime(info)
    assert "N=2→1 completed trials, 2 stopped early" in fig.get_suptitle()
    assert "where 2 of 2 trials stopped early" in throughtime_caption(info)
    records = [_rec(0, stopped=2.5), _rec(1, stopped=1.5)]
    assert outcomes_info({}, records).stops == recorded
    decisions = render_markdown(summary_info(RUN, {}, RESULTS, records))
    assert "2 of 2 completed trials stopped early" in decisions
    metrics = metrics_info(tt, ResultKeys(metric_names=("iou",), metric_modes={"iou": "max"}), stops=recorded)
    assert metrics.stops(metrics.metrics[0]) == recorded
    assert "where 2 of 2 trials stopped early" in metrics_caption(metrics)


def test_best_checkpoints_are_marked_on_the_panel_of_their_metric():
    o = Outcomes((0, 1, 2), "loss", "min", (TrialBest(0, 2.0, 0.2), TrialBest(1, 1.0, 0.35), TrialBest(2, 0.5, 0.3)))
    fig = plot_throughtime(throughtime_info(_tt(3), best=best_marks(o, "val loss")))
    stars = [[ln for ln in ax.lines if ln.get_marker() == "*"] for ax in fig.axes[:2]]
    assert len(stars[0]) == 1 and stars[1] == []  # the loss panel only
    np.testing.assert_array_equal(stars[0][0].get_xdata(), [2.0, 1.0, 0.5])
    np.testing.assert_array_equal(stars[0][0].get_ydata(), [0.2, 0.35, 0.3])
    assert stars[0][0].get_label() == "each trial's best checkpoint (by val loss, min)"
    assert "Stars on the loss panel" in throughtime_caption(throughtime_info(_tt(3), best=best_marks(o, "val loss")))

    keys = ResultKeys(("val",), ("iou",))
    iou = o._replace(metric="iou", mode="max")
    minfo = metrics_info(_tt(3), keys, best_marks(iou, "val iou"))
    np.testing.assert_array_equal(minfo.counts(minfo.metrics[0]), [3, 3, 2, 2, 1, 1])
    fig = plot_metrics(minfo)
    assert [ln.get_xdata().tolist() for ln in fig.axes[0].lines if ln.get_marker() == "*"] == [[2.0, 1.0, 0.5]]
    assert "val: mean of 3→1 trials" in _legend(fig) and "N=3→1" in fig.get_suptitle()
    cap = metrics_caption(minfo)
    assert "Stars on the iou panel: each trial's best checkpoint (model_best.pt) by val iou (max)" in cap
    assert "where 2 of 3 trials stopped early" in cap
    assert not any(ln.get_marker() == "*" for ax in plot_throughtime(throughtime_info(_tt(3), best=best_marks(
        iou, "val iou"))).axes for ln in ax.lines)  # a custom metric's checkpoint is not on the loss/perf panels


def test_a_real_run_with_stops_and_best_checkpoints_end_to_end(tiny_run: Path):
    # trial 1 keeps 9 snapshots, trial 2 keeps 6; best checkpoints at known snapshots of the val loss
    chosen = stop_and_keep_best(tiny_run, {1: 9, 2: 6}, {0: 10, 1: 7, 2: 5})
    assert main([str(tiny_run), "--analysis", "images"]) == 0
    a = tiny_run / "analysis"
    md = (a / "summary.md").read_text()
    epochs = np.load(tiny_run / "throughtimes.npz")["epochs"]
    e1, e2 = (f"{epochs[k]:.2f}".rstrip("0").rstrip(".") for k in (8, 5))
    assert f"- **early stops**: 2 of 3 completed trials stopped early by a handler (trial 1: epoch {e1}, " \
           f"trial 2: epoch {e2})" in md
    for tid, (epoch, value) in chosen.items():
        assert f"| {tid} | {f'{epoch:.2f}'.rstrip('0').rstrip('.')} | {value:.4g} |" in md
    html = (a / "index.html").read_text()
    head = html.split("<figure")[0]  # before the figures: the decisions
    assert "<strong>best checkpoint</strong>" in head and "<strong>early stops</strong>" in head
    assert "<th>best val loss</th>" in head
    info = extract.throughtime_of(Snapshot(str(tiny_run)))
    finite = np.isfinite(np.load(tiny_run / "throughtimes.npz")["losses_val"]).sum(axis=0)
    np.testing.assert_array_equal(info.counts, finite)
    assert finite.tolist() == [3] * 6 + [2] * 3 + [1] * (epochs.size - 9)
    assert info.stops == ((1, float(epochs[8])), (2, float(epochs[5])))
    np.testing.assert_array_equal(info.best.epochs, [chosen[t][0] for t in (0, 1, 2)])
    assert "where 2 of 3 trials stopped early" in html and "Stars on the loss panel" in html
