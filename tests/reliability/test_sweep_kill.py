"""SIGKILL a sweep's driver at atomic writes across its points, continue it, and compare with an
uninterrupted sweep: finished points untouched, sweep.npz equal, every point complete."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .harness import ROOT, assert_same_run, completed_trials, load_npz

SCRIPT = Path(__file__).with_name("sweeprun.py")
#: seconds a sweep driver may run (a few on this machine) before the test calls it a hang
DRIVER_TIMEOUT = 240


def _sweep_driver(folder: Path, kill_at: int | None = None, trace: bool = False,
                  continuation: bool = False, spec: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("IGNITE_SEG_KILL_AT_WRITE", "IGNITE_SEG_TRACE_WRITES")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    if trace:
        env["IGNITE_SEG_TRACE_WRITES"] = "1"
    if kill_at is not None:
        env["IGNITE_SEG_KILL_AT_WRITE"] = str(kill_at)
    arg = json.dumps({**(spec or {}), "folder": str(folder), "continuation": continuation})
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:  # under pytest-timeout's 300 s, so that a hang fails with the driver's own log, not a bare timeout
            proc = subprocess.run([sys.executable, str(SCRIPT), arg], env=env, stdout=out, stderr=err, text=True,
                                  timeout=DRIVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            err.seek(0)
            pytest.fail(f"the sweep driver ran past {DRIVER_TIMEOUT} s (a hang); its log ended:\n{err.read()[-4000:]}")
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())


def test_sweep_killed_then_continued_equals_uninterrupted(tmp_path):
    reference = tmp_path / "reference"
    traced = _sweep_driver(reference, trace=True)
    assert traced.returncode == 0, traced.stderr[-3000:]
    writes = [line.split(" ", 2)[2] for line in traced.stdout.splitlines() if line.startswith("WRITE ")]
    rel = [w[len(str(reference)) + 1:] for w in writes]
    # kill points: in point 0's trials, between points, in point 2, at sweep.npz and in the report
    picks = [rel.index(next(r for r in rel if r.startswith("points/0/trials/1/"))) + 1,
             rel.index(next(r for r in rel if r.startswith("points/1/"))) + 1,
             rel.index(next(r for r in rel if r.startswith("points/2/trials/0/"))) + 1,
             rel.index("sweep.npz") + 1,
             rel.index(next(r for r in rel if r.startswith("analysis/"))) + 1]
    folders = {n: tmp_path / f"killed_at_{n}" for n in picks}
    with ThreadPoolExecutor(2) as ex:
        procs = dict(zip(picks, ex.map(lambda n: _sweep_driver(folders[n], kill_at=n), picks)))
    for n, proc in procs.items():
        assert proc.returncode == -9, f"kill at {n} ({rel[n - 1]}) did not kill: {proc.stderr[-2000:]}"
    before = {n: {k: completed_trials(f / "points" / str(k)) for k in range(3)} for n, f in folders.items()}
    with ThreadPoolExecutor(2) as ex:
        conts = dict(zip(picks, ex.map(lambda n: _sweep_driver(folders[n], continuation=True), picks)))
    for n, folder in folders.items():
        assert conts[n].returncode == 0, (rel[n - 1], conts[n].stderr[-3000:])
        got, want = load_npz(folder / "sweep.npz"), load_npz(reference / "sweep.npz")
        assert set(got) == set(want)
        for key in want:
            assert (got[key] == want[key]).all() or (got[key].dtype.kind == "f" and
                                                    ((got[key] == want[key]) | (got[key] != got[key])).all()), key
        for k in range(3):
            assert_same_run(folder / "points" / str(k), reference / "points" / str(k))
            after = completed_trials(folder / "points" / str(k))
            for tid, snap in before[n][k].items():  # completed trials kept, not rerun
                assert after[tid]["digest"] == snap["digest"], (rel[n - 1], k, tid)
        assert json.loads((folder / "sweep.json").read_text())["state"] == "complete"
        assert (folder / "analysis" / "sweep_perf.png").is_file()
