"""The tuner's ignite handlers and engines, in this process (the workers run the same code)."""
from __future__ import annotations

import copy
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from ignite.engine import Engine, Events
from ignite.handlers import LRScheduler
from tasks import blobs, mlp

from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.batching import Batches, BatchSource, Data
from ignite_seg.engine.scoring import Scorer
from ignite_seg.engine.sweeps import (
    BatchRunTask,
    GeometricLR,
    GradNorms,
    LRRangeTest,
    LRSweepTask,
    NoiseSampling,
    NoiseTrainer,
    RecipeSpec,
    SweepRecorder,
    create_noise_trainer,
    run_batch_trial,
    run_lr_sweep,
)


def data():
    train, _ = blobs()
    x, y = train.tensors
    return SimpleNamespace(x=x, y=y, source=BatchSource(train, Data(train, train)))


def test_noise_trainer_update_is_the_full_batch_update_and_norms_are_exact():
    torch.manual_seed(0)
    model = mlp()
    twin = copy.deepcopy(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    d = data()
    x, y = d.x[:32], d.y[:32]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = create_noise_trainer(model, opt, loss_fn, torch.device("cpu"), NoiseSampling(4))
    engine.run([(x, y)], max_epochs=1)
    # the twin takes one plain SGD step on the whole batch
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    twin_opt.zero_grad()
    loss_fn(twin(x), y).backward()
    full_grad = torch.cat([p.grad.reshape(-1) for p in twin.parameters()])
    twin_opt.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    sq_small, sq_big, b_small, b_big = engine.grad_norms
    assert (b_small, b_big) == (8, 32)
    assert sq_big == pytest.approx(float(full_grad @ full_grad), rel=1e-5)
    assert sq_small >= sq_big  # mean of squares >= square of the mean (Jensen)


def test_range_test_records_geometric_lrs_and_restores_model_and_optimizer():
    torch.manual_seed(1)
    model = mlp()
    before = copy.deepcopy(model.state_dict())
    loss_fn = torch.nn.CrossEntropyLoss()
    d = data()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    opt_before = copy.deepcopy(opt.state_dict())
    engine = create_noise_trainer(model, opt, loss_fn, torch.device("cpu"), NoiseSampling(2))
    rec = SweepRecorder(model, Scorer(loss_fn, "classification"), [(d.x[:16], d.y[:16])])
    test = LRRangeTest(1e-3, 1.0, 40, diverge_th=50.0, smooth_f=0.1, recorder=rec)
    with test.attach(engine, model, opt) as e:
        e.run(Batches(d.source, 16, torch.Generator().manual_seed(0)), max_iters=40)
        test.recorder.attach(e)  # attach twice: still one handler
        assert sum(1 for h in e._event_handlers[Events.ITERATION_COMPLETED] if h[0] == rec.record) == 1
    arrays = rec.arrays()
    np.testing.assert_allclose(arrays["lrs"], np.geomspace(1e-3, 1.0, 40), rtol=1e-9)
    assert arrays["losses"].shape == (40,) and np.isfinite(arrays["perfs"]).all()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k])
    assert opt.state_dict()["state"] == opt_before["state"] == {}
    assert not engine.has_event_handler(rec.record, Events.ITERATION_COMPLETED)
    assert GeometricLR(opt, 1e-3, 1.0, 40).lr_at(1000) == pytest.approx(1.0)


def test_geometric_lr_is_ignites_lr_scheduler_with_the_geometric_lr_at_each_step():
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 7.0})
    lr_start, lr_end, n = 1e-4, 10.0, 7
    schedule = GeometricLR(opt, lr_start, lr_end, n)
    assert isinstance(schedule, LRScheduler)
    engine = Engine(lambda e, _b: 0.0)
    schedule.attach(engine)
    schedule.attach(engine)  # attach twice: still one handler
    seen = []
    engine.add_event_handler(Events.ITERATION_COMPLETED, lambda e: seen.append([g["lr"] for g in opt.param_groups]))
    engine.run(range(n + 3), max_epochs=1)
    expected = [lr_start * (lr_end / lr_start) ** (min(k, n - 1) / (n - 1)) for k in range(n + 3)]
    assert seen == [[lr, lr] for lr in expected]  # exactly the formula, every group, constant past n
    assert [schedule.lr_at(i) for i in range(1, n + 4)] == expected


