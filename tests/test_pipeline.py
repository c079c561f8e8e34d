"""End-to-end tests of the core pipeline with real worker processes."""
from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from helpers import CE

import ignite_seg
from ignite_seg.storage.run_folder import RunFolder

MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def _load(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_end_to_end_two_workers_layout_and_shapes(run_kwargs, caplog):
    with caplog.at_level(logging.INFO, logger="ignite_seg"):
        res = ignite_seg.train(MLP, BLOBS, CE, **{**run_kwargs, "trials": 3})
    folder = run_kwargs["folder"]
    # trials_strict=False fills the 2 workers: 3 -> 4 trials, and the log says why
    assert [t.trial_id for t in res.trials] == [0, 1, 2, 3]
    assert "trials=3 rounded up to 4, a multiple of the 2 trials that run at once" in caplog.text
    assert all(t.status == "completed" for t in res.trials)
    assert min(t.perf_val for t in res.trials) > 0.9  # blobs are easy
    run = json.loads((folder / "run.json").read_text())
    assert run["state"] == "complete" and run["seed"] == 0 and run["accuracy_style"] == "classification"
    assert set(run["versions"]) >= {"torch", "pytorch-ignite", "ignite_seg"}
    assert json.loads((folder / "hparams" / "final.json").read_text())["batch_size"] == 16
    for i in range(4):
        d = folder / "trials" / str(i)
        result = json.loads((d / "result.json").read_text())
        assert result["status"] == "completed"
        assert set(result) >= {"format", "status", "seconds", "metrics"}
        assert set(result["metrics"]) == {"loss_train", "loss_val", "perf_train", "perf_val"}
        sd = torch.load(d / "model.pt", weights_only=True)
        sd0 = torch.load(d / "model_init.pt", weights_only=True)
        assert set(sd) == {"0.weight", "0.bias", "2.weight", "2.bias"}
        assert not torch.equal(sd["0.weight"], sd0["0.weight"])
        tt = _load(d / "throughtime.npz")
        assert set(tt) == {"epochs", "losses_train", "losses_val", "perfs_train", "perfs_val"}
    results = _load(folder / "results.npz")
    assert set(results) == {"trial_ids", "final_loss_train", "final_loss_val", "final_perf_train",
                            "final_perf_val", "seconds"}
    assert results["final_perf_val"].shape == (4,)
    np.testing.assert_array_equal(results["trial_ids"], [0, 1, 2, 3])
    np.testing.assert_allclose(results["final_perf_val"], [t.perf_val for t in res.trials])
    tt = _load(folder / "throughtimes.npz")
    # 96 items / batch 16 = 6 iterations per epoch, 10 snapshots per epoch -> deduplicated to 6
    # per epoch, plus the one before training: 3 epochs -> 19 snapshots at exact epochs
    np.testing.assert_allclose(tt["epochs"], np.arange(19) / 6)
    for key in ("losses_train", "losses_val", "perfs_train", "perfs_val"):
        assert tt[key].shape == (4, 19) and tt[f"{key}_smoothed"].shape == (4, 19)
    assert json.loads(str(tt["settings"][0]))["batch_size"] == 16
    # the curves learn: loss falls from the first to the last snapshot
    assert (tt["losses_val"][:, -1] < tt["losses_val"][:, 0]).all()


def test_snapshot_subsets_and_epochs_are_exact(run_kwargs, tmp_path):
    hp = ignite_seg.FixedHyperparameters(lr_start=0.05, lr_end=0.5, batch_size=10, cycle_size_epochs=1, epochs=2)
    ignite_seg.train(MLP, ("tasks", "blobs", (), {"n_train": 200, "n_val": 50}), CE,
                     **{**run_kwargs, "hyperparameters": hp, "trials": 1, "trials_strict": True,
                        "cores": 1, "snapshots_per_epoch": 4})
    tt = _load(run_kwargs["folder"] / "throughtimes.npz")
    # 200 / 10 = 20 iterations per epoch, snapshots every 5 iterations
    np.testing.assert_allclose(tt["epochs"], np.arange(9) / 4)


def test_seeded_runs_are_reproducible_whatever_the_workers(run_kwargs, tmp_path):
    a = ignite_seg.train(MLP, BLOBS, CE, **{**run_kwargs, "cores": 2, "trials": 2})
    b = ignite_seg.train(MLP, BLOBS, CE, **{**run_kwargs, "folder": tmp_path / "b", "cores": 1,
                                            "trials": 2, "trials_strict": True})
    assert [t.loss_val for t in a.trials] == [t.loss_val for t in b.trials]
    assert a.trials[0].loss_val != a.trials[1].loss_val  # trials differ from each other


def test_continuation_adds_trials_and_archiving_never_overwrites(run_kwargs, tmp_path):
    first = ignite_seg.train(MLP, BLOBS, CE, **run_kwargs)
    more = ignite_seg.train(MLP, BLOBS, CE, **{**run_kwargs, "is_continuation": True})
    assert [t.trial_id for t in more.trials] == [0, 1, 2, 3]
    assert [t.loss_val for t in more.trials[:2]] == [t.loss_val for t in first.trials]
    assert _load(run_kwargs["folder"] / "results.npz")["final_perf_val"].shape == (4,)
    # a fresh run archives the folder; two archives in the same second get distinct names
    ignite_seg.train(MLP, BLOBS, CE, **run_kwargs)
    ignite_seg.train(MLP, BLOBS, CE, **run_kwargs)
    history = sorted((tmp_path / "history").iterdir())
    assert len(history) == 2
    sizes = sorted(len(list((h / "trials").iterdir())) for h in history)
    assert sizes == [2, 4]  # the 4-trial run and one 2-trial run, both intact
    assert len(RunFolder(run_kwargs["folder"]).trial_ids()) == 2


def test_archiving_across_filesystems(run_kwargs, tmp_path):
    import os
    import tempfile

    from ignite_seg.storage.run_folder import archive_folder

    shm = "/dev/shm"
    if not os.path.isdir(shm) or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second filesystem (/dev/shm)")
    src = tmp_path / "current"
    (src / "trials" / "0").mkdir(parents=True)
    (src / "trials" / "0" / "result.json").write_text("{}")
    with tempfile.TemporaryDirectory(dir=shm) as other:
        dest = archive_folder(src, __import__("pathlib").Path(other) / "history")
        assert (dest / "trials" / "0" / "result.json").read_text() == "{}"
        assert not src.exists()
        again = tmp_path / "current"
        again.mkdir()
        (again / "x").write_text("y")
        second = archive_folder(again, dest.parent)
        assert second != dest and (second / "x").read_text() == "y"


@pytest.mark.parametrize(
    "model, dataset, loss, style",
    [
        (("tasks", "mlp", (), {}), ("tasks", "multilabel", (), {}), ("torch.nn", "BCEWithLogitsLoss", (), {}), "multiclass"),
        (("tasks", "linear", (), {}), ("tasks", "regression", (), {}), ("torch.nn", "MSELoss", (), {}), "inv-loss"),
        (("tasks", "mlp", (), {}), ("tasks", "blobs_list", (), {}), CE, "classification"),
    ],
    ids=["multiclass", "inv-loss", "classification-plain-dataset"],
)
def test_accuracy_styles(run_kwargs, model, dataset, loss, style):
    res = ignite_seg.train(model, dataset, loss, accuracy_style=style, **{**run_kwargs, "cores": 1, "trials": 1})
    (t,) = res.trials
    assert t.status == "completed"
    if style == "inv-loss":
        assert t.perf_val == pytest.approx(1 / (1 + t.loss_val))
    else:
        assert 0.5 < t.perf_val <= 1.0


@pytest.mark.parametrize("options", [
    {"optimizer": "adamw", "weight_decay": 0.01, "lr_start": 0.001, "lr_end": 0.01},
    {"momentum": 0.9, "grad_clip_norm": 1.0},
    {"amp": True},
], ids=["adamw", "momentum-clip", "amp"])
def test_trainer_options(run_kwargs, options):
    import dataclasses

    hp = dataclasses.replace(run_kwargs["hyperparameters"], epochs=5, **options)
    res = ignite_seg.train(MLP, BLOBS, CE, **{**run_kwargs, "hyperparameters": hp, "trials": 1, "cores": 1})
    (t,) = res.trials
    assert t.status == "completed" and t.perf_val > 0.9
    final = json.loads((run_kwargs["folder"] / "hparams" / "final.json").read_text())
    assert all(final[k] == v for k, v in options.items())


def test_failing_trial_is_recorded_and_others_go_on(run_kwargs):
    res = ignite_seg.train(("tasks", "RaisesInTraining", (), {}), BLOBS, CE, **{**run_kwargs, "trials": 2})
    assert [t.status for t in res.trials] == ["failed", "failed"]
    d = run_kwargs["folder"] / "trials" / "0"
    assert "boom in training" in (d / "error.txt").read_text()
    assert "Traceback" in (d / "error.txt").read_text()
    assert "boom in training" in json.loads((d / "result.json").read_text())["error"]
    assert _load(run_kwargs["folder"] / "results.npz")["final_perf_val"].shape == (0,)
    assert res.n_failed == 2 and [t.trial_id for t in res.failures] == [0, 1]
    assert "0 of 2 trial(s) completed" in str(res) and "boom in training" in str(res)


def test_diverging_trial_is_recorded_with_its_iteration(run_kwargs):
    res = ignite_seg.train(("tasks", "Exploding", (), {}), BLOBS, CE, **{**run_kwargs, "cores": 1, "trials": 1})
    (t,) = res.trials
    assert t.status == "diverged" and res.n_diverged == 1
    result = json.loads((run_kwargs["folder"] / "trials" / "0" / "result.json").read_text())
    assert result["diverged_iteration"] == 6


def test_spawned_workers_where_there_is_no_fork_server(run_kwargs, monkeypatch):
    from ignite_seg.runtime import tasks as execution

    monkeypatch.setenv("IGNITE_SEG_START_METHOD", "spawn")
    assert execution.start_method() == "spawn"
    res = ignite_seg.train(MLP, BLOBS, CE, **run_kwargs)
    assert [t.status for t in res.trials] == ["completed", "completed"]
    monkeypatch.setenv("IGNITE_SEG_START_METHOD", "no-such-method")
    assert execution.start_method() == "spawn"


def test_dask_executor(run_kwargs):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        res = ignite_seg.train(MLP, BLOBS, CE, executor=client.get_executor(), **run_kwargs)
        pids = {json.loads((run_kwargs["folder"] / "trials" / str(i) / "result.json").read_text())["pid"]
                for i in range(2)}
        worker_pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert all(t.status == "completed" for t in res.trials)
    assert pids <= worker_pids


def test_any_executor_and_load_model_round_trip(run_kwargs):
    with ThreadPoolExecutor(1) as ex:  # one thread: reproducible trials (more are refused)
        res = ignite_seg.train(MLP, BLOBS, CE, executor=ex, **run_kwargs)
    model = ignite_seg.load_model(run_kwargs["folder"], trial=1, trust_recipe=True)
    x, y = __import__("tasks").blobs()[1].tensors
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    assert acc == pytest.approx(res.trials[1].perf_val)
    init = ignite_seg.load_model(run_kwargs["folder"], trial=1, initial=True, trust_recipe=True)
    assert not torch.equal(init[0].weight, model[0].weight)
    with pytest.raises(ignite_seg.FolderError, match="trial 7"):
        ignite_seg.load_model(run_kwargs["folder"], trial=7, trust_recipe=True)


def test_ray_executor(run_kwargs):
    ray = pytest.importorskip("ray")
    import os
    import sys

    from ignite_seg.runtime.executors import RayExecutor

    path = os.pathsep.join(p for p in sys.path if p)  # the workers import tests/tasks.py
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        res = ignite_seg.train(MLP, BLOBS, CE, executor=RayExecutor(), **run_kwargs)
    finally:
        ray.shutdown()
    assert [t.status for t in res.trials] == ["completed", "completed"]
    pids = {json.loads((run_kwargs["folder"] / "trials" / str(i) / "result.json").read_text())["pid"] for i in range(2)}
    assert os.getpid() not in pids


FORKED_SCRIPT = '''
import atexit, gc, os, sys
import torch
# registered before train(): runs after its exit hook (last registered, first run)
atexit.register(lambda: print("frozen at exit", gc.get_freeze_count() > 0))
sys.path.insert(0, {tests!r})
import ignite_seg
import tasks
from helpers import CE, FAST_HP

torch.set_num_threads(2)
x = torch.randn(1500, 1500)
(x @ x).sum()  # an OpenMP parallel region in this process before the workers fork


def model():  # a loader from this unguarded script: fine when the workers are forks of it
    with open(os.path.join({out!r}, f"parent_{{os.getpid()}}"), "w") as f:
        f.write(str(os.getppid()))
    return tasks.mlp()


ignite_seg.train(model, ("tasks", "blobs", (), {{}}), CE, folder={folder!r}, hyperparameters=FAST_HP,
                 analysis="none", allow_later_analysis_up_to="none", trials=2, cores=2, seed=0)
print("caller", os.getpid())
'''


def test_workers_forked_from_the_caller_when_asked(run_kwargs, tmp_path):
    """``IGNITE_SEG_START_METHOD=fork``: workers are forks of the calling script (no fork server, an
    unguarded script is not refused), they do not deadlock after the caller ran two OpenMP threads,
    and the trials equal the fork server's."""
    import subprocess
    import sys
    from pathlib import Path

    tests = str(Path(__file__).parent)
    script = tmp_path / "forked.py"
    script.write_text(FORKED_SCRIPT.format(tests=tests, out=str(tmp_path), folder=str(tmp_path / "forked")))
    env = {**__import__("os").environ, "IGNITE_SEG_START_METHOD": "fork"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    caller = int(done.stdout.split("caller")[-1].split()[0])
    assert "frozen at exit True" in done.stdout  # train() made the interpreter's shutdown skip the collector
    parents = {int(p.read_text()) for p in tmp_path.glob("parent_*") if p.name != f"parent_{caller}"}  # the probe
    assert parents == {caller}  # each worker that built a model is a child of the script itself
    ignite_seg.train(MLP, BLOBS, CE, **run_kwargs)  # the same run from the fork server (this process's default)
    forked, served = _load(tmp_path / "forked" / "results.npz"), _load(run_kwargs["folder"] / "results.npz")
    for key in ("final_loss_val", "final_perf_val", "final_loss_train"):
        np.testing.assert_array_equal(forked[key], served[key])


def test_fork_is_not_used_once_cuda_is_initialised(monkeypatch, caplog):
    from ignite_seg.runtime import workers

    monkeypatch.setenv("IGNITE_SEG_START_METHOD", "fork")
    assert workers.start_method() == "fork"
    monkeypatch.setattr(workers, "_cuda_initialized", lambda: True)
    monkeypatch.setattr(workers, "_warned_cuda", False)
    with caplog.at_level("WARNING", logger="ignite_seg"):
        assert workers.start_method() == "forkserver" and workers.start_method() == "forkserver"
    assert [r.getMessage() for r in caplog.records].count(
        "IGNITE_SEG_START_METHOD=fork: CUDA is initialised in this process, and a forked worker cannot use it; "
        "starting workers from the fork server instead") == 1


LINUX = ["fork", "spawn", "forkserver"]


@pytest.mark.parametrize("wanted, available, platform, cuda, threads, method", [
    (None, LINUX, "linux", False, [], "fork"),  # the default where it is safe
    (None, LINUX, "linux", False, ["user-thread"], "forkserver"),  # a thread of the user's is alive
    (None, LINUX, "linux", True, [], "forkserver"),  # CUDA initialised in the caller
    (None, LINUX, "darwin", False, [], "forkserver"),  # fork only on Linux
    (None, ["spawn"], "win32", False, [], "spawn"),  # no fork server
    ("forkserver", LINUX, "linux", False, [], "forkserver"),  # the variable is obeyed...
    ("spawn", LINUX, "linux", False, [], "spawn"),
    ("fork", LINUX, "linux", False, ["user-thread"], "fork"),  # ...even with threads (the user's call)
    ("fork", LINUX, "linux", True, [], "forkserver"),  # ...except fork with CUDA initialised
    ("no-such-method", LINUX, "linux", False, [], "spawn"),
])
def test_the_start_method_from_known_facts(wanted, available, platform, cuda, threads, method):
    from ignite_seg.runtime.workers import choose_start_method

    choice = choose_start_method(wanted, available, platform, cuda, threads)
    assert choice.method == method
    if threads and wanted is None:
        assert "1 other thread(s) run in this process ('user-thread')" in choice.reason
    if cuda:
        assert "CUDA is initialised" in choice.reason
    if wanted is not None:
        assert f"IGNITE_SEG_START_METHOD={wanted}" in choice.reason


def test_other_threads_are_the_live_ones_but_tqdms_monitor(monkeypatch):
    import threading

    from ignite_seg.runtime import workers

    monkeypatch.delenv("IGNITE_SEG_START_METHOD", raising=False)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="user-thread")
    before = workers.other_threads()
    thread.start()
    try:
        assert workers.other_threads() == [*before, "user-thread"]
        assert workers.start_method() == "forkserver"
    finally:
        stop.set()
        thread.join()
    assert workers.other_threads() == before


TRAIN_SCRIPT = '''
import json, os, sys, threading
sys.path.insert(0, {tests!r})
import ignite_seg
from helpers import CE, FAST_HP

if {thread!r}:
    stop = threading.Event()
    threading.Thread(target=stop.wait, name="user-thread", daemon=True).start()
if __name__ == "__main__":
    res = ignite_seg.train(("tasks", "mlp", (), {{}}), ("tasks", "blobs", (), {{}}), CE, folder={folder!r},
                           hyperparameters=FAST_HP, analysis="none", allow_later_analysis_up_to="none", trials=2,
                           cores=2, seed=0)
    print("RESULT", json.dumps([os.getpid(), [t.status for t in res.trials]]))
'''


@pytest.mark.parametrize("how", ["default", "thread", "forkserver", "spawn"])
def test_a_real_train_under_each_start_method(tmp_path, how, reference):
    """The default forks the workers from a lone-threaded caller (they are its children, no fork
    server); a live thread of the user's, or the variable, starts them from the fork server; the
    log says which and why; every way gives the same trials."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "run.py"
    script.write_text(TRAIN_SCRIPT.format(tests=str(Path(__file__).parent), thread=how == "thread",
                                          folder=str(tmp_path / "run")))
    env = {k: v for k, v in os.environ.items() if k != "IGNITE_SEG_START_METHOD"}
    if how in ("forkserver", "spawn"):
        env["IGNITE_SEG_START_METHOD"] = how
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    caller, statuses = json.loads(done.stdout.split("RESULT")[-1])
    assert statuses == ["completed", "completed"]
    said = {"default": "workers start by forking this process: Linux, no CUDA initialised and no other thread",
            "thread": "workers start by the fork server: 1 other thread(s) run in this process ('user-thread')",
            "forkserver": "workers start by the fork server: IGNITE_SEG_START_METHOD=forkserver",
            "spawn": "workers start by spawning: IGNITE_SEG_START_METHOD=spawn"}[how]
    assert said in done.stderr
    pids = {json.loads((tmp_path / "run" / "trials" / str(i) / "result.json").read_text())["pid"] for i in range(2)}
    assert caller not in pids
    results = _load(tmp_path / "run" / "results.npz")
    for key in ("final_loss_val", "final_perf_val", "final_loss_train"):
        np.testing.assert_array_equal(results[key], reference[key])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same run from this process (whatever its start method), once for the module."""
    from helpers import FAST_HP

    folder = tmp_path_factory.mktemp("reference")
    ignite_seg.train(MLP, BLOBS, CE, folder=folder / "current", history_folder=folder / "history",
                     hyperparameters=FAST_HP, analysis="none", allow_later_analysis_up_to="none", trials=2, cores=2,
                     seed=0)
    return _load(folder / "current" / "results.npz")
