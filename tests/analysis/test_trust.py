"""A report a reader trusts (issue 17): valid bands, captions that say what is drawn, fresh products,
refusals that name the missing data, and a page whose images and videos load in a browser."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from fakes import add_tuner_files, lr_sweep_arrays

import ignite_seg
from ignite_seg.analysis.captions import lr_caption, throughtime_caption
from ignite_seg.analysis.curves import plot_throughtime, throughtime_info
from ignite_seg.analysis.lr import lr_sweep_info, plot_lr_sweep
from ignite_seg.analysis.stats import describe, mean_band
from ignite_seg.analysis.text import render_markdown, summary_info
from ignite_seg.reanalyze import main
from ignite_seg.storage.atomic import write_json


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def _noisy(seed: int = 0) -> dict[str, np.ndarray]:
    """Five trials of tiny noisy losses near 0 and accuracies near 1: a linear t-interval leaves the valid range."""
    rng = np.random.default_rng(seed)
    s = 30
    loss = np.exp(rng.normal(np.log(np.linspace(1.0, 1e-4, s)), 1.5, size=(5, s)))
    acc = np.clip(1 - np.abs(rng.normal(0, 0.03, size=(5, s))), 0, 1)
    return {"epochs": np.linspace(0, 3, s), "trial_ids": np.arange(5), "losses_train": loss, "losses_val": loss[::-1],
            "perfs_train": acc, "perfs_val": acc[::-1]}


def test_no_band_outside_its_valid_range_on_data_that_provoked_it():
    tt = _noisy()
    linear_loss, linear_acc = mean_band(tt["losses_train"]), mean_band(tt["perfs_train"])
    assert (linear_loss.low <= 0).any() and (linear_acc.high > 1).any()  # the data provokes the old bands
    info = throughtime_info(tt)
    for cs in (info.loss_train, info.loss_val):
        assert (cs.band.low > 0).all() and (cs.band.low <= cs.band.mean).all() and (cs.band.mean <= cs.band.high).all()
    for cs in (info.perf_train, info.perf_val):
        assert (cs.band.low >= 0).all() and (cs.band.high <= 1).all()
    # the summary's intervals too: an accuracy interval never ends above 1, a loss interval never at or below 0
    acc = np.array([1.0, 1.0, 0.99, 1.0])
    assert describe(acc, np.arange(4), "max").ci_high > 1
    assert describe(acc, np.arange(4), "max", "unit").ci_high == 1.0
    assert describe(np.array([1e-4, 0.5, 1e-3]), np.arange(3), "min", "log").ci_low > 0
    # and the legend says where the bands were computed
    texts = _legend_texts(plot_throughtime(info))
    assert "bands: geometric mean, 95% CI in log space" in texts and "bands: 95% CI clipped to [0, 1]" in texts


def test_captions_say_the_band_the_figure_draws():
    lr = lr_sweep_info(lr_sweep_arrays(repeats=3))
    cap, texts = lr_caption(lr), _legend_texts(plot_lr_sweep(lr))
    assert "min–max of 3 repeats" in cap and "95% CI" not in cap
    assert "repeats: min–max of 3 repeats" in texts
    tt = _noisy()
    for n, drawn in ((2, "train: min–max of 2 trials"), (5, "train: 95% CI of the mean (N=5)")):
        sub = {k: (v[:n] if v.ndim == 2 else v) for k, v in tt.items()}
        sub["trial_ids"] = np.arange(n)
        info = throughtime_info(sub)
        cap = throughtime_caption(info)
        assert drawn in _legend_texts(plot_throughtime(info))
        assert drawn.split(": ", 1)[1] in cap
        assert ("log space" in cap) == (n >= 3)


def test_report_says_the_state_the_run_will_have():
    md = render_markdown(summary_info({"state": "collated"}, None, None, []))
    assert "state: **complete**" in md and "collated" not in md


def _mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (folder / "analysis").iterdir()}


def test_reanalyze_after_train_marks_the_run_complete_is_a_no_op(tiny_run: Path):
    run = json.loads((tiny_run / "run.json").read_text())
    write_json(tiny_run / "run.json", {**run, "state": "collated"})  # as train() analyses it
    ignite_seg.analyze(tiny_run, analysis="images")
    time.sleep(0.01)
    write_json(tiny_run / "run.json", {**run, "state": "complete"})  # train() marks it complete afterwards
    before = _mtimes(tiny_run)
    assert main([str(tiny_run), "--analysis", "images"]) == 0
    assert _mtimes(tiny_run) == before
    # what the analysis reads of run.json still counts: another accuracy style redoes the products
    write_json(tiny_run / "run.json", {**run, "accuracy_style": "inv-loss"})
    assert main([str(tiny_run), "--analysis", "images"]) == 0
    assert _mtimes(tiny_run)["throughtime.png"] != before["throughtime.png"]


def test_images_after_collecting_nothing_extra_and_the_refusal_names_the_hidden_data(tiny_run: Path):
    run = json.loads((tiny_run / "run.json").read_text())
    write_json(tiny_run / "run.json", {**run, "allow_later_analysis_up_to": "none"})
    ignite_seg.analyze(tiny_run, analysis="images-min")  # the through-time data is always recorded
    assert (tiny_run / "analysis" / "throughtime.png").is_file()
    with pytest.raises(ignite_seg.AnalysisUnavailableError, match="hidden representations") as err:
        ignite_seg.analyze(tiny_run, analysis="video-draft")
    assert "allow_later_analysis_up_to='none'" in str(err.value)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

_CHECK = """<script>window.addEventListener('load', () => setTimeout(() => {
  const bad = [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src);
  const vids = [...document.querySelectorAll('video')];
  Promise.all(vids.map(v => new Promise(ok => { if (v.readyState >= 1) ok(); else { v.onloadedmetadata = ok;
    v.onerror = ok; setTimeout(ok, 8000); } }))).then(() => {
    vids.filter(v => !(v.videoWidth > 0)).forEach(v => bad.push(v.src));
    document.body.setAttribute('data-broken', JSON.stringify(bad)); document.body.setAttribute('data-done', '1');
  });
}, 200));</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_report_page_loads_every_image_and_video_in_chromium(tiny_run: Path):
    add_tuner_files(tiny_run)
    ignite_seg.analyze(tiny_run, analysis="video-draft", cores=2)
    a = tiny_run / "analysis"
    page = (a / "index.html").read_text().replace('loading="lazy"', "")
    (a / "check.html").write_text(page.replace("</body>", _CHECK + "</body>"))
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required",
                          "--virtual-time-budget=15000", "--dump-dom", (a / "check.html").as_uri()],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tiny_run)})
    assert 'data-done="1"' in out.stdout, out.stderr[-2000:]
    broken = json.loads(re.search(r"data-broken=\"([^\"]*)\"", out.stdout).group(1).replace("&quot;", '"'))
    assert broken == []
    assert re.findall(r'<img src="([^"]+)"', page) and "<video" in page