def test_noise_trainer_keeps_typed_norms_on_itself_not_on_state():
    d = data()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = create_noise_trainer(model, opt, torch.nn.CrossEntropyLoss(), torch.device("cpu"), NoiseSampling(4))
    assert isinstance(engine, NoiseTrainer) and engine.grad_norms is None
    engine.run([(d.x[:32], d.y[:32])], max_epochs=1)
    assert isinstance(engine.grad_norms, GradNorms) and engine.grad_norms.b_big == 32.0
    assert not hasattr(engine.state, "grad_norms")
    engine.run([(d.x[:30], d.y[:30])], max_epochs=1)  # 30 does not split in 4 chunks: a plain step
    assert engine.grad_norms is None


def test_noise_trainer_measures_every_kth_step_and_trains_as_plain_sgd_between():
    torch.manual_seed(0)
    d = data()
    model = mlp()
    twin = copy.deepcopy(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = create_noise_trainer(model, opt, loss_fn, torch.device("cpu"), NoiseSampling(4, every=3))
    rec = SweepRecorder(model, Scorer(loss_fn, "classification"), [(d.x[:16], d.y[:16])])
    rec.attach(engine, opt)
    batches = [(d.x[i:i + 16], d.y[i:i + 16]) for i in range(0, 64, 16)] * 2  # 8 steps of 16 items
    engine.run(batches, max_epochs=1)
    measured = np.isfinite(rec.arrays()["sq_small"])
    assert measured.tolist() == [True, False, False, True, False, False, True, False]  # iterations 1, 4, 7
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    for x, y in batches:  # the measured steps update on the chunks' mean gradient: plain SGD's
        twin_opt.zero_grad()
        loss_fn(twin(x), y).backward()
        twin_opt.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="every >= 1"):
        create_noise_trainer(model, opt, loss_fn, torch.device("cpu"), NoiseSampling(4, every=0))


def test_range_test_publishes_its_divergence_iteration():
    torch.manual_seed(0)
    d = data()
    model = mlp()
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = create_noise_trainer(model, opt, loss_fn, torch.device("cpu"), NoiseSampling(1))
    rec = SweepRecorder(model, Scorer(loss_fn, "classification"), [(d.x[:16], d.y[:16])])
    test = LRRangeTest(1e-2, 1e6, 60, diverge_th=2.0, smooth_f=0.5, recorder=rec)
    assert test.diverged_at is None
    with test.attach(engine, model, opt) as e:
        state = e.run(Batches(d.source, 16, torch.Generator().manual_seed(0)), max_iters=60)
    assert test.diverged_at == state.iteration == rec.arrays()["losses"].size < 60
    assert not hasattr(state, "diverged_at")


def recipe(holdout=tuple(range(0, 96, 8))):
    return RecipeSpec(
        model=normalize_spec(("tasks", "mlp", (), {}), "m"), dataset=normalize_spec(("tasks", "blobs", (), {}), "d"),
        loss=normalize_spec(("torch.nn", "CrossEntropyLoss", (), {}), "l"), accuracy_style="classification",
        holdout=holdout, device="cpu",
    )


@pytest.mark.parametrize("run, task_of", [
    (run_lr_sweep, lambda rec: LRSweepTask(key=0, recipe=rec, init_seed=3, data_seed=4, batch_size=16, lr_start=1e-3,
                                            lr_end=1.0, iterations=30, diverge_th=2.0, diverge_regain=0.5,
                                            smooth_f=0.1, noise_chunks=4)),
    (run_batch_trial, lambda rec: BatchRunTask(key=0, recipe=rec, seed=3, batch_size=16, lr_min=0.01, lr_max=0.1,
                                               epochs=2.0)),
])
def test_a_tuning_task_is_repeatable_when_the_dataset_augments_with_numpys_global_rng(run, task_of):
    # the same task twice in one process whose numpy RNG was left elsewhere in between (a worker's
    # earlier tasks): the augmentation must draw the same noise, so the task returns the same result
    rec = dataclasses.replace(recipe(), dataset=normalize_spec(("tasks", "blobs_numpy_augmented", (), {}), "d"))
    np.random.seed(1)
    a = run(task_of(rec))
    np.random.seed(2)
    b = run(task_of(rec))
    assert a.error is None and b.error is None
    if run is run_lr_sweep:
        np.testing.assert_array_equal(a.arrays["losses"], b.arrays["losses"])
        np.testing.assert_array_equal(a.arrays["holdout_losses"], b.arrays["holdout_losses"])
    else:
        assert (a.loss, a.perf) == (b.loss, b.perf)


