"""The summary (info, markdown, JSON) and the HTML page."""
from __future__ import annotations

import json
import math

import numpy as np
from fakes import MISC, bs_arrays, lr_sweep_arrays

from ignite_seg.analysis.report import markdown_to_html, render_index
from ignite_seg.analysis.stats import describe
from ignite_seg.analysis.text import Problem, TunerFiles, render_markdown, summary_info, summary_json

RUN = {"hyperparameters": {"kind": "tuned"}, "accuracy_style": "classification", "state": "complete",
       "planned_trials": [0, 1, 2, 3, 4], "versions": {"ignite_seg": "0.1.0"}, "created": "2026-12-02T10:00:00"}
HP = {"lr_start": 0.003, "lr_end": 0.05, "batch_size": 64, "cycle_size_epochs": 2, "epochs": 4}
RESULTS = {"trial_ids": np.array([0, 1, 3]), "final_loss_train": np.array([0.2, 0.1, 0.3]),
           "final_loss_val": np.array([0.3, 0.2, 0.4]), "final_perf_train": np.array([0.95, 0.97, 0.9]),
           "final_perf_val": np.array([0.9, 0.8, 1.0]), "seconds": np.array([1.0, 2.0, 3.0])}
RECORDS = [
    {"trial_id": 0, "status": "completed"}, {"trial_id": 1, "status": "completed"},
    {"trial_id": 2, "status": "failed", "error": "RuntimeError: boom in training",
     "error_text": "Traceback ...\nRuntimeError: boom in training\n"},
    {"trial_id": 3, "status": "completed"},
    {"trial_id": 4, "status": "diverged", "error": "loss became non-finite at iteration 7", "diverged_iteration": 7},
]


def _info(**kw):
    bs, sampled = bs_arrays()
    args = dict(run=RUN, final_hp=HP, results=RESULTS, records=RECORDS, misc=MISC, lr=lr_sweep_arrays(), bs=bs,
                bs_sampled=sampled, title="digits/current")
    args.update(kw)
    tuner = TunerFiles(*(args.pop(k) for k in ("misc", "lr", "bs", "bs_sampled")))
    return summary_info(**args, tuner=tuner)


def test_summary_info_statistics_and_problems():
    info = _info()
    # perf's interval is clipped to [0, 1] (0.9 ± 0.25 would end at 1.15)
    assert info.stats["final_perf_val"] == describe(RESULTS["final_perf_val"], RESULTS["trial_ids"], "max", "unit")
    assert info.stats["final_perf_val"].ci_high == 1.0
    assert info.stats["final_loss_val"].best_trial == 1 and info.stats["final_perf_val"].best_trial == 3
    assert info.counts == {"completed": 3, "diverged": 1, "failed": 1, "planned": 5, "unfinished": 0}
    assert info.problems == (Problem(2, "failed", "RuntimeError: boom in training"),
                             Problem(4, "diverged", "loss became non-finite at iteration 7"))
    assert any("B_simple ≈ 70" in line for line in info.evidence["batch_size"])
    assert any("chosen range [0.003, 0.05]" in line for line in info.evidence["lr_start"])
    assert any("64: 0.905" in line for line in info.evidence["batch_size"])  # candidate 64's mean score
    assert any("96: 0.87" in line and "128: pruned" in line for line in info.evidence["batch_size"])


def test_summary_evidence_states_the_tuners_rules_from_misc_json():
    # misc.json as the tuner writes it: the batch size's rule and whether the range was anchored
    misc = {"steps": {
        "lr_range": {"anchored_at_loss_minimum": False},
        "lr_rescan": {"anchored_at_loss_minimum": True},
        "batch_size": {"reason": "best held-out loss of 5 candidates after successive halving (eta=2)"},
    }}
    info = _info(misc=misc)
    assert "chosen: 64 (best held-out loss of 5 candidates after successive halving (eta=2))" in \
        info.evidence["batch_size"]
    assert any("centre of the valley's bottom" in line for line in info.evidence["lr_end"])
    # fastest: no candidate runs, the rule alone; a first sweep that was not anchored says nothing of it
    fastest = {"steps": {"lr_range": {"anchored_at_loss_minimum": False},
                         "batch_size": {"reason": "batch_pts=0: the grid batch size nearest 0.25 x the noise scale"}}}
    info = _info(misc=fastest, bs_sampled=None)
    assert info.evidence["batch_size"][-1] == "chosen by the rule: batch_pts=0: the grid batch size nearest 0.25 x " \
        "the noise scale"
    assert not any("valley" in line for line in info.evidence["lr_end"])


