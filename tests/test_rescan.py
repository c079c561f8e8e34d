"""The rescan's consistency rule (tuning/recipe.py RESCAN_AGREE): a rescan whose range lies more than a decade
below the first sweep's, scaled to its batch size, is not used; and the divergence that goes with the used range
(the schedule's lifted peak reads it) comes from the same sweep, scaled alike. The sweeps are stand-ins here (the
range test itself is tested in test_tuner.py and test_lr_range.py); the rule, its record and its files are real."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from ignite_seg import get_preset
from ignite_seg.config.specs import normalize_spec
from ignite_seg.storage.run_folder import RunFolder
from ignite_seg.storage.schemas import LR_INITIAL_NPZ, LR_NPZ, MISC_JSON, LRRangeStep, MiscFile
from ignite_seg.tuning import recipe
from ignite_seg.tuning.recipe import RESCAN_AGREE, _final_lr_range, _start


def _sweep(lr_min: float, lr_max: float, batch_size: int, diverged=(np.nan,), top=None) -> SimpleNamespace:
    """A sweep's choice; ``top``: where a plateau range ended ("quiet": a trivial floor's quiet top)."""
    written: list[str] = []
    file = SimpleNamespace(write=lambda path: written.append(path.name))
    choice = SimpleNamespace(lr_min=lr_min, lr_max=lr_max, diverged_lr=np.array(diverged, dtype=float), plateau_top=top)
    return SimpleNamespace(choice=choice, file=file, written=written, batch_size=batch_size)


@pytest.fixture
def tune(tmp_path, monkeypatch):
    specs = {"model": normalize_spec(("tasks", "mlp", (), {}), "m"), "dataset": normalize_spec(("tasks", "blobs", (), {}), "d"),
             "loss": normalize_spec(("torch.nn", "CrossEntropyLoss", (), {}), "l")}
    t = _start(SimpleNamespace(task_threads=1), RunFolder(tmp_path), get_preset("fast"), specs, "classification", 96, 0,
               "cpu")

    def rescan_at(lr_min, lr_max, diverged=(np.nan,), top=None):
        def fake(t, batch_size, stage, longer_after=None):
            t.misc.record(lr_rescan=LRRangeStep(batch_size=batch_size, lr_min=lr_min, lr_max=lr_max))
            return rescan
        rescan = _sweep(lr_min, lr_max, 8, diverged, top)
        monkeypatch.setattr(recipe, "_lr_range_test", fake)
        return rescan

    return SimpleNamespace(t=t, rescan_at=rescan_at, misc=lambda: MiscFile.from_json(
        json.loads((tmp_path / "hparams" / MISC_JSON).read_text()), strict=True))


def test_a_rescan_that_agrees_with_the_scaled_first_sweep_is_used(tune):
    first = _sweep(0.04, 0.13, 16, diverged=(0.9, 0.7))  # scaled to batch 8 (linear below the sweep's batch): 0.02 -> 0.065
    rescan = tune.rescan_at(0.01, 0.03, diverged=(0.5, np.nan, 0.3), top="quiet")  # 2x below: within a decade
    lo, hi, how, diverged, quiet = _final_lr_range(tune.t, first, 8)
    assert (lo, hi) == (0.01, 0.03) and how == "rescanned at batch size 8"
    assert quiet  # the rescan's range, which ended at a trivial floor's quiet top
    assert diverged == 0.3  # where the rescan's first repeat diverged
    assert rescan.written == [LR_NPZ] and first.written == [LR_INITIAL_NPZ]
    steps = tune.misc().steps
    assert steps.lr_rescan.not_used is None and steps.used_lr_range is steps.lr_rescan


def test_a_rescan_a_decade_below_the_scaled_first_sweep_is_not_used_and_says_why(tune, caplog):
    # shapes, seed 1 (bench/RESULTS.md session 14): first sweep 0.041 -> 0.129 at batch 16, the rescan at batch 8
    # stopped as diverged at 0.023-0.044 and chose 0.0019 -> 0.0059, 11x below the first's top scaled (0.065)
    first = _sweep(0.0409, 0.1292, 16)
    rescan = tune.rescan_at(0.00187, 0.00591, top="quiet")
    lo, hi, how, diverged, quiet = _final_lr_range(tune.t, first, 8)
    assert not quiet  # the first sweep's range is used, and it was an ordinary one
    assert (lo, hi) == pytest.approx((0.0409 / 2, 0.1292 / 2))  # the first range, scaled
    assert diverged is None  # no repeat of the first sweep diverged
    assert "the rescan was not used" in how and f"more than {RESCAN_AGREE:g}x below" in how
    assert rescan.written == [] and first.written == []  # lr_vs_perf.npz stays the first sweep (written before)
    steps = tune.misc().steps
    assert "not used" in steps.lr_rescan.not_used and steps.used_lr_range is steps.lr_range
    assert "LR rescan: the rescan at batch size 8" in caplog.text


def test_the_rule_is_one_sided_a_higher_rescan_is_the_recipe_checks_to_judge(tune):
    first = _sweep(0.01, 0.02, 16)
    tune.rescan_at(0.1, 0.5)  # 50x above the scaled first top: used (the recipe check backs off a range too hot)
    assert _final_lr_range(tune.t, first, 8)[:2] == (0.1, 0.5)
    assert tune.misc().steps.lr_rescan.not_used is None


def test_the_first_sweeps_divergence_is_scaled_with_its_range(tune):
    first = _sweep(0.04, 0.13, 16, diverged=(1.2, 0.8, np.nan, 1.0))
    tune.rescan_at(0.001, 0.003)  # 20x below the scaled first top: not used
    lo, hi, _, diverged, _ = _final_lr_range(tune.t, first, 8)
    assert (lo, hi, diverged) == pytest.approx((0.02, 0.065, 0.4))  # all three scaled linearly to batch 8


@pytest.mark.parametrize("optimizer, peak", [("sgd", 0.5), ("adamw", 0.1)])
def test_the_final_recipe_lifts_sgds_peak_past_the_range_top_and_caps_adamws(tmp_path, optimizer, peak):
    # the tune hands its optimizer to the schedule's mapping: a range [0.01, 0.1] from a sweep that diverged at 5
    import dataclasses

    specs = {"model": normalize_spec(("tasks", "mlp", (), {}), "m"), "dataset": normalize_spec(("tasks", "blobs", (), {}), "d"),
             "loss": normalize_spec(("torch.nn", "CrossEntropyLoss", (), {}), "l")}
    s = dataclasses.replace(get_preset("fast"), optimizer=optimizer, schedule="cosine")
    t = _start(SimpleNamespace(task_threads=1), RunFolder(tmp_path), s, specs, "classification", 96, 0, "cpu")
    final = recipe._schedule(t, recipe._FinalRange(0.01, 0.1, "swept", 5.0), 16)
    assert final.lr_end == pytest.approx(peak) and final.lr_start == pytest.approx(min(0.01, peak / 10))
    step = json.loads((tmp_path / "hparams" / MISC_JSON).read_text())["steps"]["schedule"]
    assert step["peak_lifted"] is True and step["diverged_lr"] == 5.0 and step["range_max"] == 0.1
    assert ("above the range's top" in step["mapping"]) is (optimizer == "sgd")
