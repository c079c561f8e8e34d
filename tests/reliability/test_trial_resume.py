"""Mid-trial resume: a driver SIGKILLed while its trials run, continued with ``is_continuation=True``,
ends with the same weights (byte for byte), through-time arrays and metrics as an uninterrupted run;
workers that do not see the run folder write no checkpoint, and the caller says so."""
from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import tempfile
import uuid
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import CE, FAST_HP

import ignite_seg
from ignite_seg.engine.checkpoints import CheckpointPlan
from ignite_seg.engine.trainer import TrialTask

from .harness import load_npz, processes_with_marker, start_script, wait_until

SCRIPT = Path(__file__).with_name("resumerun.py")
VOLATILE = ("seconds", "started_at", "pid", "peak_rss_mib", "checkpoints")  # checkpoints: resumed_from_epoch


def _driver(spec: dict, marker: str, out) -> subprocess.Popen:
    return start_script(SCRIPT, spec, marker, out)


def _until(condition, limit: float, what: str) -> None:
    wait_until(condition, limit, what, poll=0.02)


def _run(spec: dict) -> str:
    with tempfile.TemporaryFile("w+") as out:
        proc = _driver(spec, uuid.uuid4().hex, out)
        code = proc.wait(timeout=600)
        out.seek(0)
        log = out.read()
    assert code == 0 and "DONE" in log, log[-3000:]
    return log


@pytest.mark.parametrize("case", ["tensors", "dataloader+ema"])
def test_a_killed_run_resumes_its_trials_from_their_checkpoints_to_the_uninterrupted_result(tmp_path, case):
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    _run({"folder": str(reference), "case": case})
    assert not list(reference.rglob("checkpoint.pt")), "a finished trial kept its checkpoint"

    marker = uuid.uuid4().hex
    trials = [killed / "trials" / str(t) for t in (0, 1)]
    with tempfile.TemporaryFile("w+") as out:
        proc = _driver({"folder": str(killed), "case": case}, marker, out)
        try:
            _until(lambda: all((d / "checkpoint.pt").is_file() for d in trials) or proc.poll() is not None, 300,
                   "both trials' first checkpoint")
            proc.kill()
            proc.wait()
        finally:
            proc.kill()
    _until(lambda: not processes_with_marker(marker), 20, "the killed run's workers to end")
    cut = [not (d / "result.json").exists() for d in trials]
    assert any(cut), "both trials finished before the kill: nothing was interrupted"

    log = _run({"folder": str(killed), "case": case, "continuation": True})
    for t, d in enumerate(trials):
        result = json.loads((d / "result.json").read_text())
        want = json.loads((reference / "trials" / str(t) / "result.json").read_text())
        if cut[t]:
            assert result["checkpoints"]["resumed_from_epoch"] >= 1, result
            assert f"trial {t} resumed from its checkpoint at epoch {result['checkpoints']['resumed_from_epoch']}" in log
        assert {k: v for k, v in result.items() if k not in VOLATILE} == \
               {k: v for k, v in want.items() if k not in VOLATILE}
        for name in ("model.pt", "model_init.pt", "model_raw.pt"):
            ref_file = reference / "trials" / str(t) / name
            assert (d / name).is_file() == ref_file.is_file(), name
            if ref_file.is_file():
                assert (d / name).read_bytes() == ref_file.read_bytes(), f"trial {t} {name}"
        got, ref = load_npz(d / "throughtime.npz"), load_npz(reference / "trials" / str(t) / "throughtime.npz")
        assert got.keys() == ref.keys()
        for k in ref:
            assert (got[k] == ref[k]).all(), f"trial {t} throughtime {k}"
        assert not (d / "checkpoint.pt").exists()
    assert (load_npz(killed / "results.npz")["final_perf_val"] == load_npz(reference / "results.npz")["final_perf_val"]).all()


