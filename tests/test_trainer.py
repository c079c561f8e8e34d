"""The trial engine's parts, in this process (the workers run the same code)."""
from __future__ import annotations

import functools
import io

import numpy as np
import pytest
import real_tasks
import torch
from helpers import trial_task
from tasks import blobs, blobs_list, mlp

from ignite_seg.config.hyperparameters import FixedHyperparameters, OptimizerSpec
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.batching import Batches, BatchSource, Data
from ignite_seg.engine.scoring import Scorer
from ignite_seg.engine.sweeps import BatchRunTask, RecipeSpec, run_batch_trial
from ignite_seg.engine.trainer import (
    ThroughTimeRecorder,
    create_trainer,
    loss_to,
    make_optimizer,
    passthrough,
    run_trial,
)

HP = FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=16, cycle_size_epochs=2, epochs=2)


def spec(*recipe):
    return normalize_spec(recipe, "spec")


def test_make_optimizer_takes_the_spec_and_uses_the_numbers_its_optimizer_needs():
    model = mlp()
    sgd = make_optimizer(model, OptimizerSpec(momentum=0.9, weight_decay=1e-4), lr=0.1)
    assert type(sgd) is torch.optim.SGD
    assert (sgd.defaults["lr"], sgd.defaults["momentum"], sgd.defaults["weight_decay"]) == (0.1, 0.9, 1e-4)
    adamw = make_optimizer(model, OptimizerSpec(optimizer="adamw", weight_decay=0.5), lr=0.01)
    assert type(adamw) is torch.optim.AdamW and (adamw.defaults["lr"], adamw.defaults["weight_decay"]) == (0.01, 0.5)


def test_through_time_recorder_measures_with_its_scorer_at_the_snapshot_epochs():
    torch.manual_seed(0)
    train, _ = blobs()
    x, y = train.tensors
    model, loss_fn, cpu = mlp(), torch.nn.CrossEntropyLoss(), torch.device("cpu")
    scorer = Scorer(loss_fn, "classification", prepare_batch=passthrough)
    batch = (x[:20], y[:20])
    opt = make_optimizer(model, OptimizerSpec(), lr=0.1)
    engine = create_trainer(model, opt, loss_fn, cpu)
    rec = ThroughTimeRecorder(scorer, model, {"train": [batch], "val": [batch]}, iters_per_epoch=6, epochs=2,
                              per_epoch=2)
    rec.attach(engine)
    rec.attach(engine)  # attach twice: still one snapshot per event
    engine.run(Batches(BatchSource(train, Data(train, train)), 16, torch.Generator().manual_seed(0)), max_epochs=2)
    arrays = rec.arrays()
    np.testing.assert_array_equal(arrays["epochs"], [0.0, 0.5, 1.0, 1.5, 2.0])
    assert arrays["losses_train"][-1] == pytest.approx(scorer.measure(model, [batch])["loss"])
    np.testing.assert_array_equal(arrays["losses_train"], arrays["losses_val"])


def test_a_loss_with_a_weight_tensor_moves_to_the_device_with_the_model():
    loss = real_tasks.WeightedLoss()
    assert loss_to(loss, torch.device("meta")).weight.device.type == "meta"
    real_tasks.MOVES.clear()
    task = trial_task(trial_id=0, model=spec("tasks", "mlp", (), {}), dataset=spec("tasks", "blobs", (), {}),
                      loss=spec("real_tasks", "WeightedLoss", (), {}), hparams=HP, accuracy_style="classification",
                      seed=0, device="cpu")
    outcome = run_trial(task)
    assert outcome.status == "completed", outcome.error_text
    recipe = RecipeSpec(model=task.setup.model, dataset=task.setup.dataset, loss=task.setup.loss, accuracy_style="classification",
                        holdout=(0, 5, 9), device="cpu")
    assert run_batch_trial(BatchRunTask(0, recipe, 0, 16, 0.05, 0.5, 1.0)).status == "completed"
    assert real_tasks.MOVES == [torch.device("cpu")] * 2  # once in the trial, once in the tuner's run