def test_the_lr_evidence_says_how_often_the_held_out_loss_was_measured():
    lr = {**lr_sweep_arrays(), "choice_curve": np.asarray("holdout_losses")}
    sampled = _info(lr=lr, misc={"steps": {"lr_range": {"holdout_every": 16}}})
    assert any("held-out loss (a slice of the training set, measured every 16 steps, interpolated between)" in line
               for line in sampled.evidence["lr_start"])
    older = _info(lr=lr, misc={"steps": {"lr_range": {}}})  # a folder from before the sampling: every step
    assert any("measured after every step)" in line for line in older.evidence["lr_start"])
    assert not any(line.startswith("a longer sweep") for line in older.evidence["lr_start"])
    longer = _info(lr=lr, misc={"steps": {"lr_range": {"longer_after": "the sweep of 500 iterations ... could not"}}})
    assert "a longer sweep: the sweep of 500 iterations ... could not" in longer.evidence["lr_start"]


def test_summary_info_fixed_hyperparameters_say_so():
    info = _info(run={**RUN, "hyperparameters": {"kind": "fixed"}}, misc=None, lr=None, bs=None, bs_sampled=None)
    assert info.evidence["lr_start"] == ("given by the user (FixedHyperparameters): no LR range test was run",)
    assert "no batch-size search" in info.evidence["batch_size"][0]


def test_markdown_has_every_section_and_number():
    md = render_markdown(_info())
    for needle in ("# ignite_seg run: digits/current", "## Chosen hyperparameters", "| `batch_size` | 64 |",
                   "## Final metrics across completed trials", "| 3 | 0.9 | 0.1 |", "## Failed and diverged trials",
                   "| 2 | failed | RuntimeError: boom in training |", "## Tuner decisions (hparams/misc.json)",
                   "- **batch**:", "  - **chosen**: 64", "1 diverged, 1 failed"):
        assert needle in md, needle
    half = 4.303 * 0.1 / math.sqrt(3)
    assert f"[{0.9 - half:.4g}, 1]" in md  # clipped to the range of a perf


def test_summary_json_is_strict_json_with_nulls():
    info = _info(results={k: v[:1] for k, v in RESULTS.items()})
    text = json.dumps(summary_json(info), allow_nan=True)
    data = json.loads(text)
    assert data["trials"]["final"]["final_perf_val"]["std"] is None  # one trial: no std, no NaN in the file
    assert data["trials"]["problems"][0] == {"trial_id": 2, "status": "failed", "reason": "RuntimeError: boom in training"}
    assert data["tuner"] == MISC


def test_markdown_to_html_tables_lists_and_escaping():
    html = markdown_to_html("# T\n\n- a **b**\n  - c `d`\n\n| x | y |\n|---|---|\n| 1 \\| 2 | <b> |\n")
    assert "<h1>T</h1>" in html
    assert "<ul>\n<li>a <strong>b</strong></li>\n<ul>\n<li>c <code>d</code></li>\n</ul>\n</ul>" in html
    assert "<td>1 | 2</td><td>&lt;b&gt;</td>" in html


def test_render_index_links_only_present_files():
    page = render_index("t", "# s", ["summary.md", "lr_sweep.png", "throughtime.gif", "throughtime.mp4"],
                        ["../results.npz"])
    assert 'src="lr_sweep.png"' in page and 'src="throughtime.gif"' in page and 'href="throughtime.mp4"' in page
    assert "video.mp4" not in page and "batch_size.png" not in page and 'href="../results.npz"' in page


def test_the_summary_names_the_fallback_the_tie_rule_and_the_schedule_used():
    from ignite_seg.analysis.text import decision_lines

    misc = {"steps": {"batch_size": {
        "reason": "initial_batch_size=16 (the grid batch size nearest it), because the gradient noise scale could "
                  "not be measured; no candidate runs",
        "rule": "fallback", "fallback": "the gradient noise scale could not be measured (NaN), so "
                                        "initial_batch_size=16 stands in for 0.25 x the noise scale"}}}
    hp = {**HP, "batch_size": 16, "schedule": "cosine", "warmup_epochs": 1.0}
    info = _info(misc=misc, final_hp=hp, bs_sampled=None)
    assert info.evidence["batch_size"][0].startswith("fallback: the gradient noise scale could not be measured (NaN)")
    lines = decision_lines(info)
    assert "- **batch size**: 16 — chosen by the rule: initial_batch_size=16 (the grid batch size nearest it), " \
        "because the gradient noise scale could not be measured; no candidate runs" in lines
    assert "- **learning rate**: peak (lr_end) 0.05, lr_start 0.003 on the cosine schedule (tuned)" in lines
    # the range the schedule was mapped from, where misc.json kept it: the decay may end below it
    misc["steps"]["schedule"] = {"range_min": 0.01, "range_max": 0.25}
    assert "- **learning rate**: peak (lr_end) 0.05, lr_start 0.003 on the cosine schedule, from the tuned range " \
        "[0.01, 0.25] (tuned)" in decision_lines(_info(misc=misc, final_hp=hp, bs_sampled=None))
    assert "- **schedule**: linear warmup from 0 over 1 epochs, then cosine decay from 0.05 to 0.003; 4 epochs" in lines
    assert not any("triangular" in line or "cycles" in line for line in lines)
    # the default triangular schedule keeps its cycles
    assert "- **schedule**: triangular cycles between 0.003 and 0.05, 2 cycles of 2 epochs; 4 epochs" in \
        decision_lines(_info())


