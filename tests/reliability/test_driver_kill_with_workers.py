"""SIGKILL of a driver whose trials run in the default worker processes: the workers end by
themselves, and a continuation gives the uninterrupted run."""
from __future__ import annotations

import time
import uuid

import pytest

from .harness import assert_same_run, completed_trials, processes_with_marker, run_driver, writes_of


def test_killed_driver_leaks_no_worker_and_resumes(tmp_path):
    spec = {"pool": "process", "trials": 4}
    reference = tmp_path / "reference"
    writes = writes_of(run_driver({**spec, "folder": str(reference)}, trace=True))
    # kill at the write after the first trial's result (the hook kills before the replace):
    # one trial complete, the others still running in the workers
    kill_at = next(n for n, p in enumerate(writes, start=1) if p.endswith("result.json")) + 1
    marker = uuid.uuid4().hex
    killed = tmp_path / "killed"
    proc = run_driver({**spec, "folder": str(killed)}, kill_at=kill_at, marker=marker)
    assert proc.returncode == -9
    deadline = time.time() + 20
    while processes_with_marker(marker) and time.time() < deadline:
        time.sleep(0.5)
    assert processes_with_marker(marker) == [], "worker processes outlived the killed driver"
    before = completed_trials(killed)
    assert 1 <= len(before) < 4
    cont = run_driver({**spec, "folder": str(killed), "continuation": True})
    assert cont.returncode == 0, cont.stderr[-3000:]
    assert_same_run(killed, reference)
    after = completed_trials(killed)
    assert all(after[t]["digest"] == snap["digest"] for t, snap in before.items())


@pytest.mark.parametrize("method", ["forkserver", "fork"])
def test_a_killed_driver_that_nobody_reaped_takes_its_fork_server_tracker_and_workers_along(tmp_path, method):
    """Issue 26, item 3: the parent reads the driver's stdout to EOF before it reaps it (a zombie
    meanwhile). Every process of the run must end, and so the pipe reach EOF, by themselves: the
    old watch read a zombie's creation time as alive and the parent hung for minutes. The 2 s goal
    is measured by ``python -m tests.reliability.zombie_kill 20`` (docs/reliability.md). ``fork``:
    the workers are the driver's own children (no fork server, no tracker)."""
    from .zombie_kill import one_kill

    for k in range(2):  # each kill starts a driver: seconds to tens of seconds on a loaded machine
        gone, eof = one_kill(tmp_path / f"run{k}", limit=15.0, method=method)
        assert gone < 15.0 and eof < 15.0, f"kill {k}: a process of the run outlived its driver ({gone:.1f} s)"
