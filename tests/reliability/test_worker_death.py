"""A worker process killed in the middle of a trial: retried once, then recorded as failed."""
from __future__ import annotations

import json
import logging

import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg.api import trial_seed

BLOBS = ("tasks", "blobs", (), {})


def test_worker_killed_once_is_retried_and_the_run_completes(tmp_path, caplog):
    marker = tmp_path / "died-once"
    with caplog.at_level(logging.WARNING, logger="ignite_seg"):
        res = ignite_seg.train(("tasks", "KillsWorker", (), {"once_marker": str(marker)}), BLOBS, CE,
                               folder=tmp_path / "run", hyperparameters=FAST_HP, analysis="none",
                               trials=3, trials_strict=True, cores=2, seed=0)
    assert marker.exists()  # a worker really died
    assert [t.status for t in res.trials] == ["completed"] * 3
    assert "worker process died" in caplog.text


def test_worker_that_always_dies_is_failed_after_one_retry(tmp_path):
    doomed = trial_seed(0, 1)
    res = ignite_seg.train(("tasks", "KillsWorker", (), {"only_seed": doomed}), BLOBS, CE,
                           folder=tmp_path / "run", hyperparameters=FAST_HP, analysis="none",
                           trials=3, trials_strict=True, cores=2, seed=0)
    assert [t.status for t in res.trials] == ["completed", "failed", "completed"]
    result = json.loads((tmp_path / "run" / "trials" / "1" / "result.json").read_text())
    assert result["status"] == "failed"
    error = (tmp_path / "run" / "trials" / "1" / "error.txt").read_text()
    # the fork server reports a worker's exit status through a pipe; when the pool tears the worker
    # down before that report is read, multiprocessing gives 255 ("should not happen usually")
    assert "lost after 2 attempts" in error and ("killed by signal 9" in error or "exit code 255" in error)
    assert res.n_failed == 1


@pytest.mark.parametrize("cores", [1])
def test_single_worker_pool_recovers_too(tmp_path, cores):
    doomed = trial_seed(0, 0)
    res = ignite_seg.train(("tasks", "KillsWorker", (), {"only_seed": doomed}), BLOBS, CE,
                           folder=tmp_path / "run", hyperparameters=FAST_HP, analysis="none",
                           trials=2, trials_strict=True, cores=cores, seed=0)
    assert [t.status for t in res.trials] == ["failed", "completed"]


def test_worker_dying_while_the_caller_handles_a_result_is_retried(tmp_path):
    # the first result comes back; while the caller holds it the other worker dies, so the pool is
    # broken before the runner submits the next task: that task must wait for the new pool
    import time

    from tasks import quick_or_dies_once

    from ignite_seg.runtime.tasks import TaskRunner

    marker = tmp_path / "died"
    tasks = [("quick", 1), ("dies_once", str(marker), 0.3), ("quick", 2), ("quick", 3)]
    with TaskRunner(2) as runner:
        results = runner.map_unordered(quick_or_dies_once, tasks, key=lambda t: t[:2])
        first = next(results)
        time.sleep(2.0)
        rest = list(results)
    assert marker.exists() and first == 1
    assert sorted(map(str, rest)) == ["2", "3", "retried"]
