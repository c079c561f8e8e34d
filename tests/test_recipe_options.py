"""The recipe's parts (config/recipe_options.py): declared once, taken as flat keywords by the public
records, read as nested records, and written to final.json / run.json in the same keys as before."""
from __future__ import annotations

import dataclasses
import json

import pytest

from ignite_seg import ConfigError, FixedHyperparameters, HyperparameterSettings
from ignite_seg.config.recipe_options import OptimizerSpec, RecipeOptions, ScheduleSpec, TrainingOptions

RECIPE = dict(lr_start=0.01, lr_end=0.1, batch_size=8, cycle_size_epochs=2.0, epochs=4)
#: final.json as ignite_seg wrote it before the parts were records (its key order included)
OLD_FINAL = {"lr_start": 0.01, "lr_end": 0.1, "batch_size": 8, "cycle_size_epochs": 2.0, "epochs": 4,
             "optimizer": "adamw", "momentum": 0.0, "weight_decay": 0.01, "grad_clip_norm": 1.0, "amp": False,
             "schedule": "cosine", "warmup_epochs": 0.0, "betas": [0.8, 0.99], "eps": 1e-6, "ema_decay": 0.9,
             "warmup_steps": 5}


def test_flat_keywords_build_the_nested_records():
    hp = FixedHyperparameters(**RECIPE, optimizer="adamw", betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01,
                              grad_clip_norm=1.0, schedule="cosine", warmup_steps=5, ema_decay=0.9)
    assert hp.optimizer_spec == OptimizerSpec(optimizer="adamw", momentum=0.0, weight_decay=0.01, betas=(0.8, 0.99),
                                              eps=1e-6)
    assert hp.options == TrainingOptions(optimizer="adamw", weight_decay=0.01, betas=(0.8, 0.99), eps=1e-6,
                                         grad_clip_norm=1.0, amp=False)
    assert hp.schedule_spec == ScheduleSpec(schedule="cosine", warmup_epochs=0.0, warmup_steps=5)
    assert dataclasses.replace(hp, momentum=0.5).optimizer_spec.momentum == 0.5  # the documented customisation


def test_final_json_round_trips_in_the_same_keys_and_reads_the_old_files():
    hp = FixedHyperparameters.from_dict(OLD_FINAL)
    assert hp.to_dict() == OLD_FINAL  # same keys and values (JSON's list for the betas)
    assert FixedHyperparameters.from_dict(json.loads(json.dumps(hp.to_dict()))) == hp
    assert list(hp.to_dict())[:5] == list(RECIPE)  # the recipe's own numbers first, then its parts
    assert repr(hp).startswith("FixedHyperparameters(lr_start=0.01, lr_end=0.1, batch_size=8, cycle_size_epochs=2.0, "
                               "epochs=4, optimizer='adamw'")


def test_the_tuner_settings_round_trip_and_hand_their_parts_to_the_recipe():
    s = HyperparameterSettings(optimizer="adamw", eps=1e-6, schedule="noam", warmup_steps=40, ema_decay=0.99,
                               amp=True, lr_min_inits=2)
    assert HyperparameterSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    final = FixedHyperparameters(**RECIPE, **RecipeOptions.values(s))  # what the tuner does
    assert (final.options, final.schedule_spec, final.ema_decay) == (s.options, s.schedule_spec, 0.99)


def test_each_part_is_declared_once():
    parts = {f.name for f in dataclasses.fields(RecipeOptions)}
    assert parts == {"optimizer", "momentum", "weight_decay", "betas", "eps", "grad_clip_norm", "amp", "schedule",
                     "warmup_epochs", "warmup_steps", "ema_decay"}
    for record in (FixedHyperparameters, HyperparameterSettings):
        for name in parts:
            owners = [c.__name__ for c in record.__mro__ if name in c.__dict__.get("__annotations__", {})]
            assert len(owners) == 1, (record.__name__, name, owners)


@pytest.mark.parametrize("record,kw,match", [
    (FixedHyperparameters, {**RECIPE, "eps": 0}, r"FixedHyperparameters\.eps=0 is out of range"),
    (FixedHyperparameters, {**RECIPE, "optimizer": "adam"}, r"FixedHyperparameters\.optimizer must be 'sgd' or 'adamw'"),
    (HyperparameterSettings, {"momentum": 1.0}, r"HyperparameterSettings\.momentum=1.0 is out of range"),
    (HyperparameterSettings, {"schedule": "step"}, r"HyperparameterSettings\.schedule must be one of"),
])
def test_the_parts_are_checked_under_the_record_the_user_built(record, kw, match):
    with pytest.raises(ConfigError, match=match):
        record(**kw)