def _accuracy(state: bytes, dataset) -> float:
    model = mlp()
    model.load_state_dict(torch.load(io.BytesIO(state), weights_only=True))
    x, y = dataset.tensors
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def test_every_validation_set_and_custom_metric_is_recorded_under_the_documented_keys():
    task = trial_task(trial_id=0, model=spec("tasks", "mlp", (), {}), dataset=spec("real_tasks", "two_val_sets", (), {}),
                      loss=spec("torch.nn", "CrossEntropyLoss", (), {}), hparams=HP, accuracy_style="classification",
                      seed=0, device="cpu", snapshots_per_epoch=2, metrics={"acc": spec("ignite.metrics", "Accuracy", (), {})})
    out = run_trial(task)
    assert out.status == "completed", out.error_text
    assert (out.val_names, out.metric_names) == (("clean", "shifted"), ("acc",))
    parts = ("train", "val", "val_shifted")
    assert set(out.result.metrics) == {f"{m}_{p}" for m in ("loss", "perf", "metric_acc") for p in parts}
    assert set(out.throughtime) == {"epochs"} | {f"{m}_{p}" for m in ("losses", "perfs", "metric_acc") for p in parts}
    for p in parts:  # known answer: ignite's Accuracy is the classification perf
        assert out.result.metrics[f"metric_acc_{p}"] == pytest.approx(out.result.metrics[f"perf_{p}"])
        np.testing.assert_allclose(out.throughtime[f"metric_acc_{p}"], out.throughtime[f"perfs_{p}"])
        assert out.throughtime[f"losses_{p}"].shape == out.throughtime["epochs"].shape == (5,)
    _, clean = blobs()
    _, shifted = blobs(seed=1)
    assert out.result.metrics["perf_val"] == pytest.approx(_accuracy(out.model, clean))
    assert out.result.metrics["perf_val_shifted"] == pytest.approx(_accuracy(out.model, shifted))


def test_a_padded_sequence_trial_records_hidden_layers_of_a_tuple_input_and_ignores_padding():
    task = trial_task(trial_id=0, model=spec("real_tasks", "Tagger", (), {}), dataset=spec("real_tasks", "tagging", (), {}),
                      loss=spec("real_tasks", "tagging_loss", (), {}), hparams=HP, accuracy_style="classification",
                      seed=0, device="cpu", record_hidden=True, metrics={"iou": spec("real_tasks", "class_iou", (), {})})
    out = run_trial(task)
    assert out.status == "completed", out.error_text
    assert out.hidden["epochs"].tolist() == [0, 1, 2] and out.hidden["targets"].shape[0] == 64
    model = real_tasks.Tagger()
    model.load_state_dict(torch.load(io.BytesIO(out.model), weights_only=True))
    batch = real_tasks.pad_collate([real_tasks.Sequences(64, 1)[i] for i in range(64)])
    with torch.no_grad():
        pred = model((batch.features, batch.lengths)).argmax(1)
    real = batch.targets != real_tasks.PAD
    assert out.result.metrics["perf_val"] == pytest.approx(float((pred[real] == batch.targets[real]).float().mean()))
    assert 0.0 <= out.result.metrics["metric_iou_val"] <= 1.0


def test_dataloader_workers_persist_across_epochs_and_draw_augmentation_afresh(tmp_path):
    import os

    log = tmp_path / "reads.log"
    task = trial_task(trial_id=0, model=spec("tasks", "mlp", (), {}),
                      dataset=spec("real_tasks", "flips_in_workers", (), {"log": str(log)}),
                      loss=spec("torch.nn", "CrossEntropyLoss", (), {}), hparams=HP, accuracy_style="classification",
                      seed=0, device="cpu")
    out = run_trial(task)
    assert out.status == "completed", out.error_text
    reads = [line.split() for line in log.read_text().splitlines()]
    in_workers = [r for r in reads if int(r[0]) != os.getpid()]
    n = 48  # items in the training set: two epochs, then the final evaluation's pass
    epoch1, epoch2 = in_workers[:n], in_workers[n : 2 * n]
    assert sorted(int(i) for _, i, _ in epoch1) == sorted(int(i) for _, i, _ in epoch2) == list(range(n))
    pids = {p for p, _, _ in epoch1}
    assert len(pids) == 2 and {p for p, _, _ in epoch2} == pids  # the same two workers serve both epochs
    flips1 = {i: f for _, i, f in epoch1}
    assert sum(flips1[i] != f for _, i, f in epoch2) > n // 8  # each epoch draws its own flips


def test_a_cached_item_dataset_trains_exactly_like_the_same_tensors():
    def trial(dataset):
        return run_trial(trial_task(trial_id=0, model=spec("tasks", "mlp", (), {}), dataset=spec(*dataset),
                                    loss=spec("torch.nn", "CrossEntropyLoss", (), {}), hparams=HP,
                                    accuracy_style="classification", seed=3, device="cpu"))

    cached, tensors = trial(("real_tasks", "cached_blobs", (), {})), trial(("tasks", "blobs", (), {}))
    assert cached.status == tensors.status == "completed"
    assert cached.result.metrics == tensors.result.metrics
    for key, values in tensors.throughtime.items():
        np.testing.assert_array_equal(cached.throughtime[key], values)


