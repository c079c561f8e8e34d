"""Mid-trial checkpoints of a trial on several processes: rank 0 writes one file with every rank's
random states; a group relaunched after losing a rank resumes from it and ends, byte for byte, as
the uninterrupted group (gloo's sum of two ranks' gradients does not depend on their order)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from helpers import CE, FAST_HP, trial_task

import ignite_seg
from ignite_seg.config.specs import LoaderSpec
from ignite_seg.engine.checkpoints import CheckpointPlan, CheckpointReport
from ignite_seg.engine.distributed import run_trial_group
from ignite_seg.engine.trainer import TrialOutcome, TrialTask

# 96 items in global batches of 19: 6 steps per epoch; rank 1 is killed at step 20, in epoch 4,
# after the checkpoint of epoch 3
HP = dataclasses.replace(FAST_HP, batch_size=19, epochs=5)
KILL_AT = 3 * 6 + 2
CASES = {
    "tensors": {},
    # the DataLoader path: a DistributedSampler, and augmentation noise drawn from each rank's RNG
    "dataloader+ema": {"dataset": LoaderSpec("resume_tasks", "augmented_blobs", (), {}),
                       "hparams": dataclasses.replace(HP, ema_decay=0.9)},
}


def spec(module: str, attr: str, **kwargs) -> LoaderSpec:
    return LoaderSpec(module, attr, (), kwargs)


def run_folder(tmp_path, run_id: str = "abc"):
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "loaders": {}}))
    return folder


def group_task(plan: CheckpointPlan | None, marker=None, **kw) -> TrialTask:
    """A 2-rank trial of an MLP with dropout (each rank draws its own masks); with ``marker``, rank 1 is
    SIGKILLed at step :data:`KILL_AT` of the first launch."""
    handlers = (spec("distributed_tasks", "kill_rank", at_iteration=KILL_AT, marker=str(marker)),) if marker else ()
    base = dict(trial_id=0, model=spec("resume_tasks", "Interruptible"), dataset=spec("tasks", "blobs"),
                loss=LoaderSpec(*CE), hparams=HP, accuracy_style="classification", seed=7, device="cpu",
                snapshots_per_epoch=2, record_hidden=True, threads=1, checkpoints=plan, processes=2, handlers=handlers)
    return trial_task(**{**base, **kw})


def assert_same(got: TrialOutcome, want: TrialOutcome) -> None:
    assert got.status == want.status == "completed", got.error_text
    assert got.model == want.model and got.model_raw == want.model_raw and got.model_init == want.model_init
    assert got.result.metrics == want.result.metrics
    for arrays in ("throughtime", "hidden"):
        g, w = getattr(got, arrays), getattr(want, arrays)
        assert g.keys() == w.keys()
        for k in w:
            np.testing.assert_array_equal(g[k], w[k], err_msg=k)


@pytest.mark.parametrize("case", list(CASES))
def test_a_group_that_lost_a_rank_resumes_from_its_checkpoint_to_the_uninterrupted_result(tmp_path, case):
    reference = run_trial_group(group_task(None, **CASES[case]))
    plan = CheckpointPlan(1, str(run_folder(tmp_path)), "abc")
    marker = tmp_path / "killed"
    resumed = run_trial_group(group_task(plan, marker, **CASES[case]))
    assert marker.exists()  # rank 1 died in the first launch
    assert resumed.result.checkpoints == CheckpointReport(resumed_from_epoch=3)
    assert_same(resumed, reference)


def test_rank_0_writes_one_file_with_each_ranks_random_states_and_checkpoints_change_nothing(tmp_path):
    reference = run_trial_group(group_task(None))
    plan = CheckpointPlan(2, str(run_folder(tmp_path)), "abc")
    out = run_trial_group(group_task(plan))
    assert_same(out, reference)
    assert out.result.checkpoints == CheckpointReport()
    assert [p.name for p in plan.path(0).parent.iterdir()] == ["checkpoint.pt"]
    state = torch.load(plan.path(0), weights_only=True)
    assert state["trainer"]["iteration"] == 4 * 6  # epochs 2 and 4 of 5
    ranks = state["rng"]["ranks"]
    assert len(ranks) == 2
    assert not torch.equal(ranks[0]["torch"], ranks[1]["torch"])  # their dropout drew on shares of 10 and 9 items
    assert torch.equal(ranks[0]["batches"], ranks[1]["batches"])  # the same permutations on both


def test_automatic_checkpoints_of_a_group_follow_rank_0s_decision(tmp_path):
    plan = CheckpointPlan(None, str(run_folder(tmp_path)), "abc")  # a trial of seconds: no checkpoint
    out = run_trial_group(group_task(plan))
    assert out.status == "completed", out.error_text
    assert not plan.path(0).exists()


def test_a_one_process_checkpoint_is_not_loaded_by_a_group(tmp_path):
    plan = CheckpointPlan(1, str(run_folder(tmp_path)), "abc")
    from ignite_seg.engine.trainer import run_trial

    crash = tmp_path / "crash"
    crash.touch()
    single = group_task(plan, processes=1, model=spec("resume_tasks", "Interruptible", crash_file=str(crash),
                                                      crash_at=KILL_AT))
    assert run_trial(single).status == "failed" and plan.path(0).is_file()
    out = run_trial_group(group_task(plan))
    assert out.status == "completed", out.error_text
    assert out.result.checkpoints.resumed_from_epoch is None and "processes" in (out.result.checkpoints.refused or "")


def test_train_relaunches_a_group_that_lost_a_rank_from_its_checkpoint(run_kwargs, tmp_path):
    marker = tmp_path / "killed"
    kill = ("distributed_tasks", "kill_rank", (), {"at_iteration": KILL_AT, "marker": str(marker)})
    kwargs = {**run_kwargs, "hyperparameters": HP, "trials": 1, "trial_processes": 2, "checkpoint_every": 1}
    res = ignite_seg.train(("resume_tasks", "Interruptible", (), {}), ("tasks", "blobs", (), {}), CE,
                           handlers=[kill], **kwargs)
    assert marker.exists() and [t.status for t in res.trials] == ["completed"]
    got = run_kwargs["folder"] / "trials" / "0"
    assert json.loads((got / "result.json").read_text())["checkpoints"]["resumed_from_epoch"] == 3
    assert not (got / "checkpoint.pt").exists()
    ignite_seg.train(("resume_tasks", "Interruptible", (), {}), ("tasks", "blobs", (), {}), CE,
                     **{**kwargs, "folder": tmp_path / "reference"})
    assert (got / "model.pt").read_bytes() == (tmp_path / "reference" / "trials" / "0" / "model.pt").read_bytes()


def test_a_resumed_trial_with_a_user_handler_records_each_snapshot_once(tmp_path):
    """The snapshot evaluator re-attaches the recorder after the checkpoint was loaded: it must not
    measure again at STARTED, nor twice per snapshot (one process; the group path is the same)."""
    from ignite_seg.engine.trainer import run_trial

    plan = CheckpointPlan(1, str(run_folder(tmp_path)), "abc")
    crash = tmp_path / "crash"
    handlers = (spec("distributed_tasks", "write_threads"),)  # any user handler attaches the snapshot evaluator

    def one(**model_kw) -> TrialTask:
        return group_task(plan, processes=1, handlers=handlers, model=spec("resume_tasks", "Interruptible", **model_kw))

    reference = run_trial(dataclasses.replace(one(), checkpoints=None))
    crash.touch()
    assert run_trial(one(crash_file=str(crash), crash_at=KILL_AT)).status == "failed"
    crash.unlink()
    resumed = run_trial(one(crash_file=str(crash), crash_at=KILL_AT))
    assert resumed.result.checkpoints.resumed_from_epoch == 3
    assert resumed.throughtime["epochs"].tolist() == [k / 2 for k in range(11)]  # 2 per epoch, 5 epochs
    assert_same(resumed, reference)
