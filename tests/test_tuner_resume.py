"""A tune killed half way resumes from its finished tasks (``hparams/tasks/``), with the same choice."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from test_tuner import SMALL, specs

from ignite_seg.engine.sweeps import BatchRunResult, BatchRunTask, LRSweepResult, RecipeSpec
from ignite_seg.runtime.tasks import TaskRunner
from ignite_seg.storage.run_folder import RunFolder
from ignite_seg.tuning.recipe import choose_recipe
from ignite_seg.tuning.task_store import TASKS_DIR, TaskStore

KW = dict(accuracy_style="classification", facts={"n_train": 96, "n_val": 48}, device="cpu")


class CountingRunner:
    """The runner, counting the tasks it is given."""

    def __init__(self, runner: TaskRunner) -> None:
        self.runner, self.tasks = runner, 0

    @property
    def task_threads(self):
        return self.runner.task_threads

    def map_unordered(self, fn, tasks, key, **kw):
        tasks = list(tasks)
        self.tasks += len(tasks)
        return self.runner.map_unordered(fn, tasks, key=key, **kw)


def _kind(path) -> str:
    with np.load(path, allow_pickle=False) as z:
        return str(z["meta"]).split('"type": "')[1].split('"')[0]


def test_a_tune_killed_during_the_batch_search_resumes_without_redoing_the_sweep(tmp_path):
    with TaskRunner(2) as pool:
        runner = CountingRunner(pool)
        first = choose_recipe(runner, RunFolder(tmp_path / "run"), SMALL, specs(), seed=5, **KW)
        n_all = runner.tasks
        kept = sorted((tmp_path / "run/hparams" / TASKS_DIR).glob("*.npz"))
        batch_runs = [p for p in kept if _kind(p) == "BatchRunResult"]
        assert len(kept) == n_all and batch_runs and len(batch_runs) < n_all  # every task kept, none failed
        # the kill: the batch-size runs had not finished, nor the tune
        for p in batch_runs + [tmp_path / "run/hparams/final.json"]:
            p.unlink()
        runner.tasks = 0
        again = choose_recipe(runner, RunFolder(tmp_path / "run"), SMALL, specs(), seed=5, **KW)
        # only the unfinished tasks ran again (not the sweeps' repeats), and the choice is the same
        assert runner.tasks == len(batch_runs) < n_all
        assert again == first and (tmp_path / "run/hparams/final.json").is_file()
        # a changed setting (another seed) reuses nothing
        runner.tasks = 0
        choose_recipe(runner, RunFolder(tmp_path / "run"), SMALL, specs(), seed=6, **KW)
        assert runner.tasks == n_all


def _task(seed: int) -> BatchRunTask:
    recipe = RecipeSpec(model=specs()["model"], dataset=specs()["dataset"], loss=specs()["loss"],
                        accuracy_style="classification", holdout=(1, 2, 3))
    return BatchRunTask(key=("k", 1), recipe=recipe, seed=seed, batch_size=16, lr_min=0.1, lr_max=0.3, epochs=1.0)


def test_the_store_round_trips_results_without_pickle_and_keeps_no_failed_task(tmp_path):
    store = TaskStore(tmp_path)
    task = _task(1)
    assert store.load(task) is None
    store.save(task, BatchRunResult(key="old", status="completed", perf=0.5, loss=math.nan, iterations=7, seconds=1.5,
                                    examples=112))
    got = store.load(dataclasses.replace(task, key="new"))  # the key is the caller's, the rest is kept
    assert got == BatchRunResult(key="new", status="completed", perf=0.5, loss=got.loss, iterations=7, seconds=1.5,
                                 examples=112) and math.isnan(got.loss)
    assert store.load(_task(2)) is None  # another seed: another task
    store.save(_task(3), BatchRunResult(key="x", status="failed", error="boom"))
    assert store.load(_task(3)) is None
    sweep = LRSweepResult(key=0, status="diverged", arrays={"lrs": np.geomspace(1e-3, 1, 5), "losses": np.ones(5)},
                          seconds=2.0, examples=80)
    store.save(_task(4), sweep)
    back = store.load(_task(4))
    assert isinstance(back, LRSweepResult) and back.status == "diverged" and back.examples == 80
    np.testing.assert_array_equal(back.arrays["lrs"], sweep.arrays["lrs"])
    (tmp_path / next(p.name for p in tmp_path.iterdir())).write_bytes(b"torn")  # a torn file is run again
    assert sum(store.load(_task(s)) is None for s in (1, 4)) == 1


@pytest.mark.parametrize("field", ["batch_size", "lr_max", "epochs"])
def test_any_changed_field_is_another_task(tmp_path, field):
    store = TaskStore(tmp_path)
    store.save(_task(1), BatchRunResult(key="k", status="completed", perf=0.9))
    changed = dataclasses.replace(_task(1), **{field: getattr(_task(1), field) * 2})
    assert store.load(changed) is None and store.load(_task(1)) is not None
