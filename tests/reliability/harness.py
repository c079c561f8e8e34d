"""Helpers of the fault-injection tests: run killrun.py, snapshot and compare run folders."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).with_name("killrun.py")
ROOT = Path(__file__).resolve().parents[2]


def run_driver(spec: dict, kill_at: int | None = None, timeout: float = 300, trace: bool = False,
               marker: str | None = None) -> subprocess.CompletedProcess:
    """Run killrun.py; ``marker`` goes into the environment of the driver and its workers."""
    env = {k: v for k, v in os.environ.items() if k not in ("IGNITE_SEG_KILL_AT_WRITE", "IGNITE_SEG_TRACE_WRITES")}
    if marker is not None:
        env["IGNITE_SEG_TEST_MARKER"] = marker
    if trace:
        env["IGNITE_SEG_TRACE_WRITES"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    if kill_at is not None:
        env["IGNITE_SEG_KILL_AT_WRITE"] = str(kill_at)
    # output through files, not pipes: a leaked worker holding a pipe would hang the wait
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.run([sys.executable, str(SCRIPT), json.dumps(spec)], env=env, stdout=out, stderr=err,
                              text=True, timeout=timeout)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())


def processes_with_marker(marker: str) -> list[int]:
    """Pids of the live processes whose environment holds ``marker`` (the driver's workers)."""
    import psutil

    pids = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("IGNITE_SEG_TEST_MARKER") == marker and p.status() != psutil.STATUS_ZOMBIE:
                pids.append(p.pid)
        except psutil.Error:
            continue
    return pids


def writes_of(proc: subprocess.CompletedProcess) -> list[str]:
    """The paths of the atomic writes a traced run made, in order (write n is item n - 1)."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    writes = [line.split(" ", 2)[2] for line in proc.stdout.splitlines() if line.startswith("WRITE ")]
    assert len(writes) == int(proc.stdout.split("WRITES")[-1].split()[0])
    return writes


def completed_trials(folder: Path) -> dict[int, dict]:
    """Completed trials with a digest of their files: what must survive a crash untouched."""
    out = {}
    trials = folder / "trials"
    if not trials.is_dir():
        return out
    for d in trials.iterdir():
        try:
            res = json.loads((d / "result.json").read_text())
        except (FileNotFoundError, ValueError):
            continue
        if res.get("status") == "completed":
            digest = hashlib.sha256()
            for name in ("result.json", "model.pt", "model_init.pt", "throughtime.npz"):
                digest.update((d / name).read_bytes())
            out[int(d.name)] = {"result": res, "digest": digest.hexdigest()}
    return out


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def assert_same_run(folder: Path, reference: Path) -> None:
    """``folder`` holds exactly the trials and collated arrays of the uninterrupted ``reference``."""
    for name in ("results.npz", "throughtimes.npz"):
        got, want = load_npz(folder / name), load_npz(reference / name)
        assert got.keys() == want.keys(), name
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{name}:{k}") if k != "seconds" else None
    got_trials, want_trials = completed_trials(folder), completed_trials(reference)
    assert sorted(got_trials) == sorted(want_trials)
    for tid, want in want_trials.items():
        g, w = dict(got_trials[tid]["result"]), dict(want["result"])
        for volatile in ("seconds", "started_at", "pid", "peak_rss_mib"):
            g.pop(volatile, None), w.pop(volatile, None)
        assert g == w, tid
    run = json.loads((folder / "run.json").read_text())
    assert run["state"] == "complete"
    if (reference / "analysis").is_dir():  # the analysis was regenerated, every product of it
        listing = sorted(p.name for p in (folder / "analysis").iterdir())
        assert listing == sorted(p.name for p in (reference / "analysis").iterdir())
        manifest = json.loads((folder / "analysis" / ".manifest.json").read_text())
        assert manifest == json.loads((reference / "analysis" / ".manifest.json").read_text())
    assert not list(folder.rglob("*.tmp")), "temporary files left behind"
    assert not (folder / ".ignite_seg.lock").exists()


def start_script(script: Path, spec: dict, marker: str, out) -> subprocess.Popen:
    """Start ``script`` with the JSON ``spec`` in a process tagged by ``marker`` (see :func:`processes_with_marker`)."""
    env = {**os.environ, "IGNITE_SEG_TEST_MARKER": marker,
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(script), json.dumps(spec)], env=env, stdout=out, stderr=out)


def wait_until(condition, limit: float, what: str, poll: float = 0.1) -> None:
    """Poll ``condition`` every ``poll`` s; fail the test naming ``what`` after ``limit`` s."""
    deadline = time.time() + limit
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


#: A small 2-trial run that tests of damaged and linked folders copy (trained once per test module).
MLP = ("tasks", "mlp", (), {})
BLOBS = ("tasks", "blobs", (), {})


def small_run_kwargs() -> dict:
    from helpers import FAST_HP

    return dict(hyperparameters=FAST_HP, analysis="none", allow_later_analysis_up_to="none", cores=1, seed=0)


def train_small_run(folder: Path) -> Path:
    """A complete 2-trial run into ``folder``."""
    from helpers import CE

    import ignite_seg

    ignite_seg.train(MLP, BLOBS, CE, folder=folder, trials=2, trials_strict=True, **small_run_kwargs())
    return folder