def test_batch_figure_plots_what_the_rule_ranked_read_from_bs_sampled(tmp_path: Path):
    from ignite_seg.analysis.batch import batch_info, plot_batch_size
    from ignite_seg.storage.schemas import BatchSampledFile

    # rung 1: four candidates, 2 repeats; 64 and 32 are cut; rung 2: 16 has the lower loss, 8 wins by the tie rule
    nan = np.nan
    l1 = np.array([[0.30, 0.29, 0.40, 0.50], [0.32, 0.30, 0.44, 0.52]])
    l2 = np.array([[0.200, 0.198, nan, nan], [0.202, 0.199, nan, nan]])
    rec = BatchSampledFile.of_rungs([8, 16, 32, 64], 8, [0.5, 1.0], [1 - l1, 1 - l2], [l1, l2])
    rec.write(tmp_path / "bs_sampled.npz")
    back = BatchSampledFile.read(tmp_path / "bs_sampled.npz", strict=True)
    tie = "batch 8 is within batch_tie_tol=0.03 of the best scored 16 (loss); ties rank the smaller batch size first"
    info = batch_info(None, back, 8, "loss", tie)
    fig = plot_batch_size(info)
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines if ln.get_gid()}
    np.testing.assert_allclose(lines["candidates"].get_xdata(), back.bss[:2])
    np.testing.assert_allclose(lines["candidates"].get_ydata(), np.nanmean(back.rung_losses[1][:, :2], axis=0))
    # the pruned ones at their real score at the rung that cut them, not at a placeholder height
    np.testing.assert_allclose(lines["pruned"].get_ydata(), np.nanmean(back.rung_losses[0][:, 2:], axis=0))
    texts = _legend_texts(fig)
    assert "lowest held-out loss: 16" in texts and "chosen 8 by the tie rule" in texts
    assert "last rung: mean of 2 repeats" in texts
    assert any(tie[:40] in t.get_text().replace("\n", " ") for t in fig.axes[0].texts)
    one = BatchSampledFile.of_rungs([8, 16], 16, [1.0], [1 - l2[:1, :2]], [l2[:1, :2]])
    assert "last rung: the only repeat, no mean" in _legend_texts(plot_batch_size(batch_info(None, one, 16, "loss")))


def test_hidden_layer_named_by_module_class_and_trial():
    from ignite_seg.analysis.hidden import pca_info

    rng = np.random.default_rng(0)
    hidden = {"epochs": np.arange(2.0), "targets": np.arange(20) % 3, "layer_names": np.array(["0", "1"]),
              "layer_types": np.array(["Linear", "ReLU"]), "layer_0": rng.normal(size=(2, 20, 5)),
              "layer_1": rng.normal(size=(2, 20, 4))}
    assert pca_info(hidden, trial=3).layer_title() == "module '1' (ReLU) of trial 3"
    assert pca_info({k: v for k, v in hidden.items() if k != "layer_types"}).layer_title() == "module '1'"


def test_index_puts_decisions_and_figures_before_the_evidence():
    from ignite_seg.analysis.report import render_index

    md = ("# ignite_seg run: t\n\n- state: **complete**\n\n## Decisions\n\n- **batch size**: 8\n\n"
          "## Chosen hyperparameters\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Tuner decisions (hparams/misc.json)\n\n- **x**: 1\n")
    page = render_index("t", md, ["summary.md", "lr_sweep.png", "video.mp4", "video.poster.png"],
                        captions={"lr_sweep.png": "CAPTION FROM INFO"})
    assert page.index("Decisions") < page.index('<figure id="video-mp4"') < page.index("Chosen hyperparameters")
    assert page.index("<details><summary>Tuner decisions") > page.index('<figure id="lr_sweep-png"')
    assert '<a href="#lr_sweep-png">' in page and '<a href="#video-mp4">' in page
    assert 'poster="video.poster.png"' in page and "CAPTION FROM INFO" in page