def test_a_trial_whose_worker_died_is_retried_from_its_checkpoint(tmp_path):
    crash = tmp_path / "crash"
    # 6 steps per epoch: the worker dies in epoch 4, after the checkpoint of epoch 3; the retry's new
    # process counts its steps from 0 and has 12 left, so it does not die again
    model = ("resume_tasks", "Interruptible", (), {"crash_file": str(crash), "crash_at": 20, "crash_how": "kill"})
    kwargs = dict(hyperparameters=dataclasses.replace(FAST_HP, epochs=5), analysis="none",
                  allow_later_analysis_up_to="none", trials=1, trials_strict=True, cores=1, seed=0, checkpoint_every=1)
    ignite_seg.train(model, ("tasks", "blobs", (), {}), CE, folder=tmp_path / "reference", **kwargs)
    crash.touch()
    res = ignite_seg.train(model, ("tasks", "blobs", (), {}), CE, folder=tmp_path / "run", **kwargs)
    assert [t.status for t in res.trials] == ["completed"]
    result = json.loads((tmp_path / "run" / "trials" / "0" / "result.json").read_text())
    assert result["checkpoints"] == {"resumed_from_epoch": 3}
    got, want = tmp_path / "run" / "trials" / "0", tmp_path / "reference" / "trials" / "0"
    assert (got / "model.pt").read_bytes() == (want / "model.pt").read_bytes()
    got_tt, want_tt = load_npz(got / "throughtime.npz"), load_npz(want / "throughtime.npz")
    assert got_tt.keys() == want_tt.keys() and all((got_tt[k] == want_tt[k]).all() for k in want_tt)


class OtherMachine(Executor):
    """One worker thread that sees the files as a worker on another machine would: there, the run
    folder's path holds another folder (``elsewhere``)."""

    def __init__(self, elsewhere: Path) -> None:
        self.pool, self.elsewhere = ThreadPoolExecutor(1), str(elsewhere)

    def _as_seen_there(self, arg: Any) -> Any:
        if isinstance(arg, CheckpointPlan):
            return dataclasses.replace(arg, run_folder=self.elsewhere)
        if isinstance(arg, TrialTask) and arg.checkpoints is not None:
            return dataclasses.replace(arg, checkpoints=self._as_seen_there(arg.checkpoints))
        return arg

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.pool.submit(fn, *[self._as_seen_there(a) for a in args], **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait, cancel_futures=cancel_futures)


@pytest.mark.parametrize("there", ["nothing", "another run"])
def test_workers_that_do_not_see_the_run_folder_write_no_checkpoint_and_the_caller_warns(tmp_path, caplog, there):
    elsewhere = tmp_path / "elsewhere"
    if there == "another run":
        elsewhere.mkdir()
        (elsewhere / "run.json").write_text(json.dumps({"run_id": "not this run", "loaders": {}}))
    folder = tmp_path / "run"
    hp = dataclasses.replace(FAST_HP, epochs=3)
    with caplog.at_level(logging.INFO, logger="ignite_seg"), OtherMachine(elsewhere) as ex:
        res = ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE, folder=folder,
                               hyperparameters=hp, analysis="none", allow_later_analysis_up_to="none", trials=2,
                               trials_strict=True, cores=1, seed=0, executor=ex, checkpoint_every=1)
    assert [t.status for t in res.trials] == ["completed", "completed"]
    assert any("mid-trial resume is off for this executor" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    for t in (0, 1):
        result = json.loads((folder / "trials" / str(t) / "result.json").read_text())
        assert "not visible from this worker" in result["checkpoints"]["off"]
    assert not list(tmp_path.rglob("checkpoint.pt")) and not (elsewhere / "trials").exists()


def test_an_executor_that_shares_the_folder_is_not_warned_about(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="ignite_seg"), ThreadPoolExecutor(1) as ex:
        ignite_seg.train(("tasks", "mlp", (), {}), ("tasks", "blobs", (), {}), CE, folder=tmp_path / "run",
                         hyperparameters=FAST_HP, analysis="none", allow_later_analysis_up_to="none", trials=1,
                         trials_strict=True, cores=1, seed=0, executor=ex, checkpoint_every=1)
    assert not any("mid-trial resume is off" in r.getMessage() for r in caplog.records)
    result = json.loads((tmp_path / "run" / "trials" / "0" / "result.json").read_text())
    assert "checkpoints" not in result  # nothing to say: no resume, none off, none refused
