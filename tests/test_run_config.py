"""The validated call (ignite_seg/run_config.py): one keyword-only ``validate`` holding every check,
returning a ``RunConfig`` whose trial part (``TrialSetup``) every ``TrialTask`` carries unchanged."""
from __future__ import annotations

import dataclasses

import pytest
from helpers import CE, FAST_HP

from ignite_seg import ConfigError, ConfigTypeError
from ignite_seg.engine.trial_records import TrialSetup, TrialTask
from ignite_seg.run_config import RunConfig, validate

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def _call(tmp_path, **kw):
    args = dict(model_loader=MLP, dataset_loader=BLOBS, loss_loader=CE, folder=tmp_path / "run", cores=1)
    return validate(**{**args, **kw})


def test_validate_takes_keywords_only():
    with pytest.raises(TypeError, match=r"validate\(\) takes 0 positional arguments but 3 positional"):
        validate(MLP, BLOBS, CE, folder="out")  # type: ignore[misc]


def test_a_valid_call_is_one_record_and_writes_nothing(tmp_path):
    cfg = _call(tmp_path, hyperparameters=FAST_HP, trials=3, seed=4, device="cpu", snapshots_per_epoch=2,
                metrics={"acc": ("ignite.metrics", "Accuracy", (), {})}, metric_modes={"acc": "max"},
                best_metric="acc", best_mode="max", best_over="mean", val_only_metrics=["acc"], checkpoint_every=0)
    assert isinstance(cfg, RunConfig) and not (tmp_path / "run").exists()
    s = cfg.setup
    assert (s.model.attr, s.dataset.attr, s.loss.attr) == ("mlp", "blobs", "CrossEntropyLoss")
    assert (s.accuracy_style, s.device, s.snapshots_per_epoch, s.processes) == ("classification", "cpu", 2, 1)
    assert (list(s.metrics), s.best_metric, s.best_mode, s.val_only_metrics) == (["acc"], "acc", "max", ("acc",))
    assert (cfg.trials, cfg.seed, cfg.hp_settings, cfg.best_over, cfg.checkpoint_every) == (3, 4, FAST_HP, "mean", 0)
    assert cfg.history == tmp_path / "history" and cfg.metric_modes == {"acc": "max"}


@pytest.mark.parametrize("kw,error,match", [
    ({"trial_processes": 2}, ConfigError, r"trial_processes=2 is more than cores=1.*Pass trial_processes <= 1"),
    ({"trial_processes": 1.5}, ConfigTypeError, r"trial_processes=1.5 \(float\) is not an int"),
    ({"checkpoint_every": -1}, ConfigError, "checkpoint_every=-1 is negative"),
    ({"best_over": "mean"}, ConfigError, "best_over"),  # without a best_metric
    ({"val_only_metrics": ["iou"]}, ConfigError, "iou"),  # not a custom metric
    ({"snapshots_per_epoch": 0}, ConfigError, "snapshots_per_epoch must be >= 1, got 0"),
    ({"trials": 0, "trials_strict": True, "hyperparameters": FAST_HP}, ConfigError, "fixed hyperparameters leave nothing"),
])
def test_every_argument_is_checked_in_validate_itself(tmp_path, kw, error, match):
    """The checks once made after validate() (with a dataclasses.replace) are validate's own now."""
    with pytest.raises(error, match=match):
        _call(tmp_path, **kw)


def test_trial_processes_are_checked_against_the_cores_validated_in_the_same_call(tmp_path):
    assert _call(tmp_path, cores=2, trial_processes=2).setup.processes == 2
    assert _call(tmp_path, cores=2, trial_processes=2).trials_at_once == 1


def test_a_task_repeats_no_field_of_the_run_and_the_run_none_of_its_setup():
    setup = {f.name for f in dataclasses.fields(TrialSetup)}
    assert not setup & {f.name for f in dataclasses.fields(TrialTask)}
    assert not setup & {f.name for f in dataclasses.fields(RunConfig)}


def test_run_config_is_still_importable_from_run_plan():
    from ignite_seg import run_plan

    assert run_plan.RunConfig is RunConfig
    assert run_plan.check_trial_processes(3, 4, None) == 3
