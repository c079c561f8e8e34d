"""Mid-trial checkpoints in one process: a trial stopped after a checkpoint and run again resumes
and ends exactly as an uninterrupted one; a checkpoint that is not the trial's own is never loaded."""
from __future__ import annotations

import dataclasses
import json
import logging
import re

import numpy as np
import pytest
import torch
from helpers import CE, FAST_HP, trial_task

from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine import checkpoints
from ignite_seg.engine.checkpoints import CheckpointPlan, CheckpointReport, folder_visible
from ignite_seg.engine.trainer import TrialOutcome, TrialTask, run_trial
from ignite_seg.exceptions import ConfigError, ConfigTypeError
from ignite_seg.run_plan import check_checkpoint_every
from ignite_seg.storage.run_folder import RunFolder

HP = dataclasses.replace(FAST_HP, epochs=5)
#: 96 training items in batches of 16: 6 steps per epoch; the crash is in epoch 4, after the checkpoint of epoch 3
CRASH_AT = 3 * 6 + 2


def _run_folder(tmp_path, run_id="abc"):
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "loaders": {}}))
    return folder


def _task(tmp_path, plan, *, dataset=("tasks", "blobs"), hp=HP, seed=0, crash=True, hidden=True, best=(None, None),
          snapshots=3, handlers=()) -> TrialTask:
    kwargs = {"crash_file": str(tmp_path / "crash"), "crash_at": CRASH_AT} if crash else {}
    return trial_task(
        trial_id=0, model=normalize_spec(("resume_tasks", "Interruptible", (), kwargs), "model"),
        dataset=normalize_spec((*dataset, (), {}), "dataset"), loss=normalize_spec(CE, "loss"), hparams=hp,
        accuracy_style="classification", seed=seed, device="cpu", snapshots_per_epoch=snapshots, record_hidden=hidden,
        checkpoints=plan, best_metric=best[0], best_mode=best[1],
        handlers=tuple(normalize_spec(h, "handlers") for h in handlers),
    )


def _same(got: TrialOutcome, want: TrialOutcome) -> None:
    assert got.status == want.status == "completed", got.error_text
    assert got.model == want.model and got.model_raw == want.model_raw and got.model_init == want.model_init
    assert got.result.metrics == want.result.metrics
    assert got.model_best == want.model_best and got.result.best == want.result.best
    for arrays in ("throughtime", "hidden"):
        g, w = getattr(got, arrays), getattr(want, arrays)
        assert g.keys() == w.keys()
        for k in w:
            np.testing.assert_array_equal(g[k], w[k], err_msg=k)