def test_the_batch_scene_says_when_the_noise_scale_fell_back_and_when_no_runs_decided():
    from ignite_seg.analysis.batch import batch_info
    from ignite_seg.analysis.scenes import batch_caption

    bs, sampled = bs_arrays()
    info = batch_info(bs, sampled, 64.0)
    assert batch_caption(info) == "Batch size: noise scale B_simple ≈ 70; candidates scored with short runs " \
        "(successive halving); chosen 64."
    fell_back = info._replace(noise_scale=float("nan"), cand_bss=np.zeros(0), final_batch_size=16.0)
    assert batch_caption(fell_back) == "Batch size: the noise scale could not be measured, so the initial batch " \
        "size stood in for it; no candidate runs; chosen 16."


def test_the_first_screen_says_how_the_lr_range_and_the_epochs_were_reached():
    from ignite_seg.analysis.text import decision_lines

    misc = {"settings": {"min_epochs": 5, "max_epochs": 100},
            "steps": {"schedule": {"epochs": 21, "cycle_size_epochs": 21.0, "cycles": 1, "train_examples": 30000,
                                   "n_train": 1437, "lr_how": "rescanned at batch size 16"}}}
    info = _info(misc=misc, final_hp={**HP, "epochs": 21, "cycle_size_epochs": 21.0})
    lines = decision_lines(info)
    assert "- **learning rate**: cycles between 0.003 and 0.05 (tuned: rescanned at batch size 16)" in lines
    why = ("21 epochs: about 30,000 examples per trial (train_examples) / 1,437 training items = 20.9, kept within "
           "[min_epochs, max_epochs] = [5, 100]")
    assert info.evidence["epochs"] == (why,)
    assert any(line.startswith("- **schedule**: ") and line.endswith("; 21 epochs — " + why.split(": ", 1)[1])
               for line in lines)
    fixed = _info(run={**RUN, "hyperparameters": {"kind": "fixed"}}, misc=misc, lr=None, bs=None, bs_sampled=None)
    assert "- **learning rate**: cycles between 0.003 and 0.05 (fixed)" in decision_lines(fixed)


