"""One trial on several processes (``trial_processes``): ignite.distributed with gloo, 2 ranks on the CPU."""
from __future__ import annotations

import dataclasses
import io
import json
import logging
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import CE, FAST_HP, trial_task

import ignite_seg
from ignite_seg.config.specs import LoaderSpec
from ignite_seg.engine.batching import BatchSource, Data
from ignite_seg.engine.distributed import (
    GROUP_ATTEMPTS,
    RankBatches,
    backend_for,
    group_gpus,
    run_trial_group,
    visible_gpus,
)
from ignite_seg.engine.trainer import TrialTask, run_trial
from ignite_seg.exceptions import ConfigError, ConfigTypeError


def spec(module: str, attr: str, **kwargs) -> LoaderSpec:
    return LoaderSpec(module, attr, (), kwargs)


# 96 items in global batches of 19: five of 19 (ranks take 10 and 9) and one of 1 (rank 1 has none)
HP = dataclasses.replace(FAST_HP, batch_size=19, epochs=2)


def task(**kw) -> TrialTask:
    base = dict(trial_id=0, model=spec("tasks", "mlp"), dataset=spec("tasks", "blobs"), loss=spec(*CE[:2]),
                hparams=HP, accuracy_style="classification", seed=7, device="cpu", snapshots_per_epoch=2)
    return trial_task(**{**base, **kw})


def weights(blob: bytes) -> dict[str, torch.Tensor]:
    return torch.load(io.BytesIO(blob), weights_only=True)


def test_rank_batches_split_each_global_batch_and_weight_each_share():
    x = torch.arange(10.0).unsqueeze(1)
    source = BatchSource(torch.utils.data.TensorDataset(x, torch.arange(10)), Data(x, x))
    shares = [list(RankBatches(source, 4, seed=3, rank=r, size=3)) for r in range(3)]
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    for b, start in enumerate(range(0, 10, 4)):
        got = torch.cat([shares[r][b][0][1] for r in range(3) if shares[r][b][1] > 0])
        assert got.tolist() == perm[start : start + 4].tolist()  # the global batch, in order, once
        n = min(4, 10 - start)
        for r in range(3):  # DDP's average of the weighted means gives each item of the batch 1 / n
            weight, items = shares[r][b][1], len(shares[r][b][0][1])
            assert weight == 0 or weight / (3 * items) == pytest.approx(1 / n)
        assert [len(shares[r][b][0][1]) for r in range(3)] == ([2, 1, 1] if n == 4 else [1, 1, 1])
    assert [shares[r][2][1] for r in range(3)] == [1.5, 1.5, 0.0]  # the last batch of 2: rank 2 gets a 0 weight


def test_on_the_dataloader_path_the_ranks_see_disjoint_items_each_epoch_in_a_new_order_set_by_the_trainer():
    from ignite.engine import Engine
    from tasks import ListDataset

    items = ListDataset([(torch.tensor([float(i)]), i) for i in range(20)])
    source = BatchSource(items, Data(items, items))
    assert not source.fast

    def epochs(rank: int, n: int) -> list[list[int]]:  # the items of each epoch, as a trainer draws them
        batches = RankBatches(source, 8, seed=3, rank=rank, size=2)
        shares = list(batches)  # batches of ceil(8 / 2) items, weight 1
        assert len(batches) == 3 and [len(y) for (_, y), _ in shares] == [4, 4, 2] and {w for _, w in shares} == {1.0}
        batches.epoch = 0
        return [[int(i) for (_, y), _ in batches for i in y] for _ in range(n)]

    ranks = [epochs(r, 3) for r in range(2)]
    for e in range(3):
        assert sorted(ranks[0][e] + ranks[1][e]) == list(range(20))  # disjoint halves, all items once
    assert ranks[0][0] != ranks[0][1] != ranks[0][2] and ranks[1][0] != ranks[1][1]  # set_epoch: a new order
    resumed = RankBatches(source, 8, seed=3, rank=1, size=2)
    trainer = Engine(lambda e, b: None)
    trainer.state.epoch = 3  # Events.EPOCH_STARTED of the third epoch, as after a resume from epoch 2
    resumed.start_epoch(trainer)
    assert [int(i) for (_, y), _ in resumed for i in y] == ranks[1][2]


