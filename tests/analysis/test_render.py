"""The render step: every ``plot_*`` returns a Figure that saves to PNG (into memory)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from fakes import bs_arrays, lr_sweep_arrays
from matplotlib.figure import Figure

from ignite_seg.analysis.batch import batch_info, plot_batch_size
from ignite_seg.analysis.curves import (
    final_info,
    final_pairs_info,
    plot_final_distribution,
    plot_final_pairs,
    plot_throughtime,
    throughtime_info,
)
from ignite_seg.analysis.hidden import pca_info, plot_hidden_pca
from ignite_seg.analysis.lr import lr_sweep_info, plot_lr_sweep, plot_schedule, schedule_info

RNG = np.random.default_rng(0)
TT = {"epochs": np.linspace(0, 4, 41), "trial_ids": np.arange(4)}
for _k, _base in (("losses_train", 2.0), ("losses_val", 2.2), ("perfs_train", 0.0), ("perfs_val", 0.0)):
    _t = np.exp(-TT["epochs"])[None, :] * (1 + 0.05 * RNG.standard_normal((4, 41)))
    TT[_k] = _base * _t + 0.05 if _k.startswith("losses") else 1 - 0.9 * _t
RES = {"trial_ids": np.arange(4), "final_perf_val": np.array([0.9, 0.92, 0.88, 0.91]),
       "final_perf_train": np.array([0.95, 0.96, 0.94, 0.97]), "final_loss_val": np.array([0.3, 0.25, 0.35, 0.28]),
       "final_loss_train": np.array([0.2, 0.18, 0.22, 0.19])}


def _png(fig: Figure) -> bytes:
    assert isinstance(fig, Figure)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = buf.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return data


def _legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_plot_lr_sweep_log_x_bands_labelled_with_n():
    fig = plot_lr_sweep(lr_sweep_info(lr_sweep_arrays()))
    _png(fig)
    assert all(ax.get_xscale() == "log" for ax in fig.axes)
    texts = _legend_texts(fig)
    assert "repeats: min–max of 2 repeats" in texts and "each repeat (N=2)" in texts
    assert "chosen range [0.003, 0.05]" in texts and "diverged (2 of 2 repeats)" in texts
    assert all(ax.get_xlabel() == "learning rate (log scale)" for ax in fig.axes[2:])


def test_a_wide_log_axis_drops_its_minor_ticks_and_a_narrow_one_keeps_them():
    from matplotlib.ticker import NullLocator

    from ignite_seg.analysis._mpl import new_figure, wide_log_axis

    fig = plot_lr_sweep(lr_sweep_info(lr_sweep_arrays()))  # a sweep over 4+ decades: decades labelled only
    assert all(isinstance(ax.xaxis.get_minor_locator(), NullLocator) for ax in fig.axes)
    assert all(len(ax.get_xticklabels()) >= 3 for ax in fig.axes[2:])
    narrow = new_figure(3, 2).subplots()
    narrow.set_xscale("log")
    narrow.set_xlim(1e-3, 5e-3)  # half a decade: its minor ticks may be the only labelled ones
    wide_log_axis(narrow.xaxis, 1e-3, 5e-3)
    assert not isinstance(narrow.xaxis.get_minor_locator(), NullLocator)


def test_the_derivative_panel_is_not_flattened_by_a_blow_up_past_the_range():
    """Scikit-learn's diabetes (session 13): the loss blew up to ~1e9 before the divergence cut, and the derivative
    panel's axis ran to 1e9, the fall that chose the range a flat line at 0. The axis is capped at 3x the largest
    slope up to the range's top; the fall stays in view."""
    arrays = lr_sweep_arrays()
    x = np.log10(arrays["lrs"])
    arrays["loss_deriv"] = np.where(x > -1.0, 1e9, arrays["loss_deriv"])  # past the range's top (5e-2)
    fig_ylim = plot_lr_sweep(lr_sweep_info(arrays)).axes[2].get_ylim()
    near = np.abs(arrays["loss_deriv"][arrays["lrs"] <= 5e-2]).max()
    assert fig_ylim[1] <= 4 * near  # capped at 3x, plus the axis' margin
    assert fig_ylim[0] <= -near  # the fall that chose the range is in view