def test_the_learning_rate_line_says_where_the_peak_sits_in_the_range_and_when_it_was_lifted():
    from ignite_seg.analysis.text import decision_lines

    def line(hp, **sched):
        base = {"lr_how": "swept at batch size 16, the chosen one", "range_min": 0.01, "range_max": 0.1,
                "lr_end": hp["lr_end"]}
        lines = decision_lines(_info(misc={"steps": {"schedule": {**base, **sched}}}, final_hp=hp))
        return next(x for x in lines if x.startswith("- **learning rate**"))

    cosine = {**HP, "schedule": "cosine", "lr_start": 0.005, "lr_end": 0.05}
    assert line({**cosine, "lr_end": 0.03162}, peak_at="centre", peak_lifted=False) == (
        "- **learning rate**: peak (lr_end) 0.03162, lr_start 0.005 on the cosine schedule: the geometric centre of "
        "the tuned range [0.01, 0.1] (tuned: swept at batch size 16, the chosen one)")
    inv = {**cosine, "schedule": "inv-sqrt", "lr_start": 0.01, "lr_end": 0.1}
    assert line(inv, peak_at="top", peak_lifted=False) == (
        "- **learning rate**: peak (lr_end) 0.1, lr_start 0.01 on the inv-sqrt schedule: the top of the tuned range "
        "[0.01, 0.1], as the schedule leaves its peak at once (tuned: swept at batch size 16, the chosen one)")
    # lifted: the line says from where, to where, and the divergence that set it
    assert line(cosine, peak_at="centre", peak_lifted=True, diverged_lr=0.5) == (
        "- **learning rate**: peak (lr_end) 0.05, lr_start 0.005 on the cosine schedule, from the tuned range "
        "[0.01, 0.1] (tuned: swept at batch size 16, the chosen one; the peak lifted from the range's centre towards "
        "a decade below where the sweep diverged (0.5))")
    assert line({**cosine, "lr_end": 0.1}, peak_at="centre", peak_lifted=True, diverged_lr=3.0).endswith(
        "the peak lifted from the range's centre to its top (a decade below where the sweep diverged, 3, lies above it))")
    assert line({**cosine, "lr_end": 0.3}, peak_at="centre", peak_lifted=True, diverged_lr=3.0).endswith(
        "the peak lifted above the range's top, towards a decade below where the sweep diverged (3): SGD's best "
        "peak tracks its divergence)")
    # inverse-sqrt's peak is lifted only past the top it starts from (SGD)
    assert line({**inv, "lr_end": 0.3}, peak_at="top", peak_lifted=True, diverged_lr=3.0).endswith(
        "the peak lifted above the range's top, towards a decade below where the sweep diverged (3): SGD's best "
        "peak tracks its divergence)")
    # a schedule that reads only lr_end (constant holds it) does not print the lr_start it ignores
    assert line({**cosine, "schedule": "constant", "lr_end": 0.03162}, peak_at="centre", peak_lifted=False) == (
        "- **learning rate**: peak (lr_end) 0.03162 on the constant schedule: the geometric centre of the tuned range "
        "[0.01, 0.1] (tuned: swept at batch size 16, the chosen one)")
    # a held peak at a trivial floor's quiet top
    assert line({**cosine, "schedule": "constant", "lr_end": 0.1}, peak_at="quiet top", peak_lifted=False) == (
        "- **learning rate**: peak (lr_end) 0.1 on the constant schedule: the top of the tuned range [0.01, 0.1], a "
        "trivial floor's quiet top (the held-out loss within 2% of the best constant output's), which the schedule "
        "holds (tuned: swept at batch size 16, the chosen one)")
    # an older folder (no peak_at): the range alone, as before
    assert line(cosine, peak_lifted=False).startswith(
        "- **learning rate**: peak (lr_end) 0.05, lr_start 0.005 on the cosine schedule, from the tuned range "
        "[0.01, 0.1] (tuned")


def test_the_schedule_line_names_the_schedule_and_its_warmup():
    from ignite_seg.engine.schedule_text import describe_schedule

    base = {"epochs": 12, "lr_start": 0.001, "lr_end": 0.01, "cycle_size_epochs": 6}
    assert describe_schedule(base) == "triangular cycles between 0.001 and 0.01, 2 cycles of 6 epochs; 12 epochs"
    assert describe_schedule({**base, "schedule": "noam", "warmup_steps": 60}) == (
        "noam: linear up to 0.01 over W = 60 steps, then 0.01 · sqrt(W / k); 12 epochs")
    assert describe_schedule({**base, "schedule": "noam", "warmup_epochs": 2.0}) == (
        "noam: linear up to 0.01 over W = 2 epochs, then 0.01 · sqrt(W / k); 12 epochs")
    assert describe_schedule({**base, "schedule": "inv-sqrt", "warmup_steps": 60}) == (
        "linear warmup from 0 over 60 steps, then inverse-square-root decay from 0.01 to 0.001; 12 epochs")
    assert describe_schedule({**base, "schedule": "one-cycle"}) == (
        "one-cycle: up from 0.001 to 0.01, then down to 1e-05; 12 epochs")


