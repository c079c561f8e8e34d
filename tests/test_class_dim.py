"""Outputs whose classes are not in dimension 1 (``Data(class_dim=-1)`` for ``(N, T, C)`` logits):
perf reads them as ignite's Accuracy reads ``(N, C, T)``; the loss and custom metrics get them as they are."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import FAST_HP, trial_task

import ignite_seg
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.scoring import TokenAccuracy
from ignite_seg.engine.trainer import run_trial
from ignite_seg.exceptions import ConfigError


def test_token_accuracy_over_the_last_dimension_is_the_known_count_and_leaves_padding_out():
    out = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [5.0, 0.0]],   # (N=2, T=3, C=2): predictions 0, 1, 0
                        [[0.0, 3.0], [1.0, 0.0], [0.0, 1.0]]])  # predictions 1, 0, 1
    y = torch.tensor([[0, 0, -1], [1, 0, 0]])  # right, wrong, padding | right, right, wrong
    last = TokenAccuracy(ignore_index=-1, class_dim=-1)
    last.update((out, y))
    assert last.compute() == pytest.approx(3 / 5)
    second = TokenAccuracy(ignore_index=-1)
    second.update((out.transpose(1, 2), y))
    assert second.compute() == last.compute()
    one_hot = TokenAccuracy(class_dim=-1)
    one_hot.update((out, torch.nn.functional.one_hot(torch.tensor([[0, 0, 0], [1, 0, 0]]), 2)))
    assert one_hot.compute() == pytest.approx(4 / 6)


def _specs(model, dataset, loss):
    return [normalize_spec(s, n) for n, s in zip(("model", "dataset", "loss"), (model, dataset, loss))]


def test_a_classes_last_tagger_trains_and_scores_as_the_classes_second_one():
    last = run_trial(trial_task(0, *_specs(("real_tasks", "TaggerLast", (), {}), ("real_tasks", "tagging_last", (), {}),
                                          ("real_tasks", "FlatLoss", (), {})), FAST_HP, "classification", seed=2,
                               device="cpu"))
    second = run_trial(trial_task(0, *_specs(("real_tasks", "Tagger", (), {}), ("real_tasks", "tagging", (), {}),
                                            ("real_tasks", "tagging_loss", (), {})), FAST_HP, "classification",
                                 seed=2, device="cpu"))
    assert last.status == second.status == "completed", (last.error_text, second.error_text)
    for key in ("perfs_train", "perfs_val", "losses_val"):  # the same model and loss, the classes elsewhere
        np.testing.assert_allclose(last.throughtime[key], second.throughtime[key], rtol=1e-5, err_msg=key)
    assert 0.5 < last.result.metrics["perf_val"] <= 1


def test_the_recipe_check_reads_the_class_dimension_and_refuses_a_wrong_one(run_kwargs):
    with pytest.raises(ConfigError, match="Data.class_dim=0. must be the int index"):
        ignite_seg.Data([], [], class_dim=0)
    with pytest.raises(ConfigError, match=r"accuracy_style='classification'"):  # classes last, read second
        ignite_seg.train(("real_tasks", "TaggerLast", (), {}), ("real_tasks", "tagging", (), {}),
                         ("real_tasks", "FlatLoss", (), {}), **run_kwargs)
    assert not run_kwargs["folder"].exists()