def test_the_lr_sweeps_mean_ends_where_most_repeats_diverged():
    """ignite-simple's mnist example: 5 of 8 repeats diverged near lr 0.42 and the 3 left sat at ~0 loss; the
    'mean of 8 repeats' then jumped to theirs. The mean (and its band) stops where the majority is gone,
    as the range rule's mean does; the repeats' own lines go on."""
    arrays = lr_sweep_arrays(repeats=3)
    for key in ("losses", "perfs"):  # two repeats diverge at point 80, one goes on to the end
        arrays[key][1:, 80:] = np.nan
        arrays[key][0] = np.nan_to_num(arrays[key][0], nan=0.01)
    info = lr_sweep_info(arrays)
    fig = plot_lr_sweep(info)
    _png(fig)
    ax = fig.axes[0]
    mean = next(line for line in ax.get_lines() if line.get_label() == "repeats: mean of 3 repeats")
    y = np.asarray(mean.get_ydata(), dtype=float)
    most = info.loss_band.n >= 2
    assert np.isfinite(y[most]).all() and np.isnan(y[~most]).all() and (~most).any()
    assert np.isfinite(arrays["losses"][0][~most]).all()  # ... where one repeat still ran
    assert "mean and band end where most repeats diverged" in _legend_texts(fig)
    # nothing diverged: no such note
    assert "mean and band end where most repeats diverged" not in _legend_texts(
        plot_lr_sweep(lr_sweep_info({**arrays, "losses": np.nan_to_num(arrays["losses"], nan=0.01),
                                     "perfs": np.nan_to_num(arrays["perfs"], nan=0.5)})))


def test_plot_batch_size_panels_and_noise_scale():
    bs, sampled = bs_arrays()
    fig = plot_batch_size(batch_info(bs, sampled, 64))
    _png(fig)
    assert len(fig.axes) == 3
    assert "noise scale B_simple ≈ 70" in _legend_texts(fig)
    assert fig.axes[2].get_xscale() == "log"  # the noise-scale estimates are plotted against the LR
    only_candidates = batch_info(None, sampled, 64)
    assert len(plot_batch_size(only_candidates).axes) == 1


