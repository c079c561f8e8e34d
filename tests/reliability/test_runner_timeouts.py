"""TaskRunner: per-task timeouts (default pool and another executor), the stall warning, the
preload parameter, and train()'s trial_timeout / executor checks."""
from __future__ import annotations

import inspect
import json
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg.api import trial_seed
from ignite_seg.runtime import tasks as execution
from ignite_seg.runtime.tasks import TaskLost, TaskRunner

sys.path.insert(0, str(Path(__file__).parent))  # runtime_tasks, for this process and its workers
from runtime_tasks import quick_or_sleep  # noqa: E402

BLOBS = ("tasks", "blobs", (), {})


def _by_kind(results):
    lost = [r for r in results if isinstance(r, TaskLost)]
    return sorted(r for r in results if not isinstance(r, TaskLost)), lost


def test_a_task_past_its_timeout_is_killed_and_reported_the_others_complete():
    tasks = [("quick", 1), ("sleep", 3600), ("quick", 2), ("quick", 3)]
    with TaskRunner(2) as runner:
        values, lost = _by_kind(list(runner.map_unordered(quick_or_sleep, tasks, key=lambda t: t, timeout=3)))
        assert sorted(runner.map_unordered(quick_or_sleep, [("quick", 4)])) == [4]  # the pool recovered
    assert values == [1, 2, 3]
    assert [(x.task, x.timed_out, x.message) for x in lost] == [(("sleep", 3600), True, "timed out after 3 s")]


def test_another_executor_gives_a_timed_out_task_up_and_ignores_its_result():
    release = threading.Event()
    tasks = [("quick", 1), ("block", release), ("quick", 2)]
    with ThreadPoolExecutor(2) as ex:
        runner = TaskRunner(2, ex)
        results = list(runner.map_unordered(quick_or_sleep, tasks, key=lambda t: t[0] + str(t[1]), timeout=0.5))
        still_blocked = not release.is_set()
        release.set()
    values, lost = _by_kind(results)
    assert values == [1, 2] and still_blocked  # the generator did not wait for the blocked task
    assert [(x.task[0], x.message) for x in lost] == [("block", "timed out after 0.5 s")]


def test_a_long_silence_is_logged(monkeypatch, caplog):
    monkeypatch.setattr(execution, "STALL_WARNING_S", 0.3)
    monkeypatch.setattr(execution, "POLL_S", 0.1)
    with ThreadPoolExecutor(1) as ex, caplog.at_level(logging.WARNING, logger="ignite_seg"):
        assert list(TaskRunner(1, ex).map_unordered(quick_or_sleep, [("sleep", 1.5)], key=lambda t: t)) == ["slept"]
    assert "no task has finished for" in caplog.text and "('sleep', 1.5)" in caplog.text


def test_the_runner_knows_no_upper_layer_and_preloads_what_it_is_told():
    source = inspect.getsource(execution)
    assert "ignite_seg.engine.trainer" not in source and "._processes" not in source
    with TaskRunner(2, preload=("colorsys",)) as runner:
        assert list(runner.map_unordered(quick_or_sleep, [("module", "colorsys")] * 4)) == [True] * 4


def _train(tmp_path, model, **kw):
    return ignite_seg.train(model, BLOBS, CE, folder=tmp_path / "run", hyperparameters=FAST_HP, analysis="none",
                            trials=3, trials_strict=True, cores=2, seed=0, **kw)


def test_a_hanging_trial_times_out_and_the_run_goes_on(tmp_path):
    model = ("runtime_tasks", "Misbehaves", (), {"how": "hang", "only_seed": trial_seed(0, 1)})
    res = _train(tmp_path, model, trial_timeout=20)
    assert [t.status for t in res.trials] == ["completed", "failed", "completed"]
    assert res.trials[1].error == "timed out after 20 s"
    assert json.loads((tmp_path / "run" / "trials" / "1" / "result.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("how", ["exit", "interrupt"])
def test_systemexit_or_keyboardinterrupt_in_user_code_is_a_failed_trial(tmp_path, how):
    model = ("runtime_tasks", "Misbehaves", (), {"how": how, "only_seed": trial_seed(0, 2)})
    res = _train(tmp_path, model)
    assert [t.status for t in res.trials] == ["completed", "completed", "failed"]
    error = (tmp_path / "run" / "trials" / "2" / "error.txt").read_text()
    assert ("SystemExit: 3" if how == "exit" else "KeyboardInterrupt") in error


@pytest.mark.parametrize("value, exc", [
    (0, ignite_seg.ConfigError), (-5, ignite_seg.ConfigError), (float("nan"), ignite_seg.ConfigError),
    ("60", ignite_seg.ConfigTypeError), (True, ignite_seg.ConfigTypeError),
])
def test_trial_timeout_is_checked_up_front(tmp_path, value, exc):
    with pytest.raises(exc, match=rf"trial_timeout.*{value!r}".replace("(", r"\(")):
        _train(tmp_path, ("tasks", "mlp", (), {}), trial_timeout=value)
    assert not (tmp_path / "run").exists()


def test_a_thread_pool_of_several_threads_is_refused_with_the_fix(tmp_path):
    with ThreadPoolExecutor(2) as ex, pytest.raises(ignite_seg.ConfigError, match=r"not reproducible.*executor=None"):
        _train(tmp_path, ("tasks", "mlp", (), {}), executor=ex)
    assert not (tmp_path / "run").exists()