def test_two_processes_train_the_same_trial_as_one_at_the_same_global_batch():
    one = run_trial(task())
    two = run_trial_group(task(processes=2, threads=1))
    assert one.status == two.status == "completed", two.error_text
    assert two.result.processes == 2 and two.result.devices == ("cpu", "cpu") and one.result.devices == ("cpu",)
    assert two.result.metrics.keys() == one.result.metrics.keys()
    for key, value in one.result.metrics.items():
        assert two.result.metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    for key, curve in one.throughtime.items():
        np.testing.assert_allclose(two.throughtime[key], curve, rtol=1e-4, atol=1e-6, err_msg=key)
    a, b = weights(one.model), weights(two.model)
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-4, atol=1e-5)
    assert weights(two.model_init).keys() == a.keys()


def test_the_dataloader_path_trains_on_a_distributed_sampler():
    out = run_trial_group(task(dataset=spec("tasks", "blobs_list"), processes=2, threads=1))
    assert out.status == "completed", out.error_text
    assert out.result.metrics["perf_val"] > 0.6  # the blobs are learnt


def test_a_killed_rank_fails_the_group_once_and_the_second_launch_completes(tmp_path):
    marker = tmp_path / "killed"
    out = run_trial_group(task(processes=2, handlers=(spec("distributed_tasks", "kill_rank", marker=str(marker)),)))
    assert marker.exists()  # rank 1 was killed in the first launch
    assert out.status == "completed", out.error_text
    reference = run_trial_group(task(processes=2))
    assert out.result.metrics == pytest.approx(reference.result.metrics)


def test_a_rank_killed_at_every_launch_fails_the_trial():
    out = run_trial_group(task(processes=2, handlers=(spec("distributed_tasks", "kill_rank"),)))
    assert out.status == "failed"
    assert f"lost a process {GROUP_ATTEMPTS} times" in (out.error_text or "")


def test_a_rank_that_hangs_makes_the_trial_fail_at_the_collective_timeout():
    out = run_trial_group(task(processes=2, collective_timeout=5.0, handlers=(spec("distributed_tasks", "hang_rank"),)))
    assert out.status == "failed"
    assert "rank" in (out.error_text or "").lower()


def test_train_with_two_processes_per_trial_runs_one_trial_at_a_time_and_records_them(run_kwargs):
    res = ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE, trial_processes=2,
                           checkpoint_every=0, **run_kwargs)
    folder = run_kwargs["folder"]
    records = [json.loads((folder / "trials" / str(t) / "result.json").read_text()) for t in range(2)]
    assert [r["status"] for r in records] == ["completed", "completed"]
    assert all(r["processes"] == 2 and r["devices"] == ["cpu", "cpu"] for r in records)
    first, second = sorted(records, key=lambda r: r["started_at"])
    assert second["started_at"] >= first["started_at"] + first["seconds"]  # cores=2: one group at a time
    assert json.loads((folder / "run.json").read_text())["trial_processes"] == 2
    assert len(res.trials) == 2


def test_cores_4_runs_two_groups_of_2_at_once_each_on_its_own_port_as_they_would_run_in_turn(run_kwargs, monkeypatch):
    monkeypatch.setattr("ignite_seg.runtime.checks.usable_cpus", lambda: 4)  # this test machine may have 2
    kwargs = {**run_kwargs, "trial_processes": 2, "checkpoint_every": 0,
              "handlers": [("distributed_tasks", "write_rendezvous", (), {})]}
    recipe = (("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE)
    ignite_seg.train(*recipe, **{**kwargs, "cores": 4})
    ignite_seg.train(*recipe, **{**kwargs, "cores": 2, "folder": run_kwargs["folder"].parent / "in_turn"})

    def trials(folder):
        return [json.loads((folder / "trials" / str(t) / "result.json").read_text()) for t in range(2)]

    together, in_turn = trials(run_kwargs["folder"]), trials(run_kwargs["folder"].parent / "in_turn")
    first, second = sorted(together, key=lambda r: r["started_at"])
    assert second["started_at"] < first["started_at"] + first["seconds"]  # the two groups overlapped
    assert first["pid"] != second["pid"]  # in two workers
    rendezvous = [(run_kwargs["folder"] / "trials" / str(t) / "rendezvous.txt").read_text().split() for t in range(2)]
    assert rendezvous[0][0] != rendezvous[1][0]  # each group its own port
    first, second = sorted(in_turn, key=lambda r: r["started_at"])
    assert second["started_at"] >= first["started_at"] + first["seconds"]
    for a, b in zip(together, in_turn):
        assert a["status"] == b["status"] == "completed"
        finals = [k for k in b["metrics"] if k.startswith(("loss_", "perf_"))]
        assert finals and {k: a["metrics"][k] for k in finals} == {k: b["metrics"][k] for k in finals}


@pytest.mark.parametrize("processes", [1, 2])
def test_the_callers_log_names_each_trials_processes_and_devices(run_kwargs, caplog, processes):
    with caplog.at_level(logging.INFO, logger="ignite_seg"):
        ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE, trial_processes=processes,
                         checkpoint_every=0, **{**run_kwargs, "trials": 1})
    lines = [r.getMessage() for r in caplog.records if r.name == "ignite_seg" and r.levelno == logging.INFO]
    devices = ", ".join(["cpu"] * processes)
    assert f"trial 0 ran on {processes} process(es): {devices}" in lines


def test_one_process_per_trial_records_its_device_and_imports_nothing_distributed():
    code = ("import sys; sys.path.insert(0, 'tests'); from helpers import FAST_HP, trial_task; "
            "from ignite_seg.config.specs import LoaderSpec as S; "
            "from ignite_seg.engine.trainer import run_trial; "
            "o = run_trial(trial_task(0, S('tasks', 'mlp', (), {}), S('tasks', 'blobs', (), {}), "
            "S('torch.nn', 'CrossEntropyLoss', (), {}), FAST_HP, 'classification', seed=0, device='cpu')); "
            "assert o.status == 'completed' and o.result.processes == 1 and o.result.devices == ('cpu',), o; "
            "assert 'ignite_seg.engine.distributed' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("value, error", [(0, ConfigError), (3, ConfigError), ("2", ConfigTypeError),
                                          (True, ConfigTypeError), (1.5, ConfigTypeError)])