def test_the_lr_scene_names_the_plateau_rule_when_it_placed_the_range():
    # the video's caption said "where the smoothed loss falls fastest" also when the plateau rule had moved the range
    # to the top of a flat floor (the adding problem: the range sits where the loss is flattest)
    from ignite_seg.analysis.lr import lr_sweep_info
    from ignite_seg.analysis.scenes import lr_scene_caption
    from ignite_seg.storage.schemas import LRRangeStep

    info = lr_sweep_info(lr_sweep_arrays())
    steepest = lr_scene_caption(info, LRRangeStep(lr_min=0.003, lr_max=0.05))
    assert steepest.endswith("Green: the chosen range [0.003, 0.05], where the smoothed loss falls fastest.")
    assert lr_scene_caption(info, None) == steepest
    floor = lr_scene_caption(info, LRRangeStep(lr_min=0.003, lr_max=0.05, plateau_lr=[1e-4, 0.05],
                                               plateau_perf=[0.45, 0.84], constant_loss=0.19, plateau_at_constant=True))
    assert floor.endswith("[0.003, 0.05], the top of the floor the loss sat on before diverging (the plateau rule).")
    quiet = lr_scene_caption(info, LRRangeStep(lr_min=0.003, lr_max=0.01, plateau_lr=[1e-4, 2.0], plateau_perf=[None, None],
                                               constant_loss=0.19, plateau_at_constant=True, plateau_quiet_lr=0.01,
                                               range_top="quiet"))
    assert quiet.endswith("[0.003, 0.05], the top of the quiet part of the floor the loss sat on, where it lay within 2% "
                          "of the best constant output's (the plateau rule, for a schedule that holds its peak).")
    # the constant's loss measured on the held-out curve: the scene draws its line and the caption names it
    arrays = lr_sweep_arrays()
    measured = lr_sweep_info({**arrays, "holdout_losses": arrays["losses"], "choice_curve": np.array("holdout_losses"),
                              "holdout_losses_smoothed": arrays["losses_smoothed"], "constant_loss": np.array(1.1)})
    assert lr_scene_caption(measured, None).endswith(
        "falls fastest. Grey dashed: the held-out loss of the best constant output (1.1).")


def test_the_videos_closing_card_keeps_each_decisions_headline_and_fits_its_frame():
    from ignite_seg.analysis.scenes import CARD_LINES, CARD_WIDTH, card_lines

    # the decision lines of a tuned momentum SGD run whose length check took the cooler recipe (session 23): the
    # reasons ran to 25 wrapped lines, past the top and bottom of a 16:9 frame
    why = "the held-out perf did not fall by more than the tolerance " * 6
    decisions = [
        "- **learning rate**: peak (lr_end) 0.08534, lr_start 0.008534 on the cosine schedule, from the tuned range "
        "[0.1396, 0.5218] (tuned: rescanned at batch size 32; then / 3.16 by the length check (its first run's "
        "held-out perf dipped and recovered: a recipe at the edge of stability))",
        "- **batch size**: 32 — best held-out loss of the 2 candidate(s) left after successive halving",
        f"- **length check**: 1 full-length run(s); 23 epochs kept, learning rates / 3.162 — {why}",
        "- **final val perf = 1 / (1 + loss)**: mean 0.7846, 95% CI [0.7247, 0.8445] over 2 trials",
    ]
    lines = card_lines(decisions)
    assert lines[0].startswith("learning rate: peak (lr_end) 0.08534") and lines[1].endswith(" …")
    assert lines[2:5] == ["batch size: 32", "length check: 1 full-length run(s); 23 epochs kept, learning rates / 3.162",
                          "final val perf = 1 / (1 + loss): mean 0.7846, 95% CI [0.7247, 0.8445] over 2 trials"]
    assert all(len(line) <= CARD_WIDTH for line in lines) and len(lines) <= CARD_LINES * len(decisions)


def test_the_lr_evidence_says_where_on_a_trivial_floor_the_range_ended():
    # the plateau rule's floor at the constant's loss: its top (a decaying schedule), or its quiet top (constant)
    from ignite_seg.analysis.text import TunerFiles, render_markdown, summary_info

    lrs = np.geomspace(1e-4, 10, 50)
    lr = {"lrs": lrs, "losses": np.full((1, lrs.size), 0.19), "lr_range": np.array([0.003, 0.01]),
          "diverged_lr": np.array([2.0])}
    step = {"lr_min": 0.003, "lr_max": 0.01, "plateau_lr": [1e-4, 2.0], "plateau_perf": [None, None],
            "constant_loss": 0.19, "plateau_at_constant": True, "plateau_quiet_lr": 0.01}

    def md(**extra):
        misc = {"steps": {"lr_range": {**step, **extra}}}
        return render_markdown(summary_info({}, {"lr_start": 0.003, "lr_end": 0.0055, "schedule": "constant"}, None, [],
                                            TunerFiles(misc=misc, lr=lr)))

    assert ("the loss sat on a floor from lr 0.0001 to 2 before diverging at the held-out loss of the best constant "
            "output (0.19): the network learned nothing beyond a constant output there, so the range was moved to "
            "the top of its quiet part (lr 0.01: the held-out loss within 2% of the constant's), as the schedule "
            "holds its peak (the plateau rule)") in " ".join(md(range_top="quiet").split())
    assert "so the range was moved to the floor's top (the plateau rule)" in " ".join(md(range_top="floor").split())
    assert "the top of the quiet part of the floor the loss sat on (the plateau rule, below)" in md(range_top="quiet")
