"""Custom metrics declared for the validation sets only (``train(val_only_metrics=...)``): never fed
a training-set batch, NaN on the training set, and the same values elsewhere as when measured everywhere."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from helpers import CE, trial_task
from ignite.metrics import Metric

import ignite_seg
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.scoring import Scorer
from ignite_seg.engine.trainer import run_trial
from ignite_seg.exceptions import ConfigError, ConfigTypeError


class Count(Metric):
    """The number of items it was fed."""

    def reset(self) -> None:
        self.n = 0

    def update(self, output) -> None:
        self.n += len(output[1])

    def compute(self) -> float:
        return float(self.n)


def test_a_val_only_metric_is_not_fed_the_training_part_and_reads_nan_there():
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))
    parts = {"train": [(x[:6], y[:6])], "val": [(x[6:], y[6:])], "val_noisy": [(x, y)]}
    count = Count()
    fed: list[int] = []
    count.update = lambda out, _u=count.update: (fed.append(len(out[1])), _u(out))  # type: ignore[method-assign]
    scorer = Scorer(torch.nn.CrossEntropyLoss(), "classification", {"n": count}, val_only=("n",))
    measured = scorer.measure_parts(model, parts)
    assert fed == [4, 10]  # the validation parts' batches only
    assert math.isnan(measured["train"]["n"]) and measured["val"]["n"] == 4 and measured["val_noisy"]["n"] == 10
    everywhere = Scorer(torch.nn.CrossEntropyLoss(), "classification", {"n": Count()}).measure_parts(model, parts)
    assert everywhere["train"]["n"] == 6
    for part in parts:  # loss and perf are measured on every part as before
        assert {k: v for k, v in measured[part].items() if k != "n"} == \
            {k: v for k, v in everywhere[part].items() if k != "n"}
    with pytest.raises(ValueError, match=r"names \['iou'\], not custom metrics"):
        Scorer(torch.nn.CrossEntropyLoss(), "classification", {"n": Count()}, val_only=("iou",))


TAGGING = (("real_tasks", "Tagger", (), {}), ("real_tasks", "tagging", (), {}), ("real_tasks", "tagging_loss", (), {}))


def _trial(**kw):
    from helpers import FAST_HP

    specs = [normalize_spec(s, n) for n, s in zip(("model", "dataset", "loss"), TAGGING)]
    iou = {"iou": normalize_spec(("real_tasks", "class_iou", (), {}), "m")}
    return run_trial(trial_task(0, *specs, FAST_HP, "classification", seed=5, device="cpu", metrics=iou, **kw))


def test_a_trial_with_a_val_only_metric_records_the_same_except_nan_on_the_training_set():
    only, both = _trial(val_only_metrics=("iou",)), _trial()
    assert only.status == both.status == "completed", (only.error_text, both.error_text)
    assert np.isnan(only.throughtime["metric_iou_train"]).all() and math.isnan(only.result.metrics["metric_iou_train"])
    assert not np.isnan(both.throughtime["metric_iou_train"]).any()
    for key, values in both.throughtime.items():
        if key != "metric_iou_train":
            np.testing.assert_array_equal(only.throughtime[key], values, err_msg=key)
    assert {k: v for k, v in only.result.metrics.items() if k != "metric_iou_train"} == \
        {k: v for k, v in both.result.metrics.items() if k != "metric_iou_train"}
    assert only.model == both.model


def test_train_records_val_only_metrics_in_run_json(run_kwargs):
    res = ignite_seg.train(*TAGGING, **{**run_kwargs, "trials": 1, "trials_strict": True},
                           metrics={"iou": ("real_tasks", "class_iou", (), {})}, metric_modes={"iou": "max"},
                           val_only_metrics=["iou"])
    assert json.loads((res.folder / "run.json").read_text())["val_only_metrics"] == ["iou"]
    result = json.loads((res.folder / "trials" / "0" / "result.json").read_text())
    assert result["metrics"]["metric_iou_train"] is None or math.isnan(result["metrics"]["metric_iou_train"])
    assert 0 <= result["metrics"]["metric_iou_val"] <= 1


@pytest.mark.parametrize("value,error,needle", [
    ("iou", ConfigTypeError, "val_only_metrics='iou' is not a list of metric names"),
    (["IoU"], ConfigError, "names ['IoU'], not custom metrics of this run; use names from metrics= (['iou']"),
    (["perf"], ConfigError, "loss and perf are always measured"),
], ids=["not-a-list", "custom-metric", "always-measured"])
def test_bad_val_only_metrics_are_refused_before_anything_is_written(run_kwargs, value, error, needle):
    with pytest.raises(error) as info:
        ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE, **run_kwargs,
                         metrics={"iou": ("real_tasks", "class_iou", (), {})}, metric_modes={"iou": "max"},
                         val_only_metrics=value)
    assert needle in str(info.value)
    assert not run_kwargs["folder"].exists()