CASES = {
    "tensors": {},
    "dataloader+ema+warmup": {"dataset": ("resume_tasks", "augmented_blobs"),
                              "hp": dataclasses.replace(HP, ema_decay=0.9, warmup_epochs=1.0, schedule="cosine")},
    # augmentation from torch, numpy and random drawn in 2 DataLoader worker processes
    "dataloader-workers": {"dataset": ("resume_tasks", "augmented_in_workers")},
    "adamw+one-cycle": {"hp": dataclasses.replace(HP, optimizer="adamw", schedule="one-cycle")},
    # the worst loss is the initial one, kept from before the checkpoint: the resumed trial must keep it
    "best-by-max-loss": {"best": ("loss", "max")},
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_trial_stopped_after_a_checkpoint_resumes_to_the_uninterrupted_result(tmp_path, case):
    plan = CheckpointPlan(1, str(_run_folder(tmp_path)), "abc")
    reference = run_trial(_task(tmp_path, None, crash=True, **CASES[case]))  # no crash file: runs through
    (tmp_path / "crash").touch()
    stopped = run_trial(_task(tmp_path, plan, **CASES[case]))
    assert stopped.status == "failed" and "interrupted for the test" in (stopped.error_text or "")
    assert plan.path(0).is_file()
    (tmp_path / "crash").unlink()
    resumed = run_trial(_task(tmp_path, plan, **CASES[case]))
    assert resumed.result.checkpoints == CheckpointReport(resumed_from_epoch=3)
    _same(resumed, reference)


@pytest.mark.parametrize("case", ["tensors", "dataloader+ema+warmup", "dataloader-workers"])
def test_checkpoints_change_nothing_and_none_is_written_after_the_last_epoch(tmp_path, case):
    reference = run_trial(_task(tmp_path, None, **CASES[case]))
    plan = CheckpointPlan(2, str(_run_folder(tmp_path)), "abc")
    with_checkpoints = run_trial(_task(tmp_path, plan, **CASES[case]))
    _same(with_checkpoints, reference)
    state = torch.load(plan.path(0), weights_only=True)
    assert state["trainer"]["iteration"] == 4 * 6  # epochs 2 and 4 of 5, 6 steps each


@pytest.mark.parametrize("other", ["seed", "hparams", "handlers", "corrupt", "truncated"])
def test_a_checkpoint_that_is_not_the_trials_own_is_never_loaded(tmp_path, caplog, other):
    plan = CheckpointPlan(1, str(_run_folder(tmp_path)), "abc")
    reference = run_trial(_task(tmp_path, None))
    (tmp_path / "crash").touch()
    if other == "seed":
        run_trial(_task(tmp_path, plan, seed=1))
    elif other == "hparams":
        run_trial(_task(tmp_path, plan, hp=dataclasses.replace(HP, lr_end=0.4)))
    elif other == "handlers":  # written with a handler's registered state; resumed without that handler
        run_trial(_task(tmp_path, plan, handlers=[("handler_tasks", "early_stopping_on", ([1.0] * 9, 100), {})]))
    else:
        run_trial(_task(tmp_path, plan))
        data = plan.path(0).read_bytes()
        plan.path(0).write_bytes(b"not a checkpoint" if other == "corrupt" else data[: len(data) // 2])
    (tmp_path / "crash").unlink()
    with caplog.at_level(logging.WARNING, logger="ignite_seg"):
        restarted = run_trial(_task(tmp_path, plan))
    assert restarted.result.checkpoints.resumed_from_epoch is None
    assert "checkpoint" in (restarted.result.checkpoints.refused or "")
    assert any("starting the trial from epoch 0" in r.getMessage() for r in caplog.records)
    _same(restarted, reference)


@pytest.mark.parametrize("seen", ["missing", "other run"])
def test_a_worker_that_does_not_see_the_run_folder_writes_and_reads_nothing(tmp_path, seen):
    folder = tmp_path / "run"
    if seen == "other run":
        _run_folder(tmp_path, run_id="another")
    plan = CheckpointPlan(1, str(folder), "abc")
    assert not folder_visible(plan)
    outcome = run_trial(_task(tmp_path, plan))
    assert outcome.status == "completed"
    assert "not visible from this worker" in (outcome.result.checkpoints.off or "")
    assert not (folder / "trials").exists()


def test_automatic_checkpoints_follow_the_predicted_trial_time(tmp_path, monkeypatch):
    plan = CheckpointPlan(None, str(_run_folder(tmp_path)), "abc")
    monkeypatch.setattr(checkpoints, "AUTO_SECONDS", 1e6)  # a short trial: no checkpoint
    run_trial(_task(tmp_path, plan))
    assert not plan.path(0).exists()
    monkeypatch.setattr(checkpoints, "AUTO_SECONDS", 1e-6)  # a long one: every epoch
    run_trial(_task(tmp_path, plan))
    assert plan.path(0).is_file()


def test_the_checkpoint_is_removed_only_once_the_trial_is_written(tmp_path):
    plan = CheckpointPlan(1, str(_run_folder(tmp_path)), "abc")
    (tmp_path / "crash").touch()
    run_trial(_task(tmp_path, plan))
    (tmp_path / "crash").unlink()
    outcome = run_trial(_task(tmp_path, plan))
    assert plan.path(0).is_file()  # the worker never removes it
    result = RunFolder(tmp_path / "run").write_trial(outcome)
    d = tmp_path / "run" / "trials" / "0"
    assert (d / "model.pt").is_file() and (d / "result.json").is_file() and not plan.path(0).exists()
    assert result.checkpoints == CheckpointReport(resumed_from_epoch=3)
    assert json.loads((d / "result.json").read_text())["checkpoints"] == {"resumed_from_epoch": 3}


def test_no_checkpoint_is_written_for_a_trial_recorded_as_finished(tmp_path):
    plan = CheckpointPlan(1, str(_run_folder(tmp_path)), "abc")
    plan.path(0).parent.mkdir(parents=True)
    (plan.path(0).parent / "result.json").write_text('{"status": "failed", "error": "timed out after 5 s"}')
    assert run_trial(_task(tmp_path, plan)).status == "completed"  # a task the caller gave up on, still running
    assert not plan.path(0).exists()


@pytest.mark.parametrize("value, error", [(-1, ConfigError), (False, ConfigTypeError), (1.5, ConfigTypeError),
                                          ("2", ConfigTypeError)])
def test_checkpoint_every_is_checked(value, error):
    with pytest.raises(error, match=r"checkpoint_every=.*0 to turn mid-trial checkpoints off"):
        check_checkpoint_every(value)
    assert [check_checkpoint_every(v) for v in (None, 0, 3)] == [None, 0, 3]


@pytest.mark.parametrize("dataset", ["tensors", "augmented"])
def test_batches_after_a_restored_epoch_end_equal_the_uninterrupted_ones(dataset):
    from ignite.engine import Engine
    from resume_tasks import augmented_blobs
    from tasks import blobs

    from ignite_seg.engine.batching import Batches, BatchSource, as_data

    data = as_data(augmented_blobs() if dataset == "augmented" else blobs())

    def batches(seed: int) -> Batches:
        return Batches(BatchSource(data.train, data), 16, torch.Generator().manual_seed(seed))

    def seen(b: Batches, epochs: int) -> list[torch.Tensor]:  # as a trainer sees them
        out: list[torch.Tensor] = []
        Engine(lambda _e, batch: out.append(torch.cat([batch[0].flatten(), batch[1].float()]))).run(b, epochs)
        return out

    torch.manual_seed(0)
    want = seen(batches(0), 3)  # three epochs of 6 batches, uninterrupted
    torch.manual_seed(0)
    before = batches(0)
    assert all(torch.equal(a, b) for a, b in zip(seen(before, 1), want[:6]))
    before.finish_epoch()  # what a checkpoint does at the epoch's end
    state = checkpoints._rng_state(before).state_dict()
    torch.manual_seed(123)  # another process: other random states until the checkpoint is loaded
    after = batches(7)
    checkpoints._rng_state(after).load_state_dict(state)
    got = seen(after, 2)
    assert len(got) == len(want[6:]) == 12
    assert all(torch.equal(a, b) for a, b in zip(got, want[6:]))


#: a validation loss that falls until epoch 2 and rises from epoch 3 (one value per epoch's snapshot)
RISING = [1.0, 0.8, 0.6, 0.7, 0.9, 1.1, 1.3, 1.5, 1.7]


@pytest.mark.parametrize("register", [True, False])
def test_early_stopping_resumed_with_its_counter_stops_where_the_uninterrupted_trial_stops(tmp_path, register):
    """``EarlyStopping(patience=2)`` on :data:`RISING`: its counter is 1 at the checkpoint of epoch 3,
    the trial is killed in epoch 4 and resumed; it stops at epoch 4's snapshot as an uninterrupted
    trial does. Without its state registered it would start counting anew and stop at epoch 6."""
    handler = ("handler_tasks", "early_stopping_on", (RISING,), {"register": register})
    kw = {"hp": dataclasses.replace(HP, epochs=8), "snapshots": 1, "hidden": False, "handlers": [handler]}
    plan = CheckpointPlan(1, str(_run_folder(tmp_path)), "abc")
    reference = run_trial(_task(tmp_path, None, **kw))
    assert reference.result.stop.epoch == 4.0
    (tmp_path / "crash").touch()
    assert run_trial(_task(tmp_path, plan, **kw)).status == "failed"
    saved = torch.load(plan.path(0), weights_only=True)
    assert saved["trainer"]["iteration"] == 3 * 6
    if register:
        state = saved["handler:early_stopping"]
        assert (state["counter"], state["best_score"]) == (1, -0.6)
    (tmp_path / "crash").unlink()
    resumed = run_trial(_task(tmp_path, plan, **kw))
    assert resumed.result.checkpoints == CheckpointReport(resumed_from_epoch=3)
    if register:
        assert resumed.result.stop.epoch == 4.0
        _same(resumed, reference)
    else:  # the limit the registration removes
        assert resumed.result.stop.epoch == 6.0


@pytest.mark.parametrize("name, what, error, needle", [
    (3, "early_stopping", ConfigTypeError, "the name must be a str"),
    ("early stopping", "early_stopping", ConfigError, "letters, digits"),
    ("stop", "two", ConfigError, "another object .EarlyStopping. is registered under this name"),
    ("stop", "plain", ConfigTypeError, ": object has no state_dict.. and load_state_dict.. methods"),
])
def test_a_bad_registration_fails_the_trial_naming_the_handler(tmp_path, name, what, error, needle):
    spec = ("handler_tasks", "registers", (name,), {"what": what})
    outcome = run_trial(_task(tmp_path, None, crash=False, handlers=[("handler_tasks", "csv_logger", (), {}), spec]))
    assert outcome.status == "failed"
    assert f"{error.__name__}: handlers[1]=handler_tasks.registers(" in (outcome.error_text or "")
    assert re.search(needle, outcome.error_text or ""), outcome.error_text


def test_a_registered_state_that_could_not_be_read_back_fails_the_trial_at_the_first_checkpoint(tmp_path):
    plan = CheckpointPlan(1, str(_run_folder(tmp_path)), "abc")
    outcome = run_trial(_task(tmp_path, plan, crash=False, handlers=[("handler_tasks", "registers", ("es",),
                                                                      {"what": "numpy"})]))
    assert outcome.status == "failed"
    assert "ConfigTypeError: context.checkpoint('es', ...): its state_dict() holds a value" in (outcome.error_text or "")
    assert not plan.path(0).exists()
