"""Overlapping sweep points (issue 29) under faults: one TaskRunner used by several threads (the
capacity shared, a worker death charged to its own task only), Ctrl-C to a sweep whose points run
at once, and a SIGKILL while two points are mid-flight followed by a continuation."""
from __future__ import annotations

import json
import logging
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from ignite_seg.runtime.tasks import TaskLost, TaskRunner

from .harness import assert_same_run, load_npz, processes_with_marker, start_script, wait_until
from .runtime_tasks import span_or_die
from .test_sweep_kill import _sweep_driver

SCRIPT = Path(__file__).with_name("sweeprun.py")


def _in_threads(runner: TaskRunner, jobs: dict[str, list[tuple]], pause: float = 0.0,
                timeouts: dict[str, float] | None = None) -> dict[str, list]:
    """Each job's tasks through ``runner.map_unordered`` from a thread of its own, all at once
    (``pause`` seconds between the threads' starts)."""
    out: dict[str, list] = {name: [] for name in jobs}
    errors: list[BaseException] = []

    def one(name: str) -> None:
        try:
            out[name] = list(runner.map_unordered(span_or_die, jobs[name], key=lambda t: f"{name}{jobs[name].index(t)}",
                                              timeout=(timeouts or {}).get(name)))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(name,)) for name in jobs]
    for t in threads:
        t.start()
        time.sleep(pause)
    for t in threads:
        t.join(120)
    assert not errors, errors
    return out


def test_threads_share_the_pool_capacity_in_turn():
    used: list[int] = []
    with TaskRunner(2) as runner:
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                used.append(runner.slots.used)
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            out = _in_threads(runner, {"a": [("span", 0.3 + i / 100) for i in range(4)],
                                       "b": [("span", 0.3 + i / 100) for i in range(4)]})
        finally:
            stop.set()
            watcher.join()
    assert max(used) == 2  # never more tasks in flight than workers, all calls together
    starts_a = sorted(s for _, s, _ in out["a"])
    starts_b = sorted(s for _, s, _ in out["b"])
    assert len(starts_a) == len(starts_b) == 4
    # in turn: neither call waits for all of the other's tasks
    assert starts_b[0] < starts_a[-1] and starts_a[0] < starts_b[-1], (starts_a, starts_b)


def test_waiting_for_a_slot_is_no_stall(monkeypatch, caplog):
    from ignite_seg.runtime import tasks as execution

    monkeypatch.setattr(execution, "STALL_WARNING_S", 2.0)
    with caplog.at_level(logging.WARNING, logger="ignite_seg"), TaskRunner(2) as runner:
        out = _in_threads(runner, {"a": [("span", 3.0), ("span", 3.01)], "b": [("span", 1.5)]}, pause=0.3)
    assert len(out["b"]) == 1
    stalls = [r.getMessage() for r in caplog.records if "no task has finished" in r.getMessage()]
    assert stalls and not any("b0" in m for m in stalls), stalls  # a's own tasks are quiet; b only waited


def test_a_worker_death_rebuilds_the_pool_once_and_is_charged_to_its_own_task():
    with TaskRunner(2) as runner:
        out = _in_threads(runner, {"dies": [("span", 0.2), ("die",), ("span", 0.2)],
                                   "innocent": [("span", 0.6) for _ in range(4)]})
        generation = runner.generation
    lost = [r for r in out["dies"] if isinstance(r, TaskLost)]
    assert len(lost) == 1 and lost[0].task == ("die",) and lost[0].attempts == 2, out["dies"]
    assert "exit code 7" in lost[0].error
    assert len([r for r in out["dies"] if not isinstance(r, TaskLost)]) == 2
    assert not any(isinstance(r, TaskLost) for r in out["innocent"]) and len(out["innocent"]) == 4
    assert generation == 2  # one rebuild per death (two attempts), not one per calling thread


def test_a_timeout_in_one_thread_charges_no_task_of_another():
    with TaskRunner(2) as runner:
        out = _in_threads(runner, {"slow": [("span", 60.0)], "other": [("span", 0.5) for _ in range(4)]},
                          pause=0.3, timeouts={"slow": 1.5})
    lost = out["slow"]
    assert len(lost) == 1 and isinstance(lost[0], TaskLost) and lost[0].timed_out, lost
    assert len(out["other"]) == 4 and not any(isinstance(r, TaskLost) for r in out["other"]), out["other"]