def _inside(fig: Figure, texts) -> list[str]:
    """The non-empty texts whose drawn extent leaves the figure (cut off in the picture)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    out = []
    for t in texts:
        if t.get_text() and t.get_visible():
            e = t.get_window_extent(renderer)
            if e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y0 < box.y0 - 1 or e.y1 > box.y1 + 1:
                out.append(t.get_text())
    return out


@pytest.mark.parametrize("height", [360, 1080])
def test_the_videos_batch_scene_shows_every_panel_of_the_png_and_cuts_no_text(height):
    from ignite_seg.analysis._mpl import new_figure
    from ignite_seg.analysis.batch import draw_batch_size
    from ignite_seg.analysis.movie import FIG_H, FIG_W, movie_size

    bs, sampled = bs_arrays()
    info = batch_info(bs, sampled, 64)
    dpi, _, _ = movie_size(height)
    fig = new_figure(FIG_W, FIG_H, dpi)
    top, _caption = fig.subfigures(2, 1, height_ratios=[5.2, 1])
    draw_batch_size(top, info, compact=True)
    fig.canvas.draw()
    png = plot_batch_size(info)
    assert [ax.get_title().replace("\n", " ") for ax in fig.axes] == [ax.get_title() for ax in png.axes]
    texts = [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
    assert _inside(fig, texts) == []


def test_the_range_test_figure_keeps_its_axis_labels_inside():
    from ignite_seg.tuning.lr_finder import RangeTestResult
    from ignite_seg.tuning.lr_range import RangeRule, choose_lr_range, geometric_lrs

    lrs = geometric_lrs(1e-4, 10.0, 100)
    loss = (2.0 - 1.8 / (1.0 + np.exp(-(np.log10(lrs) + 1.0) / 0.3)))[None, :].repeat(2, axis=0)
    choice = choose_lr_range(lrs, loss, RangeRule(window=5))
    res = RangeTestResult(lrs, loss, loss, choice.lr_min, choice.lr_max, choice.steepest_lr, 40.0, 16, choice)
    fig = res.plot()
    _png(fig)
    ax = fig.axes[0]
    assert _inside(fig, [ax.title, ax.xaxis.label, ax.yaxis.label]) == []
    assert repr(res).startswith("RangeTestResult(lr_min=") and "repeats=2, points=100" in repr(res)
    assert len(repr(res)) < 200  # no arrays


def test_plot_schedule_log_lr():
    fig = plot_schedule(schedule_info({"lr_start": 0.05, "lr_end": 0.5, "cycle_size_epochs": 2, "epochs": 4}))
    _png(fig)
    assert fig.axes[0].get_yscale() == "log" and "learning rate" in fig.axes[0].get_ylabel()


def test_plot_throughtime_every_trial_and_ci_band():
    fig = plot_throughtime(throughtime_info(TT))
    _png(fig)
    texts = _legend_texts(fig)
    assert "val: 95% CI of the mean (N=4)" in texts and "train: each trial (N=4)" in texts
    assert len(fig.axes[0].lines) == 2 * (4 + 1)  # train and val: each trial plus the mean
    assert fig.axes[0].get_xlabel() == "epoch" and fig.axes[1].get_ylabel() == "accuracy"


def test_plot_throughtime_draws_the_best_constant_outputs_training_loss_when_recorded():
    """The trials' constant_loss_train (median) as a grey dashed line on the loss panel, in view, named in the legend
    and the caption; none without it (older folders, unmeasurable models)."""
    from ignite_seg.analysis.captions import throughtime_caption

    top = float(np.nanmax(TT["losses_train"]))
    info = throughtime_info(TT, constant_train=2 * top)
    fig = plot_throughtime(info)
    _png(fig)
    assert f"best constant output, train ({2 * top:.3g})" in _legend_texts(fig)
    assert fig.axes[0].get_ylim()[1] >= 2 * top  # the line is in view above every curve
    assert not any("best constant" in ln.get_label() for ln in fig.axes[1].get_lines())  # the loss panel only
    assert "Grey dashed: the training loss of the best constant output" in throughtime_caption(info)
    plain = throughtime_info(TT)
    assert plain.constant_train is None and "Grey dashed" not in throughtime_caption(plain)
    assert not any("best constant" in t for t in _legend_texts(plot_throughtime(plain)))


def test_plot_throughtime_of_a_loss_below_zero_averages_it_plainly():
    """A Poisson NLL falls from 0.9 through zero to -0.2, its inv-loss perf above 1 (session 27's look): the loss
    panel's geometric mean dropped every point below zero (its line ended at the crossing) and the perf band, clipped
    to [0, 1], lay below its own mean. Both are plain means now, and the legend says "mean"."""
    tt = {k: v.copy() for k, v in TT.items()}
    for k in ("losses_train", "losses_val"):
        tt[k] = TT[k] - 0.4  # 1.6..-0.35
    for k in ("perfs_train", "perfs_val"):
        tt[k] = 0.8 + 0.4 * (TT[k] - TT[k].min()) / np.ptp(TT[k])  # 0.8..1.2
    info = throughtime_info(tt, "inv-loss")
    assert (info.loss_space, info.perf_space) == ("linear", "linear")
    assert np.isfinite(info.loss_val.band.mean).all() and info.loss_val.band.mean[-1] < 0
    assert (info.perf_val.band.high >= info.perf_val.band.mean).all()
    fig = plot_throughtime(info)
    _png(fig)
    assert any("val: mean of 4 trials" in t for t in _legend_texts(fig))
    assert not any("geometric" in t for t in _legend_texts(fig))
    assert info.perf_label == "perf = 1 / (1 + loss); 2 − 1/(1 − loss) below 0"  # values past 1, said how
    assert fig.axes[1].get_ylabel() == info.perf_label
    plain = throughtime_info(TT, "inv-loss")
    assert plain.loss_space == "log" and plain.perf_label == "perf = 1 / (1 + loss)"  # above zero: as before


@pytest.mark.parametrize("n", [1, 4, 12])
def test_plot_final_distribution_any_n(n):
    res = {"trial_ids": np.arange(n), "final_perf_val": np.linspace(0.8, 0.9, n)}
    fig = plot_final_distribution(final_info(res, "final_perf_val", "final val accuracy", n_failed=1))
    _png(fig)
    assert "not shown: 1 failed" in fig.axes[0].get_title()


def test_plot_final_pairs_and_hidden():
    _png(plot_final_pairs(final_pairs_info(RES)))
    x = RNG.standard_normal((3, 20, 5))
    fig = plot_hidden_pca(pca_info({"epochs": np.arange(3.0), "targets": np.arange(20) % 3,
                                    "layer_names": np.array(["h"]), "layer_0": x}))
    _png(fig)
    assert fig.axes[0].name == "3d"


def _length_misc(cut: bool) -> dict:
    e = np.arange(1, 41, dtype=np.float64)
    fall = np.where(e <= 10, 0.7 * e / 10, 0.7 - 0.01 * (e - 10))  # best 0.7 at epoch 10, then overfits
    runs = [fall[:25].tolist(), np.roll(fall, 2)[:30].tolist()]  # both fell and stopped early
    step = {"runs": 2, "epochs_planned": 40, "epochs": 12 if cut else 40, "cut": cut, "slice_items": [30, 30],
            "rel_tol": 0.02, "item_tol": [0.0, 0.0], "run_status": ["stopped", "stopped"], "perfs": runs,
            "decided_by": "x"}
    return {"steps": {"length": step}}


@pytest.mark.parametrize("cut", [True, False])
def test_the_length_check_figure_shows_each_runs_curve_best_tolerance_and_the_cut(cut):
    from ignite_seg.analysis.length import length_caption, length_info, plot_length

    info = length_info(_length_misc(cut), "inv-loss")
    assert info.best_epochs == (11, 13) and info.bests[0] == pytest.approx(0.69)  # the 3-epoch mean peaks after the raw
    assert info.tols[0] == pytest.approx(0.02 * info.bests[0])
    fig = plot_length(info)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("stopped: fell" in x for x in labels) == 2 and "planned: 40 epochs" in labels
    assert ("the trials train 12 epochs" in labels) == cut
    assert ax.get_title().startswith("Length check: " + ("cut 40 -> 12 epochs" if cut else "40 epochs kept"))
    assert ("train 12 epochs (dashed)" in length_caption(info)) == cut
    _png(fig)
    assert length_info({"steps": {"length": {"runs": 0, "epochs_planned": 5, "epochs": 5}}}) is None  # not run
    assert length_info({}) is None


def test_the_lr_sweep_draws_the_best_constant_outputs_loss_on_the_held_out_panel_only():
    # chosen on the held-out loss with the constant's loss recorded: a grey dashed line at it, named in the legend
    # and the caption (a floor there is the plateau rule's trivial one); on a training-loss panel it is not drawn
    from ignite_seg.analysis.captions import lr_caption

    arrays = lr_sweep_arrays()
    held = {**arrays, "holdout_losses": arrays["losses"], "holdout_losses_smoothed": arrays["losses_smoothed"],
            "choice_curve": np.array("holdout_losses"), "constant_loss": np.array(1.1)}
    info = lr_sweep_info(held)
    assert info.constant_loss == 1.1
    fig = plot_lr_sweep(info)
    _png(fig)
    assert "best constant output (1.1)" in _legend_texts(fig)
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "best constant output (1.1)")
    assert list(line.get_ydata()) == [1.1, 1.1] and line.get_linestyle() == "--"
    assert "Grey dashed: the loss of the best constant output" in lr_caption(info)
    train = lr_sweep_info({**arrays, "constant_loss": np.array(1.1)})
    assert train.constant_loss is None and "Grey dashed" not in lr_caption(train)
    assert not any("best constant" in t for t in _legend_texts(plot_lr_sweep(train)))


@pytest.mark.parametrize("height", [360, 1080])
def test_the_videos_caption_keeps_clear_of_the_frames_edges(height):
    """matplotlib's ``wrap=True`` wrapped a centred caption to the whole frame's width: its lines ran to within a
    few pixels of the edges. Every line now keeps the margin, and a caption too long for the strip shrinks."""
    from ignite_seg.analysis._mpl import new_figure
    from ignite_seg.analysis.movie import (
        CAPTION_MARGIN,
        CAPTION_MIN_PT,
        CAPTION_PT,
        FIG_H,
        FIG_W,
        draw_caption,
        movie_size,
    )

    dpi, _, _ = movie_size(height)
    caption = ("2 final trials through time. Loss and perf on fixed train/val subsets: each trial (thin) and their "
               "mean; band: min–max of 2 trials. Grey dashed: the training loss of the best constant output (one "
               "output for every item, 0.933): a training curve on it learned nothing from its inputs.")
    for text, shrunk in ((caption, False), (" ".join([caption] * 2), True)):
        fig = new_figure(FIG_W, FIG_H, dpi)
        _top, strip = fig.subfigures(2, 1, height_ratios=[5.2, 1])
        artist = draw_caption(strip, text)
        fig.canvas.draw()
        box, frame = artist.get_window_extent(fig.canvas.get_renderer()), fig.bbox
        margin = CAPTION_MARGIN * frame.width
        assert box.x0 >= frame.x0 + margin - 1 and box.x1 <= frame.x1 - margin + 1
        assert box.y0 >= strip.bbox.y0 and box.y1 <= strip.bbox.y1
        assert artist.get_text().replace("\n", " ") == text
        assert (artist.get_fontsize() < CAPTION_PT) == shrunk and artist.get_fontsize() >= CAPTION_MIN_PT