def test_lr_sweep_task_diverges_and_stops_and_is_deterministic():
    task = LRSweepTask(key=0, recipe=recipe(), init_seed=3, data_seed=4, batch_size=16, lr_start=1e-3, lr_end=1e3,
                       iterations=120, diverge_th=2.0, diverge_regain=0.5, smooth_f=0.1, noise_chunks=4)
    a, b = run_lr_sweep(task), run_lr_sweep(task)
    assert a.error is None and a.status == "diverged"
    n = a.arrays["losses"].size
    assert 10 < n < 120  # stopped early, at an LR well above where training works
    np.testing.assert_array_equal(a.arrays["losses"], b.arrays["losses"])
    # it trained on the 84 items left after holding out 12 (6 batches an epoch, the last of 4)
    full, part = divmod(n, 6)
    assert a.examples == full * 84 + min(part * 16, 84)


def test_batch_trial_scores_on_the_holdout_and_reports_divergence():
    ok = run_batch_trial(BatchRunTask(key=0, recipe=recipe(), seed=0, batch_size=16, lr_min=0.05, lr_max=0.5,
                                      epochs=4.0))
    assert ok.status == "completed" and ok.perf > 0.8 and ok.iterations == 4 * 6  # 84 items / 16 = 6 per epoch
    assert ok.perf * 12 == pytest.approx(round(ok.perf * 12))  # a fraction of the 12 held-out items
    bad = run_batch_trial(BatchRunTask(key=1, recipe=recipe(), seed=0, batch_size=16, lr_min=1e6, lr_max=1e7,
                                       epochs=2.0))
    assert bad.status == "diverged" and bad.perf == 0.0


def test_noise_trainer_splits_a_dict_batch_for_a_two_input_model_and_steps_on_the_full_batch_gradient():
    import real_tasks

    torch.manual_seed(0)
    model = real_tasks.TwoInputs()
    twin = copy.deepcopy(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    items = real_tasks.DictItems(32, 0)
    batch = {"a": items.a, "b": items.b, "label": items.y}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = create_noise_trainer(model, opt, loss_fn, torch.device("cpu"), NoiseSampling(4),
                                  prepare_batch=real_tasks.dict_prepare)
    engine.run([batch], max_epochs=1)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    loss_fn(twin((items.a, items.b)), items.y).backward()
    twin_opt.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert engine.grad_norms is not None and (engine.grad_norms.b_small, engine.grad_norms.b_big) == (8, 32)


def test_the_tuners_runs_train_a_padded_sequence_recipe_and_score_its_holdout_per_token():
    rec = RecipeSpec(
        model=normalize_spec(("real_tasks", "Tagger", (), {}), "m"),
        dataset=normalize_spec(("real_tasks", "tagging", (), {}), "d"),
        loss=normalize_spec(("real_tasks", "tagging_loss", (), {}), "l"), accuracy_style="classification",
        holdout=tuple(range(0, 160, 10)), device="cpu",
    )
    sweep = run_lr_sweep(LRSweepTask(key=0, recipe=rec, init_seed=0, data_seed=0, batch_size=16, lr_start=1e-3,
                                     lr_end=1.0, iterations=20, diverge_th=50.0, diverge_regain=0.9, smooth_f=0.1,
                                     noise_chunks=2))
    assert sweep.error is None and sweep.arrays["perfs"].shape == (20,) and np.isfinite(sweep.arrays["perfs"]).all()
    assert np.isfinite(sweep.arrays["sq_small"]).any()  # the (features, lengths) input was split in chunks
    run = run_batch_trial(BatchRunTask(key=0, recipe=rec, seed=0, batch_size=16, lr_min=0.05, lr_max=0.5, epochs=2.0))
    assert run.status == "completed", run.error
    # known answer: the perf is the token accuracy over the held-out sequences' real tokens
    import real_tasks

    tokens = sum(len(real_tasks.Sequences(160, 0)[i][1]) for i in rec.holdout)
    assert run.perf * tokens == pytest.approx(round(run.perf * tokens))
    assert run.examples == 2 * 144  # 160 items less 16 held out, two epochs