def test_trial_processes_is_checked_up_front(run_kwargs, value, error):
    with pytest.raises(error, match="trial_processes"):
        ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE, trial_processes=value, **run_kwargs)
    assert not run_kwargs["folder"].exists()


def test_the_ranks_of_a_trial_get_distinct_gpus_round_robin_by_trial_from_the_visible_ones():
    visible = ["3", "5", "6", "7"]  # CUDA_VISIBLE_DEVICES=3,5,6,7
    assert group_gpus(visible, "cuda", 0, 2) == ["3", "5"]
    assert group_gpus(visible, "auto", 1, 2) == ["6", "7"]
    assert group_gpus(visible, "auto", 2, 2) == ["3", "5"]  # round-robin: trial 2 shares trial 0's
    assert group_gpus(visible, "cuda", 1, 3) == ["7", "3", "5"]
    assert group_gpus(visible, "cuda:2", 5, 2) == ["6", "7"]  # cuda:N: from the N-th visible GPU on
    with pytest.raises(RuntimeError, match="trial_processes=5 on CUDA needs a GPU per process"):
        group_gpus(visible, "cuda", 0, 5)


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 0")
    assert visible_gpus() == ["2", "0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
    assert backend_for("cpu") == "gloo" and backend_for("cuda:1") == "nccl"


def test_a_cuda_trial_on_more_processes_than_gpus_fails_with_the_fix_in_its_error(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    out = run_trial_group(task(device="cuda", processes=2))
    assert out.status == "failed"
    assert "needs a GPU per process" in (out.error_text or "")


def test_the_ranks_share_out_the_workers_threads_when_the_task_sets_none():
    out = run_trial_group(task(processes=2, threads=None, handlers=(spec("distributed_tasks", "write_threads"),)))
    assert out.status == "completed", out.error_text
    assert out.files["threads.txt"] == str(max(1, torch.get_num_threads() // 2)).encode()
    out = run_trial_group(task(processes=2, threads=1, handlers=(spec("distributed_tasks", "write_threads"),)))
    assert out.files["threads.txt"] == b"1"


def test_a_rendezvous_port_taken_before_rank_0_binds_it_costs_no_attempt(monkeypatch):
    """``_free_port`` releases the port it found; another process may bind it first (two groups
    starting at once). That launch fails with EADDRINUSE and is made again on a new port, without
    using the trial's one retry."""
    import socket

    from ignite_seg.engine import distributed

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    free = distributed._free_port
    ports = iter([taken.getsockname()[1]])
    monkeypatch.setattr(distributed, "_free_port", lambda: next(ports, None) or free())
    monkeypatch.setattr(distributed, "GROUP_ATTEMPTS", 1)
    try:
        out = run_trial_group(task(processes=2, threads=1))
    finally:
        taken.close()
    assert out.status == "completed", out.error_text
    assert next(ports, None) is None  # the taken port was tried first
