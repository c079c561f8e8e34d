"""Real recipes end to end (real workers): padded sequences, dict batches, augmentation, named val sets."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
from helpers import FAST_HP

import ignite_seg

TAGGER = ("real_tasks", "Tagger", (), {})
TAGGING = ("real_tasks", "tagging", (), {})
TAG_LOSS = ("real_tasks", "tagging_loss", (), {})
IOU = ("real_tasks", "class_iou", (), {"cls": 1})


def _npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_sequence_tagging_tunes_and_trains_with_padding_ignored_and_a_custom_metric(run_kwargs):
    res = ignite_seg.train(
        TAGGER, TAGGING, TAG_LOSS, **{**run_kwargs, "trials": 1, "trials_strict": True, "hyperparameters": "fastest",
                                      "allow_later_analysis_up_to": "images"},
        metrics={"iou": IOU}, metric_modes={"iou": "max"},
    )
    folder = res.folder
    assert [t.status for t in res.trials] == ["completed"], res
    # known answer: perf_val is the per-token accuracy over real tokens only, recomputed here
    from real_tasks import Sequences, pad_collate

    model = ignite_seg.load_model(folder, trial=0, trust_recipe=True)
    batch = pad_collate([Sequences(64, 1)[i] for i in range(64)])
    with torch.no_grad():
        pred = model((batch.features, batch.lengths)).argmax(1)
    real = batch.targets != -1
    expected = float((pred[real] == batch.targets[real]).float().mean())
    result = json.loads((folder / "trials" / "0" / "result.json").read_text())
    assert result["metrics"]["perf_val"] == pytest.approx(expected, abs=1e-6)
    # the custom metric through time, at the end, and collated
    tt = _npz(folder / "trials" / "0" / "throughtime.npz")
    assert tt["metric_iou_val"].shape == tt["epochs"].shape and np.isfinite(tt["metric_iou_val"]).all()
    results = _npz(folder / "results.npz")
    assert results["final_metric_iou_val"].shape == (1,)
    # ... and in the report: its own figure and its line in the summary
    ignite_seg.analyze(folder, analysis="images", cores=1)
    assert (folder / "analysis" / "metrics.png").is_file()
    assert "final_metric_iou_val" in (folder / "analysis" / "summary.json").read_text()
    assert "metric_iou_val" in _npz(folder / "throughtimes.npz")


def test_dict_items_and_a_two_input_model_through_prepare_batch(run_kwargs):
    res = ignite_seg.train(
        ("real_tasks", "TwoInputs", (), {}), ("real_tasks", "dict_items", (), {}),
        ("torch.nn", "CrossEntropyLoss", (), {}), **{**run_kwargs, "hyperparameters": FAST_HP},
    )
    assert all(t.status == "completed" for t in res.trials), res
    assert min(t.perf_val for t in res.trials) > 0.7


def test_random_augmentation_is_drawn_afresh_in_every_epoch_of_a_trial(run_kwargs, tmp_path):
    log = tmp_path / "reads.log"
    ignite_seg.train(
        ("tasks", "mlp", (), {}), ("real_tasks", "flips", (), {"log": str(log)}),
        ("torch.nn", "CrossEntropyLoss", (), {}), **{**run_kwargs, "trials": 1, "trials_strict": True, "hyperparameters": FAST_HP},
    )
    lines = [line.split() for line in log.read_text().splitlines()]
    reads_per_pid = Counter(pid for pid, _, _ in lines)
    worker_pid, reads = reads_per_pid.most_common(1)[0]
    n = 48
    # the calling process reads at most one batch to check the recipe; the trial reads every item
    # once per epoch (FAST_HP has 3), not once in all
    assert sum(c for p, c in reads_per_pid.items() if p != worker_pid) <= 64
    assert reads >= FAST_HP.epochs * n
    draws: dict[str, set[str]] = {}
    for pid, i, flip in lines:
        if pid == worker_pid:
            draws.setdefault(i, set()).add(flip)
    # with one draw frozen for the whole trial (the old behaviour) every item has one value
    assert sum(len(d) == 2 for d in draws.values()) > n // 4


def test_two_named_validation_sets_are_both_recorded_the_primary_under_ignite_simple_keys(run_kwargs):
    res = ignite_seg.train(
        ("tasks", "mlp", (), {}), ("real_tasks", "two_val_sets", (), {}),
        ("torch.nn", "CrossEntropyLoss", (), {}), **{**run_kwargs, "hyperparameters": FAST_HP},
    )
    folder = res.folder
    tt = _npz(folder / "throughtimes.npz")
    for key in ("losses_val", "perfs_val", "losses_val_shifted", "perfs_val_shifted"):
        assert tt[key].shape == tt["losses_train"].shape, key
    results = _npz(folder / "results.npz")
    assert {"final_perf_val", "final_perf_val_shifted", "final_loss_val_shifted"} <= set(results)
    result = json.loads((folder / "trials" / "0" / "result.json").read_text())
    assert {"perf_val", "perf_val_shifted"} <= set(result["metrics"])
    assert not np.allclose(results["final_perf_val"], results["final_perf_val_shifted"])


def test_a_trial_worker_loads_with_its_own_dataloader_workers(run_kwargs):
    res = ignite_seg.train(
        ("tasks", "mlp", (), {}), ("real_tasks", "flips_in_workers", (), {}),
        ("torch.nn", "CrossEntropyLoss", (), {}), **{**run_kwargs, "trials": 1, "trials_strict": True},
    )
    assert [t.status for t in res.trials] == ["completed"], res


@pytest.mark.parametrize(
    "dataset, model, match",
    [
        (("real_tasks", "tagging_without_collate", (), {}), TAGGER, r"cannot be batched together.*collate_fn"),
        (("real_tasks", "dict_items_without_prepare", (), {}), ("real_tasks", "TwoInputs", (), {}),
         r"prepare_batch fails.*\{'a': \(2, 3\).*prepare_batch=\.\.\."),
    ],
    ids=["ragged-without-collate_fn", "dict-batch-without-prepare_batch"],
)
def test_the_probe_names_the_batch_and_the_fix(run_kwargs, dataset, model, match):
    with pytest.raises(ignite_seg.ConfigError, match=match):
        ignite_seg.train(model, dataset, TAG_LOSS, **run_kwargs)