def test_sigint_to_a_sweep_with_points_at_once_stops_every_point_and_leaves_no_process(tmp_path):
    marker = uuid.uuid4().hex
    started = [str(tmp_path / f"started{k}") for k in range(2)]
    model = ["runtime_tasks", "Misbehaves", [], {"how": "slow", "seconds": 5.0}]
    spec = {"folder": str(tmp_path / "sweep"), "pool": True, "at_once": 2, "model": model,
            "grid": {"started": started}, "trials": 1}  # one trial per point: each gets a worker
    with tempfile.TemporaryFile("w+") as out:
        proc = start_script(SCRIPT, spec, marker, out)
        try:
            wait_until(lambda: all(Path(s).is_dir() and any(Path(s).iterdir()) for s in started), 180,
                       "a slow trial of each point to start")
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=20)
            stopped = time.monotonic() - sent
        finally:
            proc.kill()
        out.seek(0)
        log = out.read()
    assert code != 0 and "WRITES" not in log, log[-3000:]
    assert stopped < 5, f"the sweep took {stopped:.1f} s to stop after Ctrl-C"
    assert "KeyboardInterrupt" in log, log[-3000:]
    for k in range(2):  # each point says what it kept, and its lock is released
        kept = [line for line in log.splitlines() if f"point {k} (started=" in line and "completed trials are kept" in line]
        assert kept, log[-3000:]
        assert not (tmp_path / "sweep" / "points" / str(k) / ".ignite_seg.lock").exists()
    assert not (tmp_path / "sweep" / ".ignite_seg.lock").exists()
    wait_until(lambda: not processes_with_marker(marker), 15, "the sweep's processes to end")


def test_a_sweep_killed_with_two_points_mid_flight_continues_to_the_uninterrupted_result(tmp_path):
    spec = {"pool": True, "at_once": 2, "grid": {"n_hidden": [4, 8]}, "trials": 4, "epochs": 30}
    reference = tmp_path / "reference"
    ref = _sweep_driver(reference, spec={**spec, "at_once": 1})  # one point at a time: the same numbers
    assert ref.returncode == 0, ref.stderr[-3000:]
    killed = tmp_path / "killed"
    marker = uuid.uuid4().hex

    def done(k: int) -> int:
        return len(list((killed / "points" / str(k) / "trials").glob("*/result.json")))

    with tempfile.TemporaryFile("w+") as out:
        proc = start_script(SCRIPT, {**spec, "folder": str(killed)}, marker, out)
        try:
            wait_until(lambda: done(0) >= 1 and done(1) >= 1, 240, "a finished trial in each point")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=20)
        finally:
            proc.kill()
    assert done(0) + done(1) < 8, "the sweep finished before the kill: make its trials longer"
    wait_until(lambda: not processes_with_marker(marker), 15, "the killed sweep's workers to end")
    cont = _sweep_driver(killed, continuation=True, spec=spec)
    assert cont.returncode == 0, cont.stderr[-3000:]
    got, want = load_npz(killed / "sweep.npz"), load_npz(reference / "sweep.npz")
    for key in ("final_perf_val", "final_loss_train", "trial_ids", "n_completed"):
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    for k in range(2):
        assert_same_run(killed / "points" / str(k), reference / "points" / str(k))
    assert json.loads((killed / "sweep.json").read_text())["state"] == "complete"


def test_a_worker_death_in_a_sweep_with_points_at_once_restarts_the_workers_from_the_fork_server(tmp_path):
    from ignite_seg.api import trial_seed
    from ignite_seg.param_sweep.run import point_seed

    # point 0's trial 0 ends its worker (twice: it is retried once); point 1 trains normally
    model = ["runtime_tasks", "Misbehaves", [], {"only_seed": trial_seed(point_seed(0, 0), 0)}]
    spec = {"pool": True, "at_once": 2, "model": model, "grid": {"how": ["die", "none"]}, "trials": 2}
    proc = _sweep_driver(tmp_path / "sweep", spec=spec)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    # the driver threads run: the new workers come from the fork server, not from a fork of this process
    assert "restarting the workers from the fork server" in log, log[-3000:]
    assert "forking the workers from this process while other threads run" not in log
    res = [[json.loads((tmp_path / "sweep" / "points" / str(k) / "trials" / str(t) / "result.json").read_text())
            for t in range(2)] for k in range(2)]
    assert res[0][0]["status"] == "failed" and "lost after 2 attempts" in res[0][0]["error"], res[0][0]
    assert [r["status"] for r in (res[0][1], *res[1])] == ["completed"] * 3  # nobody else charged
