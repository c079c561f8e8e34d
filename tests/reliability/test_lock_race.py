"""The folder lock under contention: one holder at a time, across processes and PID namespaces."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import ignite_seg
from ignite_seg.storage.folder_lock import LOCK_NAME, FolderLock

ROUNDS = 120
RACERS = 4
HALF_WRITTEN = '{"pid": 12'  # what a run killed in the middle of writing its lock file leaves


def _race(folder: str, rank: int, barrier, wins, rounds: int) -> None:
    """One racer: each round, wait for the others, try to take the lock, hold it to the round's end."""
    warnings.simplefilter("ignore")
    for r in range(rounds):
        if rank == 0 and r % 2 == 0:  # even rounds start from a stale, half-written lock file
            Path(folder, LOCK_NAME).write_text(HALF_WRITTEN)
        barrier.wait()
        lock = FolderLock(Path(folder))
        try:
            lock.acquire()
        except ignite_seg.FolderLockedError:
            pass
        else:
            with wins.get_lock():
                wins[r] += 1
        barrier.wait()  # everyone has tried while the winner holds the lock
        lock.release()
        barrier.wait()


def test_racing_processes_never_hold_the_lock_together(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    wins = ctx.Array("i", ROUNDS)
    procs = [ctx.Process(target=_race, args=(str(tmp_path), k, barrier, wins, ROUNDS)) for k in range(RACERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * RACERS
    assert list(wins) == [1] * ROUNDS  # exactly one holder in every round, stale file or not
    assert not (tmp_path / LOCK_NAME).exists()


HOLD = """
import sys, time, json, pathlib, socket
from ignite_seg.storage.folder_lock import FolderLock, LOCK_NAME
lock = FolderLock(pathlib.Path(sys.argv[1]))
lock.acquire()
if len(sys.argv) > 2:  # pretend to live in another PID namespace: the file names a pid unknown here
    (pathlib.Path(sys.argv[1]) / LOCK_NAME).write_text(json.dumps({"pid": int(sys.argv[2]), "host": socket.gethostname(), "created": 0}))
print("held", flush=True)
time.sleep(120)
"""


def _holder(folder: Path, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), *extra], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_holder_whose_pid_means_nothing_here_still_keeps_the_folder(tmp_path):
    # a run in another PID namespace of this host: its pid is no live process here
    dead = _dead_pid()
    holder = _holder(tmp_path, str(dead))
    try:
        with pytest.raises(ignite_seg.FolderLockedError, match="in use by process"):
            FolderLock(tmp_path).acquire()
        assert FolderLock.holder(tmp_path) is not None
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == dead  # left as it was
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_killed_by_sigkill_leaves_a_lock_the_next_run_takes_over(tmp_path):
    holder = _holder(tmp_path)
    with pytest.raises(ignite_seg.FolderLockedError, match=f"in use by process {holder.pid}"):
        FolderLock(tmp_path).acquire()
    holder.kill()
    holder.wait()
    assert FolderLock.holder(tmp_path) is None
    lock = FolderLock(tmp_path)
    with pytest.warns(UserWarning, match=rf"stale lock .*\(pid {holder.pid} ") as said:
        lock.acquire()
    assert said[0].filename == __file__  # the warning points at the caller's line, not into ignite_seg
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_half_written_lock_file_is_live_while_its_writer_holds_it(tmp_path):
    holder = _holder(tmp_path, "0")
    try:
        (tmp_path / LOCK_NAME).write_text(HALF_WRITTEN)  # its writer is still at work
        with pytest.raises(ignite_seg.FolderLockedError):
            FolderLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with pytest.warns(UserWarning, match=r"stale lock .*\(unreadable\)"):
        FolderLock(tmp_path).acquire()


def test_two_fresh_runs_on_one_run_folder_exactly_one_proceeds(tmp_path):
    """Issue 26, item 2: the check and the archive of a fresh run happen under the claim's lock."""
    from .fresh_race import archived, race

    rounds = 30
    results = race(tmp_path, rounds)
    assert [sorted(o) for o in results] == [[1, 2]] * rounds  # one ok, one FolderLockedError, nothing else
    runs = archived(tmp_path)
    assert [run["by"] for run in runs] == ["old"] * rounds  # never the winner's live folder
    assert sorted(run["round"] for run in runs) == list(range(rounds))