def _general_prepare(batch, device=None, non_blocking=False):
    """ignite's own prepare_batch for ``(x, y)`` pairs (``convert_tensor`` on each side): the general path."""
    from ignite.utils import convert_tensor

    return convert_tensor(batch[0], device, non_blocking), convert_tensor(batch[1], device, non_blocking)


def general_prepare_data(loader):
    """The sets of ``loader()`` with :func:`_general_prepare` as the recipe's prepare_batch."""
    train, val = loader()
    return Data(train, val, prepare_batch=_general_prepare)


@pytest.mark.parametrize("dataset", [blobs, blobs_list], ids=["tensor path", "DataLoader path"])
def test_the_per_step_fast_paths_train_bit_for_bit_like_the_general_path(dataset):
    """The default prepare_batch's shortcut for tensor pairs changes no bit of a trial (model, snapshots,
    hidden layers, final metrics) against ignite's ``convert_tensor`` on both sides, on both data paths."""
    def trial(loader):
        return run_trial(trial_task(trial_id=0, model=spec("tasks", "mlp", (), {}), dataset=normalize_spec(loader, "d"),
                                    loss=spec("torch.nn", "CrossEntropyLoss", (), {}), hparams=HP,
                                    accuracy_style="classification", seed=5, device="cpu", record_hidden=True))

    fast, general = trial(dataset), trial(functools.partial(general_prepare_data, dataset))
    assert fast.status == general.status == "completed"
    assert fast.model == general.model and fast.model_init == general.model_init
    assert fast.result.metrics == general.result.metrics
    assert fast.throughtime.keys() == general.throughtime.keys()
    for key, values in general.throughtime.items():
        np.testing.assert_array_equal(fast.throughtime[key], values)
    for key, values in general.hidden.items():
        np.testing.assert_array_equal(fast.hidden[key], values)


def test_training_batches_already_on_the_device_skip_the_default_prepare_and_others_keep_it():
    from ignite_seg.engine.batching import default_prepare_batch
    from ignite_seg.engine.trainer import Recipe, _training_prepare

    train, val = blobs()
    cpu, meta = torch.device("cpu"), torch.device("meta")
    for data, device, expected in [
        (Data(train, val), cpu, passthrough),  # the fast tensor path on the CPU: nothing to move
        (Data(train, val), meta, default_prepare_batch),  # tensors on another device: moved every step
        (Data(train, val, prepare_batch=_general_prepare), cpu, _general_prepare),  # the recipe's own, always
        (Data(blobs_list()[0], val), cpu, default_prepare_batch),  # the DataLoader path's batches are not known
    ]:
        recipe = Recipe(mlp(), data, torch.nn.CrossEntropyLoss())
        assert _training_prepare(recipe, BatchSource(data.train, data), device) is expected


def test_snapshot_completed_fires_once_per_snapshot_when_a_handler_listens_and_not_at_all_otherwise():
    from ignite.engine import Engine, Events

    from ignite_seg.engine.recorders import SnapshotEvents

    train, _ = blobs()
    batch = train.tensors
    rec = ThroughTimeRecorder(Scorer(torch.nn.CrossEntropyLoss(), "classification", prepare_batch=passthrough), mlp(),
                              {"val": [batch]}, iters_per_epoch=4, epochs=1, per_epoch=2)
    quiet, heard = Engine(lambda e, b: 0.5), Engine(lambda e, b: 0.5)
    for engine in (quiet, heard):
        rec.attach(engine)
    seen = []
    heard.add_event_handler(SnapshotEvents.SNAPSHOT_COMPLETED, lambda e: seen.append(rec.latest()["epochs"]))
    last = []  # the engine's last event after each step, the snapshots' included (run after the recorder's check)
    quiet.add_event_handler(Events.ITERATION_COMPLETED, lambda e: last.append(e.last_event_name))
    quiet.run(range(4), max_epochs=1)
    assert len(rec.records["epochs"]) == 3 and last == [Events.ITERATION_COMPLETED] * 4  # measured, nothing fired
    heard.run(range(4), max_epochs=1)
    assert seen == [0.0, 0.5, 1.0]
