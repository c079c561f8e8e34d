"""User handlers: ignite's EarlyStopping stops a trial whose val loss rises (the files say so, the
folder analyses), a CSV logger's file lands in trials/<i>/, and bad handlers are refused."""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from handler_tasks import replay_early_stopping
from helpers import CE, FAST_HP, trial_task

import ignite_seg
from ignite_seg.config.specs import normalize_spec
from ignite_seg.engine.trainer import TrialTask, run_trial
from ignite_seg.engine.user_handlers import collect_output
from ignite_seg.exceptions import ConfigError, ConfigTypeError

ROOT = Path(__file__).resolve().parents[1]
WRONG_VAL = (("tasks", "mlp", (), {}), ("handler_tasks", "wrong_val_blobs", (), {}), CE)
PATIENCE = 3


def test_early_stopping_stops_one_trial_and_the_run_collates_and_analyses(run_kwargs):
    handlers = [("handler_tasks", "early_stopping", (PATIENCE,), {"only_trial": 0}), ("handler_tasks", "csv_logger", (), {})]
    res = ignite_seg.train(*WRONG_VAL, **{**run_kwargs, "analysis": "images", "allow_later_analysis_up_to": "images"},
                           snapshots_per_epoch=2, handlers=handlers)
    folder = res.folder
    assert [t.status for t in res.trials] == ["completed", "completed"]
    stopped, full = (json.loads((folder / "trials" / str(i) / "result.json").read_text()) for i in (0, 1))
    tt0 = dict(np.load(folder / "trials" / "0" / "throughtime.npz"))
    k = replay_early_stopping(-tt0["losses_val"], PATIENCE)  # where EarlyStopping stops on this curve
    assert k is not None and len(tt0["epochs"]) == k + 1  # no snapshot after the stop
    assert stopped["stop"]["epoch"] == tt0["epochs"][-1] < FAST_HP.epochs
    assert full["stop"] == {"epoch": None}  # ran to its last epoch
    with np.load(folder / "throughtimes.npz") as tt:
        assert tt["losses_val"].shape == (2, 2 * FAST_HP.epochs + 1) and tt["epochs"][-1] == FAST_HP.epochs
        assert np.isnan(tt["losses_val"][0, k + 1:]).all() and np.isfinite(tt["losses_val"][1]).all()
    # one row per completed epoch (ignite fires no EPOCH_COMPLETED for the epoch terminate() ends)
    for tid, rows in ((0, math.ceil(stopped["stop"]["epoch"]) - 1), (1, FAST_HP.epochs)):
        path = folder / "trials" / str(tid) / "metrics.csv"
        table = list(csv.reader(path.read_text().splitlines())) if rows else [["epoch", "losses_val"]]
        assert table[0] == ["epoch", "losses_val"] and [int(r[0]) for r in table[1:]] == list(range(1, rows + 1))
    assert (folder / "analysis" / "index.html").is_file() and json.loads((folder / "run.json").read_text())["state"] == "complete"
    again = subprocess.run([sys.executable, "-m", "ignite_seg.reanalyze", str(folder), "--analysis", "text"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]


def _task(handlers, dataset=WRONG_VAL[1]) -> TrialTask:
    specs = [normalize_spec(s, n) for n, s in (("model", WRONG_VAL[0]), ("dataset", dataset), ("loss", CE))]
    return trial_task(0, *specs, FAST_HP, "classification", seed=0, device="cpu",
                      handlers=tuple(normalize_spec(h, "h") for h in handlers))


def test_the_evaluator_completes_after_every_snapshot_with_its_values():
    out = run_trial(_task([("handler_tasks", "csv_logger", (), {})]))
    assert out.status == "completed" and out.result.stop is not None and not out.result.stop.stopped, out.error_text
    rows = list(csv.reader(out.files["metrics.csv"].decode().splitlines()))[1:]
    tt = out.throughtime
    at_epoch_ends = [tt["losses_val"][np.flatnonzero(tt["epochs"] == e)[0]] for e in (1.0, 2.0, 3.0)]
    assert [float(r[1]) for r in rows] == pytest.approx(at_epoch_ends, rel=1e-12)


@pytest.mark.parametrize("name", ["model.pt", "result.json", "model_best.pt"])
def test_a_handler_writing_one_of_our_files_fails_the_trial_and_says_why(name):
    out = run_trial(_task([("handler_tasks", "writes", (name,), {})]))
    assert out.status == "failed" and f"handlers wrote ['{name}'] into context.output_dir" in out.error_text


def test_the_output_is_capped(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "big.bin").write_bytes(b"x" * 100)
    assert collect_output(tmp_path) == {"sub/big.bin": b"x" * 100}
    with pytest.raises(ValueError, match="100 bytes into context.output_dir, more than the 99 bytes"):
        collect_output(tmp_path, limit=99)


def test_a_handler_spec_building_no_callable_fails_the_trial():
    out = run_trial(_task([("handler_tasks", "not_a_factory", (), {})]))
    assert out.status == "failed" and "built 42, not a callable attach(trainer, context)" in out.error_text


@pytest.mark.parametrize("handlers,error,needle", [
    (("handler_tasks", "csv_logger", (), {}), ConfigTypeError, "wrap one spec in a list"),
    ("handler_tasks.csv_logger", ConfigTypeError, "handlers must be a list"),
    ([("handler_tasks", "no_such_handler", (), {})], ConfigError, "cannot be imported here"),
    ([("no_such_module_xyz", "h", (), {})], ConfigError, "cannot be imported here"),
    ([42], ConfigTypeError, "handlers[0] must be a loader: a 4-tuple (module, attrname, args, kwargs) or a picklable callable, e.g. ('mytask', 'make_it', (), {})"),
])
def test_bad_handler_specs_are_refused_before_anything_runs(run_kwargs, handlers, error, needle):
    with pytest.raises(error) as info:
        ignite_seg.train(*WRONG_VAL, **run_kwargs, handlers=handlers)
    assert needle in str(info.value)
    assert not run_kwargs["folder"].exists()


def test_on_a_dask_cluster_the_files_and_the_best_checkpoint_come_back_through_the_outcome(run_kwargs):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        res = ignite_seg.train(*WRONG_VAL, **run_kwargs, executor=client.get_executor(), best_metric="perf",
                               best_mode="max", handlers=[("handler_tasks", "csv_logger", (), {})])
    assert [t.status for t in res.trials] == ["completed", "completed"]
    for tid in (0, 1):
        trial = res.folder / "trials" / str(tid)
        assert len((trial / "metrics.csv").read_text().splitlines()) == 1 + FAST_HP.epochs
        assert (trial / "model_best.pt").is_file() and "epoch" in json.loads((trial / "result.json").read_text())["best"]


def test_an_unguarded_script_whose_handler_it_defines_is_refused_before_any_worker(tmp_path):
    """Under the fork server (workers import the script again); forked workers (the default on Linux)
    import nothing, so there the script runs (tests/test_compat.py)."""
    script = tmp_path / "my_run.py"
    script.write_text(textwrap.dedent('''
        import ignite_seg
        from helpers import FAST_HP
        def logger():
            return lambda trainer, context: None
        try:
            ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), ("torch.nn", "CrossEntropyLoss", (), {}),
                             folder="x", hyperparameters=FAST_HP, analysis="none", handlers=[logger])
        except ignite_seg.ConfigError as exc:
            print("ERROR", exc)
    '''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
           "IGNITE_SEG_START_METHOD": "forkserver"}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert "ERROR train() is called at the top level" in out.stdout, out.stderr[-3000:]
    assert not (tmp_path / "x").exists()
